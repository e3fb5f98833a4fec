/* Logging for every layer (registry, csi, fs), and the reason of a refusal.
 *
 * reg_log(prio, ...) writes one line when prio is at or above the level
 * (LOG_ERR .. LOG_DEBUG of syslog.h; default LOG_INFO): to stderr ("csifs: "
 * prefix, or sd-daemon's "<N>" prefix when stderr is the journal, i.e.
 * JOURNAL_STREAM names it), and to syslog once reg_log_syslog() was called.
 * Thread-safe; never blocks on anything but the write.
 *
 * reg_why(): the text an errno cannot carry ("name must be 1-63 of
 * [A-Za-z0-9._-]"), set by the validation that refused the last call of
 * this thread, "" when none. reg_why_clear() before a call to know. */
#ifndef CSIFS_LOG_H
#define CSIFS_LOG_H

#include <syslog.h>

void reg_log(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "debug", "info", "warning", "err" -> LOG_*; -EINVAL otherwise. */
int reg_log_level_parse(const char *s);
void reg_log_set_level(int prio);
/* Also to syslog (daemon facility); stderr then goes only where it goes. */
void reg_log_syslog(void);
/* Stop writing to stderr (it is /dev/null in a daemon). */
void reg_log_no_stderr(void);

const char *reg_why(void);
void reg_why_clear(void);
void reg_why_set(const char *why);

#endif
