/* Write-side handlers: mkdir, rmdir, symlink, unlink, rename, write, setattr.
 * Each resolves where it is asked to act, refuses what DESIGN section 5
 * refuses (the "where" rows before the "name" rows), then makes one registry
 * call. Whatever is refused leaves everything as it was. */
#include "fs/node.h"
#include "registry/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    (void)mode;
    struct fs *fs = fs_req(req);
    struct fs_node dir;
    int rc = fs_resolve(fs, parent, &dir);
    if (rc == 0) {
        switch (fs_kinds[dir.kind].mkdir_child) {
        case K_PLUGIN: rc = reg_plugin_create(fs->reg, dir.type, name); break;
        case K_INST: rc = reg_instance_register(fs->reg, dir.type, dir.r.plugin, name); break;
        default: rc = -EPERM;
        }
    }
    fs_reply_child(req, fs, rc, &dir, name);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_req(req);
    struct fs_node dir;
    int rc = fs_resolve(fs, parent, &dir);
    if (rc == 0) {
        switch (fs_kinds[dir.kind].mkdir_child) {
        case K_PLUGIN: rc = reg_plugin_remove(fs->reg, dir.type, name); break;
        case K_INST: rc = reg_instance_deregister(fs->reg, dir.type, dir.r.plugin, name); break;
        default: rc = -EPERM;
        }
    }
    fuse_reply_err(req, -rc);
}

static int check_target(const char *target)
{
    if (target[0] != '/')
        return reg_why_set("socket target must be an absolute path"), -EINVAL;
    if (reg_value_check(target, strlen(target)) < 0)
        return -EINVAL;
    if (strlen(target) > REG_SOCKET_MAX)
        return reg_why_set("socket target over 107 bytes (a unix socket address)"), -ENAMETOOLONG;
    return 0;
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_req(req);
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

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_req(req);
    struct fs_node dir, n;
    int rc = fs_resolve(fs, parent, &dir);
    if (rc == 0)
        rc = fs_child(fs, &dir, name, &n);
    if (rc == 0) {
        switch (n.kind) {
        case K_SOCKET: rc = reg_socket_set(fs->reg, n.r.seq, NULL); break;
        case K_PENDING: rc = pending_del(&fs->pend, n.r.seq, name); break;
        case K_PLUGIN: case K_INST: case K_TYPE: rc = -EISDIR; break;
        default: rc = -EPERM;
        }
    }
    fuse_reply_err(req, -rc);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
    struct fs *fs = fs_req(req);
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

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)fi;
    struct fs *fs = fs_req(req);
    struct fs_node n;
    int rc = fs_resolve(fs, ino, &n);
    if (rc == 0 && (n.kind != K_ATTR || !(reg_attrs[n.attr].flags & REG_AF_WRITABLE)))
        rc = -EACCES;
    if (rc == 0 && off != 0)
        rc = -EINVAL;
    if (rc == 0)
        rc = reg_attr_store(fs->reg, n.r.seq, n.attr, buf, size);
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_write(req, size);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    (void)fi;
    struct fs *fs = fs_req(req);
    struct fs_node n;
    int times = FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |
                FUSE_SET_ATTR_MTIME_NOW;
    int rc = fs_resolve(fs, ino, &n);
    if (rc == 0 && (to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
        rc = -EPERM;
    else if (rc == 0 && !(to_set & FUSE_SET_ATTR_SIZE) && (to_set & times))
        rc = -EPERM;                 /* a time change that is not part of a size change */
    else if (rc == 0 && (to_set & FUSE_SET_ATTR_SIZE)) {
        if (n.kind != K_ATTR || !(reg_attrs[n.attr].flags & REG_AF_WRITABLE))
            rc = n.kind == K_ATTR || n.kind == K_EVENTS ? -EACCES : -EPERM;
        else if (attr->st_size != 0)
            rc = -EINVAL;
        else
            rc = reg_attr_store(fs->reg, n.r.seq, n.attr, "", 0);
    }
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

static void op_eperm_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                           dev_t rdev)
{
    (void)parent, (void)name, (void)mode, (void)rdev;
    fuse_reply_err(req, EPERM);
}

static void op_eperm_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                          const char *newname)
{
    (void)ino, (void)newparent, (void)newname;
    fuse_reply_err(req, EPERM);
}

static void op_eperm_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                            struct fuse_file_info *fi)
{
    (void)parent, (void)name, (void)mode, (void)fi;
    fuse_reply_err(req, EPERM);
}

void fs_ops_write(struct fuse_lowlevel_ops *ops)
{
    ops->mkdir = op_mkdir;
    ops->rmdir = op_rmdir;
    ops->symlink = op_symlink;
    ops->unlink = op_unlink;
    ops->rename = op_rename;
    ops->write = op_write;
    ops->setattr = op_setattr;
    ops->mknod = op_eperm_mknod;
    ops->link = op_eperm_link;
    ops->create = op_eperm_create;
}
