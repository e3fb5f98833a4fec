/* The csifs daemon: start-up in the order of DESIGN sections 7 and 9, serve,
 * stop.
 *   FUSE session (unknown options: exit 2, nothing touched) -> recover a
 *   wedged holder of the state dir -> check the store -> prepare the mount
 *   point -> mount -> fork (unless -f; no thread exists before it) -> open
 *   the store -> registry -> notifier, prober -> serve.
 * Without -f the command returns when the daemon serves (0) or failed (1,
 * the daemon's message on stderr), told through a pipe. "Serving" is: the
 * registry attached and the prober started before the request loop, and FUSE
 * INIT answered (the word is sent from the INIT handler, just before libfuse
 * writes the reply; any request waits in the kernel until it is written).
 * Then READY=1 (sd_notify). SIGTERM/SIGINT: STOPPING=1,
 * unmount, exit 0. SIGHUP is ignored.
 * Logs: base/log.h; syslog once daemonized. */
#ifndef CSIFS_DAEMON_H
#define CSIFS_DAEMON_H

#include "cmd/options.h"

/* Returns the process exit status. */
int csifs_daemon_run(struct csifs_opts *o);

#endif
