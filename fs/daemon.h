/* The csifs daemon: start-up in the order of DESIGN section 7, serve, stop.
 *   check the store -> clean a stale mount, refuse a live one -> mount ->
 *   daemonize (unless -f) -> open the store -> registry -> serve.
 * Logs go to stderr, and to syslog once daemonized. */
#ifndef CSIFS_DAEMON_H
#define CSIFS_DAEMON_H

#include "fs/options.h"

/* Returns the process exit status. */
int fs_daemon_run(struct csifs_opts *o);

/* Prepare MOUNTPOINT: lazily unmount a dead csifs (ENOTCONN), refuse a live
 * csifs (-EBUSY), create the directory if missing. */
int fs_prepare_mountpoint(const char *mnt, char *err, size_t errlen);

void fs_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fs_log_to_syslog(void);

#endif
