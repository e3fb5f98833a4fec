/* The log lines and the reason of the last refusal. See log.h. */
#include "base/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int level = LOG_INFO;
static bool to_syslog, no_stderr;
static int journal = -1;             /* unknown yet */

static bool stamp;
static int log_fd = -1;

static const char *const level_names[] = {
    [LOG_ERR] = "err", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
    [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

int csifs_log_on(int prio)
{
    return prio <= __atomic_load_n(&level, __ATOMIC_RELAXED);
}

int csifs_log_file(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
    if (fd < 0)
        return -errno;
    if (log_fd >= 0)
        close(log_fd);
    log_fd = fd;
    return 0;
}

void csifs_log_stamp(void)
{
    stamp = true;
}

/* "2026-12-02T04:42:00.123Z warning " */
static void stamp_of(int prio, char *buf, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
    const char *lv = prio >= 0 && prio <= LOG_DEBUG && level_names[prio] ? level_names[prio]
                                                                            : "err";
    snprintf(buf + n, cap - n, ".%03ldZ %s ", ts.tv_nsec / 1000000, lv);
}

int csifs_log_level_parse(const char *s)
{
    for (int p = 0; p < (int)(sizeof(level_names) / sizeof(level_names[0])); p++)
        if (level_names[p] && !strcmp(s, level_names[p]))
            return p;
    return -EINVAL;
}

void csifs_log_set_level(int prio)
{
    __atomic_store_n(&level, prio, __ATOMIC_RELAXED);
}

void csifs_log_syslog(void)
{
    openlog("csifs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    to_syslog = true;
}

void csifs_log_no_stderr(void)
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

void csifs_log(int prio, const char *fmt, ...)
{
    if (prio > __atomic_load_n(&level, __ATOMIC_RELAXED))
        return;
    char msg[2048], ts[64] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (log_fd >= 0 || stamp)
        stamp_of(prio, ts, sizeof(ts));
    if (!no_stderr) {
        if (stderr_is_journal())
            fprintf(stderr, "<%d>%s\n", prio, msg);
        else if (stamp)
            fprintf(stderr, "%s%s\n", ts, msg);
        else
            fprintf(stderr, "csifs: %s\n", msg);
    }
    if (log_fd >= 0) {               /* one write(): O_APPEND keeps lines whole */
        char line[sizeof(msg) + sizeof(ts) + 1];
        int n = snprintf(line, sizeof(line), "%s%s\n", ts, msg);
        (void)!write(log_fd, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1));
    }
    if (to_syslog)
        syslog(prio, "%s", msg);
}

static _Thread_local const char *why;
static _Thread_local void (*why_hook)(void);

const char *csifs_why(void)
{
    return why ? why : "";
}

void csifs_why_clear(void)
{
    why = NULL;
}

void csifs_why_set(const char *w)
{
    why = w;
    if (why_hook)
        why_hook();
}

void csifs_why_hook(void (*fn)(void))
{
    why_hook = fn;
}
