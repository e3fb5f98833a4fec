/* The fixture shared by the hook tests (hook.c, hook_run.c, hook_mount.c):
 * a temp dir per test (CSIFS_SOCKET_ROOT under it), a csifs process, hooks run
 * through sh in the background and reaped with their output, and the plugins
 * `run` hooks start. Included once by each test file; teardown ends what the
 * test started, by PID only. Run from the top of the tree. */
#ifndef CSIFS_HOOK_FIXTURE_H
#define CSIFS_HOOK_FIXTURE_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "csi/client.h"
#include "tests/lib/fsrun.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#define HOOK "scripts/csi-plugin-hook"
#define FS_OPTS "heartbeat=1s,health_timeout=5s"

static struct tf t;
static char *work;           /* temp dir: hook outputs, CSIFS_SOCKET_ROOT, mounts */
static char sockroot[512];

/* A run of the hook: its stdout and stderr once reaped. */
struct hk {
    pid_t pid;
    int status;
    char outp[600], errp[600];
    char out[8192], err[8192];
};

#define MAX_BG 8
static pid_t running[MAX_BG];        /* hooks spawned, not reaped: teardown ends them */

static inline void hook_setup(void)
{
    work = tu_tmpdir("hook");
    cr_assert(work);
    snprintf(sockroot, sizeof(sockroot), "%s/sockets", work);
    setenv("CSIFS_SOCKET_ROOT", sockroot, 1);
    setenv("CSIFS_MOUNT", "/nonexistent-csifs-mount", 1);
    char state[600];
    snprintf(state, sizeof(state), "%s/hook-state", work);
    setenv("CSIFS_HOOK_STATE", state, 1);
    const char *defaults[] = { "CSI_PLUGIN_TYPE", "CSI_PLUGIN_NAME", "CSI_PLUGIN_ALLOC",
                               "NOMAD_ALLOC_ID" };
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
        unsetenv(defaults[i]);
}

/* waitpid(pid) within tu_ms(ms): its exit status (128 + signal), or -1. */
static inline int reap_pid(pid_t pid, int64_t ms)
{
    int64_t end = tu_now_ms() + tu_ms(ms);
    int st;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (tu_now_ms() > end)
            return -1;
        tu_sleep_ms(5);
    }
    for (int i = 0; i < MAX_BG; i++)
        if (running[i] == pid)
            running[i] = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static inline bool reaped(struct hk *h, int64_t ms)
{
    int st = reap_pid(h->pid, ms);
    if (st < 0)
        return false;
    h->status = st;
    h->pid = 0;
    return true;
}


/* Plugins a `run` hook started (the wrapper scripts write their PIDs):
 * teardown SIGKILLs the ones still alive, by PID, if they are still a
 * csi-test-plugin. */
#define MAX_PLUGINS 16
static pid_t plugin_pids[MAX_PLUGINS];

static inline bool is_test_plugin(pid_t pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strstr(buf, "csi-test-plugin") != NULL;
}

static inline void track_plugin(pid_t pid)
{
    for (int i = 0; i < MAX_PLUGINS; i++)
        if (!plugin_pids[i]) {
            plugin_pids[i] = pid;
            return;
        }
}

static inline void kill_plugins(void)
{
    for (int i = 0; i < MAX_PLUGINS; i++) {
        pid_t pid = plugin_pids[i];
        plugin_pids[i] = 0;
        for (int64_t end = tu_now_ms() + 5000; pid > 0 && is_test_plugin(pid);) {
            kill(pid, SIGKILL);
            if (tu_now_ms() > end)
                break;
            tu_sleep_ms(5);
        }
    }
}

static inline void hook_teardown(void)
{
    /* SIGTERM lets the hook stop its events reader (its EXIT trap). */
    for (int i = 0; i < MAX_BG; i++) {
        pid_t pid = running[i];
        if (pid > 0) {
            kill(pid, SIGTERM);
            if (reap_pid(pid, 5000) < 0) {
                kill(pid, SIGKILL);
                reap_pid(pid, 5000);
            }
        }
    }
    tp_kill_all();
    kill_plugins();
    tf_stop(&t);
    tu_rmrf(work);
    free(work);
    work = NULL;
}

static inline void start_fs(const char *tag, const char *opts)
{
    struct tf_opts o = { .tag = tag, .extra_opts = opts };
    cr_assert_eq(tf_spawn(&t, &o), 0, "csifs did not start");
    setenv("CSIFS_MOUNT", t.mnt, 1);
}

static inline void slurp(const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Start `sh HOOK <args>` (args: shell words) in the background, with
 * SIGINT and SIGQUIT at their default action and no signal blocked, as from
 * a terminal, however the test binary was started: a shell started with a
 * signal ignored may not trap it (POSIX), and a test binary run as a
 * background job of sh (run-tests.sh's lanes, a `cmd &` of a CI script)
 * inherits SIGINT and SIGQUIT ignored; a hook started so would never see the
 * SIGINT a test sends it. */
static inline void hook_spawnv(struct hk *h, const char *fmt, va_list ap)
{
    static int n;
    char args[4096], cmd[8192];
    vsnprintf(args, sizeof(args), fmt, ap);
    memset(h, 0, sizeof(*h));
    snprintf(h->outp, sizeof(h->outp), "%s/hook-%d.out", work, n);
    snprintf(h->errp, sizeof(h->errp), "%s/hook-%d.err", work, n++);
    snprintf(cmd, sizeof(cmd), "exec sh %s %s >'%s' 2>'%s'", HOOK, args, h->outp, h->errp);
    h->pid = fork();
    cr_assert_geq(h->pid, 0);
    if (h->pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGINT, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < MAX_BG; i++)
        if (!running[i]) {
            running[i] = h->pid;
            return;
        }
    cr_assert_fail("more than %d hooks running", MAX_BG);
}

static inline void __attribute__((format(printf, 2, 3))) hook_spawn(struct hk *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hook_spawnv(h, fmt, ap);
    va_end(ap);
}

/* Reap a spawned hook within tu_ms(ms): its exit status; out and err filled. */
static inline int hook_reap(struct hk *h, int64_t ms)
{
    cr_assert(reaped(h, ms), "the hook did not exit within %lld ms", (long long)tu_ms(ms));
    slurp(h->outp, h->out, sizeof(h->out));
    slurp(h->errp, h->err, sizeof(h->err));
    return h->status;
}

/* Run the hook to completion (liveness bound 60 s): its exit status. */
static inline int __attribute__((format(printf, 2, 3))) hook(struct hk *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hook_spawnv(h, fmt, ap);
    va_end(ap);
    return hook_reap(h, 60000);
}

static inline bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* The socket path of "CSI_ENDPOINT=unix://<path>\n" in out. */
static inline const char *endpoint_path(const char *out)
{
    static char path[512];
    const char *pre = "CSI_ENDPOINT=unix://";
    cr_assert(strncmp(out, pre, strlen(pre)) == 0, "prestart printed: %s", out);
    const char *rest = out + strlen(pre);
    size_t n = strcspn(rest, "\n");
    cr_assert_lt(n, sizeof(path), "prestart printed: %s", out);
    memcpy(path, rest, n);
    path[n] = '\0';
    return path;
}

static inline void assert_registration(const char *rel, const char *sock, const char *health)
{
    char r[512];
    snprintf(r, sizeof(r), "%s/socket", rel);
    cr_assert_str_eq(tf_readlink(&t, r), sock, "%s", r);
    snprintf(r, sizeof(r), "%s/health", rel);
    cr_assert_str_eq(tf_cat(&t, r), health, "%s", r);
}

static inline void assert_fails(int code, const char *needle, const char *args)
{
    struct hk h;
    int rc = hook(&h, "%s", args);
    cr_assert_eq(rc, code, "%s: exit %d: %s", args, rc, h.err);
    cr_assert(strstr(h.err, needle), "%s: %s", args, h.err);
}

#endif
