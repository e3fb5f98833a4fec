/* Shared helpers for csifs tests.
 *
 * Deadlines in tests are liveness bounds, never speed claims: every bound goes
 * through tu_ms(), which scales it by CSIFS_TEST_SLACK (default 1; 3 under ASan).
 */
#ifndef CSIFS_TESTUTIL_H
#define CSIFS_TESTUTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>

/* ms scaled by CSIFS_TEST_SLACK. */
int64_t tu_ms(int64_t ms);
/* Monotonic clock in ms. */
int64_t tu_now_ms(void);
/* Sleep ms (unscaled). */
void tu_sleep_ms(int64_t ms);
/* Poll cond(arg) every 5 ms until it holds or tu_ms(timeout_ms) passes. */
bool tu_wait_for(bool (*cond)(void *arg), void *arg, int64_t timeout_ms);
/* How many newlines s holds. */
int tu_count_lines(const char *s);
/* mkdtemp under $TMPDIR or /tmp with prefix "csifs-<tag>-"; returns malloc'd path. */
char *tu_tmpdir(const char *tag);
/* rm -rf path (best effort). */
void tu_rmrf(const char *path);
/* Note what this test made, for scripts/run-tests.sh to clean up should the
 * test binary die before it does: appends "<kind> <value>" to
 * $CSIFS_TEST_RUNDIR/made (nothing when unset). Kinds: "dir" (tu_tmpdir),
 * "mnt" (a mount point), "pid" (value "<pid> <starttime>", tu_note_pid). */
void tu_note(const char *kind, const char *value);
void tu_note_pid(pid_t pid);
/* Directory holding the built binaries (BUILD env or "build"). */
const char *tu_build_dir(void);
/* "dir/name" in one of 4 rotating static buffers (good until the fourth
 * call after it); NULL when it does not fit. */
const char *tu_path(const char *dir, const char *name);
/* Run a shell command in dir ($MNT is dir there); its exit status, 128 +
 * the signal when killed. */
int tu_vsh(const char *dir, const char *fmt, va_list ap);

/* A thread of pid in state D (uninterruptible, in the kernel) whose wchan
 * starts with fn (NULL: any). */
bool tu_thread_in_d(long pid, const char *fn);
/* The value of field name ("State", "SigBlk", ...) in a /proc status
 * file (/proc/PID/status, /proc/PID/task/TID/status), leading blanks and
 * the newline cut, in buf; false when the file or the field is missing. */
bool tu_proc_field(const char *path, const char *name, char *buf, size_t cap);
/* The first child of pid's main thread (/proc/PID/task/PID/children), 0
 * none. */
long tu_child_of(long pid);

#endif
