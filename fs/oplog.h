/* The log lines of a serving csifs (DESIGN section 9):
 *   - fs_oplog_wrap: wraps the mutating handlers of an ops table so that a
 *     call refused by a validation logs one line with its reason
 *     ("mkdir csi-node/Bad!: name must be ..."), at info;
 *   - fs_oplog_subscribe: a registry subscriber logging one line for each
 *     registration, deregistration, socket change, health change and change
 *     of current, at info.
 * One table and one registry per process (the wrappers keep the originals
 * in static storage). */
#ifndef CSIFS_OPLOG_H
#define CSIFS_OPLOG_H

#include <fuse_lowlevel.h>

#include "registry/registry.h"

void fs_oplog_wrap(struct fuse_lowlevel_ops *ops);
int fs_oplog_subscribe(struct reg *reg);

#endif
