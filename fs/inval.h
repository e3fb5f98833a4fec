/* Keeping the kernel's caches exact (DESIGN sections 8 and 10).
 *
 * Everything is cached with long timeouts; every registry change drops
 * exactly what it may have made stale before the mutating call returns:
 *   - inode invalidation (attributes, file pages, symlink targets, cached
 *     directory listings) synchronously, in the thread of the change: it
 *     takes no inode lock, so it is safe inside a request handler;
 *   - entry invalidation (a name that went away) from the notifier thread,
 *     because from inside a handler it can deadlock the mount; the
 *     notifier hands it to the notification helper process (fs/helper.c),
 *     which writes it to the connection, since it may wait on a directory
 *     lock in the kernel. Until it runs, the stale name's inode answers
 *     ENOENT (its attributes were dropped synchronously), so no process
 *     sees a stale value. None for the name the caller's own RMDIR or
 *     UNLINK removed: the kernel drops that dentry itself once answered
 *     (the helper's write would wait on the directory's lock for that).
 * Also wakes poll() on attribute files (sysfs style).
 */
#ifndef CSIFS_INVAL_H
#define CSIFS_INVAL_H

#include "fs/node.h"

int fs_inval_start(struct fs *fs);
void fs_inval_stop(struct fs *fs);
/* From the registry subscriber: invalidate what c may have made stale. */
void fs_inval_change(struct fs *fs, const struct reg_change *c);
/* Test-only (debug_notifier_shared_fd): the notifier writes through the
 * process's own /dev/fuse fd instead of the helper or a private clone (see
 * inval.c). */
void fs_inval_share_fd(bool share);
/* Invalidate an inode the kernel holds, in this thread (never under a lock
 * a FUSE handler takes). */
void fs_inval_inode(struct fs *fs, fuse_ino_t ino);
/* Queue the invalidation of parent/name for the notifier thread. */
void fs_inval_entry(struct fs *fs, fuse_ino_t parent, const char *name);
/* Queue ino's inval_inode (offset 0: its pages too) for the notifier thread,
 * which hands it to the helper: the caller never waits on a page lock. */
void fs_inval_inode_later(struct fs *fs, fuse_ino_t ino);

/* poll() on attribute files: remember ph for the open file fh of instance
 * inst; answered by fs_inval_change when the instance's health changes. */
struct fs_poll;
int fs_poll_arm(struct fs *fs, uint64_t inst, void *fh, struct fuse_pollhandle *ph);
void fs_poll_forget(struct fs *fs, void *fh);

#endif
