/* The mount point before mounting, and the mount table (DESIGN 7, 9).
 *
 * Nothing here looks up a path that may be a wedged FUSE mount from this
 * process: the mount table is read with util-linux libmount (no cache, so no
 * path is canonicalised), and a FUSE mount is probed only by a forked child
 * with a deadline. */
#ifndef CSIFS_MOUNTPOINT_H
#define CSIFS_MOUNTPOINT_H

#include <stddef.h>

/* The topmost mount on path (absolute): 1 with its fs type and connection id
 * (minor of its st_dev, the 0:NN of mountinfo), 0 when path is no mount
 * point, or a negative errno. */
int csifs_mount_find(const char *path, char *fstype, size_t cap, unsigned *conn);

/* statfs(path) in a forked child: 0 answered, -ENOTCONN dead, -ETIMEDOUT
 * no answer within 2 s, or another negative errno. */
int csifs_mount_probe(const char *path);

/* A process other than this one holding FUSE connection conn open (its
 * /dev/fuse fdinfo names the connection, Linux 6.x): its pid, 0 when none
 * is found (or the kernel does not say), or a negative errno. */
long csifs_conn_holder(unsigned conn);

/* Ready MOUNTPOINT for a mount: a dead csifs's stale mount (ENOTCONN) is
 * lazily unmounted; refused with a message in err: a live csifs (-EBUSY,
 * naming its pid when known), a
 * FUSE mount that does not answer (-EBUSY), not a directory (-ENOTDIR); a
 * missing directory is created (its parents too). */
int csifs_mountpoint_prepare(const char *mnt, char *err, size_t errlen);

/* A mount point given as a symlink (not a mount root itself) becomes the
 * path it names, as the mount table will show it. 0 or -ENOMEM. */
int csifs_mountpoint_resolve(char **mnt);

#define CSIFS_FUSECTL "/sys/fs/fuse/connections"

/* Open file ("waiting", "abort") of FUSE connection conn in fusectl
 * (mounted when it is not): an fd (O_CLOEXEC) or a negative errno. */
int csifs_conn_open(unsigned conn, const char *file, int flags);

/* Abort FUSE connection conn through fusectl (mounted when it is not). */
int csifs_conn_abort(unsigned conn);

#endif
