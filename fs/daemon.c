#include "csi/prober.h"
#include "fs/daemon.h"
#include "fs/fs.h"
#include "registry/store.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <syslog.h>
#include <unistd.h>
#include <fuse_lowlevel.h>

static bool use_syslog;

void fs_log_to_syslog(void)
{
    openlog("csifs", LOG_PID, LOG_DAEMON);
    use_syslog = true;
}

void fs_log(int prio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "csifs: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (use_syslog) {
        va_start(ap, fmt);
        vsyslog(prio, fmt, ap);
        va_end(ap);
    }
}

/* Is a csifs mounted on path (by /proc/self/mountinfo)? */
static bool csifs_mounted_on(const char *path)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return false;
    char line[4096], mp[4096], fstype[256];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f)) {
        const char *sep = strstr(line, " - ");
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 || !sep ||
            sscanf(sep + 3, "%255s", fstype) != 1)
            continue;
        found = !strcmp(mp, path) && !strcmp(fstype, "fuse.csifs");
    }
    fclose(f);
    return found;
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

int fs_prepare_mountpoint(const char *mnt, char *err, size_t errlen)
{
    /* statfs always asks the daemon (stat may be answered from the kernel's
     * cache), so ENOTCONN tells a dead csifs reliably. */
    struct statfs sfs;
    if (statfs(mnt, &sfs) < 0 && errno == ENOTCONN) {
        if (umount2(mnt, MNT_DETACH) < 0) {
            snprintf(err, errlen, "%s: stale mount, cannot unmount: %s", mnt, strerror(errno));
            return -errno;
        }
        fs_log(LOG_NOTICE, "%s: unmounted the stale mount of a dead csifs", mnt);
    }
    char real[4096];
    if (realpath(mnt, real) && csifs_mounted_on(real)) {
        snprintf(err, errlen, "%s: a live csifs is mounted there", mnt);
        return -EBUSY;
    }
    int rc = mkdir_p(mnt);
    if (rc < 0)
        snprintf(err, errlen, "%s: %s", mnt, strerror(-rc));
    return rc;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            fs_log(LOG_WARNING, "cannot raise the open-file limit: %s", strerror(errno));
    }
}

int fs_daemon_run(struct csifs_opts *o)
{
    char err[1024] = "";
    struct fs *fs = NULL;
    struct store *st = NULL;
    struct reg *reg = NULL;
    int rc = store_check(o->state, err, sizeof(err));
    if (rc == 0)
        rc = fs_prepare_mountpoint(o->mountpoint, err, sizeof(err));
    struct fs_opts fo = { .mountpoint = o->mountpoint, .argc = o->fuse.argc,
                          .argv = o->fuse.argv, .has_registrar = o->has_registrar,
                          .registrar_gid = o->registrar_gid };
    if (rc == 0 && (rc = fs_mount(&fs, &fo)) < 0)
        snprintf(err, sizeof(err), "%s: cannot mount: %s", o->mountpoint, strerror(-rc));
    if (rc < 0) {
        fs_log(LOG_ERR, "%s", err);
        return 1;
    }
    if (!o->foreground) {
        fuse_daemonize(0);
        fs_log_to_syslog();
    }
    raise_nofile();
    rc = store_open(&st, o->state, o->nosync ? STORE_NOSYNC : 0, err, sizeof(err));
    struct reg_opts ro = { .events_ring = o->events_ring, .max_instances = o->max_instances,
                           .health_timeout_ms = o->health_timeout_ms,
                           .backend = st ? store_backend(st) : NULL };
    if (rc == 0 && (rc = reg_open(&reg, &ro)) < 0)
        snprintf(err, sizeof(err), "%s: cannot restore the registry: %s", o->state,
                 strerror(-rc));
    if (rc == 0)
        rc = fs_attach(fs, reg);
    struct csi_prober *pr = NULL;
    struct csi_prober_opts po = { .heartbeat_ms = o->heartbeat_ms,
                                  .probe_timeout_ms = o->probe_timeout_ms,
                                  .health_timeout_ms = o->health_timeout_ms, .log = fs_log };
    if (rc == 0 && (rc = csi_prober_start(&pr, reg, &po)) < 0)
        snprintf(err, sizeof(err), "cannot start the prober: %s", strerror(-rc));
    if (rc == 0) {
        fs_log(LOG_INFO, "serving %s (state %s)", o->mountpoint, o->state);
        rc = fs_loop(fs, true);
    } else {
        fs_log(LOG_ERR, "%s", err);
    }
    /* Unmount first: a prober call dialling a socket inside the mount then
     * fails at once instead of waiting for a daemon that no longer serves. */
    fs_unmount(fs);
    csi_prober_stop(pr);
    fs_destroy(fs);
    reg_close(reg);
    csi_prober_free(pr);
    store_close(st);
    return rc < 0 ? 1 : 0;
}
