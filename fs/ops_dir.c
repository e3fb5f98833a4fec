/* Directory handlers: opendir (ENOSYS, so that the kernel caches every
 * listing), readdir and readdirplus from the kinds' children. */
#include "fs/ops.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ENOSYS from a real handler: with FUSE_CAP_NO_OPENDIR_SUPPORT the kernel
 * then never sends OPENDIR or RELEASEDIR again and keeps listings in its
 * cache (FOPEN_KEEP_CACHE | FOPEN_CACHE_DIR) until the dir's inode is
 * invalidated (inval.c does so on every change). A NULL opendir would make
 * libfuse answer success, which keeps both round trips (DESIGN 10). */
void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino, (void)fi;
    fs_req(req, FS_OP_OPENDIR);
    fuse_reply_err(req, ENOSYS);
}

/* Sent only by a kernel without FUSE_NO_OPENDIR_SUPPORT (counted to show
 * that this one sends none). */
void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino, (void)fi;
    fs_req(req, FS_OP_RELEASEDIR);
    fuse_reply_err(req, 0);
}

/* Add one entry; false once the buffer is full. */
static bool add(struct fs_dirbuf *d, const char *name, const struct fs_node *n, off_t cookie)
{
    size_t room = d->size - d->len, used;
    bool dots = name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]));
    if (d->plus) {
        struct fuse_entry_param e;
        if (dots)                    /* the kernel takes only their ino and type */
            e = (struct fuse_entry_param){ .ino = n->ino, .attr = { .st_ino = n->ino,
                                           .st_mode = fs_kinds[n->kind].fmt } };
        else
            fs_entry_param(d->fs, n, &e);
        used = fuse_add_direntry_plus(d->req, d->buf + d->len, room, name, &e, cookie);
    } else {
        struct stat st = { .st_ino = n->ino, .st_mode = fs_kinds[n->kind].fmt };
        used = fuse_add_direntry(d->req, d->buf + d->len, room, name, &st, cookie);
    }
    if (used > room) {
        d->full = true;
        return false;
    }
    /* The kernel takes a lookup of every readdirplus entry but . and .. */
    if (d->plus && !dots)
        fs_lookups_add(d->fs, n->ino);
    d->len += used;
    return true;
}

bool fs_dirbuf_add(struct fs_dirbuf *d, const char *name, const struct fs_node *n, off_t cookie)
{
    return add(d, name, n, cookie);
}

static int add_reg_child(const struct reg_node *r, void *arg)
{
    struct fs_dirbuf *d = arg;
    struct fs_node n;
    fs_node_of(r, &n);               /* under reg_list's read lock: no reg_get */
    /* newest first: cookies go down here, reg_list resumes after one */
    return !add(d, r->kind == REG_K_PLUGIN ? r->plugin : r->alloc, &n,
                (off_t)r->seq + FS_COOKIE_SEQ);
}

void fs_list_reg(struct fs_dirbuf *d, const struct fs_node *dir)
{
    off_t after = d->skip - FS_COOKIE_SEQ;
    reg_list(d->fs->reg, dir->type, dir->kind == K_PLUGIN ? dir->r.seq : 0,
             after > 0 ? (uint64_t)after : 0, add_reg_child, d);
}

/* ".." of dir: only its inode and type go out (add), so nothing is read. */
static struct fs_node parent_of(const struct fs_node *dir)
{
    struct fs_node p = { .kind = K_ROOT, .ino = FUSE_ROOT_ID };
    if (dir->kind == K_PLUGIN)
        p = (struct fs_node){ .kind = K_TYPE, .ino = fs_ino(0, SLOT_TYPE0 + dir->type),
                              .type = dir->type };
    else if (dir->kind == K_INST)
        p = (struct fs_node){ .kind = K_PLUGIN, .ino = fs_ino(dir->r.parent, SLOT_DIR),
                              .type = dir->type };
    return p;
}

/* An entry of fixed position, unless a resumed listing is past it. */
static bool add_fixed(struct fs_dirbuf *d, const char *name, const struct fs_node *n,
                      off_t cookie)
{
    return cookie <= d->skip || add(d, name, n, cookie);
}

/* ".", "..", the fixed children by slot, then the kind's own (list): the
 * fixed ones' cookies (at most FS_COOKIE_SEQ - 1) are below every
 * registry child's. */
static void list_dir(struct fs_dirbuf *d, const struct fs_node *dir)
{
    const struct fs_kind_def *k = &fs_kinds[dir->kind];
    struct fs_node parent = parent_of(dir), n;
    if (!add_fixed(d, ".", dir, 1) || !add_fixed(d, "..", &parent, 2))
        return;
    for (unsigned slot = dir->kind == K_ROOT ? SLOT_ROOT + 1 : 1; slot < k->nslots; slot++)
        if (fs_resolve_slot(d->fs, dir, slot, &n) == 0 &&
            !add_fixed(d, fs_node_name(&n), &n, (off_t)slot + 3))
            return;
    if (k->list)
        k->list(d, dir);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
    struct fs *fs = fs_req(req, plus ? FS_OP_READDIRPLUS : FS_OP_READDIR);
    struct fs_node dir;
    int rc = fs_resolve(fs, ino, &dir);
    if (rc == 0 && fs_kinds[dir.kind].fmt != S_IFDIR)
        rc = -ENOTDIR;
    char *buf = rc == 0 ? malloc(size) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct fs_dirbuf d = { .req = req, .fs = fs, .plus = plus, .buf = buf, .size = size,
                           .skip = off };
    list_dir(&d, &dir);
    fuse_reply_buf(req, buf, d.len);
    free(buf);
}

void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
    (void)fi;
    readdir_common(req, ino, size, off, false);
}

void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    readdir_common(req, ino, size, off, true);
}
