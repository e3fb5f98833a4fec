/* The mount point, the mount table, fusectl. See mountpoint.h. */
#include "cmd/mountpoint.h"
#include "base/defaults.h"
#include "base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libmount.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FUSECTL CSIFS_FUSECTL
#define PROBE_MS 2000                /* a serving FUSE daemon answers statfs at once */

int csifs_mount_find(const char *path, char *fstype, size_t cap, unsigned *conn)
{
    struct libmnt_table *tb = mnt_new_table();
    if (!tb)
        return -ENOMEM;
    /* no mnt_table_set_cache: targets are compared as strings, never
     * canonicalised (which would stat a possibly wedged mount) */
    int rc = mnt_table_parse_mtab(tb, NULL);
    struct libmnt_fs *fs = rc == 0 ? mnt_table_find_target(tb, path, MNT_ITER_BACKWARD) : NULL;
    if (rc == 0 && fs) {
        const char *t = mnt_fs_get_fstype(fs);
        snprintf(fstype, cap, "%s", t ? t : "");
        *conn = minor(mnt_fs_get_devno(fs));
        rc = 1;
    }
    mnt_unref_table(tb);
    return rc < 0 ? (rc == -1 ? -EIO : rc) : rc;
}

int csifs_mount_probe(const char *path)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        struct statfs sfs;
        _exit(statfs(path, &sfs) == 0 ? 0 : errno == ENOTCONN ? 1 : 2);
    }
    int st = 0;
    for (int64_t end = csifs_mono_ms() + PROBE_MS; csifs_mono_ms() < end;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return !WIFEXITED(st) ? -EIO : WEXITSTATUS(st) == 0 ? 0
                   : WEXITSTATUS(st) == 1 ? -ENOTCONN : -EIO;
        struct timespec ts = { 0, 5 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);              /* a FUSE request wait is killable */
    for (int k = 0; k < 100 && waitpid(pid, &st, WNOHANG) == 0; k++) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return -ETIMEDOUT;
}

static int mkdir_p(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    return mkdir(buf, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

#define FAIL(rc, ...) (snprintf(err, errlen, __VA_ARGS__), (rc))

int csifs_mountpoint_prepare(const char *mnt, char *err, size_t errlen)
{
    char type[64];
    unsigned conn;
    int rc;
    /* stacked stale mounts: peel them one by one */
    for (int k = 0; k < 16 && (rc = csifs_mount_find(mnt, type, sizeof(type), &conn)) == 1; k++) {
        if (strncmp(type, "fuse", 4))
            break;                   /* not FUSE: a plain lookup is safe */
        int p = csifs_mount_probe(mnt);
        if (p == 0 && !strcmp(type, "fuse.csifs")) {
            long pid = csifs_conn_holder(conn);
            return pid > 0 ? FAIL(-EBUSY, "%s: a live csifs is mounted there (pid %ld)", mnt, pid)
                           : FAIL(-EBUSY, "%s: a live csifs is mounted there", mnt);
        }
        if (p == 0)
            break;
        if (p == -ETIMEDOUT)
            return FAIL(-EBUSY, "%s: the %s mounted there (connection %u) does not answer", mnt,
                        type, conn);
        if (p != -ENOTCONN)
            return FAIL(p, "%s: %s", mnt, strerror(-p));
        if (umount2(mnt, MNT_DETACH) < 0)
            return FAIL(-errno, "%s: stale mount, cannot unmount: %s", mnt, strerror(errno));
        csifs_log(LOG_NOTICE, "%s: unmounted the stale mount of a dead %s", mnt, type);
    }
    if (rc < 0)
        return FAIL(rc, "%s: cannot read the mount table: %s", mnt, strerror(-rc));
    struct stat st;                  /* no FUSE mount here: safe to look up */
    if (stat(mnt, &st) == 0)
        return S_ISDIR(st.st_mode) ? 0 : FAIL(-ENOTDIR, "%s: not a directory", mnt);
    if (errno != ENOENT)
        return FAIL(-errno, "%s: %s", mnt, strerror(errno));
    rc = mkdir_p(mnt);
    return rc < 0 ? FAIL(rc, "%s: %s", mnt, strerror(-rc)) : 0;
}

int csifs_mountpoint_resolve(char **mnt)
{
    char type[64], real[4096];
    unsigned conn;
    struct stat st;
    if (csifs_mount_find(*mnt, type, sizeof(type), &conn) != 0 || lstat(*mnt, &st) < 0 ||
        !S_ISLNK(st.st_mode))
        return 0;                    /* a mount root, missing, or no link: as it is */
    if (!realpath(*mnt, real))
        return 0;                    /* dangling: the mount fails and says so */
    char *copy = strdup(real);
    if (!copy)
        return -ENOMEM;
    free(*mnt);
    *mnt = copy;
    return 0;
}

int csifs_conn_open(unsigned conn, const char *file, int flags)
{
    char path[128];
    snprintf(path, sizeof(path), FUSECTL "/%u/%s", conn, file);
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && mount("fusectl", FUSECTL, "fusectl", 0, NULL) == 0)
        fd = open(path, flags | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int csifs_conn_abort(unsigned conn)
{
    int fd = csifs_conn_open(conn, "abort", O_WRONLY);
    if (fd < 0)
        return fd;
    int rc = write(fd, "1", 1) == 1 ? 0 : -errno;
    close(fd);
    return rc;
}

/* Does fd of pid hold FUSE connection conn? fdinfo of /dev/fuse says
 * "fuse_connection:\t<id>" (Linux 6.x). */
static bool holds(const char *pid, const char *fd, unsigned conn)
{
    char path[600], line[128];
    snprintf(path, sizeof(path), "/proc/%s/fd/%s", pid, fd);
    ssize_t n = readlink(path, line, sizeof(line) - 1);
    if (n != 9 || memcmp(line, "/dev/fuse", 9))
        return false;
    snprintf(path, sizeof(path), "/proc/%s/fdinfo/%s", pid, fd);
    FILE *f = fopen(path, "re");
    unsigned c = 0;
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f))
        found = sscanf(line, "fuse_connection: %u", &c) == 1;
    if (f)
        fclose(f);
    return found && c == conn;
}

long csifs_conn_holder(unsigned conn)
{
    DIR *proc = opendir("/proc");
    if (!proc)
        return -errno;
    long found = 0, self = (long)getpid();
    struct dirent *p;
    while (!found && (p = readdir(proc))) {
        char path[300];
        long pid = strtol(p->d_name, NULL, 10);
        if (pid <= 0 || pid == self)
            continue;
        snprintf(path, sizeof(path), "/proc/%s/fd", p->d_name);
        DIR *fds = opendir(path);
        struct dirent *d;
        while (fds && !found && (d = readdir(fds)))
            found = d->d_name[0] != '.' && holds(p->d_name, d->d_name, conn) ? pid : 0;
        if (fds)
            closedir(fds);
    }
    closedir(proc);
    return found;
}
