/* Logging for every layer (registry, csi, fs), and the reason of a refusal.
 *
 * csifs_log(prio, ...) writes one line when prio is at or above the level
 * (LOG_ERR .. LOG_DEBUG of syslog.h; default LOG_INFO): to stderr ("csifs: "
 * prefix, or sd-daemon's "<N>" prefix when stderr is the journal, i.e.
 * JOURNAL_STREAM names it, or "<ISO-8601 UTC time> <level> " once
 * csifs_log_stamp() was called and stderr is not the journal), to the log
 * file (csifs_log_file: always stamped), and to syslog once csifs_log_syslog()
 * was called. Thread-safe; never blocks on anything but the write.
 *
 * csifs_why(): the text an errno cannot carry ("name must be 1-63 of
 * [A-Za-z0-9._-]"), set by the validation that refused the last call of
 * this thread, "" when none. csifs_why_clear() before a call to know.
 * csifs_why_hook(fn): fn is called (on this thread) by the next
 * csifs_why_set, at the moment of the refusal, before any reply (the
 * caller of a FUSE request is still waiting); NULL: none. */
#ifndef CSIFS_LOG_H
#define CSIFS_LOG_H

#include <syslog.h>

void csifs_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "debug", "info", "notice", "warning", "err" -> LOG_*; -EINVAL otherwise. */
int csifs_log_level_parse(const char *s);
/* Whether a line at prio would be written (to skip costly arguments). */
int csifs_log_on(int prio);
/* Also append every line to path (created 0640): 0 or -errno. */
int csifs_log_file(const char *path);
/* Stamp stderr's lines with the time and level (the foreground without
 * journald). */
void csifs_log_stamp(void);
void csifs_log_set_level(int prio);
/* Also to syslog (daemon facility); stderr then goes only where it goes. */
void csifs_log_syslog(void);
/* Stop writing to stderr (it is /dev/null in a daemon). */
void csifs_log_no_stderr(void);

const char *csifs_why(void);
void csifs_why_clear(void);
void csifs_why_set(const char *why);
void csifs_why_hook(void (*fn)(void));

#endif
