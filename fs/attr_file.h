/* Attribute files of an instance dir: sysfs-style snapshots and poll().
 * A read at offset 0 takes a fresh snapshot of the value; later offsets
 * continue it. poll() reports POLLPRI|POLLERR once health, ready or reason
 * changed since the open file last read. */
#ifndef CSIFS_ATTR_FILE_H
#define CSIFS_ATTR_FILE_H

#include "fs/node.h"

int fs_attr_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi);
void fs_attr_read(struct fs *fs, fuse_req_t req, const struct fs_node *n, size_t size,
                  off_t off, struct fuse_file_info *fi);
void fs_attr_poll(struct fs *fs, fuse_req_t req, const struct fs_node *n,
                  struct fuse_file_info *fi, struct fuse_pollhandle *ph);
void fs_attr_release(struct fs *fs, struct fuse_file_info *fi);

#endif
