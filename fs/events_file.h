/* <mnt>/events: replay then follow the registry's events ring (DESIGN 4).
 * Its operations are the K_EVENTS row of fs_kinds[] (kinds.h).
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
/* New events may be in the ring: answer waiting readers and pollers. */
void fs_events_wake(struct fs *fs);
/* Open readers of events now (csifs_event_readers). */
unsigned fs_events_readers(struct fs *fs);
/* A reader opened before a takeover (fh.c adopted it): one bare line
 * `restarted`, then the live stream. */
void fs_events_restarted(struct fs *fs, struct fs_fh *h);

#endif
