/* The cluster view's kinds (-o cluster_view, DESIGN 15): the read-only
 * <mnt>/cluster/ subtree served from cluster/view.h's model (rows in
 * node.c), and the invalidations of its changes.
 *
 * Inodes: seq FS_CL_SEQ0 is cluster/ itself (slot 1 status, slots
 * SLOT_TYPE0.. the types); seq FS_CL_SEQ0 + id a view object: a plugin
 * (slot 1 summary) or a node's key (slot SLOT_ATTR0 + f its field f). */
#include "fs/kinds.h"
#include "fs/inval.h"
#include "fs/snapshot.h"
#include "cluster/view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fs_cluster_attach(struct fs *fs, struct cl_view *v)
{
    fs->view = v;
}

static void of_obj(struct fs *fs, const struct cl_view_obj *o, struct fs_node *out)
{
    (void)fs;
    memset(out, 0, sizeof(*out));
    out->kind = o->kind == CL_VO_PLUGIN ? K_CL_PLUGIN : K_CL_NODE;
    out->type = (enum reg_type)o->type;
    out->cl_id = o->id;
    out->cl_fields = o->fields;
    out->r.seq = FS_CL_SEQ0 + o->id;
    out->r.changed_ns = o->changed_ns;
    out->r.count = (uint32_t)o->nodes;
    snprintf(out->r.plugin, sizeof(out->r.plugin), "%s", o->plugin);
    out->ino = fs_ino(out->r.seq, SLOT_DIR);
}

int fs_cl_resolve(struct fs *fs, uint64_t id, unsigned slot, struct fs_node *out)
{
    struct cl_view_obj o;
    if (!fs->view)
        return -ENOENT;
    fuse_ino_t ino = fs_ino(FS_CL_SEQ0 + id, slot);
    if (id == 0) {                   /* cluster/ */
        out->r.seq = FS_CL_SEQ0;
        out->r.changed_ns = fs->mount_ns;
        out->ino = ino;
        if (slot == SLOT_DIR || slot == fs_kinds[K_CL_STATUS].slot) {
            out->kind = slot == SLOT_DIR ? K_CL_ROOT : K_CL_STATUS;
            return 0;
        }
        if (slot < SLOT_TYPE0 || slot >= SLOT_TYPE0 + REG_NTYPES)
            return -ENOENT;
        out->kind = K_CL_TYPE;
        out->type = (enum reg_type)(slot - SLOT_TYPE0);
        return 0;
    }
    if (cl_view_get(fs->view, id, &o) < 0)
        return -ENOENT;
    of_obj(fs, &o, out);
    out->ino = ino;
    if (slot == SLOT_DIR)
        return 0;
    if (o.kind == CL_VO_PLUGIN && slot == fs_kinds[K_CL_SUMMARY].slot) {
        out->kind = K_CL_SUMMARY;
        return 0;
    }
    unsigned f = slot - SLOT_ATTR0;
    if (o.kind != CL_VO_NODE || slot < SLOT_ATTR0 || f >= CL_NFIELDS || !(o.fields & 1u << f))
        return -ENOENT;
    out->kind = K_CL_FIELD;
    out->cl_field = (int)f;
    return 0;
}

/* ---- the root's entry "cluster" ---- */

int fs_cl_root_lookup(struct fs *fs, const char *name, struct fs_node *out)
{
    if (!fs->view || strcmp(name, FS_CL_DIR))
        return -ENOENT;
    return fs_resolve(fs, fs_ino(FS_CL_SEQ0, SLOT_DIR), out);
}

void fs_cl_root_list(struct fs_dirbuf *d, const struct fs_node *dir)
{
    (void)dir;
    struct fs_node n;
    if (d->skip < FS_COOKIE_SEQ && fs_cl_root_lookup(d->fs, FS_CL_DIR, &n) == 0)
        fs_dirbuf_add(d, FS_CL_DIR, &n, FS_COOKIE_SEQ);
}

/* ---- directories ---- */

int fs_cl_dir_child(struct fs *fs, const struct fs_node *dir, const char *name,
                    struct fs_node *out)
{
    struct cl_view_obj o;
    int t, f;
    switch (dir->kind) {
    case K_CL_ROOT:
        t = reg_type_parse(name);
        return t < 0 ? -ENOENT : fs_resolve(fs, fs_ino(FS_CL_SEQ0, SLOT_TYPE0 + (unsigned)t), out);
    case K_CL_TYPE:
    case K_CL_PLUGIN:
        if (cl_view_find(fs->view, dir->type, dir->kind == K_CL_TYPE ? name : dir->r.plugin,
                         dir->kind == K_CL_TYPE ? NULL : name, &o) < 0)
            return -ENOENT;
        of_obj(fs, &o, out);
        return 0;
    case K_CL_NODE:
        f = cl_field_lookup(name);
        return f < 0 ? -ENOENT : fs_resolve(fs, fs_ino(dir->r.seq, SLOT_ATTR0 + (unsigned)f), out);
    default:
        return -ENOENT;
    }
}

static int add_obj(const struct cl_view_obj *o, void *arg)
{
    struct fs_dirbuf *d = arg;
    struct fs_node n;
    of_obj(d->fs, o, &n);            /* under the view's lock: no call back into it */
    return !fs_dirbuf_add(d, o->kind == CL_VO_PLUGIN ? o->plugin : o->node, &n,
                          (off_t)o->id + FS_COOKIE_SEQ);
}

void fs_cl_list(struct fs_dirbuf *d, const struct fs_node *dir)
{
    off_t after = d->skip - FS_COOKIE_SEQ;
    cl_view_list(d->fs->view, dir->type, dir->kind == K_CL_PLUGIN ? dir->cl_id : 0,
                 after > 0 ? (uint64_t)after : 0, add_obj, d);
}

void fs_cl_dir_stat(struct fs *fs, const struct fs_node *n, struct stat *st)
{
    (void)fs;
    st->st_nlink = 2 + (n->kind == K_CL_ROOT ? REG_NTYPES : 0) +
                   (n->kind == K_CL_PLUGIN ? n->r.count : 0);
}

/* ---- files: a field, a plugin's summary, the status ---- */

static ssize_t content(struct fs *fs, const struct fs_node *n, char *buf, size_t cap)
{
    return n->kind == K_CL_SUMMARY ? cl_view_summary(fs->view, n->cl_id, buf, cap)
                                   : cl_view_field(fs->view, n->cl_id, n->cl_field, buf, cap);
}

off_t fs_cl_file_size(struct fs *fs, const struct fs_node *n)
{
    ssize_t len = content(fs, n, NULL, 0);
    return len < 0 ? 0 : (off_t)len;
}

int fs_cl_file_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                    struct fs_fh **out)
{
    struct fs_buf b = { .cap = CL_VALUE_MAX + 2 };
    if (!(b.p = malloc(b.cap)))
        return -ENOMEM;
    ssize_t len = content(fs, n, b.p, b.cap);
    if (len < 0) {
        fs_buf_free(&b);
        return (int)len;
    }
    b.len = (size_t)len < b.cap ? (size_t)len : b.cap;
    return fs_snap_open(&b, fi, out);
}

int fs_cl_status_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                      struct fs_fh **out)
{
    (void)n;
    struct fs_buf b = { 0 };
    int rc = cl_view_status(fs->view, &b.p, &b.len);
    if (rc < 0)
        return rc;
    b.cap = b.len;
    return fs_snap_open(&b, fi, out);
}

/* ---- invalidation: the view's thread, no view lock held ---- */

void fs_cluster_changed(void *arg, const struct cl_view_change *c)
{
    struct fs *fs = arg;
    fuse_ino_t type_dir = fs_ino(FS_CL_SEQ0, SLOT_TYPE0 + (unsigned)c->type);
    fuse_ino_t plugin_dir = fs_ino(FS_CL_SEQ0 + c->plugin_id, SLOT_DIR);
    fuse_ino_t summary = fs_ino(FS_CL_SEQ0 + c->plugin_id, fs_kinds[K_CL_SUMMARY].slot);
    fuse_ino_t node_dir = fs_ino(FS_CL_SEQ0 + c->node_id, SLOT_DIR);
    switch (c->kind) {
    case CL_VC_PLUGIN_ADD:
        fs_inval_inode(fs, type_dir);
        break;
    case CL_VC_PLUGIN_DEL:
        fs_inval_inode(fs, type_dir);
        fs_inval_entry(fs, type_dir, c->plugin);
        break;
    case CL_VC_NODE_ADD:
    case CL_VC_NODE_DEL:
        fs_inval_inode(fs, plugin_dir);
        fs_inval_inode(fs, summary);
        if (c->kind == CL_VC_NODE_DEL)
            fs_inval_entry(fs, plugin_dir, c->node);
        break;
    case CL_VC_NODE_SET:
        fs_inval_inode(fs, node_dir);
        fs_inval_inode(fs, plugin_dir);
        fs_inval_inode(fs, summary);
        for (int f = 0; f < CL_NFIELDS; f++) {
            fs_inval_inode(fs, fs_ino(FS_CL_SEQ0 + c->node_id, SLOT_ATTR0 + (unsigned)f));
            if (c->gone & 1u << f)
                fs_inval_entry(fs, node_dir, cl_field_names[f]);
        }
        break;
    }
}
