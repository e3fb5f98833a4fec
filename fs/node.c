/* The node-kind table, inode numbers, name resolution, stat and the entry
 * replies. */
#include "fs/kinds.h"
#include "cluster/value.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>

/* One row per kind: everything the kind is and does. */
const struct fs_kind_def fs_kinds[K_NKINDS] = {
    [K_ROOT] = { .fmt = S_IFDIR, .perm = 0755, .nslots = SLOT_TYPE0 + REG_NTYPES + 2,
                 .child = fs_root_child, .list = fs_cl_root_list, .stat = fs_root_stat },
    [K_TYPE] = { .fmt = S_IFDIR, .perm = 0755, .child = fs_type_child, .list = fs_list_reg,
                 .mkdir = fs_type_mkdir, .rmdir = fs_type_rmdir, .stat = fs_type_stat },
    [K_EVENTS] = { .name = "events", .fmt = S_IFREG, .perm = 0444, .parent = K_ROOT,
                   .slot = SLOT_TYPE0 + REG_NTYPES, .open = fs_events_open,
                   .read = fs_events_read, .poll = fs_events_poll,
                   .release = fs_events_release, .stat = fs_events_stat },
    [K_METRICS] = { .name = "metrics", .fmt = S_IFREG, .perm = 0444, .parent = K_ROOT,
                    .slot = SLOT_TYPE0 + REG_NTYPES + 1, .open = fs_metrics_open,
                    .read = fs_snap_read, .release = fs_snap_release },
    [K_PLUGIN] = { .fmt = S_IFDIR, .perm = 0755, .nslots = 3, .child = fs_plugin_child,
                   .list = fs_list_reg, .mkdir = fs_plugin_mkdir, .rmdir = fs_plugin_rmdir,
                   .stat = fs_plugin_stat },
    [K_CURRENT] = { .name = "current", .fmt = S_IFLNK, .perm = 0777, .parent = K_PLUGIN,
                    .slot = 1, .exists = fs_current_exists, .size = fs_current_size,
                    .readlink = fs_current_readlink },
    [K_INST] = { .fmt = S_IFDIR, .perm = 0755, .nslots = SLOT_PENDING,
                 .may_hold_links = true, .child = fs_inst_child, .stat = fs_inst_stat },
    [K_SOCKET] = { .name = "socket", .fmt = S_IFLNK, .perm = 0777, .parent = K_INST,
                   .slot = 1, .exists = fs_socket_exists, .size = fs_socket_size,
                   .readlink = fs_socket_readlink, .unlink = fs_socket_unlink },
    [K_ATTR] = { .fmt = S_IFREG, .perm = 0444, .stat = fs_attr_stat, .size = fs_attr_size,
                 .open = fs_attr_open, .read = fs_attr_read, .poll = fs_attr_poll,
                 .write = fs_attr_write, .release = fs_attr_release },
    [K_STATS] = { .name = "stats", .fmt = S_IFREG, .perm = 0444, .parent = K_INST,
                  .slot = SLOT_PENDING - 1, .open = fs_stats_open, .read = fs_snap_read,
                  .release = fs_snap_release },
    [K_KUBELET] = { .name = "kubelet", .fmt = S_IFREG, .perm = 0444, .parent = K_PLUGIN,
                    .slot = 2, .exists = fs_kubelet_exists, .open = fs_kubelet_open,
                    .read = fs_snap_read, .release = fs_snap_release },
    [K_PENDING] = { .fmt = S_IFLNK, .perm = 0777, .brief = true, .size = fs_pending_size,
                    .readlink = fs_pending_readlink, .unlink = fs_pending_unlink },
    /* the cluster view: read-only (no mkdir, write, unlink: EPERM, EACCES) */
    [K_CL_ROOT] = { .fmt = S_IFDIR, .perm = 0555, .nslots = SLOT_TYPE0 + REG_NTYPES,
                    .child = fs_cl_dir_child, .stat = fs_cl_dir_stat,
                    .resolve = fs_cl_resolve },
    [K_CL_STATUS] = { .name = "status", .fmt = S_IFREG, .perm = 0444, .parent = K_CL_ROOT,
                      .slot = 1, .open = fs_cl_status_open, .read = fs_snap_read,
                      .release = fs_snap_release },
    [K_CL_TYPE] = { .fmt = S_IFDIR, .perm = 0555, .child = fs_cl_dir_child, .list = fs_cl_list,
                    .stat = fs_cl_dir_stat },
    [K_CL_PLUGIN] = { .fmt = S_IFDIR, .perm = 0555, .nslots = 2, .child = fs_cl_dir_child,
                      .list = fs_cl_list, .stat = fs_cl_dir_stat },
    [K_CL_SUMMARY] = { .name = "summary", .fmt = S_IFREG, .perm = 0444, .parent = K_CL_PLUGIN,
                       .slot = 1, .size = fs_cl_file_size, .open = fs_cl_file_open,
                       .read = fs_snap_read, .release = fs_snap_release },
    [K_CL_NODE] = { .fmt = S_IFDIR, .perm = 0555, .nslots = SLOT_ATTR0 + CL_NFIELDS,
                    .child = fs_cl_dir_child, .stat = fs_cl_dir_stat },
    [K_CL_FIELD] = { .fmt = S_IFREG, .perm = 0444, .size = fs_cl_file_size,
                     .open = fs_cl_file_open, .read = fs_snap_read, .release = fs_snap_release },
};

fuse_ino_t fs_ino(uint64_t seq, unsigned slot)
{
    return (fuse_ino_t)(seq << SLOT_BITS | slot);
}

/* The kind with a fixed name at slot of a dir of kind dir, or K_NKINDS. */
static enum fs_kind fixed_at(enum fs_kind dir, unsigned slot)
{
    for (int k = 0; k < K_NKINDS; k++)
        if (fs_kinds[k].name && fs_kinds[k].parent == dir && fs_kinds[k].slot == slot)
            return (enum fs_kind)k;
    return K_NKINDS;
}

/* Slot `slot` inside a node of kind dir (seq 0 for the root). */
static int in_dir(enum fs_kind dir, unsigned slot, struct fs_node *out)
{
    enum fs_kind k = fixed_at(dir, slot);
    if (k != K_NKINDS) {
        out->kind = k;
    } else if (dir == K_ROOT && slot >= SLOT_TYPE0 && slot < SLOT_TYPE0 + REG_NTYPES) {
        out->kind = K_TYPE;
        out->type = (enum reg_type)(slot - SLOT_TYPE0);
    } else if (dir == K_INST && slot >= SLOT_ATTR0 && reg_attr_exists(out->type, slot - SLOT_ATTR0)) {
        out->kind = K_ATTR;
        out->attr = (enum reg_attr)(slot - SLOT_ATTR0);
    } else {
        return -ENOENT;
    }
    return fs_kinds[out->kind].exists && !fs_kinds[out->kind].exists(out) ? -ENOENT : 0;
}

int fs_resolve(struct fs *fs, fuse_ino_t ino, struct fs_node *out)
{
    memset(out, 0, sizeof(*out));
    out->ino = ino;
    uint64_t seq = ino >> SLOT_BITS;
    unsigned slot = ino & ((1u << SLOT_BITS) - 1);
    if (seq == 0 && slot == SLOT_ROOT) {
        out->kind = K_ROOT;
        return 0;
    }
    if (seq == 0)
        return in_dir(K_ROOT, slot, out);
    if (seq >= FS_CL_SEQ0)
        return fs_kinds[K_CL_ROOT].resolve(fs, seq - FS_CL_SEQ0, slot, out);
    if (slot == SLOT_PENDING) {
        struct pending_link l;
        if (pending_get(&fs->pend, seq, &l) < 0 || reg_get(fs->reg, l.inst, &out->r) < 0)
            return -ENOENT;
        out->kind = K_PENDING;
        out->type = out->r.type;
        out->pending = seq;
        return 0;
    }
    if (reg_get(fs->reg, seq, &out->r) < 0)
        return -ENOENT;
    out->type = out->r.type;
    enum fs_kind dir = out->r.kind == REG_K_PLUGIN ? K_PLUGIN : K_INST;
    if (slot == 0) {
        out->kind = dir;
        return 0;
    }
    return in_dir(dir, slot, out);
}

int fs_resolve_slot(struct fs *fs, const struct fs_node *dir, unsigned slot,
                    struct fs_node *out)
{
    if (dir->kind != K_PLUGIN && dir->kind != K_INST)
        return fs_resolve(fs, fs_ino(dir->kind == K_ROOT || dir->kind == K_TYPE ? 0 : dir->r.seq,
                                     slot), out);
    memset(out, 0, sizeof(*out));
    out->ino = fs_ino(dir->r.seq, slot);
    out->r = dir->r;
    out->type = dir->type;
    return in_dir(dir->kind, slot, out);
}

void fs_node_of(const struct reg_node *r, struct fs_node *out)
{
    memset(out, 0, sizeof(*out));
    out->ino = fs_ino(r->seq, SLOT_DIR);
    out->r = *r;
    out->type = r->type;
    out->kind = r->kind == REG_K_PLUGIN ? K_PLUGIN : K_INST;
}

int fs_child(struct fs *fs, const struct fs_node *dir, const char *name, struct fs_node *out)
{
    const struct fs_kind_def *d = &fs_kinds[dir->kind];
    if (d->fmt != S_IFDIR)
        return -ENOTDIR;
    if (strlen(name) > NAME_MAX)     /* the lookup before any mkdir, symlink... */
        return -ENAMETOOLONG;
    /* read afresh: a caller may have just changed the registry (symlink) */
    uint64_t seq = dir->kind == K_ROOT || dir->kind == K_TYPE ? 0 : dir->r.seq;
    for (int k = 0; k < K_NKINDS; k++)
        if (fs_kinds[k].name && fs_kinds[k].parent == dir->kind &&
            !strcmp(name, fs_kinds[k].name)) {
            /* a fixed name absent now (kubelet without -o kubelet_dir)
             * leaves the name to the dir's own children */
            int rc = fs_resolve(fs, fs_ino(seq, fs_kinds[k].slot), out);
            if (rc != -ENOENT || !d->child)
                return rc;
        }
    return d->child ? d->child(fs, dir, name, out) : -ENOENT;
}

const char *fs_node_name(const struct fs_node *n)
{
    switch (n->kind) {
    case K_TYPE: return reg_type_names[n->type];
    case K_ATTR: return reg_attrs[n->attr].name;
    case K_CL_TYPE: return reg_type_names[n->type];
    case K_CL_FIELD: return cl_field_names[n->cl_field];
    default: return fs_kinds[n->kind].name;
    }
}

static void set_times(struct stat *st, int64_t mtime_ns, int64_t ctime_ns)
{
    st->st_mtim.tv_sec = mtime_ns / 1000000000;
    st->st_mtim.tv_nsec = mtime_ns % 1000000000;
    st->st_ctim.tv_sec = ctime_ns / 1000000000;
    st->st_ctim.tv_nsec = ctime_ns % 1000000000;
    st->st_atim = st->st_mtim;
}

int fs_stat(struct fs *fs, const struct fs_node *n, struct stat *st)
{
    const struct fs_kind_def *k = &fs_kinds[n->kind];
    memset(st, 0, sizeof(*st));
    st->st_ino = n->ino;
    st->st_uid = 0;
    st->st_gid = fs->has_registrar ? fs->gid : 0;
    st->st_mode = k->fmt | k->perm;
    st->st_nlink = 1;
    st->st_blksize = 4096;
    off_t size = k->size ? k->size(fs, n) : 0;
    st->st_size = size > 0 ? size : 0;
    st->st_blocks = (st->st_size + 511) / 512;
    if ((n->ino >> SLOT_BITS) == 0)
        set_times(st, fs->mount_ns, fs->mount_ns);   /* the fixed nodes */
    else
        set_times(st, n->r.changed_ns, n->r.changed_ns);
    if (k->stat)
        k->stat(fs, n, st);
    return 0;
}

void fs_entry_param(struct fs *fs, const struct fs_node *n, struct fuse_entry_param *e)
{
    /* Cached for long, but for kinds that expire without a change anyone
     * is told of (pending links). */
    bool brief = fs_kinds[n->kind].brief;
    memset(e, 0, sizeof(*e));
    e->ino = n->ino;
    e->entry_timeout = brief ? 0 : fs->entry_timeout;
    e->attr_timeout = brief ? 0 : fs->attr_timeout;
    fs_stat(fs, n, &e->attr);
}

void fs_reply_entry(fuse_req_t req, struct fs *fs, const struct fs_node *n)
{
    struct fuse_entry_param e;
    /* counted before the attributes are read: a change after this sees the
     * inode as known and invalidates it */
    fs_lookups_add(fs, n->ino);
    fs_entry_param(fs, n, &e);
    if (fuse_reply_entry(req, &e) == -ENOENT)
        fs_lookups_forget(fs, n->ino, 1);   /* interrupted: the kernel took none */
}

void fs_reply_child(fuse_req_t req, struct fs *fs, int rc, const struct fs_node *dir,
                    const char *name)
{
    struct fs_node n;
    if (rc == 0)
        rc = fs_child(fs, dir, name, &n);
    if (rc < 0)
        fuse_reply_err(req, -rc);   /* never a cached negative entry */
    else
        fs_reply_entry(req, fs, &n);
}
