/* Recovery of a state dir whose holder died with its FUSE connection
 * wedged (DESIGN 7): a thread of the killed csifs stuck in the kernel keeps
 * /dev/fuse open, the process a zombie, and csifs.lock locked.
 *
 * csifs_state_recover: when state's lock is held and its recorded holder is
 * dead or a zombie (State: Z) -- never merely because something timed out --
 * abort the connection it recorded through fusectl, then wait up to a
 * deadline for the lock to be released. 0 when there was nothing to do or
 * the lock is now free; -EBUSY with a message in err when it stays held.
 * A live holder is left alone (store_check then refuses "in use by pid N").
 * When the lock is free but names mnt's FUSE connection, which another
 * process holds (a forked child of the dead csifs) and which does not
 * answer, that connection is aborted too -- unless fuse_fd_handed (a
 * restart without unmount takes it over instead). */
#ifndef CSIFS_RECOVER_H
#define CSIFS_RECOVER_H

#include <stdbool.h>
#include <stddef.h>

int csifs_state_recover(const char *state, const char *mnt, bool fuse_fd_handed, char *err,
                        size_t errlen);
/* With a handed connection (a takeover, DESIGN 13): wait (5 s at most) for
 * the lock of state, its predecessor's until that one is reaped. 0, or
 * -EBUSY with err set. */
int csifs_state_wait(const char *state, char *err, size_t errlen);

#endif
