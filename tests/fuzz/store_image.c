/* Store validation on a damaged image: the input is written as data.mdb
 * of a fresh state dir and store_check (read-only, as csifs runs it before
 * anything maps the file) must refuse it with a message or accept it, and
 * never crash; an accepted image must then open, load and take what csifs
 * commits next (a plugin registered, then it and the first plugin loaded
 * removed), without a crash (a commit may fail). The dir lives in
 * $TMPDIR (run.sh gives each target its own and removes it: a crash skips
 * atexit), else /dev/shm, and is reused. */
#include "tests/fuzz/fuzz.h"
#include "registry/backend.h"
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

struct loaded {
    struct store_plugin first;       /* type and name of the first plugin */
    char name[256];
    bool any;
};

static int on_plugin(const struct store_plugin *p, void *arg)
{
    struct loaded *l = arg;
    if (!l->any && strlen(p->name) < sizeof(l->name)) {
        l->first = *p;
        l->first.name = strcpy(l->name, p->name);
        l->any = true;
    }
    return 0;
}

static int on_inst(const struct store_inst *i, void *arg)
{
    (void)i, (void)arg;
    return 0;
}

/* What csifs does on an opened store: load, then its first commits. */
static void use(struct store *st)
{
    const struct reg_backend *be = store_backend(st);
    struct loaded l = { .any = false };
    struct store_load_cb cb = { on_plugin, on_inst, &l, NULL };
    struct store_meta meta = { 1, 1 };
    uint64_t room;
    if (be->load(be->ctx, &cb, &meta) != 0)
        return;
    be->room(be->ctx, &room);
    struct store_rec add = { .op = STORE_PUT_PLUGIN,
                             .u.plugin = { REG_NODE, "fuzz-added", meta.next_seq, 1, 0 } };
    struct store_txn t = { .meta = { meta.next_seq + 1, meta.ev_reserved }, .recs = &add };
    if (be->commit(be->ctx, &t) != 0)
        return;
    struct store_rec del1 = { .op = STORE_DEL_PLUGIN, .u.plugin = l.first };
    struct store_rec del0 = { .next = l.any ? &del1 : NULL, .op = STORE_DEL_PLUGIN,
                              .u.plugin = add.u.plugin };
    t.recs = &del0;
    be->commit(be->ctx, &t);
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
        if (rc == 0) {
            use(st);
            store_close(st);
        }
    }
    return 0;
}
