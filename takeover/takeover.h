/* takeover: restart without unmount (DESIGN 13), the parts outside fs/.
 *
 * The service manager's fd store (sd_notify(3) FDSTORE=1, sd_listen_fds(3)):
 * csifs hands it the /dev/fuse fd ("fuse") and the state memfd ("state")
 * once serving, takes them back at start, and removes them at a real stop.
 * The checks of a handed fd, and the notifications a successor writes to
 * the connection before it serves (header-only messages libfuse 3.14 does
 * not have). The state memfd's layout: takeover/state.h. No test here runs
 * systemd: tests/lib/holder.h speaks the same protocol. */
#ifndef CSIFS_TAKEOVER_H
#define CSIFS_TAKEOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TK_FD_FUSE "fuse"
#define TK_FD_STATE "state"
#define TK_FD_KUBELET "kubelet/"     /* + provider: a kubelet registration socket */

/* A stored fd and its FDNAME. */
struct tk_named {
    int fd;
    char name[256];
};

/* The fds passed to this process (LISTEN_PID is ours) by name, -1 when
 * absent, and those named TK_FD_KUBELET... (kubelet/ adopts them); every
 * other passed fd is closed. The LISTEN_* variables are unset. */
struct tk_fds {
    int fuse, state;
    struct tk_named *kub;            /* malloc'd, nkub of them, close-on-exec */
    size_t nkub;
};
void tk_fds_take(struct tk_fds *f);
/* Close n named fds, remove them from the store, free(v). */
void tk_named_drop(struct tk_named *v, size_t n);

/* Is fd a live FUSE connection, the one mounted at the mount point (conn:
 * the 0:NN of its mountinfo line, 0 when nothing is mounted there)? 0, or
 * a negative errno with the reason in why. */
int tk_fd_check(int fd, unsigned conn, char *why, size_t cap);

/* Hand fd to the service manager under name (FDSTORE=1); remove name from
 * the store (FDSTOREREMOVE=1). 0 when sent (or no NOTIFY_SOCKET: nothing
 * to do), else a negative errno. */
int tk_store(int fd, const char *name);
int tk_store_remove(const char *name);
/* Whether a service manager listens (NOTIFY_SOCKET is set). */
int tk_store_present(void);

/* Notifications written to the connection's fd (linux/fuse.h 7.45 codes):
 * every cached dentry is looked up again (INC_EPOCH, 8); every request read
 * and not answered is sent again (RESEND, 7); a poller is woken (POLL, 1). */
int tk_notify_epoch(int fd);
int tk_notify_resend(int fd);
int tk_notify_poll(int fd, uint64_t kh);

/* Upgrade in place (upgrade.c). prepare: at start, remember the binary's
 * path (/proc/self/exe then) and argv (kept by the caller). exec: the fds
 * at 3 and 4, then the nmore of more from 5 on, as LISTEN_FDS (names
 * fuse, state, then theirs) with LISTEN_PID this pid, then execv: returns
 * only on failure, a negative errno. upgraded: whether this image was
 * started so (then it must not daemonize again); once. */
void tk_upgrade_prepare(char **argv);
int tk_upgrade_exec(int fuse_fd, int state_fd, const struct tk_named *more, size_t nmore);
bool tk_upgraded(void);

#endif
