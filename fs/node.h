/* Internal to fs/: node kinds and what each does, inode numbers, the
 * per-mount state.
 *
 * Inode numbers are derived, never allocated: (seq << 5) | slot, where seq
 * is the registry seq of a plugin or instance (stable across restarts) and
 * slot picks the node inside it. seq 0 holds the fixed nodes (root = 1).
 * Pending links (ln -sfn's temporary names) use slot 31 with their own ids.
 *
 * Every FUSE handler (fs.c, ops_*.c) resolves the inode it is given to a
 * struct fs_node, then calls the operation of the node's kind in fs_kinds[]
 * (resolve-then-dispatch). An open file's handle (fi->fh) starts with a
 * struct fs_fh that records its kind and node, so read, poll, write and
 * release dispatch without resolving again. Adding a kind: one enum value,
 * one row in fs_kinds[] (node.c) and one file with its operations.
 */
#ifndef CSIFS_NODE_H
#define CSIFS_NODE_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/fs.h"
#include "fs/pending.h"

enum fs_kind {
    K_ROOT, K_TYPE, K_EVENTS, K_METRICS, K_PLUGIN, K_CURRENT, K_INST, K_SOCKET, K_ATTR,
    K_STATS, K_PENDING, K_KUBELET,
    /* the cluster view (kind_cluster.c) */
    K_CL_ROOT, K_CL_STATUS, K_CL_TYPE, K_CL_PLUGIN, K_CL_SUMMARY, K_CL_NODE, K_CL_FIELD,
    K_NKINDS
};

#define SLOT_BITS 5
#define SLOT_DIR 0               /* a plugin or instance: its dir */
#define SLOT_ROOT 1              /* seq 0: 1 root, 2.. types, then fixed files */
#define SLOT_TYPE0 2
#define SLOT_ATTR0 2             /* instance: 0 dir, 1 socket, 2.. attributes */
#define SLOT_PENDING 31
#define FS_NSLOTS 32
/* The cluster view's inodes: seqs from here on (kind_cluster.c), far above
 * any registry seq. */
#define FS_CL_SEQ0 (UINT64_C(1) << 56)
#define FS_CL_DIR "cluster"

/* FUSE requests, counted per op for csifs_fuse_requests_total. */
enum fs_op {
    FS_OP_LOOKUP, FS_OP_FORGET, FS_OP_GETATTR, FS_OP_SETATTR, FS_OP_READLINK, FS_OP_MKDIR,
    FS_OP_RMDIR, FS_OP_SYMLINK, FS_OP_UNLINK, FS_OP_RENAME, FS_OP_OPEN, FS_OP_READ,
    FS_OP_WRITE, FS_OP_RELEASE, FS_OP_OPENDIR, FS_OP_RELEASEDIR, FS_OP_READDIR, FS_OP_READDIRPLUS, FS_OP_POLL,
    FS_OP_OTHER, FS_NOPS
};
extern const char *const fs_op_names[FS_NOPS];

struct fs_lookups;

struct fs {
    struct fuse_session *se;
    struct reg *reg;
    char *mountpoint;
    bool mounted;
    bool has_registrar;
    gid_t gid;
    struct pending pend;
    int64_t mount_ns;            /* times of the fixed nodes */
    double entry_timeout, attr_timeout;
    struct fs_events *events;    /* readers of <mnt>/events (events_file.c) */
    struct fs_inval *inval;      /* notifier thread and pollers (inval.c) */
    struct fs_lookups *lookups;  /* inodes the kernel knows (lookups.c) */
    struct cl_view *view;        /* -o cluster_view (kind_cluster.c), or NULL */
    /* Open files: a file still open when the connection ends gets no
     * RELEASE; fs_destroy releases them (fs_fh_release_all). Leaf lock. */
    pthread_mutex_t fh_mu;
    LIST_HEAD(, fs_fh) open_fhs;
    /* fi->fh tokens (fh.c): the saved table (handover memory or own_fhs)
     * and this process's state of each slot; under fh_mu */
    struct fs_saved_fh *fhs, *own_fhs;
    uint32_t nfhs, fh_hint;
    struct fs_fh **fh_ptr;
    /* takeover (DESIGN 13): the INIT request kept for a successor */
    void *init_buf;
    uint32_t init_cap, *init_len;
    bool handover;               /* fhs and init are the handover memory */
    bool takeover;               /* and they hold a predecessor's */
    /* the notification helper (helper.c): its pipe (-1 none), pid, and the
     * connection it holds */
    int helper_fd;
    pid_t helper_pid;
    unsigned helper_conn;
    uint64_t requests;           /* requests served (atomic), for tests and metrics */
    uint64_t req_by_op[FS_NOPS]; /* the same, per op (atomic) */
    uint64_t inval_sent[2];      /* inode invalidations sent: [1] the kernel had none */
    uint64_t inval_queued;       /* entry and later inode ones for the notifier (atomic) */
    void (*on_init)(void *arg);  /* fs_opts.on_init */
    void *on_init_arg;
    /* Committing requests queued and not yet answered (ops_write.c), under
     * calls_mu (a leaf lock): fs_loop waits for none before it returns. */
    pthread_mutex_t calls_mu;
    pthread_cond_t calls_cv;
    long calls;
    bool hold;                   /* fs_hold_commits: new ones are held, not run */
    unsigned held;               /* how many were */
};

/* Count a committing request in (1) or out (-1) (ops_write.c). */
void fs_calls_add(struct fs *fs, int d);
/* Count a new committing request in: false (not counted) when an upgrade
 * holds them (fs_hold_commits): the caller leaves it unanswered. */
bool fs_calls_open(struct fs *fs);

/* The mount a request is for; counts the request. */
static inline struct fs *fs_req(fuse_req_t req, enum fs_op op)
{
    struct fs *fs = fuse_req_userdata(req);
    __atomic_add_fetch(&fs->requests, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fs->req_by_op[op], 1, __ATOMIC_RELAXED);
    return fs;
}

/* What an inode is, resolved against the registry now. */
struct fs_node {
    enum fs_kind kind;
    fuse_ino_t ino;
    enum reg_type type;          /* K_TYPE and below */
    struct reg_node r;           /* K_PLUGIN, K_CURRENT: the plugin; K_INST and
                                    below: the instance */
    enum reg_attr attr;          /* K_ATTR */
    uint64_t pending;            /* K_PENDING: its id */
    uint64_t cl_id;              /* K_CL_PLUGIN and below: the view object's id */
    unsigned cl_fields;          /* K_CL_NODE: fields present (bit 1 << field) */
    int cl_field;                /* K_CL_FIELD */
};

/* The head of every open file's state (fi->fh): set by fs_open. */
struct fs_fh {
    enum fs_kind kind;
    struct fs_node n;            /* as resolved at open */
    uint32_t slot;               /* its token's slot (fh.c) */
    LIST_ENTRY(fs_fh) link;      /* fs->open_fhs, under fs->fh_mu */
};

struct fs_dirbuf;

/* One row per node kind: what it is and its operations. A NULL operation
 * has the default written beside it. */
struct fs_kind_def {
    const char *name;            /* fixed file name, or NULL */
    mode_t fmt;                  /* S_IFDIR, S_IFREG, S_IFLNK */
    mode_t perm;                 /* without a registrar group */
    enum fs_kind parent;         /* fixed-name kinds: the dir kind they live in */
    unsigned slot;               /*   and their slot there */
    unsigned nslots;             /* dirs: slots of fixed children (1..nslots-1) */
    bool may_hold_links;         /* symlink/rename inside (instance dirs) */
    bool brief;                  /* entries not cached (they expire unannounced) */
    bool (*exists)(const struct fs_node *n);                    /* NULL: always */
    /* dirs: children that are not fixed names (lookup, readdir) */
    int (*child)(struct fs *fs, const struct fs_node *dir, const char *name,
                 struct fs_node *out);                          /* NULL: -ENOENT */
    void (*list)(struct fs_dirbuf *d, const struct fs_node *dir); /* NULL: none */
    int (*mkdir)(struct fs *fs, const struct fs_node *dir, const char *name); /* -EPERM */
    int (*rmdir)(struct fs *fs, const struct fs_node *dir, const char *name); /* -EPERM */
    /* any node */
    void (*stat)(struct fs *fs, const struct fs_node *n, struct stat *st); /* NULL: as is */
    off_t (*size)(struct fs *fs, const struct fs_node *n);      /* NULL: 0 */
    ssize_t (*readlink)(struct fs *fs, const struct fs_node *n, char *buf,
                        size_t cap);                           /* NULL: -EINVAL */
    int (*unlink)(struct fs *fs, const struct fs_node *n, const char *name);
                                                  /* NULL: -EISDIR for dirs, else -EPERM */
    /* files: open makes *out (the kind's state, starting with struct fs_fh) */
    int (*open)(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                struct fs_fh **out);                            /* NULL: -EISDIR */
    void (*read)(struct fs *fs, fuse_req_t req, struct fs_fh *h, size_t size, off_t off,
                 struct fuse_file_info *fi);
    void (*poll)(struct fs *fs, fuse_req_t req, struct fs_fh *h, struct fuse_file_info *fi,
                 struct fuse_pollhandle *ph);                   /* NULL: always readable */
    /* write at off; len 0 is a truncate to size off (only 0 may succeed) */
    int (*write)(struct fs *fs, const struct fs_node *n, const char *buf, size_t len,
                 off_t off);                /* NULL: -EACCES for files, -EPERM otherwise */
    void (*release)(struct fs *fs, struct fs_fh *h);
    /* a kind heading an inode range of its own (K_CL_ROOT: seqs from
     * FS_CL_SEQ0): resolves (seq - base, slot) there */
    int (*resolve)(struct fs *fs, uint64_t id, unsigned slot, struct fs_node *out);
};
extern const struct fs_kind_def fs_kinds[K_NKINDS];

fuse_ino_t fs_ino(uint64_t seq, unsigned slot);
/* -ENOENT when the node no longer exists. */
int fs_resolve(struct fs *fs, fuse_ino_t ino, struct fs_node *out);
/* The fixed child at slot of a resolved directory: as fs_resolve of its
 * inode, from dir's registry node as read (no second read of the registry:
 * a listing shows one moment of the dir). */
int fs_resolve_slot(struct fs *fs, const struct fs_node *dir, unsigned slot,
                    struct fs_node *out);
/* The directory node of a plugin or instance from what the registry handed
 * over (reg_list's callback: no call back into the registry). */
void fs_node_of(const struct reg_node *r, struct fs_node *out);
/* The child `name` of a directory node, or -ENOENT. */
int fs_child(struct fs *fs, const struct fs_node *dir, const char *name, struct fs_node *out);
/* stat of a node: honest type, mode, size, nlink, owner and times. */
int fs_stat(struct fs *fs, const struct fs_node *n, struct stat *st);
/* The file name of a node with a fixed name (types, attributes, rows). */
const char *fs_node_name(const struct fs_node *n);

/* Reply helpers (node.c): the entry of a node (counted as a lookup); the
 * entry of dir/name, or the error rc (or the lookup's) when there is none. */
void fs_reply_entry(fuse_req_t req, struct fs *fs, const struct fs_node *n);
void fs_reply_child(fuse_req_t req, struct fs *fs, int rc, const struct fs_node *dir,
                    const char *name);
void fs_entry_param(struct fs *fs, const struct fs_node *n, struct fuse_entry_param *e);

/* Readdir (ops_dir.c): the buffer a listing fills; list ops call these. */
struct fs_dirbuf {
    fuse_req_t req;
    struct fs *fs;
    bool plus;
    char *buf;
    size_t size, len;
    off_t skip;                  /* entries with a cookie <= skip are done */
    bool full;
};
/* Cookies: "." 1, ".." 2, a fixed child slot + 3, a registry child seq +
 * FS_COOKIE_SEQ: stable with no open (the kernel caches listings). */
#define FS_COOKIE_SEQ (FS_NSLOTS + 3)
/* Add one entry (a list op's child); false once the buffer is full. */
bool fs_dirbuf_add(struct fs_dirbuf *d, const char *name, const struct fs_node *n, off_t cookie);
/* Registry children (plugins of a type, instances of a plugin). */
void fs_list_reg(struct fs_dirbuf *d, const struct fs_node *dir);

/* Inodes the kernel holds (lookups.c): counted at each entry reply,
 * decremented by forget; invalidations go only to those it holds. */
int fs_lookups_init(struct fs *fs);
void fs_lookups_fini(struct fs *fs);
void fs_lookups_add(struct fs *fs, fuse_ino_t ino);
void fs_lookups_forget(struct fs *fs, fuse_ino_t ino, uint64_t n);
bool fs_lookups_known(struct fs *fs, fuse_ino_t ino);
/* After a takeover: the kernel may hold any inode (all are known). */
void fs_lookups_blind(struct fs *fs);

/* fi->fh tokens (fh.c). put: a token for h (-EMFILE when the table is
 * full); get: the open file of a token, a predecessor's adopted, or NULL
 * when stale (EBADF); drop: with fh_mu held, at release. */
int fs_fh_table_init(struct fs *fs);
/* Open ino as its kind's open does for fi (kind >= 0: only when it is that
 * kind, else -EBADF): a handle with kind and node set; -EISDIR (no open),
 * -EACCES (a write to a read-only kind) or the open's -errno. Takes no fs
 * lock around the kind's open (it may take the registry's). */
int fs_fh_open(struct fs *fs, fuse_ino_t ino, struct fuse_file_info *fi, int kind,
               struct fs_fh **out);
void fs_fh_table_fini(struct fs *fs);
int fs_fh_put(struct fs *fs, struct fs_fh *h, fuse_ino_t ino, int flags, uint64_t *token);
struct fs_fh *fs_fh_get(struct fs *fs, uint64_t token, fuse_ino_t ino);
void fs_fh_drop(struct fs *fs, struct fs_fh *h);
/* RELEASE: the open file of a token (not adopted: a predecessor's slot is
 * freed, NULL), NULL when stale. */
struct fs_fh *fs_fh_released(struct fs *fs, uint64_t token);
/* The kernel's poll handle id of an open file (woken after a takeover). */
void fs_fh_note_kh(struct fs *fs, const struct fs_fh *h, uint64_t kh);
unsigned fs_fh_polled(struct fs *fs, uint64_t *kh, unsigned cap);

/* The notification helper (helper.c; fs.h fs_helper_start). inval_entry:
 * hand it parent/name's FUSE_NOTIFY_INVAL_ENTRY (never blocks): 0,
 * -EAGAIN (its pipe is full), -ENOTCONN (no helper), -EPIPE (it died).
 * inval_inode: the same with ino's FUSE_NOTIFY_INVAL_INODE (offset 0: its
 * pages too, which waits on a page a READ in flight holds).
 * stop (fs_destroy, after the notifier): end of file, wait for its exit;
 * one stuck on a lock no one will release has its connection aborted. */
int fs_helper_inval_entry(struct fs *fs, fuse_ino_t parent, const char *name);
int fs_helper_inval_inode(struct fs *fs, fuse_ino_t ino);
void fs_helper_stop(struct fs *fs);

#endif
