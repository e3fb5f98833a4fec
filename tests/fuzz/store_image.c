/* Store validation on a damaged image: the input is written as data.mdb
 * of a fresh state dir and store_check (read-only, as csifs runs it before
 * anything maps the file) must refuse it with a message or accept it, and
 * never crash; an accepted image must then open. The dir lives in
 * $TMPDIR (run.sh gives each target its own and removes it: a crash skips
 * atexit), else /dev/shm, and is reused. */
#include "tests/fuzz/fuzz.h"
#include "registry/store.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256], file[300], lockfile[300];

static void setup(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof(dir), "%s/csifs-fuzz-store-%d", base, (int)getpid());
    mkdir(dir, 0700);
    snprintf(file, sizeof(file), "%s/data.mdb", dir);
    snprintf(lockfile, sizeof(lockfile), "%s/lock.mdb", dir);
}

static void cleanup(void)
{
    unlink(file);
    unlink(lockfile);
    char l[300];
    snprintf(l, sizeof(l), "%s/csifs.lock", dir);
    unlink(l);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        setup();
        atexit(cleanup);
    }
    unlink(lockfile);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, data, size) != (ssize_t)size)
        fuzz_fail("cannot write %s: %s", file, strerror(errno));
    close(fd);
    char err[512] = "";
    int rc = store_check(dir, err, sizeof(err));
    if (rc > 0)
        fuzz_fail("store_check returned %d", rc);
    if (rc < 0 && !err[0])
        fuzz_fail("store_check refused (%d) without a message", rc);
    if (rc == 0 && size > 0) {
        struct store *st = NULL;
        rc = store_open(&st, dir, STORE_NOSYNC, err, sizeof(err));
        if (rc == 0)
            store_close(st);
    }
    return 0;
}
