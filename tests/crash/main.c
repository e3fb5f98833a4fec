/* make crash-test: rounds of SIGKILL under writers (see crash.h).
 *   csifs-crash-test [ROUNDS]      env CRASH_SEED fixes the random choices
 *   TAKEOVER=1 or UPGRADE=1        csifs under the test fd store: each round
 *                                  a SIGKILL or a SIGUSR2 that no user of
 *                                  the mount may notice (takeover.c)
 * Rounds are split in thirds: 1 writer, 4 writers, 8 writers. A round:
 * start a test plugin and build/csifs -f, start the writers, SIGKILL csifs
 * at a random moment, stop the plugin (so nothing changes `ready` after
 * the restart), restart csifs on the stale mount, which must serve within
 * 5 s (else the round failed: a wedge), and check the tree in a child with a
 * deadline, then that events' seq went on past the killed csifs's. The harness never makes a FUSE syscall itself (tests/lib/mntwatch.h)
 * and cleans up only its own processes and its own mount. Last line:
 * "crash rounds: N passed, M failed"; exit 0 only when M is 0.
 * CRASH_TAMPER=1 makes one unlogged change before each check: every round
 * must then fail (the check can fail). */
#include "tests/crash/crash.h"
#include "tests/lib/mntwatch.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SERVE_MS 5000           /* DESIGN 7: a restart serves within 5 s */

struct round {
    char *dir, *mnt, *state, *sock;
    struct cr_env env;
    pid_t old, csifs, events, writer[CR_MAX_WRITERS];
    int conn;                   /* the killed csifs's connection */
    bool wedged;                /* not reaped 1 s after the kill */
    struct tp_proc plugin;
};

static pid_t spawn_csifs(struct round *r, const char *tag)
{
    char logp[1200];
    snprintf(logp, sizeof(logp), "%s/csifs-%s.log", r->dir, tag);
    return mw_spawn_csifs(r->mnt, r->state, logp);
}

/* Wait until mnt is a fuse mount answering statfs (the stale mount of the
 * killed csifs answers ENOTCONN, a wedged one never), while pid runs; its
 * connection id. */
static int serving(struct round *r, pid_t pid, int64_t ms)
{
    int64_t end = tu_now_ms() + ms;
    while (tu_now_ms() < end) {
        int st, c = mw_conn(r->mnt);
        if (waitpid(pid, &st, WNOHANG) == pid)
            return -ECHILD;
        if (c >= 0 && mw_child(mw_probe_fuse, r->mnt, end - tu_now_ms()) == 0)
            return c;
        tu_sleep_ms(10);
    }
    return -ETIMEDOUT;
}

static int setup(void *arg)
{
    struct round *r = arg;
    char p[1200];
    for (int t = 0; t < 2; t++) {
        snprintf(p, sizeof(p), "%s/%s", r->mnt, cr_plugin_path(0, t, false));
        if (mkdir(p, 0755) != 0)
            return 1;
    }
    return 0;
}

/* CRASH_TAMPER=1: one change behind the writers' backs, which the check
 * must report (shows that it can fail). */
static int tamper(void *arg)
{
    struct round *r = arg;
    char p[1200];
    snprintf(p, sizeof(p), "%s/%s", r->mnt, cr_slot_path(0, CR_K));
    return mkdir(p, 0755) == 0 || (errno == EEXIST && rmdir(p) == 0) ? 0 : 1;
}

static int check(void *arg)
{
    return cr_check(arg);
}

/* The largest seq of the events lines in path (0 if none). */
static unsigned long long max_seq(const char *path)
{
    FILE *f = fopen(path, "re");
    char line[4096];
    unsigned long long s, max = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "%llu ", &s) == 1 && s > max)
            max = s;
    if (f)
        fclose(f);
    return max;
}

/* `cat events` of the first csifs into <dir>/events.log until it dies. */
static int follow_events(void *arg)
{
    struct round *r = arg;
    char src[1200], dst[1200], buf[65536];
    snprintf(src, sizeof(src), "%s/events", r->mnt);
    snprintf(dst, sizeof(dst), "%s/events.log", r->dir);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (in < 0 || out < 0)
        return 1;
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n)
            return 1;
    return 0;
}

/* DESIGN 4: seq never goes back across restarts. One mutation on the
 * restarted csifs: its event's seq must exceed every seq seen before. */
static int seq_check(void *arg)
{
    struct round *r = arg;
    char p[1200], log[1200], line[4096];
    snprintf(log, sizeof(log), "%s/events.log", r->dir);
    unsigned long long before = max_seq(log), s;
    snprintf(p, sizeof(p), "%s/csi-node/seq-check", r->mnt);
    if (mkdir(p, 0755) != 0)
        return 1;
    snprintf(p, sizeof(p), "%s/events", r->mnt);
    FILE *f = fopen(p, "re");
    int fd = f ? fileno(f) : -1;
    if (fd < 0 || fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
        return 1;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, " registered csi-node/seq-check") && sscanf(line, "%llu ", &s) == 1) {
            if (s > before)
                return 0;
            fprintf(stderr, "    check: seq %llu after a restart, %llu was seen before\n", s,
                    before);
            return 1;
        }
    fprintf(stderr, "    check: no event for the mkdir after the restart\n");
    return 1;
}

static void tail_log(struct round *r, const char *tag)
{
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "tail -n 5 '%s/csifs-%s.log' 2>/dev/null | sed 's/^/    %s: /' >&2",
             r->dir, tag, tag);
    if (system(cmd) != 0)
        fprintf(stderr, "    (no %s log)\n", tag);
}

/* Name, state and the top of the kernel stack of each thread of pid (read
 * from /proc: never blocks), for the report of a wedge. */
void cr_show_threads(pid_t pid)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "for t in /proc/%d/task/*; do printf '    thread %%s (%%s): %%s in %%s\\n' \"${t##*/}\" "
             "\"$(cat $t/comm)\" \"$(sed -n 's/^State:[[:space:]]*//p' $t/status)\" "
             "\"$(sed -n '1,3s/^\\[<0>\\] //p' $t/stack | cut -d+ -f1 | paste -sd' ' -)\"; "
             "done >&2 2>/dev/null", (int)pid);
    if (system(cmd) != 0)
        fprintf(stderr, "    (threads of %d not readable)\n", (int)pid);
}

static void stop_pid(pid_t *pid, int sig)
{
    if (*pid <= 0)
        return;
    kill(*pid, sig);
    if (mw_wait(*pid, 5000) == -ETIMEDOUT) {
        kill(*pid, SIGKILL);
        if (mw_wait(*pid, 5000) == -ETIMEDOUT)
            return;                 /* stuck in the kernel: try again after the abort */
    }
    *pid = 0;
}

/* Leave nothing of this round: our processes by pid, our mount only. */
static void cleanup(struct round *r, bool *stuck)
{
    if (!r->mnt) {
        free(r->dir);
        return;
    }
    for (int w = 0; w < r->env.writers; w++)
        if (r->writer[w] > 0)
            kill(r->writer[w], SIGKILL);
    if (r->events > 0)
        kill(r->events, SIGKILL);
    if (r->old > 0 && mw_wait(r->old, 100) == -ETIMEDOUT) {
        *stuck = true;              /* the killed csifs is still not reaped */
        if (r->conn >= 0)
            mw_abort(r->conn);      /* the connection of our own first mount */
        stop_pid(&r->old, SIGKILL);
    }
    r->old = 0;
    stop_pid(&r->csifs, SIGTERM);
    tp_kill_all();
    mw_unmount_all(r->mnt);
    for (int w = 0; w < r->env.writers; w++)
        stop_pid(&r->writer[w], SIGKILL);
    stop_pid(&r->csifs, SIGKILL);
    stop_pid(&r->events, SIGKILL);
    if (mw_reap_stuck(5000) > 0)
        fprintf(stderr, "    children still stuck after the abort\n");
    tu_rmrf(r->dir);
    free(r->dir);
    free(r->mnt);
    free(r->state);
    free(r->sock);
}

static int round_run(struct round *r, int nw, uint64_t seed, const char **why)
{
    unsigned rng = (unsigned)seed;
    if (!(r->dir = tu_tmpdir("crash")) || asprintf(&r->mnt, "%s/mnt", r->dir) < 0 ||
        asprintf(&r->state, "%s/state", r->dir) < 0 || asprintf(&r->sock, "%s/p.sock", r->dir) < 0 ||
        mkdir(r->mnt, 0755) != 0)
        return *why = "temp dir", -1;
    chmod(r->dir, 0755);
    char s0[1200], s1[1200];
    snprintf(s0, sizeof(s0), "%s.0", r->sock);
    snprintf(s1, sizeof(s1), "%s.1", r->sock);
    r->env = (struct cr_env){ .mnt = r->mnt, .socks = { s0, s1 }, .logdir = r->dir, .writers = nw };
    if (tp_start(&r->plugin, "--socket", r->sock, "--sockets", "2", NULL) != 0)
        return *why = "test plugin did not start", -1;
    r->old = spawn_csifs(r, "first");
    if (r->old < 0 || (r->conn = serving(r, r->old, tu_ms(10000))) < 0)
        return *why = "first csifs did not serve", -1;
    if (mw_child(setup, r, tu_ms(10000)) != 0)
        return *why = "setup mkdir failed", -1;
    fflush(NULL);
    if ((r->events = fork()) == 0)
        _exit(follow_events(r));
    int64_t run_ms = 20000;
    for (int w = 0; w < nw; w++) {
        fflush(NULL);
        if ((r->writer[w] = fork()) == 0)
            _exit(cr_writer(&r->env, w, seed, run_ms));
    }
    tu_sleep_ms(20 + rand_r(&rng) % 600);
    kill(r->old, SIGKILL);
    int64_t end = tu_now_ms() + 3000;
    for (int w = 0; w < nw; w++) {
        int st = mw_wait(r->writer[w], end - tu_now_ms());
        if (st == -ETIMEDOUT) {
            kill(r->writer[w], SIGKILL);    /* its last op counts as in flight */
            st = mw_wait(r->writer[w], 200);
        }
        if (st >= 0)
            r->writer[w] = 0;
        if (st >= 0 && (!WIFEXITED(st) || WEXITSTATUS(st) != 0) && !WIFSIGNALED(st))
            return *why = "a writer failed", -1;
    }
    tp_stop(&r->plugin);
    if (mw_wait(r->old, 1000) >= 0)
        r->old = 0;
    r->wedged = r->old != 0;
    r->csifs = spawn_csifs(r, "restart");
    int c = r->csifs < 0 ? -1 : serving(r, r->csifs, SERVE_MS);
    if (c < 0) {
        if (r->old)
            cr_show_threads(r->old);
        *why = r->old ? "restart did not serve within 5 s (wedge: the killed csifs is not reaped)"
                      : "restart did not serve within 5 s";
        return -1;
    }
    if (getenv("CRASH_TAMPER") && mw_child(tamper, r, tu_ms(10000)) != 0)
        return *why = "tamper failed", -1;
    int rc = mw_child(check, &r->env, tu_ms(30000));
    if (rc != 0)
        return *why = rc == -ETIMEDOUT ? "check timed out" : "restored tree differs", -1;
    if (mw_wait(r->events, 2000) >= 0)
        r->events = 0;                  /* it ends with the first csifs */
    if (mw_child(seq_check, r, tu_ms(10000)) != 0)
        return *why = "events seq went back across the restart", -1;
    return 0;
}

static bool env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 50;
    const char *s = getenv("CRASH_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
    int passed = 0, failed = 0, wedged = 0, recovered = 0;
    signal(SIGPIPE, SIG_IGN);
    if (env_on("TAKEOVER") || env_on("UPGRADE"))
        return cr_takeover_main(rounds, seed, !env_on("TAKEOVER"));
    printf("crash-test: %d rounds, CRASH_SEED=%llu\n", rounds, (unsigned long long)seed);
    for (int i = 0; i < rounds; i++) {
        int nw = i < rounds / 3 ? 1 : i < 2 * rounds / 3 ? 4 : 8;
        struct round r = { .conn = -1 };
        const char *why = NULL;
        bool stuck = false;
        int64_t t0 = tu_now_ms();
        int rc = round_run(&r, nw, seed + (uint64_t)i, &why);
        if (rc != 0) {
            fprintf(stderr, "round %d (%d writers, seed %llu): FAILED: %s\n", i + 1, nw,
                    (unsigned long long)(seed + (uint64_t)i), why);
            tail_log(&r, "first");
            tail_log(&r, "restart");
        }
        cleanup(&r, &stuck);
        if (stuck && rc == 0) {
            rc = -1;
            fprintf(stderr, "round %d: FAILED: the killed csifs was never reaped\n", i + 1);
        }
        wedged += stuck;
        recovered += r.wedged && rc == 0;
        rc == 0 ? passed++ : failed++;
        printf("round %d/%d: %d writers, %s, %lld ms\n", i + 1, rounds, nw, rc ? "FAILED" : "ok",
               (long long)(tu_now_ms() - t0));
        fflush(stdout);
    }
    if (recovered)
        printf("rounds whose killed csifs was wedged at the restart and the restart recovered: %d\n",
               recovered);
    if (wedged)
        printf("rounds that left the killed csifs unreapable until its connection was aborted: %d\n",
               wedged);
    printf("crash rounds: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
