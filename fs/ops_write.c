/* Write-side handlers: mkdir, rmdir, symlink, unlink, rename, write, setattr.
 * Each resolves where it is asked to act, refuses what DESIGN section 5
 * refuses (the "where" rows before the "name" rows), then calls the kind's
 * operation (one registry call). Whatever is refused leaves everything as
 * it was. */
#include "fs/ops.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    (void)mode;
    struct fs *fs = fs_req(req, FS_OP_MKDIR);
    struct fs_node dir;
    int rc = fs_resolve(fs, parent, &dir);
    if (rc == 0)
        rc = fs_kinds[dir.kind].mkdir ? fs_kinds[dir.kind].mkdir(fs, &dir, name) : -EPERM;
    fs_reply_child(req, fs, rc, &dir, name);
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_req(req, FS_OP_RMDIR);
    struct fs_node dir;
    int rc = fs_resolve(fs, parent, &dir);
    if (rc == 0)
        rc = fs_kinds[dir.kind].rmdir ? fs_kinds[dir.kind].rmdir(fs, &dir, name) : -EPERM;
    fuse_reply_err(req, -rc);
}

static int check_target(const char *target)
{
    if (target[0] != '/')
        return csifs_why_set("socket target must be an absolute path"), -EINVAL;
    if (reg_value_check(target, strlen(target)) < 0)
        return -EINVAL;
    if (strlen(target) > REG_SOCKET_MAX)
        return csifs_why_set("socket target over 107 bytes (a unix socket address)"), -ENAMETOOLONG;
    return 0;
}

void fs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_req(req, FS_OP_SYMLINK);
    struct fs_node dir, n;
    struct pending_link l;
    int rc = fs_resolve(fs, parent, &dir);
    if (rc == 0 && !fs_kinds[dir.kind].may_hold_links)
        rc = -EPERM;
    if (rc == 0 && fs_child(fs, &dir, name, &n) == 0)
        rc = -EEXIST;
    if (rc == 0)
        rc = check_target(target);
    if (rc == 0 && !strcmp(name, fs_kinds[K_SOCKET].name))
        rc = reg_socket_set(fs->reg, dir.r.seq, target);
    else if (rc == 0 && (rc = reg_name_check(name)) == 0)
        rc = pending_add(&fs->pend, dir.r.seq, name, target, &l);
    fs_reply_child(req, fs, rc, &dir, name);
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_req(req, FS_OP_UNLINK);
    struct fs_node dir, n;
    int rc = fs_resolve(fs, parent, &dir);
    if (rc == 0)
        rc = fs_child(fs, &dir, name, &n);
    if (rc == 0) {
        const struct fs_kind_def *k = &fs_kinds[n.kind];
        rc = k->unlink ? k->unlink(fs, &n, name) : k->fmt == S_IFDIR ? -EISDIR : -EPERM;
    }
    fuse_reply_err(req, -rc);
}

void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                  fuse_ino_t newparent, const char *newname, unsigned int flags)
{
    struct fs *fs = fs_req(req, FS_OP_RENAME);
    struct fs_node dir, n, old;
    struct pending_link l;
    int rc = fs_resolve(fs, parent, &dir);
    /* Only a pending link renamed onto `socket` in its own dir. */
    if (rc == 0 && (parent != newparent || !fs_kinds[dir.kind].may_hold_links ||
                    strcmp(newname, fs_kinds[K_SOCKET].name) || (flags & ~RENAME_NOREPLACE)))
        rc = -EPERM;
    if (rc == 0 && fs_child(fs, &dir, name, &n) < 0)
        rc = -ENOENT;
    if (rc == 0 && n.kind != K_PENDING)
        rc = -EPERM;
    if (rc == 0 && (flags & RENAME_NOREPLACE) && fs_child(fs, &dir, newname, &old) == 0)
        rc = -EEXIST;
    if (rc == 0)
        rc = pending_get(&fs->pend, n.pending, &l);
    if (rc == 0)
        rc = reg_socket_set(fs->reg, dir.r.seq, l.target);
    if (rc == 0)
        pending_del(&fs->pend, dir.r.seq, name);
    fuse_reply_err(req, -rc);
}

/* The kind's write, or why there is none. */
static int write_node(struct fs *fs, const struct fs_node *n, const char *buf, size_t len,
                      off_t off)
{
    const struct fs_kind_def *k = &fs_kinds[n->kind];
    if (!k->write)
        return k->fmt == S_IFREG ? -EACCES : -EPERM;
    return k->write(fs, n, buf, len, off);
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                 struct fuse_file_info *fi)
{
    struct fs *fs = fs_req(req, FS_OP_WRITE);
    const struct fs_fh *h = fs_fh_get(fs, fi->fh, ino);
    int rc = h ? write_node(fs, &h->n, buf, size, off) : -EBADF;
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_write(req, size);
}

void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi)
{
    (void)fi;
    struct fs *fs = fs_req(req, FS_OP_SETATTR);
    struct fs_node n;
    int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                FUSE_SET_ATTR_MTIME_NOW;
    int rc = fs_resolve(fs, ino, &n);
    if (rc == 0 && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
        rc = -EPERM;
    else if (rc == 0 && !(to_set & FUSE_SET_ATTR_SIZE) && (to_set & times))
        rc = -EPERM;                 /* a time change that is not part of a size change */
    else if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE))
        /* a truncate is a write of nothing at the new size: the kind
         * refuses what is not writable, then any size but 0 (EINVAL) */
        rc = write_node(fs, &n, "", 0, attr->st_size);
    struct stat st;
    if (rc == 0)
        rc = fs_resolve(fs, ino, &n);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    fs_stat(fs, &n, &st);
    fuse_reply_attr(req, &st, fs->attr_timeout);
}

/* Nothing is made but by mkdir and symlink (DESIGN 5). */
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    (void)parent, (void)name, (void)mode, (void)rdev;
    fs_req(req, FS_OP_OTHER);
    fuse_reply_err(req, EPERM);
}

void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    (void)ino, (void)newparent, (void)newname;
    fs_req(req, FS_OP_OTHER);
    fuse_reply_err(req, EPERM);
}

void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                  struct fuse_file_info *fi)
{
    (void)parent, (void)name, (void)mode, (void)fi;
    fs_req(req, FS_OP_OTHER);
    fuse_reply_err(req, EPERM);
}
