/* Session set-up: the one table of FUSE operations, mount, attach to the
 * registry, the request loop; the entry replies every creating op shares. */
#include "fs/ops.h"
#include "fs/events_file.h"
#include "fs/inval.h"
#include "fs/oplog.h"
#include "fs/serve.h"
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
    /* No xattrs, no locks: the kernel stops asking after the first ENOSYS.
     * No opendir: FUSE_CAP_NO_OPENDIR_SUPPORT is the kernel's to offer, and
     * our opendir's ENOSYS takes it (ops_dir.c). */
    if (fs->on_init)
        fs->on_init(fs->on_init_arg);
}

const char *const fs_op_names[FS_NOPS] = {
    [FS_OP_LOOKUP] = "lookup", [FS_OP_FORGET] = "forget", [FS_OP_GETATTR] = "getattr",
    [FS_OP_SETATTR] = "setattr", [FS_OP_READLINK] = "readlink", [FS_OP_MKDIR] = "mkdir",
    [FS_OP_RMDIR] = "rmdir", [FS_OP_SYMLINK] = "symlink", [FS_OP_UNLINK] = "unlink",
    [FS_OP_RENAME] = "rename", [FS_OP_OPEN] = "open", [FS_OP_READ] = "read",
    [FS_OP_WRITE] = "write", [FS_OP_RELEASE] = "release", [FS_OP_OPENDIR] = "opendir", [FS_OP_RELEASEDIR] = "releasedir",
    [FS_OP_READDIR] = "readdir", [FS_OP_READDIRPLUS] = "readdirplus", [FS_OP_POLL] = "poll",
    [FS_OP_OTHER] = "other",
};

/* Every operation of the low-level API, in its order. A NULL is deliberate:
 * libfuse then answers ENOSYS (or what is said beside it). */
static const struct fuse_lowlevel_ops fs_ops = {
    .init = op_init,
    .destroy = NULL,                 /* nothing to do: fs_destroy frees */
    .lookup = fs_op_lookup,
    .forget = fs_op_forget,
    .getattr = fs_op_getattr,
    .setattr = fs_op_setattr,        /* answered after its commit (ops_write.c), */
    .readlink = fs_op_readlink,
    .mknod = fs_op_mknod,            /* EPERM: only mkdir and symlink make names */
    .mkdir = fs_op_mkdir,            /* as are all that commit: */
    .unlink = fs_op_unlink,
    .rmdir = fs_op_rmdir,
    .symlink = fs_op_symlink,
    .rename = fs_op_rename,
    .link = fs_op_link,              /* EPERM */
    .open = fs_op_open,
    .read = fs_op_read,
    .write = fs_op_write,
    .flush = NULL,                   /* nothing buffered: libfuse answers ENOSYS, the
                                        kernel stops sending it */
    .release = fs_op_release,
    .fsync = NULL,                   /* every write commits durably before it returns */
    .opendir = fs_op_opendir,        /* ENOSYS from a real handler: listings cached */
    .readdir = fs_op_readdir,
    .releasedir = fs_op_releasedir,  /* never sent once opendir is ENOSYS; counted */
    .fsyncdir = NULL,                /* as fsync */
    .statfs = NULL,                  /* libfuse's default answer (zeros) is honest */
    .setxattr = NULL,                /* no xattrs (DESIGN 10): ENOSYS, the kernel */
    .getxattr = NULL,                /*   stops asking for every entry of ls -l */
    .listxattr = NULL,
    .removexattr = NULL,
    .access = NULL,                  /* default_permissions: the kernel decides */
    .create = fs_op_create,          /* EPERM: no regular file is made */
    .getlk = NULL,                   /* no locks: the kernel's local locks serve */
    .setlk = NULL,
    .bmap = NULL,                    /* not a block device */
    .ioctl = NULL,                   /* no ioctls */
    .poll = fs_op_poll,
    .write_buf = NULL,               /* write serves (values are at most 4 KiB) */
    .retrieve_reply = NULL,          /* no notify_retrieve */
    .forget_multi = fs_op_forget_multi,
    .flock = NULL,                   /* as getlk */
    .fallocate = NULL,               /* sizes are the values' */
    .readdirplus = fs_op_readdirplus,
    .copy_file_range = NULL,         /* read and write serve */
    .lseek = NULL,                   /* no holes: SEEK_DATA/HOLE default */
};

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

uint64_t fs_requests_of(struct fs *fs, const char *op)
{
    for (int k = 0; k < FS_NOPS; k++)
        if (!strcmp(fs_op_names[k], op))
            return __atomic_load_n(&fs->req_by_op[k], __ATOMIC_RELAXED);
    return 0;
}

uint64_t fs_invalidations_queued(struct fs *fs)
{
    return __atomic_load_n(&fs->inval_queued, __ATOMIC_RELAXED);
}

uint64_t fs_invalidations(struct fs *fs, uint64_t *missed)
{
    *missed = __atomic_load_n(&fs->inval_sent[1], __ATOMIC_RELAXED);
    return *missed + __atomic_load_n(&fs->inval_sent[0], __ATOMIC_RELAXED);
}

int fs_session(struct fs **out, const struct fs_opts *o)
{
    struct fs *fs = calloc(1, sizeof(*fs));
    if (!fs || !(fs->mountpoint = strdup(o->mountpoint))) {
        free(fs);
        return -ENOMEM;
    }
    fs->has_registrar = o->has_registrar;
    fs->helper_fd = -1;
    fs->on_init = o->on_init;
    fs->on_init_arg = o->on_init_arg;
    fs->gid = o->registrar_gid;
    fs->mount_ns = (int64_t)time(NULL) * 1000000000;
    fs->entry_timeout = fs->attr_timeout = CACHE_SECONDS;
    pthread_mutex_init(&fs->fh_mu, NULL);
    pthread_mutex_init(&fs->calls_mu, NULL);
    pthread_cond_init(&fs->calls_cv, NULL);
    LIST_INIT(&fs->open_fhs);
    int rc = pending_init(&fs->pend, o->pending_ttl_ms > 0 ? o->pending_ttl_ms : 10000);
    if (rc == 0)
        rc = fs_events_init(fs);
    if (rc == 0)
        rc = fs_lookups_init(fs);
    if (rc == 0)
        rc = fs_fh_table_init(fs);

    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    for (int k = 0; rc == 0 && k < o->argc; k++)
        if (fuse_opt_add_arg(&args, o->argv[k]) < 0)
            rc = -ENOMEM;
    if (rc == 0 && o->argc == 0 && fuse_opt_add_arg(&args, "csifs") < 0)
        rc = -ENOMEM;
    if (rc == 0 && fuse_opt_add_arg(&args, "-oallow_other,default_permissions,"
                                           "fsname=csifs,subtype=csifs") < 0)
        rc = -ENOMEM;
    /* The session's table (libfuse copies it): the committing handlers
     * wrapped by the log of refusals (oplog.h) and the test options
     * (testopt.h), on the FUSE thread (csifs_why() is thread-local). */
    struct fuse_lowlevel_ops ops = fs_ops;
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

void fs_calls_add(struct fs *fs, int d)
{
    pthread_mutex_lock(&fs->calls_mu);
    if ((fs->calls += d) == 0)
        pthread_cond_broadcast(&fs->calls_cv);
    pthread_mutex_unlock(&fs->calls_mu);
}

bool fs_calls_open(struct fs *fs)
{
    pthread_mutex_lock(&fs->calls_mu);
    bool open = !fs->hold;
    if (open)
        fs->calls++;
    else
        fs->held++;
    pthread_mutex_unlock(&fs->calls_mu);
    return open;
}

/* Wait until every queued request was answered by its commit's leader. */
static void fs_calls_drain(struct fs *fs)
{
    pthread_mutex_lock(&fs->calls_mu);
    while (fs->calls > 0)
        pthread_cond_wait(&fs->calls_cv, &fs->calls_mu);
    pthread_mutex_unlock(&fs->calls_mu);
}

unsigned fs_hold_commits(struct fs *fs)
{
    pthread_mutex_lock(&fs->calls_mu);
    fs->hold = true;
    pthread_mutex_unlock(&fs->calls_mu);
    fs_calls_drain(fs);
    pthread_mutex_lock(&fs->calls_mu);
    unsigned held = fs->held;
    pthread_mutex_unlock(&fs->calls_mu);
    return held;
}

/* SIGTERM and SIGINT end the loop: libfuse's handlers only set the
 * session's flag, which a FUSE thread asleep in poll(2) would not see
 * until the next request when the signal ran on another thread (or just
 * before its poll), so these also wake it (fs_serve_wake). */
static struct fuse_session *stop_se;
static const int stop_sigs[] = { SIGTERM, SIGINT };
static struct sigaction stop_old[2];

static void on_stop(int sig)
{
    (void)sig;
    struct fuse_session *se = __atomic_load_n(&stop_se, __ATOMIC_ACQUIRE);
    if (se)
        fuse_session_exit(se);
    fs_serve_wake();
}

static int catch_stop(struct fuse_session *se)
{
    int rc = fs_serve_wake_init();
    if (rc < 0)
        return rc;
    __atomic_store_n(&stop_se, se, __ATOMIC_RELEASE);
    struct sigaction sa = { .sa_handler = on_stop };
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < 2; k++)
        if (sigaction(stop_sigs[k], &sa, &stop_old[k]) < 0)
            return -errno;
    signal(SIGPIPE, SIG_IGN);        /* a peer gone is an error, not an exit */
    signal(SIGHUP, SIG_IGN);         /* no stop from `systemctl reload` (DESIGN 9) */
    return 0;
}

static void release_stop(void)
{
    for (size_t k = 0; k < 2; k++)
        sigaction(stop_sigs[k], &stop_old[k], NULL);
    __atomic_store_n(&stop_se, NULL, __ATOMIC_RELEASE);
}

int fs_loop(struct fs *fs, bool signals)
{
    int rc = signals ? catch_stop(fs->se) : 0;
    if (rc < 0)
        return rc;
    /* This thread runs the loop (and a second one, serve.h); the leader of
     * each commit answers what commits: no request is left unanswered at
     * exit. */
    rc = fs_serve(fs->se);
    fs_calls_drain(fs);
    if (signals)
        release_stop();
    return rc < 0 ? rc : 0;
}

void fs_exit(struct fs *fs)
{
    fs_loop_break(fs);
    umount2(fs->mountpoint, MNT_DETACH);
}

void fs_loop_break(struct fs *fs)
{
    if (fs && fs->se) {
        fuse_session_exit(fs->se);
        fs_serve_wake();
    }
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
    fs_helper_stop(fs);
    fs_fh_release_all(fs);           /* files the connection ended with (node.h) */
    pthread_mutex_destroy(&fs->fh_mu);
    pthread_cond_destroy(&fs->calls_cv);
    pthread_mutex_destroy(&fs->calls_mu);
    if (fs->se) {
        fs_events_fini(fs);
        if (fs->mounted)
            fuse_session_unmount(fs->se);
        fuse_session_destroy(fs->se);
    } else {
        fs_events_fini(fs);
    }
    pending_fini(&fs->pend);
    fs_lookups_fini(fs);
    fs_fh_table_fini(fs);
    free(fs->mountpoint);
    free(fs);
}
