/* Internal to fs/: the FUSE request handlers that fs.c's one
 * fuse_lowlevel_ops table names. Each resolves the inode it is given, then
 * dispatches to the node kind's operation (node.h). */
#ifndef CSIFS_OPS_H
#define CSIFS_OPS_H

#include "fs/node.h"

/* ops_read.c */
void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f);
void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_readlink(fuse_req_t req, fuse_ino_t ino);
void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                struct fuse_file_info *fi);
void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
/* Release every file still open: in fs_destroy, once the connection ended
 * (the kernel sends no RELEASE then). */
void fs_fh_release_all(struct fs *fs);
void fs_op_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                struct fuse_pollhandle *ph);

/* ops_dir.c */
void fs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   struct fuse_file_info *fi);
void fs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi);

/* ops_write.c */
void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name);
void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                  const char *newname, unsigned int flags);
void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                 struct fuse_file_info *fi);
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                   struct fuse_file_info *fi);
void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                  struct fuse_file_info *fi);

#endif
