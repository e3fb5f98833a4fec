/* The fixture of the takeover suites (DESIGN 13): a temp dir holding mnt/,
 * state/ and csifs.log, two test fd stores (holder.h), csifs started
 * through them, and a clean-up by pid and by FUSE connection (every
 * connection noted is aborted, every process kept is killed and reaped). */
#ifndef CSIFS_TAKEOVER_FIX_H
#define CSIFS_TAKEOVER_FIX_H

#include <stdbool.h>
#include <sys/types.h>

#include "tests/lib/holder.h"

extern struct holder tx_hd, tx_hd2;
extern char *tx_dir, tx_mnt[4096], tx_state[4096], tx_log[4096];
/* csifs's options but state= ("heartbeat=100ms"; reset at teardown) */
extern char tx_opts[256];

/* 0, or -errno (the holders could not start). */
int tx_setup(void);
void tx_teardown(void);
/* csifs -f -o state=s,<tx_opts> m through h (its stderr to tx_log): its
 * pid, kept. */
pid_t tx_start(struct holder *h, const char *m, const char *s);
/* Kill and reap pid at teardown (at most 8). */
void tx_keep_pid(pid_t pid);
/* Send sig and reap (hd_reap, 10 s): pid is no longer kept. */
void tx_kill_reap(pid_t pid, int sig);
/* pid was reaped by the test: no longer kept. */
void tx_forget_pid(pid_t pid);
bool tx_is_mount_root(const char *m);
/* A shell command in tx_mnt: its exit status. */
int tx_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Does tx_log hold a line matching the grep pattern? */
bool tx_log_has(const char *pattern);

#endif
