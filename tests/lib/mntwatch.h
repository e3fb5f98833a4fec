/* Watching a csifs mount from a harness without ever blocking on it.
 *
 * Every FUSE syscall of a harness that must survive a wedged daemon runs in
 * a child with a deadline (mw_child); the harness itself only reads
 * /proc/self/mountinfo and writes fusectl, neither of which can block on the
 * FUSE connection. Aborts touch only the connection of a mount the caller
 * names (its own), found by its mount point in mountinfo.
 */
#ifndef CSIFS_MNTWATCH_H
#define CSIFS_MNTWATCH_H

#include <stdint.h>
#include <sys/types.h>

/* The FUSE connection id (the minor of "0:NN" in mountinfo) of the topmost
 * fuse mount on mnt; -ENOENT when none. */
int mw_conn(const char *mnt);
/* echo 1 > /sys/fs/fuse/connections/<conn>/abort (mounting fusectl first
 * when needed); 0 or -errno. */
int mw_abort(int conn);
/* Abort and detach every FUSE mount stacked on mnt, topmost first, each
 * connection found by mnt in mountinfo at the time (never by a number
 * noted earlier: an ended connection's number goes to the next mount,
 * maybe another run's); then detach whatever is left there. */
void mw_unmount_all(const char *mnt);
/* Run fn(arg) in a child; its exit code (fn's return), 128+signal, or
 * -ETIMEDOUT after ms (unscaled): the child then gets SIGKILL and, if it is
 * stuck in the kernel, is reaped later by mw_reap_stuck. */
int mw_child(int (*fn)(void *arg), void *arg, int64_t ms);
/* Reap children left by mw_child timeouts, waiting up to ms each; returns
 * how many are still not reaped. */
int mw_reap_stuck(int64_t ms);
/* waitpid(pid) for up to ms: the wait status, or -ETIMEDOUT. */
int mw_wait(pid_t pid, int64_t ms);
/* fork + exec <build>/csifs -f -o state=<state> <mnt>, stdout and stderr
 * to logpath; the child's pid or -errno. */
pid_t mw_spawn_csifs(const char *mnt, const char *state, const char *logpath);
/* 0 when a statfs of mnt answers as FUSE (run in a mw_child). */
int mw_probe_fuse(void *mnt);

#endif
