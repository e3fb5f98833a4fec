/* The log lines of a serving csifs (DESIGN section 9):
 *   - fs_oplog_wrap: wraps the mutating handlers of an ops table so that a
 *     call refused by a validation logs one line with its reason
 *     ("mkdir csi-node/Bad!: name must be ..."), at info;
 *   - fs_oplog_subscribe: a registry subscriber logging one line for each
 *     registration, deregistration, socket change, health change and change
 *     of current, at info.
 * fs_oplog_wrap keeps the handlers it wraps in static storage, one set per
 * process: every session wraps its own copy of the same table (fs.c's
 * fs_ops, copied per session), so the originals are the same for all. The
 * subscriber is per registry (its arg). */
#ifndef CSIFS_OPLOG_H
#define CSIFS_OPLOG_H

#include <fuse_lowlevel.h>

#include "registry/registry.h"

void fs_oplog_wrap(struct fuse_lowlevel_ops *ops);
int fs_oplog_subscribe(struct reg *reg);

#endif
