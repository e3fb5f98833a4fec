#include "tests/lib/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>
#include <ftw.h>
#include <fcntl.h>
#include <sys/wait.h>

int64_t tu_ms(int64_t ms)
{
    const char *s = getenv("CSIFS_TEST_SLACK");
    double k = s ? atof(s) : 1.0;
    if (k < 1.0)
        k = 1.0;
    return (int64_t)(ms * k);
}

int64_t tu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void tu_sleep_ms(int64_t ms)
{
    struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

bool tu_wait_for(bool (*cond)(void *arg), void *arg, int64_t timeout_ms)
{
    int64_t end = tu_now_ms() + tu_ms(timeout_ms);
    for (;;) {
        if (cond(arg))
            return true;
        if (tu_now_ms() > end)
            return false;
        tu_sleep_ms(5);
    }
}

char *tu_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *p = NULL;
    if (asprintf(&p, "%s/csifs-%s-XXXXXX", base ? base : "/tmp", tag) < 0)
        return NULL;
    if (!mkdtemp(p)) {
        free(p);
        return NULL;
    }
    tu_note("dir", p);
    return p;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

void tu_rmrf(const char *path)
{
    if (path)
        nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

void tu_note(const char *kind, const char *value)
{
    const char *d = getenv("CSIFS_TEST_RUNDIR");
    char path[4096], line[4096 + 16];
    if (!d || !*d)
        return;
    snprintf(path, sizeof(path), "%s/made", d);
    int n = snprintf(line, sizeof(line), "%s %s\n", kind, value);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (n > 0 && (size_t)n < sizeof(line) && write(fd, line, (size_t)n) != n)
        fprintf(stderr, "tu_note: %s: %s\n", path, strerror(errno));
    close(fd);
}

/* The pid with its start time (field 22 of /proc/<pid>/stat), so that the
 * runner never signals a recycled pid. */
void tu_note_pid(pid_t pid)
{
    char path[64], buf[1024], v[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long start;
    if (!p || sscanf(p + 2, "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                            "%*s %*s %*s %*s %llu", &start) != 1)
        return;
    snprintf(v, sizeof(v), "%d %llu", (int)pid, start);
    tu_note("pid", v);
}

const char *tu_build_dir(void)
{
    const char *b = getenv("BUILD");
    return b && *b ? b : "build";
}

const char *tu_path(const char *dir, const char *name)
{
    static char bufs[4][4096];
    static int k;
    char *b = bufs[k++ % 4];
    int n = snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
    return n > 0 && n < (int)sizeof(bufs[0]) ? b : NULL;
}

int tu_vsh(const char *dir, const char *fmt, va_list ap)
{
    char cmd[8192], full[8400];
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    snprintf(full, sizeof(full), "MNT='%s'; cd \"$MNT\" && { %s\n}", dir, cmd);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int tu_count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

bool tu_thread_in_d(long pid, const char *fn)
{
    char path[128], buf[512];
    snprintf(path, sizeof(path), "ls /proc/%ld/task 2>/dev/null", pid);
    FILE *ls = popen(path, "r");
    if (!ls)
        return false;
    bool found = false;
    long tid;
    while (!found && fscanf(ls, "%ld", &tid) == 1) {
        snprintf(path, sizeof(path), "/proc/%ld/task/%ld/stat", pid, tid);
        FILE *f = fopen(path, "r");
        char st = 0;
        if (f && fgets(buf, sizeof(buf), f) && strrchr(buf, ')'))
            sscanf(strrchr(buf, ')') + 1, " %c", &st);
        if (f)
            fclose(f);
        snprintf(path, sizeof(path), "/proc/%ld/task/%ld/wchan", pid, tid);
        f = fopen(path, "r");
        buf[0] = '\0';
        if (f && !fgets(buf, sizeof(buf), f))
            buf[0] = '\0';
        if (f)
            fclose(f);
        found = st == 'D' && (!fn || !strncmp(buf, fn, strlen(fn)));
    }
    pclose(ls);
    return found;
}

bool tu_proc_field(const char *path, const char *name, char *buf, size_t cap)
{
    char line[512];
    size_t n = strlen(name);
    bool found = false;
    FILE *f = fopen(path, "re");
    while (f && !found && fgets(line, sizeof(line), f)) {
        if (strncmp(line, name, n) || line[n] != ':')
            continue;
        const char *v = line + n + 1 + strspn(line + n + 1, " \t");
        snprintf(buf, cap, "%.*s", (int)strcspn(v, "\n"), v);
        found = true;
    }
    if (f)
        fclose(f);
    return found;
}

long tu_child_of(long pid)
{
    char path[96];
    long child = 0;
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", pid, pid);
    FILE *f = fopen(path, "re");
    if (f && fscanf(f, "%ld", &child) != 1)
        child = 0;
    if (f)
        fclose(f);
    return child;
}
