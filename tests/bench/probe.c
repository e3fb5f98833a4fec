/* The prober rows: memory_live, probe_fanout, probe_spread, hung_neighbour
 * (one csifs per repetition with cfg.live healthy instances, heartbeat=1s),
 * death_detect (100 instances at heartbeat=30s, their plugin SIGKILLed) and
 * probe_call.
 *
 * One csi-test-plugin process serves the cfg.live sockets live.sock.<i>,
 * another cfg.hung sockets that never answer (--hang). Instance
 * csi-node/l<i>/a0 dials live.sock.<i>; csi-node/h<j>/a0 dials hung.sock.<j>.
 * Probe latencies come from each instance's `history` file (the latency
 * the prober measured, per round); CPU from /proc/<csifs>/stat. */
#include "tests/bench/bench.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char dir[4096], live[4200], hung[4200];

/* Register csi-node/<prefix><i>/a0 -> <base>.<i> for i < n. */
static int attach(struct tf *t, const char *prefix, const char *base, int n)
{
    char sock[4300];
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        snprintf(sock, sizeof(sock), "%s.%d", base, i);
        if ((rc = mkdirf(t, "csi-node/%s%d", prefix, i)) == 0 &&
            (rc = mkdirf(t, "csi-node/%s%d/a0", prefix, i)) == 0)
            rc = symlinkf(t, sock, "csi-node/%s%d/a0/socket", prefix, i);
    }
    if (rc < 0)
        say("attach %s: %s", prefix, strerror(-rc));
    return rc;
}

static void detach(struct tf *t, const char *prefix, int n)
{
    for (int i = 0; i < n; i++) {
        char rel[64];
        snprintf(rel, sizeof(rel), "csi-node/%s%d/a0", prefix, i);
        rmdir(tf_path(t, rel));
        snprintf(rel, sizeof(rel), "csi-node/%s%d", prefix, i);
        rmdir(tf_path(t, rel));
    }
}

/* "2026-01-02T03:04:05.678Z" -> ms since the epoch, or -1. */
static int64_t parse_utc_ms(const char *s)
{
    struct tm tm = { 0 };
    int ms;
    if (sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

struct lat {
    double *v;                 /* ms */
    size_t n, cap;
    int failed;                /* probes in the window that were not ok */
    int phase[1000];           /* probes made in each ms of the second */
};

/* The share (%) of the probes made in the busiest 100 ms of the second
 * (10 when the heartbeats are spread evenly). */
static double busiest_100ms(const struct lat *l)
{
    int run = 0, best = 0;
    for (int k = 0; k < 1100; k++) {        /* round the end of the second */
        run += l->phase[k % 1000] - (k >= 100 ? l->phase[(k - 100) % 1000] : 0);
        best = run > best ? run : best;
    }
    return l->n ? 100.0 * best / (double)l->n : 0;
}

/* Add the probes of csi-node/<prefix><i>/a0/history made in [from, to]. */
static void collect(struct tf *t, const char *prefix, int n, int64_t from, int64_t to,
                    struct lat *l)
{
    char buf[8192];
    for (int i = 0; i < n; i++) {
        if (readf(t, buf, sizeof(buf), "csi-node/%s%d/a0/history", prefix, i) < 0)
            continue;
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
            char when[64], outcome[32];
            double ms;
            if (sscanf(line, "%63s %lfms %31s", when, &ms, outcome) != 3)
                continue;
            int64_t at = parse_utc_ms(when);
            if (at < from || at > to)
                continue;
            if (strcmp(outcome, "ok") != 0) {
                l->failed++;
                continue;
            }
            if (l->n == l->cap && !(l->v = realloc(l->v, (l->cap = l->cap * 2 + 1024) *
                                                             sizeof(double))))
                return;
            l->v[l->n++] = ms;
            l->phase[at % 1000]++;
        }
    }
}

/* Watch csifs for secs: its CPU (% of one core) and the p99 of the live
 * instances' probes meanwhile (ms; `history` holds the last 16 of each).
 * bare, if not NULL, is a `--child bare fanout ... go` waiting to start. */
static void window(struct tf *t, int secs, double *cpu, double *p99, double *busiest,
                   const char *what, struct run *bare)
{
    double b0 = 0, st0 = 0, b1 = 0, st1 = 0;
    (void)sys_cpu_steal(&b0, &st0);
    double c0 = proc_cpu_s(t->pid), s0 = now_s();
    int64_t w0 = wall_ms();
    if (bare && write(bare->in, "g", 1) != 1)
        say("  %s: cannot start the bare gRPC core client: %s", what, strerror(errno));
    sleep_s(secs);
    double c1 = proc_cpu_s(t->pid), s1 = now_s();
    int64_t w1 = wall_ms();
    (void)sys_cpu_steal(&b1, &st1);
    static struct lat l;
    memset(&l, 0, sizeof(l));
    collect(t, "l", cfg.live, w0, w1, &l);
    *cpu = (c1 - c0) / (s1 - s0) * 100;
    *p99 = bench_pct(l.v, l.n, 99);
    *busiest = busiest_100ms(&l);
    /* the hypervisor's share of the machine's CPU time meanwhile: what
     * moves the tails from one window to the next (docs/benchmarks.md) */
    double machine_s = (s1 - s0) * (double)sysconf(_SC_NPROCESSORS_ONLN);
    double steal = 100 * (st1 - st0) / machine_s;
    say("  %s: %zu probes, %d not ok, p50 %.3f ms, p99 %.3f ms, max %.3f ms, cpu %.1f%%, "
        "%.0f%% of them in the busiest 100 ms of the second; machine busy %.0f%%, steal %.1f%%",
        what, l.n, l.failed, bench_pct(l.v, l.n, 50), *p99, bench_pct(l.v, l.n, 100), *cpu,
        *busiest, 100 * (b1 - b0) / machine_s, steal);
    if (!strcmp(what, "fanout"))
        bench_note(R_PROBE_FANOUT, "p50 %.2fms, steal %.1f%%", bench_pct(l.v, l.n, 50), steal);
    free(l.v);
}

/* Start bare gRPC core at the same rate (`--child bare fanout ... go`):
 * it dials its channels, prints a newline, and waits for window()'s byte. */
static int bare_start(struct run *r, const char *const *argv)
{
    int rc = run_start(argv, r);
    char nl;
    if (rc == 0 && read(r->out, &nl, 1) != 1) {
        double v;
        (void)run_finish(r, &v, 1);
        rc = -EIO;
    }
    return rc;
}

#define FANOUT_MAX_S 15         /* REG_HISTORY - 1 */

static void fanout_rep(int rep)
{
    struct tf t = { 0 };
    if (daemon_start(&t, "bench-probe", "nosync,heartbeat=1s") < 0)
        return;
    sleep_s(0.5);
    long rss0 = proc_rss_kib(t.pid);
    double t0 = now_s();
    if (attach(&t, "l", live, cfg.live) < 0 ||
        !wait_files(&t, "csi-node/l%d/a0/health", cfg.live, "healthy", 120)) {
        say("probe: %d instances did not all become healthy", cfg.live);
        daemon_stop(&t);
        return;
    }
    say("  %d instances healthy in %.1f s", cfg.live, now_s() - t0);
    sleep_s(1);
    long rss1 = proc_rss_kib(t.pid);
    char n[16];
    snprintf(n, sizeof(n), "%d", cfg.live);
    const char *bare[] = { self_exe(), "--child", "bare", "channels", live, n, NULL };
    double per_chan = run_value(bare);
    bench_sample(R_MEMORY_LIVE, (double)(rss1 - rss0) / cfg.live, NAN, per_chan);

    /* `history` keeps 16 probes per instance: a window of at most 15 s sees
     * all of its probes. Bare gRPC core probes the same sockets at the same
     * rate in the same window: both see the same machine (a window of its
     * own, before or after, differs by the hypervisor's steal of the
     * moment: docs/benchmarks.md) */
    int secs_w = cfg.window_s < FANOUT_MAX_S ? cfg.window_s : FANOUT_MAX_S;
    char secs[16];
    snprintf(secs, sizeof(secs), "%d", secs_w);
    const char *bare_fan[] = { self_exe(), "--child", "bare", "fanout", live, n, secs, "go", NULL };
    double cpu = NAN, p99 = NAN, busy = NAN, hcpu = NAN, hp99 = NAN, hbusy;
    double got[2] = { NAN, NAN }, hgot[2] = { NAN, NAN };
    /* ... and in the hung window too, so that hung_neighbour compares two
     * windows under the same load */
    for (int k = 0; k < 2; k++) {
        bool fan = (k + rep) % 2 == 0;
        double v[2] = { NAN, NAN };
        struct run r;
        if ((!fan && attach(&t, "h", hung, cfg.hung) < 0) || bare_start(&r, bare_fan) < 0) {
            detach(&t, "h", cfg.hung);
            continue;
        }
        if (fan)
            window(&t, secs_w, &cpu, &p99, &busy, "fanout", &r);
        else
            window(&t, secs_w, &hcpu, &hp99, &hbusy, "hung", &r);
        if (run_finish(&r, v, 2) == 2)
            memcpy(fan ? got : hgot, v, sizeof(v));
        if (!fan) {
            detach(&t, "h", cfg.hung);
            sleep_s(0.5);
        }
    }
    bench_sample2(R_PROBE_FANOUT, cpu, p99, got[1], got[0]);
    bench_sample(R_PROBE_SPREAD, busy, NAN, NAN);
    /* two windows: each csifs p99 against the machine's floor of the
     * moment, bare gRPC core's p99 in the same window */
    bench_sample(R_HUNG_NEIGHBOUR, hp99 / hgot[0], NAN, p99 / got[0]);
    bench_note(R_HUNG_NEIGHBOUR, "p99 %.2fms (bare %.2fms), without %.2fms (bare %.2fms); "
               "csifs CPU %.1f%%", hp99, hgot[0], p99, got[0], hcpu);
    daemon_stop(&t);
}

/* One live instance probed every cfg.call_every_ms; the bare call as often. */
static void call_reps(void)
{
    struct tf t = { 0 };
    char opts[64], sock[4300], count[16], every[16];
    snprintf(opts, sizeof(opts), "nosync,heartbeat=%dms", cfg.call_every_ms);
    if (daemon_start(&t, "bench-call", opts) < 0)
        return;
    snprintf(sock, sizeof(sock), "%s.0", live);
    snprintf(count, sizeof(count), "%d", cfg.call_samples);
    snprintf(every, sizeof(every), "%d", cfg.call_every_ms);
    const char *bare[] = { self_exe(), "--child", "bare", "probe", sock, count, every, NULL };
    if (attach(&t, "l", live, 1) < 0 || !wait_files(&t, "csi-node/l%d/a0/health", 1, "healthy", 30)) {
        daemon_stop(&t);
        return;
    }
    for (int rep = 0; rep < cfg.reps; rep++) {
        double base = NAN, mine = NAN;
        for (int k = 0; k < 2; k++) {
            if ((k + rep) % 2) {
                base = run_value(bare);
                continue;
            }
            int64_t w0 = wall_ms();
            sleep_s((cfg.call_samples + 0.5) * cfg.call_every_ms / 1000.0);
            struct lat l = { 0 };
            collect(&t, "l", 1, w0, wall_ms(), &l);
            mine = bench_median(l.v, l.n) * 1000;
            free(l.v);
        }
        bench_sample(R_PROBE_CALL, mine, NAN, base);
    }
    daemon_stop(&t);
}

#define DEATH_N 100

static bool none_healthy(struct tf *t)
{
    char buf[64];
    for (int i = 0; i < DEATH_N; i++)
        if (readf(t, buf, sizeof(buf), "csi-node/d%d/a0/health", i) < 0 ||
            strcmp(buf, "unhealthy\n") != 0)
            return false;
    return true;
}

/* 100 instances at the default heartbeat, one plugin process behind them:
 * SIGKILL it, and time until every instance reads unhealthy. */
static void death_rep(void)
{
    struct tf t = { 0 };
    struct tp_proc pd;
    char base[4300], n[16];
    snprintf(base, sizeof(base), "%s/death.sock", dir);
    snprintf(n, sizeof(n), "%d", DEATH_N);
    if (tp_start(&pd, "--socket", base, "--sockets", n, "--type", "node", NULL) < 0) {
        say("death_detect: cannot start the plugin");
        return;
    }
    if (daemon_start(&t, "bench-death", "nosync,heartbeat=30s") < 0) {
        tp_kill(&pd);
        return;
    }
    if (attach(&t, "d", base, DEATH_N) < 0 ||
        !wait_files(&t, "csi-node/d%d/a0/health", DEATH_N, "healthy", 60)) {
        say("death_detect: %d instances did not all become healthy", DEATH_N);
    } else {
        sleep_s(1);
        double t0 = now_s();
        tp_kill(&pd);
        while (!none_healthy(&t) && now_s() - t0 < 60)
            sleep_s(0.005);
        bench_sample(R_DEATH_DETECT, (now_s() - t0) * 1000, NAN, NAN);
    }
    tp_kill(&pd);
    daemon_stop(&t);
}

void bench_probe(void)
{
    bool group = bench_wants(R_PROBE_FANOUT) || bench_wants(R_HUNG_NEIGHBOUR) ||
                 bench_wants(R_MEMORY_LIVE) || bench_wants(R_PROBE_SPREAD);
    if (!group && !bench_wants(R_PROBE_CALL) && !bench_wants(R_DEATH_DETECT))
        return;
    struct tp_proc lp, hp;
    char *d = tu_tmpdir("bench-plugins"), n[16], h[16];
    snprintf(dir, sizeof(dir), "%s", d ? d : "/tmp");
    free(d);
    snprintf(live, sizeof(live), "%s/live.sock", dir);
    snprintf(hung, sizeof(hung), "%s/hung.sock", dir);
    snprintf(n, sizeof(n), "%d", cfg.live);
    snprintf(h, sizeof(h), "%d", cfg.hung);
    say("probe: %d live plugins, %d hung, %d s windows", cfg.live, cfg.hung, cfg.window_s);
    if (tp_start(&lp, "--socket", live, "--sockets", n, "--type", "node", NULL) < 0 ||
        tp_start(&hp, "--socket", hung, "--sockets", h, "--type", "node", "--hang", NULL) < 0) {
        say("probe: cannot start the test plugins");
        tp_kill_all();
        return;
    }
    for (int rep = 0; group && rep < cfg.reps; rep++)
        fanout_rep(rep);
    if (bench_wants(R_PROBE_CALL))
        call_reps();
    for (int rep = 0; bench_wants(R_DEATH_DETECT) && rep < cfg.reps; rep++)
        death_rep();
    tp_stop(&lp);
    tp_stop(&hp);
    tu_rmrf(dir);
}
