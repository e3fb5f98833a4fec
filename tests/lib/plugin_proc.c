#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"
#include "tests/lib/mntwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ARGS 256
#define MAX_LIVE 256

/* Started and not yet reaped: what tp_kill_all needs. */
static struct {
    pid_t pid;
    int out;
} live[MAX_LIVE];

static void live_add(pid_t pid, int out)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (!live[i].pid) {
            live[i].pid = pid;
            live[i].out = out;
            return;
        }
    fprintf(stderr, "plugin_proc: more than %d live plugins; pid %d is not tracked\n", MAX_LIVE,
            (int)pid);
}

static void live_del(pid_t pid)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i].pid == pid)
            live[i].pid = 0;
}

/* waitpid(pid) for up to ms (scaled); the wait status, -ETIMEDOUT or -errno. */
static int reap(pid_t pid, int ms)
{
    return mw_wait(pid, tu_ms(ms));
}

static void forget(struct tp_proc *p, int status)
{
    live_del(p->pid);
    p->pid = 0;
    p->status = status;
    if (p->out >= 0)
        close(p->out);
    p->out = -1;
}

int tp_wait(struct tp_proc *p, int timeout_ms)
{
    if (!p->pid)
        return -ESRCH;
    int st = reap(p->pid, timeout_ms);
    if (st >= 0)
        forget(p, st);
    return st;
}

/* Wait for a line starting "READY " on p->out. */
static int wait_ready(struct tp_proc *p)
{
    char buf[4096];
    size_t len = 0;
    int64_t end = tu_now_ms() + tu_ms(10000);
    for (;;) {
        char *nl;
        while ((nl = memchr(buf, '\n', len))) {
            if (strncmp(buf, "READY ", 6) == 0)
                return 0;
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len);
        }
        if (len == sizeof(buf))
            len = 0;        /* a line this long is not READY */
        int64_t left = end - tu_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd pfd = { .fd = p->out, .events = POLLIN };
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno != EINTR)
            return -errno;
        if (r <= 0)
            continue;
        ssize_t n = read(p->out, buf + len, sizeof(buf) - len);
        if (n == 0)
            return -ECHILD;     /* stdout closed: it is exiting */
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            return -errno;
        len += n > 0 ? (size_t)n : 0;
    }
}

int tp_startv(struct tp_proc *p, const char *const *argv)
{
    char *bin = NULL;
    const char *args[MAX_ARGS + 2];
    int fds[2], n = 0;
    *p = (struct tp_proc){ .out = -1 };
    if (asprintf(&bin, "%s/csi-test-plugin", tu_build_dir()) < 0)
        return -ENOMEM;
    args[n++] = bin;
    for (; argv[n - 1] && n <= MAX_ARGS; n++)
        args[n] = argv[n - 1];
    args[n] = NULL;
    if (pipe2(fds, O_CLOEXEC) != 0) {
        free(bin);
        return -errno;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {     /* only async-signal-safe calls until exec */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent ||
            dup2(fds[1], STDOUT_FILENO) < 0)
            _exit(127);
        execv(bin, (char *const *)args);
        _exit(127);
    }
    int e = errno;
    free(bin);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        return -e;
    }
    p->pid = pid;
    p->out = fds[0];
    live_add(pid, fds[0]);
    tu_note_pid(pid);
    int rc = wait_ready(p);
    if (rc == -ECHILD && tp_wait(p, 5000) < 0)
        rc = -ETIMEDOUT;    /* closed stdout but did not exit */
    if (rc && p->pid)
        tp_kill(p);
    return rc;
}

int tp_start(struct tp_proc *p, const char *arg, ...)
{
    const char *argv[MAX_ARGS + 1];
    int n = 0;
    va_list ap;
    va_start(ap, arg);
    for (const char *a = arg; a && n < MAX_ARGS; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    return tp_startv(p, argv);
}

/* Send sig and reap; if it does not exit, SIGKILL it and say -ETIMEDOUT. */
static int signal_and_reap(struct tp_proc *p, int sig)
{
    if (!p->pid)
        return -ESRCH;
    if (kill(p->pid, sig) != 0)
        return -errno;
    int st = tp_wait(p, 5000);
    if (st == -ETIMEDOUT && kill(p->pid, SIGKILL) == 0)
        tp_wait(p, 5000);
    return st;
}

int tp_stop(struct tp_proc *p)
{
    return signal_and_reap(p, SIGTERM);
}

int tp_kill(struct tp_proc *p)
{
    return signal_and_reap(p, SIGKILL);
}

void tp_kill_all(void)
{
    for (int i = 0; i < MAX_LIVE; i++) {
        if (!live[i].pid)
            continue;
        kill(live[i].pid, SIGKILL);
        reap(live[i].pid, 5000);
        close(live[i].out);
        live[i].pid = 0;
    }
}
