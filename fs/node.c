/* Node kinds, inode numbers, name resolution and stat. */
#include "fs/node.h"

#include <errno.h>
#include <string.h>
#include <time.h>

/* Fixed nodes: seq 0, these slots. */
enum { SLOT_ROOT = 1, SLOT_TYPE0 = 2, SLOT_EVENTS = SLOT_TYPE0 + REG_NTYPES };

const struct fs_kind_def fs_kinds[K_NKINDS] = {
    [K_ROOT] = { NULL, S_IFDIR, 0755, K_NKINDS, false },
    [K_TYPE] = { NULL, S_IFDIR, 0755, K_PLUGIN, false },
    [K_EVENTS] = { "events", S_IFREG, 0444, K_NKINDS, false },
    [K_PLUGIN] = { NULL, S_IFDIR, 0755, K_INST, false },
    [K_CURRENT] = { "current", S_IFLNK, 0777, K_NKINDS, false },
    [K_INST] = { NULL, S_IFDIR, 0755, K_NKINDS, true },
    [K_SOCKET] = { "socket", S_IFLNK, 0777, K_NKINDS, false },
    [K_ATTR] = { NULL, S_IFREG, 0444, K_NKINDS, false },
    [K_PENDING] = { NULL, S_IFLNK, 0777, K_NKINDS, false },
};

fuse_ino_t fs_ino(uint64_t seq, unsigned slot)
{
    return (fuse_ino_t)(seq << SLOT_BITS | slot);
}

static int fixed(fuse_ino_t ino, struct fs_node *out)
{
    unsigned slot = ino & ((1u << SLOT_BITS) - 1);
    if (slot == SLOT_ROOT)
        out->kind = K_ROOT;
    else if (slot >= SLOT_TYPE0 && slot < SLOT_TYPE0 + REG_NTYPES) {
        out->kind = K_TYPE;
        out->type = (enum reg_type)(slot - SLOT_TYPE0);
    } else if (slot == SLOT_EVENTS)
        out->kind = K_EVENTS;
    else
        return -ENOENT;
    return 0;
}

static bool attr_exists(enum reg_type type, unsigned a)
{
    return a < REG_NATTRS && (type == REG_NODE || !(reg_attrs[a].flags & REG_AF_NODE_ONLY));
}

int fs_resolve(struct fs *fs, fuse_ino_t ino, struct fs_node *out)
{
    memset(out, 0, sizeof(*out));
    out->ino = ino;
    uint64_t seq = ino >> SLOT_BITS;
    unsigned slot = ino & ((1u << SLOT_BITS) - 1);
    if (seq == 0)
        return fixed(ino, out);
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
    if (out->r.kind == REG_K_PLUGIN) {
        if (slot > 1 || (slot == 1 && !out->r.current))
            return -ENOENT;
        out->kind = slot ? K_CURRENT : K_PLUGIN;
        return 0;
    }
    if (slot == 0)
        out->kind = K_INST;
    else if (slot == 1 && out->r.has_socket)
        out->kind = K_SOCKET;
    else if (slot >= SLOT_ATTR0 && attr_exists(out->type, slot - SLOT_ATTR0)) {
        out->kind = K_ATTR;
        out->attr = (enum reg_attr)(slot - SLOT_ATTR0);
    } else
        return -ENOENT;
    return 0;
}

void fs_node_of(const struct reg_node *r, struct fs_node *out)
{
    memset(out, 0, sizeof(*out));
    out->ino = fs_ino(r->seq, 0);
    out->r = *r;
    out->type = r->type;
    out->kind = r->kind == REG_K_PLUGIN ? K_PLUGIN : K_INST;
}

int fs_child(struct fs *fs, const struct fs_node *dir, const char *name, struct fs_node *out)
{
    int t;
    struct pending_link l;
    switch (dir->kind) {
    case K_ROOT:
        if (!strcmp(name, fs_kinds[K_EVENTS].name))
            return fs_resolve(fs, fs_ino(0, SLOT_EVENTS), out);
        if ((t = reg_type_parse(name)) < 0)
            return -ENOENT;
        return fs_resolve(fs, fs_ino(0, SLOT_TYPE0 + (unsigned)t), out);
    case K_TYPE:
        if (reg_lookup_plugin(fs->reg, dir->type, name, &out->r) < 0)
            return -ENOENT;
        return fs_resolve(fs, fs_ino(out->r.seq, 0), out);
    case K_PLUGIN:
        if (!strcmp(name, fs_kinds[K_CURRENT].name))
            return fs_resolve(fs, fs_ino(dir->r.seq, 1), out);
        if (reg_lookup_instance(fs->reg, dir->r.seq, name, &out->r) < 0)
            return -ENOENT;
        return fs_resolve(fs, fs_ino(out->r.seq, 0), out);
    case K_INST:
        if (!strcmp(name, fs_kinds[K_SOCKET].name))
            return fs_resolve(fs, fs_ino(dir->r.seq, 1), out);
        if ((t = reg_attr_lookup(dir->type, name)) >= 0)
            return fs_resolve(fs, fs_ino(dir->r.seq, SLOT_ATTR0 + (unsigned)t), out);
        if (pending_find(&fs->pend, dir->r.seq, name, &l) == 0)
            return fs_resolve(fs, fs_ino(l.id, SLOT_PENDING), out);
        return -ENOENT;
    default:
        return -ENOTDIR;
    }
}

static int count_one(const struct reg_node *n, void *arg)
{
    (void)n;
    (*(nlink_t *)arg)++;
    return 0;
}

static void set_times(struct stat *st, int64_t mtime_ns, int64_t ctime_ns)
{
    st->st_mtim.tv_sec = mtime_ns / 1000000000;
    st->st_mtim.tv_nsec = mtime_ns % 1000000000;
    st->st_ctim.tv_sec = ctime_ns / 1000000000;
    st->st_ctim.tv_nsec = ctime_ns % 1000000000;
    st->st_atim = st->st_mtim;
}

static off_t size_of(struct fs *fs, const struct fs_node *n)
{
    ssize_t len = 0;
    struct pending_link l;
    switch (n->kind) {
    case K_ATTR: len = reg_attr_show(fs->reg, n->r.seq, n->attr, NULL, 0); break;
    case K_SOCKET: len = reg_socket_get(fs->reg, n->r.seq, NULL, 0); break;
    case K_CURRENT: len = reg_current_get(fs->reg, n->r.seq, NULL, 0); break;
    case K_PENDING: len = pending_get(&fs->pend, n->pending, &l) ? 0 : (ssize_t)strlen(l.target);
                    break;
    default: break;
    }
    return len > 0 ? (off_t)len : 0;
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
    bool group_w = fs->has_registrar;
    switch (n->kind) {
    case K_ROOT:
        st->st_nlink = 2 + REG_NTYPES;
        break;
    case K_TYPE:
        st->st_nlink = 2;
        reg_list(fs->reg, n->type, 0, 0, count_one, &st->st_nlink);
        if (group_w)
            st->st_mode |= S_IWGRP;
        break;
    case K_PLUGIN:
        st->st_nlink = 2 + n->r.count;
        if (group_w)
            st->st_mode |= S_IWGRP;
        break;
    case K_INST:
        st->st_nlink = 2;
        if (group_w)
            st->st_mode |= S_IWGRP;
        break;
    case K_ATTR:
        if (reg_attrs[n->attr].flags & REG_AF_WRITABLE)
            st->st_mode |= S_IWUSR | (group_w ? S_IWGRP : 0);
        break;
    default:
        break;
    }
    st->st_size = size_of(fs, n);
    st->st_blocks = (st->st_size + 511) / 512;
    if (n->kind == K_ROOT || n->kind == K_TYPE || n->kind == K_EVENTS)
        set_times(st, fs->mount_ns, fs->mount_ns);
    else if (n->kind == K_INST)
        set_times(st, n->r.registered_ns, n->r.changed_ns);
    else
        set_times(st, n->r.changed_ns, n->r.changed_ns);
    return 0;
}
