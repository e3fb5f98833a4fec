/* Session set-up: mount, attach to the registry, the request loop. */
#include "fs/node.h"
#include "fs/events_file.h"
#include "fs/inval.h"
#include "fs/oplog.h"
#include "fs/testopt.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct fs *fs = userdata;
    /* O_TRUNC comes with open, so `echo x > attr` is one change, not two. */
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    /* Symlink targets (current, socket) stay cached until invalidated. */
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
        conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    /* Pages of attribute files stay cached across opens (keep_cache); we
     * drop them ourselves on change, so no size-based guessing. */
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
    /* No xattrs, no locks: the kernel stops asking after the first ENOSYS. */
    if (fs->on_init)
        fs->on_init(fs->on_init_arg);
}

/* Entries and attributes are cached for a day: every change invalidates
 * exactly what it touched (inval.c). */
#define CACHE_SECONDS 86400.0

static void on_change(const struct reg_change *c, void *arg)
{
    struct fs *fs = arg;
    /* After fs_unmount the prober may still record results: nothing to
     * invalidate, and no fd to write to. */
    if (!__atomic_load_n(&fs->mounted, __ATOMIC_ACQUIRE))
        return;
    fs_inval_change(fs, c);
}

/* On the registry's events thread: blocked `cat events` readers. */
static void on_events(void *arg)
{
    struct fs *fs = arg;
    if (__atomic_load_n(&fs->mounted, __ATOMIC_ACQUIRE))
        fs_events_wake(fs);
}

uint64_t fs_requests(struct fs *fs)
{
    return __atomic_load_n(&fs->requests, __ATOMIC_RELAXED);
}

int fs_session(struct fs **out, const struct fs_opts *o)
{
    struct fs *fs = calloc(1, sizeof(*fs));
    if (!fs || !(fs->mountpoint = strdup(o->mountpoint))) {
        free(fs);
        return -ENOMEM;
    }
    fs->has_registrar = o->has_registrar;
    fs->on_init = o->on_init;
    fs->on_init_arg = o->on_init_arg;
    fs->gid = o->registrar_gid;
    fs->mount_ns = (int64_t)time(NULL) * 1000000000;
    fs->entry_timeout = fs->attr_timeout = CACHE_SECONDS;
    pending_init(&fs->pend, o->pending_ttl_ms > 0 ? o->pending_ttl_ms : 10000);
    int rc = fs_events_init(fs);

    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    for (int k = 0; rc == 0 && k < o->argc; k++)
        if (fuse_opt_add_arg(&args, o->argv[k]) < 0)
            rc = -ENOMEM;
    if (rc == 0 && o->argc == 0 && fuse_opt_add_arg(&args, "csifs") < 0)
        rc = -ENOMEM;
    if (rc == 0 && fuse_opt_add_arg(&args, "-oallow_other,default_permissions,"
                                           "fsname=csifs,subtype=csifs") < 0)
        rc = -ENOMEM;
    struct fuse_lowlevel_ops ops = { .init = op_init };
    fs_ops_read(&ops);
    fs_ops_write(&ops);
    fs_oplog_wrap(&ops);
    fs_testopt_wrap(&ops);
    if (rc == 0 && !(fs->se = fuse_session_new(&args, &ops, sizeof(ops), fs)))
        rc = -EINVAL;
    fuse_opt_free_args(&args);
    if (rc < 0) {
        fs_destroy(fs);
        return rc;
    }
    *out = fs;
    return 0;
}

int fs_session_mount(struct fs *fs)
{
    if (fuse_session_mount(fs->se, fs->mountpoint) != 0)
        return -EIO;
    fs->mounted = true;
    return 0;
}

int fs_mount(struct fs **out, const struct fs_opts *o)
{
    int rc = fs_session(out, o);
    if (rc == 0 && (rc = fs_session_mount(*out)) < 0) {
        fs_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int fs_attach(struct fs *fs, struct reg *reg)
{
    fs->reg = reg;
    int rc = fs_inval_start(fs);
    if (rc == 0)
        rc = reg_subscribe(reg, on_change, fs);
    return rc < 0 ? rc : reg_on_events(reg, on_events, fs);
}

int fs_loop(struct fs *fs, bool signals)
{
    if (signals && fuse_set_signal_handlers(fs->se) != 0)
        return -EIO;
    if (signals)
        signal(SIGHUP, SIG_IGN);     /* no stop from `systemctl reload` (DESIGN 9) */
    struct fuse_loop_config *cfg = fuse_loop_cfg_create();
    if (!cfg)
        return -ENOMEM;
    fuse_loop_cfg_set_idle_threads(cfg, 10);
    fuse_loop_cfg_set_max_threads(cfg, 64);
    int rc = fuse_session_loop_mt(fs->se, cfg);
    fuse_loop_cfg_destroy(cfg);
    if (signals)
        fuse_remove_signal_handlers(fs->se);
    return rc < 0 ? rc : 0;
}

void fs_exit(struct fs *fs)
{
    fuse_session_exit(fs->se);
    /* Wake the workers blocked reading /dev/fuse: a lazy unmount ends the
     * connection, and the loop returns. */
    umount2(fs->mountpoint, MNT_DETACH);
}

void fs_unmount(struct fs *fs)
{
    if (fs && fs->se && fs->mounted) {
        /* first: no more notifications to a connection being closed */
        __atomic_store_n(&fs->mounted, false, __ATOMIC_RELEASE);
        fuse_session_unmount(fs->se);
    }
}

void fs_destroy(struct fs *fs)
{
    if (!fs)
        return;
    fs_inval_stop(fs);
    if (fs->se) {
        fs_events_fini(fs);
        if (fs->mounted)
            fuse_session_unmount(fs->se);
        fuse_session_destroy(fs->se);
    } else {
        fs_events_fini(fs);
    }
    pending_fini(&fs->pend);
    free(fs->mountpoint);
    free(fs);
}
