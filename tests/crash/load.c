/* The crash test's readers, cwd process, events reader and poll waiter
 * (load.h). */
#include "tests/crash/load.h"
#include "tests/lib/testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

const char *const ld_reader_names[LD_NREADERS] = { "ls", "cat", "readlink" };

static const char *file(const struct ld_env *l, const char *name, const char *ext)
{
    static char bufs[4][1200];
    static int n;
    char *b = bufs[n++ % 4];
    snprintf(b, sizeof(bufs[0]), "%s/%s.%s", l->dir, name, ext);
    return b;
}

static bool stopped(const struct ld_env *l)
{
    return access(l->stop, F_OK) == 0;
}

static void note_fail(const struct ld_env *l, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note_fail(const struct ld_env *l, const char *name, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    n = n < 0 ? 0 : n > (int)sizeof(line) - 2 ? (int)sizeof(line) - 2 : n;
    line[n++] = '\n';
    int fd = open(file(l, name, "fail"), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!write(fd, line, (size_t)n);
        close(fd);
    }
}

/* <dir>/<name>.st: "<start ms> <command>" while a command runs, else empty. */
static void status(const struct ld_env *l, const char *name, const char *cmd)
{
    char line[1200];
    int n = cmd ? snprintf(line, sizeof(line), "%lld %s\n", (long long)tu_now_ms(), cmd) : 0;
    int fd = open(file(l, name, "st"), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        (void)!write(fd, line, (size_t)n);
        close(fd);
    }
}

static void slurp(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? 0 : read(fd, buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
}

/* Run argv with stdout and stderr in <name>.out and .err; its wait status
 * (-errno when it could not run) and how long it took. */
static int run_cmd(const struct ld_env *l, const char *name, char *const argv[], int64_t *ms)
{
    char cmd[1100] = "";
    for (int k = 0; argv[k]; k++)
        snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%s%s", k ? " " : "", argv[k]);
    status(l, name, cmd);
    int64_t t0 = tu_now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(file(l, name, "out"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(file(l, name, "err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st = -ECHILD;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    *ms = tu_now_ms() - t0;
    status(l, name, NULL);
    return pid < 0 ? -errno : st;
}

/* Every line of err but ENOENT ones is a failure; how many. */
static int bad_stderr(const struct ld_env *l, const char *name, const char *err)
{
    int bad = 0;
    for (const char *p = err; *p; p += strcspn(p, "\n"), p += *p == '\n') {
        int n = (int)strcspn(p, "\n");
        char line[512];
        snprintf(line, sizeof(line), "%.*s", n, p);
        if (n && !strstr(line, "No such file or directory") && ++bad)
            note_fail(l, name, "%s", line);
    }
    return bad;
}

static void reader_once(const struct ld_env *l, enum ld_reader k)
{
    const char *name = ld_reader_names[k];
    char *const ls[] = { "ls", "-lR", (char *)l->mnt, NULL };
    char *const cat[] = { "cat", (char *)l->canary, NULL };
    char *const rl[] = { "readlink", "-v", (char *)l->current, NULL };
    char *const *argv = k == LD_LS ? ls : k == LD_CAT ? cat : rl;
    int64_t ms;
    int st = run_cmd(l, name, argv, &ms);
    char out[4096], err[4096];
    slurp(file(l, name, "out"), out, sizeof(out));
    slurp(file(l, name, "err"), err, sizeof(err));
    if (ms > l->bound_ms)
        note_fail(l, name, "`%s %s` took %lld ms, over the liveness bound", argv[0], argv[1],
                  (long long)ms);
    int bad = bad_stderr(l, name, err);
    if (st < 0 || !WIFEXITED(st))
        note_fail(l, name, "`%s` did not run or was killed (%d)", argv[0], st);
    else if (k == LD_CAT && (WEXITSTATUS(st) || strcmp(out, "healthy\n")))
        note_fail(l, name, "`cat %s` printed '%.*s' (exit %d): a health flap", l->canary,
                  (int)strcspn(out, "\n"), out, WEXITSTATUS(st));
    else if (WEXITSTATUS(st) && !bad && !err[0])
        note_fail(l, name, "`%s` exited %d and said nothing", argv[0], WEXITSTATUS(st));
}

pid_t ld_reader(const struct ld_env *l, enum ld_reader k)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid < 0 ? -errno : pid;
    while (!stopped(l)) {
        reader_once(l, k);
        usleep(k == LD_LS ? 20000 : 5000);
    }
    _exit(0);
}

/* readlink current in the cwd, timed: "" (no current), the target, or
 * "ERR <errno>" (also noted as a failure). */
static void cwd_read(const struct ld_env *l, char *buf, size_t len)
{
    int64_t t0 = tu_now_ms();
    ssize_t n = readlink("current", buf, len - 1);
    int e = errno;
    int64_t ms = tu_now_ms() - t0;
    if (ms > l->bound_ms)
        note_fail(l, "cwd", "readlink current took %lld ms, over the liveness bound",
                  (long long)ms);
    buf[n > 0 ? n : 0] = '\0';
    if (n < 0 && e != ENOENT) {
        note_fail(l, "cwd", "readlink current: %s", strerror(e));
        snprintf(buf, len, "ERR %d", e);
    }
}

static void cwd_main(const struct ld_env *l, const char *dir, int in, int out)
{
    if (chdir(dir) != 0) {
        note_fail(l, "cwd", "cd %s: %s", dir, strerror(errno));
        _exit(1);
    }
    char cur[256], req[64];
    while (!stopped(l)) {
        struct pollfd p = { .fd = in, .events = POLLIN };
        int r = poll(&p, 1, 10);
        cwd_read(l, cur, sizeof(cur));
        if (r == 1) {
            if (read(in, req, sizeof(req)) <= 0)
                break;
            cwd_read(l, cur, sizeof(cur));
            size_t n = strlen(cur);
            cur[n++] = '\n';
            if (write(out, cur, n) != (ssize_t)n)
                break;
        }
    }
    _exit(0);
}

int ld_cwd_start(const struct ld_env *l, const char *dir, struct ld_cwd *c)
{
    int i[2], o[2];
    if (pipe2(i, O_CLOEXEC) != 0)
        return -errno;
    if (pipe2(o, O_CLOEXEC) != 0) {
        close(i[0]), close(i[1]);
        return -errno;
    }
    fflush(NULL);
    c->pid = fork();
    if (c->pid == 0)
        cwd_main(l, dir, i[0], o[1]);
    close(i[0]);
    close(o[1]);
    c->in = i[1];
    c->out = o[0];
    return c->pid < 0 ? -errno : 0;
}

int ld_cwd_ask(struct ld_cwd *c, char *buf, size_t len, int64_t ms)
{
    if (write(c->in, "?\n", 2) != 2)
        return -EPIPE;
    int64_t end = tu_now_ms() + ms;
    size_t n = 0;
    while (n < len - 1) {
        struct pollfd p = { .fd = c->out, .events = POLLIN };
        int64_t left = end - tu_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            return -ETIMEDOUT;
        if (read(c->out, buf + n, 1) != 1)
            return -EPIPE;
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
    return 0;
}

pid_t ld_events(const struct ld_env *l)
{
    char src[1100];
    snprintf(src, sizeof(src), "%s/events", l->mnt);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(file(l, "events", "out"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(file(l, "events", "err"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(126);
        execlp("cat", "cat", src, (char *)NULL);
        _exit(127);
    }
    return pid < 0 ? -errno : pid;
}

pid_t ld_poller(const char *path)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid < 0 ? -errno : pid;
    int fd = open(path, O_RDONLY);
    char buf[64];
    if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
        _exit(2);
    struct pollfd p = { .fd = fd, .events = POLLPRI };
    int r = poll(&p, 1, 600000);
    _exit(r == 1 ? 0 : r == 0 ? 1 : 2);
}

bool ld_in_poll(pid_t pid)
{
    char path[64], w[128];
    snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
    slurp(path, w, sizeof(w));
    return strstr(w, "poll") != NULL;
}

int ld_failures(const struct ld_env *l, const char *name, long *off, const char *prefix)
{
    FILE *f = fopen(file(l, name, "fail"), "re");
    if (!f)
        return 0;
    char line[1100];
    int n = 0;
    fseek(f, *off, SEEK_SET);
    while (fgets(line, sizeof(line), f))
        if (n++ < 3)
            fprintf(stderr, "%s%s: %s", prefix, name, line);
    if (n > 3)
        fprintf(stderr, "%s%s: ... and %d more\n", prefix, name, n - 3);
    *off = ftell(f);
    fclose(f);
    return n;
}

bool ld_stuck(const struct ld_env *l, const char *name, char *what, size_t len)
{
    char st[1200];
    long long t0;
    int at = 0;
    slurp(file(l, name, "st"), st, sizeof(st));
    if (sscanf(st, "%lld %n", &t0, &at) != 1 || tu_now_ms() - t0 <= l->bound_ms)
        return false;
    snprintf(what, len, "%.*s for %lld ms", (int)strcspn(st + at, "\n"), st + at,
             (long long)(tu_now_ms() - t0));
    return true;
}
