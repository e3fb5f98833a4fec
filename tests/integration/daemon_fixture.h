/* The fixture shared by the start-up suites (daemon_mode.c, startup.c): a
 * temp dir per test, csifs started with or without -f and remembered by pid
 * (the lock file's, for daemon mode) so that teardown ends it by PID only,
 * and a wedged mount of ours aborted and detached. Included once by each
 * test file, whose TestSuite names setup and teardown. */
#ifndef CSIFS_DAEMON_FIXTURE_H
#define CSIFS_DAEMON_FIXTURE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cmd/mountpoint.h"
#include "tests/lib/fsrun.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"


static struct tf t;
static char *dir;                    /* this test's temp dir */
static pid_t daemons[8];             /* daemon-mode csifs started here */
static char *mounts[8];              /* mount points they were given */
static int ndaemons;

static long lock_pid(const char *state)
{
    char path[4200], buf[32] = "";
    snprintf(path, sizeof(path), "%s/csifs.lock", state);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    if (!fgets(buf, sizeof(buf), f))
        buf[0] = '\0';
    fclose(f);
    return strtol(buf, NULL, 10);
}

/* Exited: no such process, or a zombie its reaper has not reaped yet. */
static bool gone(long pid)
{
    char path[64], state[64];
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    return !tu_proc_field(path, "State", state, sizeof(state)) || strchr(state, 'Z');
}

static bool gone_cond(void *arg)
{
    return gone(*(long *)arg);
}

static bool is_mount(const char *path)
{
    char type[64];
    unsigned conn;
    return csifs_mount_find(path, type, sizeof(type), &conn) == 1 && !strcmp(type, "fuse.csifs");
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* "<dir>/<rel>" in a rotating static buffer */
static const char *D(const char *rel)
{
    static char bufs[8][4096];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, sizeof(bufs[0]), "%s/%s", dir, rel);
    return b;
}

static const char *bin(void)
{
    static char path[4096];
    if (!*path && !realpath(tu_build_dir(), path))
        cr_assert_fail("no build dir");
    static char b[4200];
    snprintf(b, sizeof(b), "%s/csifs", path);
    return b;
}

/* Run a shell command in dir (stdout+stderr into out); its exit status. */
static int sh(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t cap, const char *fmt, ...)
{
    char cmd[8192], full[8400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), "cd '%s' && { %s\n} 2>&1", dir, cmd);
    FILE *f = popen(full, "r");
    cr_assert(f);
    char sink[4096];
    size_t n = fread(out ? out : sink, 1, (out ? cap : sizeof(sink)) - 1, f);
    (out ? out : sink)[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* csifs without -f: its exit status; remembered for cleanup by the pid it
 * wrote in state's lock file. */
static bool gone(long pid);
static int start_daemon(char *out, size_t cap, const char *state, const char *opts,
                        const char *mnt)
{
    int rc = sh(out, cap, "timeout 30 '%s' -o 'state=%s%s%s' '%s'", bin(), state,
                *opts ? "," : "", opts, mnt);
    /* whatever the status (a sanitizer may change it): a pid in the lock
     * file of this test's own state dir is a daemon to clean up */
    long pid = lock_pid(state);
    for (int k = 0; k < ndaemons; k++)
        pid = daemons[k] == (pid_t)pid ? 0 : pid;
    if (pid > 0 && !gone(pid) && ndaemons < 8) {
        daemons[ndaemons] = (pid_t)pid;
        mounts[ndaemons++] = strdup(mnt);
    }
    return rc;
}

static void setup(void)
{
    dir = tu_tmpdir("daemon");
    cr_assert(dir);
    chmod(dir, 0755);
}

static void teardown(void)
{
    tp_kill_all();
    tf_stop(&t);
    for (int k = 0; k < ndaemons; k++) {
        if (daemons[k] > 0 && !gone(daemons[k])) {
            kill(daemons[k], SIGTERM);
            long pid = daemons[k];
            if (!tu_wait_for(gone_cond, &pid, 5000))
                kill(daemons[k], SIGKILL);
        }
        /* a test that failed half-way may leave its own mount wedged */
        char type[64];
        unsigned conn;
        if (csifs_mount_find(mounts[k], type, sizeof(type), &conn) == 1 &&
            !strcmp(type, "fuse.csifs")) {
            csifs_conn_abort(conn);
            umount2(mounts[k], MNT_DETACH);
        }
        free(mounts[k]);
    }
    ndaemons = 0;
    tu_rmrf(dir);
    free(dir);
}


/* SIGTERM the daemon of state: unmounted and gone within 2 s. */
static void stop_daemon(const char *state, const char *mnt)
{
    long pid = lock_pid(state);
    cr_assert_gt(pid, 0);
    cr_assert_eq(kill((pid_t)pid, SIGTERM), 0);
    cr_assert(tu_wait_for(gone_cond, &pid, 2000), "daemon %ld still running", pid);
    cr_assert(!is_mount(mnt), "still mounted after SIGTERM");
}

/* Each refusal: exit status, a message on stderr, nothing mounted, nothing
 * created. */
static void refused(int want, const char *state, const char *opts, const char *mnt,
                    const char *msg)
{
    char out[4096];
    bool had_state = exists(state), had_mnt = exists(mnt), had_mount = is_mount(mnt);
    int rc = start_daemon(out, sizeof(out), state, opts, mnt);
    cr_assert_eq(rc, want, "exit %d (want %d): %s", rc, want, out);
    cr_assert(strstr(out, msg), "want '%s' in: %s", msg, out);
    cr_assert_eq(is_mount(mnt), had_mount, "%s mounted", mnt);
    cr_assert_eq(exists(state), had_state, "%s created", state);
    cr_assert_eq(exists(mnt), had_mnt, "%s created", mnt);
}

#endif
