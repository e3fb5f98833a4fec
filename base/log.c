/* The log lines and the reason of the last refusal. See log.h. */
#include "base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int level = LOG_INFO;
static bool to_syslog, no_stderr;
static int journal = -1;             /* unknown yet */

static const char *const level_names[] = {
    [LOG_ERR] = "err", [LOG_WARNING] = "warning", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

int reg_log_level_parse(const char *s)
{
    for (int p = 0; p < (int)(sizeof(level_names) / sizeof(level_names[0])); p++)
        if (level_names[p] && !strcmp(s, level_names[p]))
            return p;
    return -EINVAL;
}

void reg_log_set_level(int prio)
{
    __atomic_store_n(&level, prio, __ATOMIC_RELAXED);
}

void reg_log_syslog(void)
{
    openlog("csifs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    to_syslog = true;
}

void reg_log_no_stderr(void)
{
    no_stderr = true;
}

/* sd-daemon(3): JOURNAL_STREAM=DEV:INO names the stream stderr must be. */
static bool stderr_is_journal(void)
{
    int j = __atomic_load_n(&journal, __ATOMIC_RELAXED);
    if (j >= 0)
        return j;
    const char *env = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    j = env && sscanf(env, "%llu:%llu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
        (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
    __atomic_store_n(&journal, j, __ATOMIC_RELAXED);
    return j;
}

void reg_log(int prio, const char *fmt, ...)
{
    if (prio > __atomic_load_n(&level, __ATOMIC_RELAXED))
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!no_stderr) {
        if (stderr_is_journal())
            fprintf(stderr, "<%d>%s\n", prio, msg);
        else
            fprintf(stderr, "csifs: %s\n", msg);
    }
    if (to_syslog)
        syslog(prio, "%s", msg);
}

static _Thread_local const char *why;

const char *reg_why(void)
{
    return why ? why : "";
}

void reg_why_clear(void)
{
    why = NULL;
}

void reg_why_set(const char *w)
{
    why = w;
}
