/* workq: the requests that commit run on a few writer threads, so that the
 * one FUSE thread never waits for an fsync.
 *
 * csifs serves every request on a single libfuse worker: a reader's
 * requests (open, read, release, lookup, getattr, readdir) then find the
 * same awake thread each time, where a pool of idle workers hands each to
 * another sleeping one (the kernel wakes /dev/fuse readers in turn), which
 * cost read_open half its speed. Those handlers never block: the registry's
 * readers never wait for a commit, `events` reads are deferred. The handlers
 * that commit (mkdir, rmdir, symlink, unlink, rename, write, setattr) are
 * queued here with copies of their arguments and answer from a writer
 * thread; when a job cannot be queued, the handler runs inline. Either way
 * through the session's fs->commit (fs.c): the handlers with their wrappers
 * (oplog.h, testopt.h), which thus run on the thread that ran the handler.
 */
#ifndef CSIFS_WORKQ_H
#define CSIFS_WORKQ_H

#include "fs/node.h"

/* Writers started with the session; more are started while jobs wait with
 * every writer busy, up to FS_WRITERS_MAX: each waits for its own commit,
 * so a batch can only hold as many mutations as there are writers (a burst
 * of 64 mkdirs needs 64 to share one fsync). They stay until stop. */
#define FS_WRITERS 8
#define FS_WRITERS_MAX 64

/* Start the writers (after any fork); stop them, running what is queued. */
int fs_workq_start(struct fs *fs);
void fs_workq_stop(struct fs *fs);

/* The fuse_lowlevel_ops entries of the committing handlers. */
void fs_q_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void fs_q_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_q_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name);
void fs_q_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void fs_q_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                 const char *newname, unsigned int flags);
void fs_q_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                struct fuse_file_info *fi);
void fs_q_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                  struct fuse_file_info *fi);

#endif
