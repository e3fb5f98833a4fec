/* <mnt>/events: replay then follow the registry's events ring (DESIGN 4).
 *
 * A blocking read with nothing to say is not a blocked thread: the request
 * is kept and answered when an event arrives (or EINTR when the reader is
 * interrupted). O_NONBLOCK readers get EAGAIN; poll() works.
 *
 * Lock order: events mutex -> the ring's mutex -> libfuse's own locks
 * (fs_events_wake runs on the registry's events thread, reg_on_events,
 * with no registry lock held).
 */
#ifndef CSIFS_EVENTS_FILE_H
#define CSIFS_EVENTS_FILE_H

#include "fs/node.h"

int fs_events_init(struct fs *fs);
void fs_events_fini(struct fs *fs);
int fs_events_open(struct fs *fs, struct fuse_file_info *fi);
void fs_events_read(struct fs *fs, fuse_req_t req, size_t size, struct fuse_file_info *fi);
void fs_events_poll(struct fs *fs, fuse_req_t req, struct fuse_file_info *fi,
                    struct fuse_pollhandle *ph);
void fs_events_release(struct fs *fs, struct fuse_file_info *fi);
/* New events may be in the ring: answer waiting readers and pollers. */
void fs_events_wake(struct fs *fs);

#endif
