/* Internal to fs/: node kinds, inode numbers, the per-mount state.
 *
 * Inode numbers are derived, never allocated: (seq << 5) | slot, where seq
 * is the registry seq of a plugin or instance (stable across restarts) and
 * slot picks the node inside it. seq 0 holds the fixed nodes (root = 1).
 * Pending links (ln -sfn's temporary names) use slot 31 with their own ids.
 */
#ifndef CSIFS_NODE_H
#define CSIFS_NODE_H

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs/fs.h"
#include "fs/pending.h"

enum fs_kind {
    K_ROOT, K_TYPE, K_EVENTS, K_PLUGIN, K_CURRENT, K_INST, K_SOCKET, K_ATTR,
    K_PENDING, K_NKINDS
};

#define SLOT_BITS 5
#define SLOT_ATTR0 2             /* instance: 0 dir, 1 socket, 2.. attributes */
#define SLOT_PENDING 31

/* One row per node kind: what it is and what may be done inside it. */
struct fs_kind_def {
    const char *name;            /* fixed file name, or NULL */
    mode_t fmt;                  /* S_IFDIR, S_IFREG, S_IFLNK */
    mode_t perm;                 /* without a registrar group */
    enum fs_kind mkdir_child;    /* what mkdir makes inside; K_NKINDS: EPERM */
    bool may_hold_links;         /* symlink/rename inside (instance dirs) */
};
extern const struct fs_kind_def fs_kinds[K_NKINDS];

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
    uint64_t requests;           /* requests served (atomic), for tests and metrics */
    void (*on_init)(void *arg);  /* fs_opts.on_init */
    void *on_init_arg;
};

/* The mount a request is for; counts the request. */
static inline struct fs *fs_req(fuse_req_t req)
{
    struct fs *fs = fuse_req_userdata(req);
    __atomic_add_fetch(&fs->requests, 1, __ATOMIC_RELAXED);
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
};

fuse_ino_t fs_ino(uint64_t seq, unsigned slot);
/* -ENOENT when the node no longer exists. */
int fs_resolve(struct fs *fs, fuse_ino_t ino, struct fs_node *out);
/* The directory node of a plugin or instance from what the registry handed
 * over (reg_list's callback: no call back into the registry). */
void fs_node_of(const struct reg_node *r, struct fs_node *out);
/* The child `name` of a directory node, or -ENOENT. */
int fs_child(struct fs *fs, const struct fs_node *dir, const char *name, struct fs_node *out);
/* stat of a node: honest type, mode, size, nlink, owner and times. */
int fs_stat(struct fs *fs, const struct fs_node *n, struct stat *st);

/* Handler tables (ops_read.c, ops_write.c). */
void fs_ops_read(struct fuse_lowlevel_ops *ops);
void fs_ops_write(struct fuse_lowlevel_ops *ops);

/* Reply helpers: the entry of a node; the entry of dir/name, or the error
 * rc (or the lookup's) when there is none. */
void fs_reply_entry(fuse_req_t req, struct fs *fs, const struct fs_node *n);
void fs_reply_child(fuse_req_t req, struct fs *fs, int rc, const struct fs_node *dir,
                    const char *name);

#endif
