/* make crash-test TAKEOVER=1 | UPGRADE=1 (DESIGN 13): csifs under the test
 * fd store (tests/lib/holder.h), each round one SIGKILL (the holder reaps
 * it and starts the successor, which takes the connection over) or one
 * SIGUSR2 (an upgrade in place: same pid, READY=1 again), under load: 4
 * writers in the same dirs (crash.h), the readers, a cwd process, a
 * blocked `cat events` and a poll() waiter (load.h). Every fourth SIGKILL
 * round first starts a csifs that holds its first mkdir unanswered and
 * blocks a notification on that directory's lock (-o debug_hold=mkdir,
 * debug_hold_inval) and is killed in that state.
 *
 * A round fails on: an answer no caller may see (ENOTCONN, ECONNABORTED,
 * EIO, a failed `ln`), a syscall over the liveness bound, a tree that is not
 * what the writers were told (lost or doubled, EEXIST on a resent mkdir),
 * a cwd process whose `current` differs from the registry's (GET /healthz/)
 * once settled, a `restarted` missing on the events reader, a poll waiter
 * not woken by the next health change, a health event or a health other
 * than healthy for an instance nothing touches, a killed csifs not reaped
 * within the bound, no READY=1 within it (or, for an upgrade, another pid).
 * A failed round ends its session: the next one starts afresh. */
#include "tests/crash/crash.h"
#include "tests/crash/load.h"
#include "tests/lib/holder.h"
#include "tests/lib/httpget.h"
#include "tests/lib/mntwatch.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NW 4
#define BOUND_MS 1000             /* the liveness bound (scaled by CSIFS_TEST_SLACK) */

static const char *const extras[] = { "canary", "poller", NULL };

struct sess {
    char *dir, mnt[1100], state[1100], logf[1100], stop[1100], pause[1100], s0[1100],
        s1[1100], sock[1100];
    struct holder h;
    struct tp_proc plugin;
    struct cr_env env;
    struct ld_env ld;
    struct ld_cwd cwd;
    pid_t csifs, writer[NW], reader[LD_NREADERS], events, poller;
    int port, conn, takeovers, canary_events;
    unsigned ready;               /* READY=1 the holder has seen */
    long fail_off[LD_NREADERS + 1];
    bool up, poll_linked, wedged;  /* wedged: a killed csifs not reaped */
    int64_t bound;                /* ms, scaled */
};

static int round_no, bad_n;

static void bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  round %d: ", round_no);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    bad_n++;
}

static const char *at(struct sess *s, const char *rel)
{
    return tu_path(s->mnt, rel);
}

static pid_t spawn(struct sess *s, bool hold)
{
    char bin[1100], opts[1400];
    snprintf(bin, sizeof(bin), "%s/csifs", tu_build_dir());
    snprintf(opts, sizeof(opts), "state=%s,http=%d%s", s->state, s->port,
             hold ? ",debug_hold=mkdir,debug_hold_inval" : "");
    char *argv[] = { bin, "-f", "-o", opts, s->mnt, NULL };
    s->h.log = s->logf;
    return hd_spawn(&s->h, argv);
}

static bool file_has(const char *path, const char *what, int *count)
{
    FILE *f = fopen(path, "re");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof(line), f))
        n += strstr(line, what) != NULL;
    if (f)
        fclose(f);
    if (count)
        *count = n;
    return n > 0;
}

/* ---- what runs in a child with a deadline (the harness makes no FUSE call) ---- */

static int wait_healthy(struct sess *s, const char *rel)
{
    char path[1200], v[64];
    snprintf(path, sizeof(path), "%s/%s/health", s->mnt, rel);
    for (int64_t end = tu_now_ms() + tu_ms(10000); tu_now_ms() < end; tu_sleep_ms(10)) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, v, sizeof(v) - 1);
        if (fd >= 0)
            close(fd);
        if (n > 0 && !strncmp(v, "healthy\n", 8))
            return 0;
    }
    fprintf(stderr, "    %s never healthy\n", rel);
    return 1;
}

static int link_poller(void *arg)
{
    struct sess *s = arg;
    if (symlink(s->s0, at(s, "csi-node/poller/a/socket")) != 0)
        return 1;
    return wait_healthy(s, "csi-node/poller/a");
}

static int unlink_poller(void *arg)
{
    struct sess *s = arg;
    return unlink(at(s, "csi-node/poller/a/socket")) == 0 ? 0 : 1;
}

static int setup(void *arg)
{
    struct sess *s = arg;
    const char *dirs[] = { "csi-controller/shared", "csi-node/shared", "csi-node/canary",
                           "csi-node/canary/a", "csi-node/poller", "csi-node/poller/a" };
    for (size_t k = 0; k < sizeof(dirs) / sizeof(dirs[0]); k++)
        if (mkdir(at(s, dirs[k]), 0755) != 0)
            return 1;
    if (symlink(s->s0, at(s, "csi-node/canary/a/socket")) != 0)
        return 1;
    return wait_healthy(s, "csi-node/canary/a") || link_poller(s);
}

static int check_tree(void *arg)
{
    return cr_check(arg);
}

/* ---- the session: one mount, the load, the csifs generations ---- */

static int sess_start(struct sess *s, uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    s->bound = tu_ms(BOUND_MS);
    if (!(s->dir = tu_tmpdir("crash-tk")))
        return -1;
    chmod(s->dir, 0755);
#define P(f, n) snprintf(s->f, sizeof(s->f), "%s/%s", s->dir, n)
    P(mnt, "mnt"), P(state, "state"), P(logf, "csifs.log"), P(stop, "stop"), P(pause, "pause");
    P(sock, "p.sock"), P(s0, "p.sock.0"), P(s1, "p.sock.1");
#undef P
    if (mkdir(s->mnt, 0755) != 0 || hd_start(&s->h) != 0)
        return -1;
    tu_note("mnt", s->mnt);
    s->up = true;
    if (tp_start(&s->plugin, "--socket", s->sock, "--sockets", "2", NULL) != 0)
        return fprintf(stderr, "  the test plugin did not start\n"), -1;
    s->port = th_free_port();
    s->csifs = spawn(s, false);
    if (s->csifs < 0 || !hd_wait_ready(&s->h, ++s->ready, 10000))
        return fprintf(stderr, "  the first csifs sent no READY=1\n"), -1;
    s->conn = mw_conn(s->mnt);
    if (mw_child(setup, s, tu_ms(30000)) != 0)
        return fprintf(stderr, "  set-up failed\n"), -1;
    s->poll_linked = true;
    s->env = (struct cr_env){ .mnt = s->mnt, .socks = { s->s0, s->s1 }, .logdir = s->dir,
                              .writers = NW, .takeover = true, .stop = s->stop,
                              .pause = s->pause, .bound_ns = s->bound * 1000000,
                              .extra = extras };
    s->ld = (struct ld_env){ .mnt = s->mnt, .dir = s->dir, .stop = s->stop,
                             .bound_ms = s->bound };
    static char canary[1200], current[1200];
    snprintf(canary, sizeof(canary), "%s/csi-node/canary/a/health", s->mnt);
    snprintf(current, sizeof(current), "%s/csi-node/shared/current", s->mnt);
    s->ld.canary = canary, s->ld.current = current;
    char evf[1200];
    snprintf(evf, sizeof(evf), "%s/events.out", s->dir);
    if ((s->events = ld_events(&s->ld)) < 0)
        return -1;
    for (int64_t end = tu_now_ms() + tu_ms(5000);
         !file_has(evf, "health csi-node/canary/a state=healthy", NULL) && tu_now_ms() < end;)
        tu_sleep_ms(10);
    file_has(evf, "health csi-node/canary/a ", &s->canary_events);
    for (int k = 0; k < LD_NREADERS; k++)
        s->reader[k] = ld_reader(&s->ld, (enum ld_reader)k);
    if (ld_cwd_start(&s->ld, at(s, "csi-node/shared"), &s->cwd) < 0)
        return -1;
    close(open(s->pause, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));   /* writers start paused */
    for (int w = 0; w < NW; w++) {
        fflush(NULL);
        if ((s->writer[w] = fork()) == 0)
            _exit(cr_writer(&s->env, w, seed, 0));
    }
    return 0;
}

static void tail_log(struct sess *s)
{
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "tail -n 8 '%s' 2>/dev/null | sed 's/^/    csifs: /' >&2",
             s->logf);
    (void)!system(cmd);
}

static void reap_or_kill(pid_t *pid, int64_t ms)
{
    if (*pid <= 0)
        return;
    if (mw_wait(*pid, ms) == -ETIMEDOUT) {
        kill(*pid, SIGKILL);
        if (mw_wait(*pid, 5000) == -ETIMEDOUT)
            return;
    }
    *pid = 0;
}

/* Stop the load (SIGKILL: the test is over), then csifs (SIGTERM: it
 * unmounts and empties the store; after a failure SIGKILL and an abort of
 * the connection); leave nothing: our pids, our mount's connection, our
 * dir. */
static void sess_stop(struct sess *s, bool failed)
{
    if (!s->up) {
        if (s->dir)
            tu_rmrf(s->dir);
        free(s->dir);
        return;
    }
    close(open(s->stop, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    unlink(s->pause);
    pid_t *load[NW + LD_NREADERS + 3];
    int n = 0;
    for (int w = 0; w < NW; w++)
        load[n++] = &s->writer[w];
    for (int k = 0; k < LD_NREADERS; k++)
        load[n++] = &s->reader[k];
    load[n++] = &s->cwd.pid, load[n++] = &s->events, load[n++] = &s->poller;
    for (int k = 0; k < n; k++)
        if (*load[k] > 0)
            kill(*load[k], SIGKILL);
    if (failed || s->wedged)
        mw_abort(mw_conn(s->mnt));
    if (s->csifs > 0) {
        kill(s->csifs, failed ? SIGKILL : SIGTERM);
        if (!hd_reap(s->csifs, 5000)) {
            mw_abort(mw_conn(s->mnt));
            kill(s->csifs, SIGKILL);
            hd_reap(s->csifs, 5000);
        } else if (!failed && (mw_conn(s->mnt) >= 0 || hd_nfds(&s->h) != 0)) {
            fprintf(stderr, "  SIGTERM left %s and %d fds in the holder\n",
                    mw_conn(s->mnt) >= 0 ? "the mount" : "no mount", hd_nfds(&s->h));
        }
        s->csifs = 0;
    }
    tp_kill_all();
    mw_unmount_all(s->mnt);
    for (int k = 0; k < n; k++)
        reap_or_kill(load[k], 5000);
    if (s->cwd.in > 0)
        close(s->cwd.in), close(s->cwd.out);
    if (mw_reap_stuck(5000) > 0)
        fprintf(stderr, "  children still stuck after the abort\n");
    hd_stop(&s->h);
    if (getenv("CRASH_KEEP"))           /* to look at a failure */
        fprintf(stderr, "  kept %s\n", s->dir);
    else
        tu_rmrf(s->dir);
    free(s->dir);
    memset(s, 0, sizeof(*s));
}

/* ---- a round ---- */

/* Is a thread of pid, or of one of its children (a notification helper),
 * in fuse_reverse_inval_entry (blocked on a directory lock)? */
static bool notifier_blocked(pid_t pid, int depth)
{
    char path[128], buf[4096];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    struct dirent *de;
    bool found = false;
    while (d && !found && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stack", (int)pid, de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);
        if (fd >= 0)
            close(fd);
        buf[n > 0 ? n : 0] = '\0';
        found = strstr(buf, "fuse_reverse_inval_entry") != NULL;
        snprintf(path, sizeof(path), "/proc/%d/task/%.16s/children", (int)pid, de->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);
        if (fd >= 0)
            close(fd);
        buf[n > 0 ? n : 0] = '\0';
        for (char *p = buf; depth == 0 && !found && *p; p += strspn(p, " "))
            found = notifier_blocked((pid_t)strtol(p, &p, 10), 1);
    }
    if (d)
        closedir(d);
    return found;
}

/* SIGKILL csifs; the holder reaps it and starts the successor (hold: one
 * that holds its first mkdir). -1 when the session cannot go on. */
static int do_kill(struct sess *s, bool hold)
{
    pid_t old = s->csifs;
    kill(old, SIGKILL);
    if (!hd_reap(old, BOUND_MS)) {
        bad("the killed csifs (pid %d) was not reaped within %lld ms", (int)old,
            (long long)s->bound);
        cr_show_threads(old);
        s->wedged = true;
        return -1;                /* the holder, as systemd, starts nothing */
    }
    s->csifs = spawn(s, hold);
    s->takeovers++;
    if (s->csifs < 0 || !hd_wait_ready(&s->h, ++s->ready, BOUND_MS)) {
        bad("the successor sent no READY=1 within %lld ms", (long long)s->bound);
        return -1;
    }
    if (mw_conn(s->mnt) != s->conn) {
        bad("the successor mounted afresh (connection %d, was %d)", mw_conn(s->mnt), s->conn);
        return -1;
    }
    return 0;
}

static int do_upgrade(struct sess *s)
{
    pthread_mutex_lock(&s->h.mu);
    unsigned reloading = s->h.reloading;
    pthread_mutex_unlock(&s->h.mu);
    kill(s->csifs, SIGUSR2);
    s->takeovers++;
    bool ready = hd_wait_ready(&s->h, ++s->ready, BOUND_MS);
    if (waitpid(s->csifs, NULL, WNOHANG) != 0) {
        bad("pid %d is gone after SIGUSR2", (int)s->csifs);
        s->csifs = 0;
        return -1;
    }
    if (!ready) {
        bad("no READY=1 within %lld ms of SIGUSR2", (long long)s->bound);
        cr_show_threads(s->csifs);
        return -1;
    }
    pthread_mutex_lock(&s->h.mu);
    if (s->h.reloading != reloading + 1)
        bad("%u RELOADING=1 for one SIGUSR2", s->h.reloading - reloading);
    pthread_mutex_unlock(&s->h.mu);
    return 0;
}

static bool all_paused(struct sess *s, bool report)
{
    for (int w = 0; w < NW; w++) {
        char p[1200];
        snprintf(p, sizeof(p), "%s/w%d.paused", s->dir, w);
        if (access(p, F_OK) == 0)
            continue;
        if (report) {
            char cmd[1400];
            snprintf(cmd, sizeof(cmd), "tail -n 1 '%s/w%d.log' | sed 's/^/    last: /' >&2",
                     s->dir, w);
            bad("writer %d did not pause within %lld ms (a syscall over the bound)", w,
                (long long)s->bound);
            (void)!system(cmd);
            cr_show_threads(s->csifs);
        }
        return false;
    }
    return true;
}

/* "" (no current) or the alloc GET /healthz/csi-node/shared names; -EIO. */
static int truth(struct sess *s, char *alloc, size_t len)
{
    char body[1024];
    const char *p;
    int st = th_get(s->port, "/healthz/csi-node/shared", body, sizeof(body));
    alloc[0] = '\0';
    if (st == 200 && (p = strstr(body, "healthy (")))
        snprintf(alloc, len, "%.*s", (int)strcspn(p + 9, ")"), p + 9);
    else if (st == 503 && (p = strstr(body, ": current ")))
        snprintf(alloc, len, "%.*s", (int)strcspn(p + 10, " "), p + 10);
    else if (st != 503 || !strstr(body, "no current instance"))
        return -EIO;
    return 0;
}

static void check_cwd(struct sess *s)
{
    char t1[256] = "", t2[256] = "", c[256] = "";
    int rc = 0;
    for (int64_t end = tu_now_ms() + tu_ms(3000); tu_now_ms() < end; tu_sleep_ms(50)) {
        if ((rc = truth(s, t1, sizeof(t1))) < 0 ||
            (rc = ld_cwd_ask(&s->cwd, c, sizeof(c), s->bound)) < 0 ||
            (rc = truth(s, t2, sizeof(t2))) < 0)
            continue;
        if (!strcmp(t1, t2) && !strcmp(c, t1))
            return;
    }
    if (rc < 0)
        bad("cwd check: %s", rc == -EIO ? "GET /healthz/csi-node/shared failed" : strerror(-rc));
    else
        bad("a stale current in the cwd process: it reads '%s', the registry says '%s'", c, t2);
}

static void check_events(struct sess *s)
{
    char evf[1200], cmd[1400];
    snprintf(evf, sizeof(evf), "%s/events.out", s->dir);
    int n = 0;
    for (int64_t end = tu_now_ms() + s->bound; tu_now_ms() < end; tu_sleep_ms(10))
        if (file_has(evf, "restarted", &n), n >= s->takeovers)
            break;
    if (waitpid(s->events, NULL, WNOHANG) != 0) {
        bad("`cat events` ended");
        snprintf(cmd, sizeof(cmd), "sed 's/^/    cat: /' '%s/events.err' >&2", s->dir);
        (void)!system(cmd);
        s->events = 0;
    }
    if (n < s->takeovers)
        bad("the events reader got %d `restarted` for %d takeovers", n, s->takeovers);
    int c = 0;
    file_has(evf, "health csi-node/canary/a ", &c);
    if (c > s->canary_events) {
        bad("%d health events for csi-node/canary/a, which nothing touched",
            c - s->canary_events);
        snprintf(cmd, sizeof(cmd), "grep 'health csi-node/canary/a ' '%s' | tail -n %d | "
                 "sed 's/^/    /' >&2", evf, c - s->canary_events);
        (void)!system(cmd);
        s->canary_events = c;
    }
}

static void check_load(struct sess *s)
{
    char what[1300], pre[64];
    snprintf(pre, sizeof(pre), "  round %d: ", round_no);
    for (int k = 0; k <= LD_NREADERS; k++) {
        const char *name = k < LD_NREADERS ? ld_reader_names[k] : "cwd";
        if (ld_failures(&s->ld, name, &s->fail_off[k], pre) > 0)
            bad_n++;
        if (k < LD_NREADERS && ld_stuck(&s->ld, name, what, sizeof(what)))
            bad("reader %s stuck: %s", name, what);
    }
}

/* One round; the writers are paused on entry and on return. -1: the
 * session cannot go on. */
static int round_run(struct sess *s, bool upgrade, bool dirlock, unsigned *rng)
{
    if (dirlock && do_kill(s, true) < 0)    /* the next csifs holds its first mkdir */
        return -1;
    if (!s->poll_linked && mw_child(link_poller, s, tu_ms(15000)) != 0)
        return bad("the poller's instance did not become healthy again"), -1;
    s->poll_linked = true;
    s->poller = ld_poller(tu_path(s->mnt, "csi-node/poller/a/health"));
    for (int64_t end = tu_now_ms() + tu_ms(2000); !ld_in_poll(s->poller); tu_sleep_ms(2))
        if (tu_now_ms() > end)
            return bad("the poll waiter never got into poll()"), -1;
    unlink(s->pause);
    if (dirlock) {
        int64_t end = tu_now_ms() + tu_ms(5000);
        while (!notifier_blocked(s->csifs, 0) && tu_now_ms() < end)
            tu_sleep_ms(1);
        if (tu_now_ms() >= end)
            bad("no notification blocked on a directory lock: the case was not made");
    } else {
        tu_sleep_ms(20 + rand_r(rng) % (upgrade ? 300 : 600));
    }
    if ((upgrade ? do_upgrade(s) : do_kill(s, false)) < 0)
        return -1;
    tu_sleep_ms(300);                       /* the load on the successor */
    int rc = mw_child(unlink_poller, s, s->bound);
    s->poll_linked = rc != 0;
    int st = rc ? -1 : mw_wait(s->poller, s->bound);
    if (rc)
        bad("unlink of csi-node/poller/a/socket failed");
    else if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
        bad("the poll waiter was not woken by a health change after the takeover (%s)",
            st == -ETIMEDOUT ? "still waiting" : "it failed");
    if (st >= 0)
        s->poller = 0;
    close(open(s->pause, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    for (int64_t end = tu_now_ms() + s->bound; !all_paused(s, false); tu_sleep_ms(2))
        if (tu_now_ms() > end && !all_paused(s, true))
            return -1;
    check_events(s);
    check_cwd(s);
    check_load(s);
    if ((rc = mw_child(check_tree, &s->env, tu_ms(30000))) != 0)
        bad("the tree is not what the writers were told%s", rc == -ETIMEDOUT ? " (timed out)" : "");
    return 0;
}

int cr_takeover_main(int rounds, uint64_t seed, bool upgrade)
{
    struct sess s = { 0 };
    unsigned rng = (unsigned)seed;
    int passed = 0, failed = 0;
    printf("crash-test %s: %d rounds, CRASH_SEED=%llu, liveness bound %lld ms\n",
           upgrade ? "UPGRADE=1" : "TAKEOVER=1", rounds, (unsigned long long)seed,
           (long long)tu_ms(BOUND_MS));
    for (int i = 0; i < rounds; i++) {
        round_no = i + 1;
        bad_n = 0;
        int64_t t0 = tu_now_ms();
        bool dirlock = !upgrade && i % 4 == 3, broken = false;
        if (!s.up && sess_start(&s, seed + (uint64_t)i) != 0) {
            bad("the session did not start");
            broken = true;
        }
        if (!broken && round_run(&s, upgrade, dirlock, &rng) < 0)
            broken = true;
        if (bad_n || broken) {
            tail_log(&s);
            sess_stop(&s, true);
        }
        bad_n || broken ? failed++ : passed++;
        printf("round %d/%d: %s%s, %s, %lld ms\n", i + 1, rounds, upgrade ? "SIGUSR2" : "SIGKILL",
               dirlock ? " with a notification blocked on a directory lock" : "",
               bad_n || broken ? "FAILED" : "ok", (long long)(tu_now_ms() - t0));
        fflush(stdout);
    }
    sess_stop(&s, false);
    printf("crash rounds: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
