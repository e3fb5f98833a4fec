/* The bottom of the LMDB store: the state dir, its lock file, fsync
 * helpers. Uses nothing of the store above it (store_int.h). */
#include "registry/store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the state dir ---- */

int store_fsync_path(const char *path, bool dir)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static int read_pid(int fd)
{
    char buf[32];
    /* The holder writes its pid right after taking the lock: give it 1 s. */
    for (int tries = 0; tries < 100; tries++) {
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            long pid = strtol(buf, NULL, 10);
            if (pid > 0)
                return (int)pid;
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

int store_lock(const char *dir, bool excl, int *fd, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, STORE_LOCK);
    *fd = open(path, (excl ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*fd < 0)
        return !excl && errno == ENOENT ? 0 : store_fail(err, errlen, -errno, "%s: %s", path,
                                                        strerror(errno));
    if (flock(*fd, (excl ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) {
        char pid[24];
        int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
        if (!excl || (ftruncate(*fd, 0) == 0 && pwrite(*fd, pid, (size_t)n, 0) == n))
            return 0;
    }
    int e = errno, holder = e == EWOULDBLOCK ? read_pid(*fd) : 0;
    close(*fd);
    *fd = -1;
    if (e != EWOULDBLOCK)
        return store_fail(err, errlen, -e, "%s: %s", path, strerror(e));
    if (holder)
        return store_fail(err, errlen, -EBUSY, "%s: state dir in use by pid %d", path, holder);
    return store_fail(err, errlen, -EBUSY, "%s: state dir in use by another process", path);
}

int store_make_dir(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (mkdir(dir, 0700) == 0) {
        char *copy = strdup(dir);
        int rc = copy ? store_fsync_path(dirname(copy), true) : -ENOMEM;
        free(copy);
        return rc < 0 ? store_fail(err, errlen, rc, "%s: fsync of its parent: %s", dir,
                                   strerror(-rc)) : 0;
    }
    if (errno != EEXIST)
        return store_fail(err, errlen, -errno, "%s: %s", dir, strerror(errno));
    if (stat(dir, &st) < 0)
        return store_fail(err, errlen, -errno, "%s: %s", dir, strerror(errno));
    return S_ISDIR(st.st_mode) ? 0 : store_fail(err, errlen, -ENOTDIR, "%s: not a directory",
                                                dir);
}

/* The lock file as store_lock_note wrote it (store.h). */
int store_lock_holder(const char *dir, struct store_holder *h)
{
    char path[4096], buf[4200];
    memset(h, 0, sizeof(*h));
    snprintf(path, sizeof(path), "%s/%s", dir, STORE_LOCK);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    int busy = flock(fd, LOCK_SH | LOCK_NB) == 0 ? 0 : errno == EWOULDBLOCK ? 1 : -errno;
    ssize_t n = busy >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : 0;
    close(fd);
    if (busy < 0)
        return busy;
    buf[n > 0 ? n : 0] = '\0';
    h->pid = strtol(buf, NULL, 10);
    const char *c = strstr(buf, "\nconn="), *m = strstr(buf, "\nmount=");
    if (c)
        h->conn = (unsigned)strtoul(c + 6, NULL, 10);
    if (m) {
        snprintf(h->mount, sizeof(h->mount), "%s", m + 7);
        h->mount[strcspn(h->mount, "\n")] = '\0';
    }
    return busy;
}
