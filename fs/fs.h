/* fs: the csifs FUSE filesystem (libfuse low-level API) over a registry.
 *
 * fs_mount() creates the session and mounts (no threads, no registry yet:
 * DESIGN section 7 mounts before daemonizing), or in two steps: fs_session()
 * (checks the FUSE options, touches nothing) then fs_session_mount();
 * fs_attach() hands it the registry and starts the notifier thread (after
 * any fork); fs_loop() serves requests until unmounted, fs_exit() or a
 * signal, on one FUSE thread at a time (fs/serve.h) that never waits for a
 * commit: a committing request is answered by the thread that leads its
 * commit, the registry's commit thread or a FUSE thread that let the loop
 * go first (fs/serve.c, fs/ops_write.c), and fs_loop returns once
 * every one is answered.
 */
#ifndef CSIFS_FS_H
#define CSIFS_FS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "registry/registry.h"

struct fs_opts {
    const char *mountpoint;
    int argc;                  /* FUSE options (argv[0] first), e.g. -d, -o ... */
    char **argv;
    bool has_registrar;        /* registrar_gid given */
    gid_t registrar_gid;
    int64_t pending_ttl_ms;    /* pending links (ln -sfn); 0 = 10 s */
    /* Called (on the FUSE thread) when FUSE INIT is answered, just before
     * libfuse writes the reply: from then on the kernel sends requests. */
    void (*on_init)(void *arg);
    void *on_init_arg;
};

struct fs;

int fs_mount(struct fs **out, const struct fs_opts *opts);
/* -EINVAL for options FUSE does not know (libfuse logs which). */
int fs_session(struct fs **out, const struct fs_opts *opts);
/* -EIO (libfuse logs why). */
int fs_session_mount(struct fs *fs);
/* Serve reg from now on; starts the notifier thread. Must be called once,
 * before fs_loop. */
int fs_attach(struct fs *fs, struct reg *reg);
/* Serve until unmounted or asked to exit; returns 0 or a negative errno.
 * signals: SIGTERM and SIGINT end the loop, whichever thread they run on
 * and whenever they come (the handler wakes the loop); SIGHUP and SIGPIPE
 * are ignored. */
int fs_loop(struct fs *fs, bool signals);
/* An upgrade in place (DESIGN 13), while fs_loop still serves: from now
 * on a committing request (mkdir, rmdir, symlink, unlink, rename, write,
 * setattr) is read but neither run nor answered: the kernel keeps it, and
 * the next image gets it again (FUSE_NOTIFY_RESEND). Returns once every
 * one taken before was answered (by its commit's leader, after its
 * subscribers), with how many were held so far. Any thread but the loop's. */
unsigned fs_hold_commits(struct fs *fs);
/* Make fs_loop return (any thread). */
void fs_exit(struct fs *fs);
/* Make fs_loop return, touching nothing else: it wakes the loop's thread
 * (a signal handler may call it). */
void fs_loop_break(struct fs *fs);
/* Requests served so far (a debug counter for tests and metrics). */
uint64_t fs_requests(struct fs *fs);
/* Requests of one op ("opendir", "getattr"... as csifs_fuse_requests_total
 * names them) served so far; 0 for an unknown name. */
uint64_t fs_requests_of(struct fs *fs, const char *op);
/* Inode invalidations sent so far; *missed: of those, how many the kernel
 * answered ENOENT (it held no such inode). */
uint64_t fs_invalidations(struct fs *fs, uint64_t *missed);
/* Invalidations queued for the notifier so far (entries, and inodes with
 * their pages: inval.h). */
uint64_t fs_invalidations_queued(struct fs *fs);
/* The metrics file's content (DESIGN 11), built now, from any thread
 * (http/): *text is malloc'd, *len bytes, no NUL counted. 0 or -ENOMEM. */
int fs_metrics_text(struct fs *fs, char **text, size_t *len);
/* The `kubelet` file of csi-node plugin dirs (DESIGN 14) shows what show
 * writes (kubelet_show's contract, with the provider into prov when it is
 * not NULL), and csifs_kubelet_registered samples it; without a source
 * neither exists. Set once, before serving (cmd/ with -o kubelet_dir=). */
typedef ssize_t fs_kubelet_show_fn(void *arg, enum reg_type type, const char *plugin,
                                   char *buf, size_t cap, char *prov, size_t provcap);
void fs_kubelet_source(fs_kubelet_show_fn *show, void *arg);
/* Requests kept unanswered on purpose: events reads waiting for a line.
 * /healthz (DESIGN 14) does not count them as stuck. Any thread. */
unsigned fs_parked(struct fs *fs);
/* The cluster view (-o cluster_view): serve v under <mnt>/cluster/ (before
 * fs_loop); fs_cluster_changed is the view's changed callback (arg: the
 * fs), which invalidates the kernel's caches. */
struct cl_view;
struct cl_view_change;
void fs_cluster_attach(struct fs *fs, struct cl_view *v);
void fs_cluster_changed(void *arg, const struct cl_view_change *c);
/* ---- Restart without unmount (DESIGN 13; takeover/ keeps the memory) ----
 * fi->fh is a token into a table of open files that a successor on the
 * same connection inherits; the INIT request read and the pending links
 * are kept beside it. */
struct fs_saved_fh {
    uint32_t live, gen;          /* gen: the slot's token generation */
    uint32_t kind, flags;        /* node kind, open flags */
    uint64_t ino, kh;            /* kh: the kernel's poll handle id, 0 none */
};
struct pending_table;             /* fs/pending.h */
struct fs_handover {
    void *init;                  /* the INIT request as read, *init_len bytes */
    uint32_t init_cap, *init_len;
    struct fs_saved_fh *fhs;
    uint32_t nfhs;
    struct pending_table *links; /* pending links (ln -sfn), NULL: kept by fs/ */
    bool takeover;               /* they hold a predecessor's (else zeroed) */
};
/* Before any open, from fs_session on: use h's memory (it outlives the
 * process). 0, -EINVAL (files already open) or -ENOMEM. */
int fs_handover(struct fs *fs, const struct fs_handover *h);
/* The session's /dev/fuse fd. */
int fs_fd(struct fs *fs);
/* With a handed-over fd, after fs_attach: feed the saved INIT to libfuse
 * (op_init runs; the kernel sees no second reply) and make the lookup
 * table blind. -ENOENT when there is none. */
int fs_replay_init(struct fs *fs);
/* inval_inode of every plugin's current and every instance's health,
 * queued for the notifier thread and the helper (never waits: one may wait
 * on a page a READ in flight holds, answered only once serving, or only
 * after FUSE_NOTIFY_RESEND); returns how many were queued. */
unsigned long fs_inval_all_current(struct fs *fs);
/* The poll handle ids (kh) of open files, at most cap: woken after a
 * takeover. */
unsigned fs_polled(struct fs *fs, uint64_t *kh, unsigned cap);
/* Mount on a handed fd: fuse_session_mount(se, "/dev/fd/N"); nothing is
 * mounted, and fs_unmount leaves the mount alone. -EIO. */
int fs_session_mount_fd(struct fs *fs, int fd);
/* Once mounted, before the lock file and the store are opened and before
 * fs_attach: fork the notification helper, a process holding only the
 * /dev/fuse fd, which writes the notifications that can wait on a
 * directory lock (entry invalidations), so that a SIGKILLed csifs is
 * reaped at once (fs/helper.c says how). Without one (a failed fork:
 * logged, -errno) the notifier thread writes them itself. */
int fs_helper_start(struct fs *fs);

/* Unmount and close the connection now: requests still waiting on the mount
 * fail instead of hanging. The fs stays valid (notifications become no-ops)
 * until fs_destroy. */
void fs_unmount(struct fs *fs);
/* Unmount (if still mounted) and free. */
void fs_destroy(struct fs *fs);

#endif
