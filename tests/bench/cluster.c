/* The cluster rows (DESIGN 15), against a real 3-member etcd 3.4 on
 * loopback (tests/lib/etcdrun: members started and killed by pid, data on
 * /dev/shm), csifs "hosts" as separate processes (cluster_ttl=2s):
 *
 * cluster_propagate  n1 (heartbeat=100ms) has csi-node/flip/a, served by a
 *                    csi-test-plugin --ready-toggle; each SIGHUP turns its
 *                    Probe answer over, so flip/a goes unhealthy, healthy,
 *                    ... From the time stamp of n1's `health` event (ms) to
 *                    the moment n3's cluster/csi-node/flip/n1/health (the
 *                    view, read every ms) shows the new state. Changes are
 *                    >= 200 ms apart. One sample: the p99 of every change.
 * cluster_writes     over the same changes, from member 0's /metrics, after
 *                    minus before, / changes: etcd_server_proposals_committed_total
 *                    (every write request goes through raft: a Txn is one
 *                    proposal, whatever it holds). The note adds the store's
 *                    revision (one per Txn that changed something) and the
 *                    mvcc counters; etcd_mvcc_txn_total counts only
 *                    transactions of more than one operation (a compare and
 *                    one put leaves it at 0), so it cannot be the figure.
 * cluster_isolation  register_serial's cycles (register.c) on n1 (durable,
 *                    publishing every mutation) with all three members
 *                    SIGSTOPped, against the same with etcd running; in
 *                    8 blocks ABBAABBA; SIGCONT always follows. One sample
 *                    per pair of neighbouring blocks (the stopped one and
 *                    the running one beside it): the row is the median of
 *                    4 pair ratios a repetition, so that a burst of the
 *                    shared machine's load weighs on one pair, not on a
 *                    whole repetition; the note keeps the ratio of the
 *                    sums.
 * cluster_view_scale cluster_scale.c (its own hosts on the same etcd). */
#include "tests/bench/bench.h"
#include "tests/lib/etcdrun.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPACING_MS  200
#define MAX_CHANGES 400

static struct te E;
static struct te_host H1, H3;

void bench_cluster_kill(void)
{
    for (int i = 0; i < E.n; i++)
        if (E.pid[i] > 0) {
            kill(E.pid[i], SIGCONT);
            kill(E.pid[i], SIGKILL);
        }
}

static void etcd_signal_all(int sig)
{
    for (int i = 0; i < E.n; i++)
        te_signal(&E, i, sig);
}

static double real_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Wait until h's <mnt>/<rel> starts with want: true when it did. */
static bool wait_reads(struct te_host *h, const char *rel, const char *want, double timeout_s)
{
    char buf[4096];
    size_t n = strlen(want);
    for (double end = now_s() + timeout_s; now_s() < end; sleep_s(0.001))
        if (readf(&h->t, buf, sizeof(buf), "%s", rel) >= (ssize_t)n && !strncmp(buf, want, n))
            return true;
    return false;
}

/* Read what fd holds now, and forget it. */
static void drain(int fd)
{
    char buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

static const char *const metric_names[] = {
    "etcd_server_proposals_committed_total", "etcd_debugging_mvcc_current_revision",
    "etcd_mvcc_put_total", "etcd_mvcc_txn_total",
};
#define NMETRICS 4

static void metrics(double v[NMETRICS])
{
    for (int i = 0; i < NMETRICS; i++)
        v[i] = te_metric(&E, 0, metric_names[i]);
}

/* One change: SIGHUP, then ms from n1's health event to n3's view showing
 * it, or NAN. *at: the event's time stamp. */
static double change(struct tp_proc *plug, int evfd, bool healthy, int64_t *at)
{
    const char *state = healthy ? "healthy" : "unhealthy";
    char want[32], needle[96];
    snprintf(want, sizeof(want), "%s\n", state);
    snprintf(needle, sizeof(needle), " health csi-node/flip/a state=%s ", state);
    kill(plug->pid, SIGHUP);
    bool seen = wait_reads(&H3, "cluster/csi-node/flip/n1/health", want, 10);
    double seen_ms = real_ms();
    *at = event_time(evfd, needle, 5000);
    if (!seen || *at < 0) {
        say("cluster_propagate: %s: %s", state, seen ? "no event on n1" : "not in n3's view");
        return NAN;
    }
    return seen_ms - (double)*at;
}

static void propagate(void)
{
    int n = cfg.quick ? 20 : 120, got = 0, evfd = -1;
    double v[MAX_CHANGES];
    char sock[400];
    struct tp_proc plug = { 0 };
    snprintf(sock, sizeof(sock), "%s/flip.sock", E.dir);
    if (tp_start(&plug, "--socket", sock, "--type", "node", "--ready-toggle", NULL) < 0 ||
        mkdirf(&H1.t, "csi-node/flip") < 0 || mkdirf(&H1.t, "csi-node/flip/a") < 0 ||
        symlinkf(&H1.t, sock, "csi-node/flip/a/socket") < 0 ||
        !wait_reads(&H3, "cluster/csi-node/flip/n1/health", "healthy\n", 10) ||
        (evfd = open(tf_path(&H1.t, "events"), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
        say("cluster_propagate: cannot set up (%s)", strerror(errno));
        goto out;
    }
    say("cluster: %d health changes, >= %d ms apart", n, SPACING_MS);
    sleep_s(0.3);
    drain(evfd);
    double m0[NMETRICS], m1[NMETRICS];
    metrics(m0);
    for (int k = 0; k < n; k++) {
        int64_t at;
        double ms = change(&plug, evfd, k % 2 == 1, &at);
        if (isnan(ms))
            break;
        v[got++] = ms;
        double wait = (double)at + SPACING_MS - real_ms();
        if (wait > 0)
            sleep_s(wait / 1e3);
    }
    sleep_s(0.3);                   /* a Txn at the end of a coalescing window */
    metrics(m1);
    if (got < n)
        goto out;
    double med = bench_median(v, (size_t)got);
    double max = v[got - 1];        /* sorted */
    bench_sample(R_CLUSTER_PROPAGATE, bench_pct(v, (size_t)got, 99), NAN, NAN);
    bench_note(R_CLUSTER_PROPAGATE, "p99 of %d changes (one sample); median %.1f ms, max %.1f ms",
               got, med, max);
    double d[NMETRICS];
    for (int i = 0; i < NMETRICS; i++)
        d[i] = m0[i] < 0 || m1[i] < 0 ? NAN : m1[i] - m0[i];
    if (!isnan(d[0])) {
        bench_sample(R_CLUSTER_WRITES, d[0] / n, NAN, NAN);
        bench_note(R_CLUSTER_WRITES, "member 0, for %d changes: %.0f proposals committed, "
                   "revision +%.0f, etcd_mvcc_put_total +%.0f, etcd_mvcc_txn_total +%.0f", n, d[0],
                   d[1], d[2], d[3]);
    }
out:
    if (evfd >= 0)
        close(evfd);
    if (plug.pid > 0)
        tp_stop(&plug);
}

/* n1 connected and its serial plugin published as it is (instances 0). */
static bool settled(void)
{
    char buf[1 << 16];
    for (double end = now_s() + 20; now_s() < end; sleep_s(0.05))
        if (readf(&H1.t, buf, sizeof(buf), "metrics") > 0 && strstr(buf, "\ncsifs_cluster_up 1\n") &&
            wait_reads(&H3, "cluster/csi-node/serial/n1/instances", "0\n", 0.01)) {
            sleep_s(0.2);
            return true;
        }
    say("cluster_isolation: n1 did not settle");
    return false;
}

#define ISO_BLOCKS 8

/* n1's CPU and run-queue wait, summed per side ([0] running, [1] stopped). */
static double iso_cpu[2], iso_wait[2];

/* One block of a repetition's cycles on n1: seconds, or NAN. */
static double serial_on_n1(bool stopped, const char *target)
{
    int n = cfg.reg_cycles / (ISO_BLOCKS / 2);
    if (!settled())
        return NAN;
    if (stopped)
        etcd_signal_all(SIGSTOP);
    double c1 = proc_cpu_s(H1.t.pid), w1 = proc_runq_wait_s(H1.t.pid);
    double v = register_serial_on(&H1.t, "serial", target, n);
    c1 = proc_cpu_s(H1.t.pid) - c1;
    w1 = proc_runq_wait_s(H1.t.pid) - w1;
    iso_cpu[stopped] += c1;
    iso_wait[stopped] += w1;
    say("  etcd %s: %.0f cycles/s, n1 cpu %.2f s, waiting for a CPU %.2f s",
        stopped ? "stopped" : "running", v, c1, w1);
    if (stopped)
        etcd_signal_all(SIGCONT);
    return n / v;
}

/* Per repetition cfg.reg_cycles with etcd running and as many stopped, in
 * 8 blocks: running, stopped, stopped, running, running, ... (the other
 * way round on odd repetitions), so that the load of a shared machine,
 * which comes and goes over seconds, weighs on both sides. Blocks 2k and
 * 2k+1 are a pair (one of each side, back to back): one sample each. */
static void isolation(void)
{
    char target[400];
    snprintf(target, sizeof(target), "%s/nothing-listens-here.sock", E.dir);
    if (mkdirf(&H1.t, "csi-node/serial") < 0) {
        say("cluster_isolation: mkdir: %s", strerror(errno));
        return;
    }
    say("cluster: register_serial on n1, %d cycles etcd stopped and as many running",
        cfg.reg_cycles);
    int n = cfg.reg_cycles / (ISO_BLOCKS / 2);
    double all[2] = { 0, 0 };            /* seconds: [0] running, [1] stopped */
    for (int rep = 0; rep < cfg.reps; rep++)
        for (int k = 0; k < ISO_BLOCKS; k += 2) {
            double s[2];
            for (int j = k; j < k + 2; j++) {
                bool stopped = (j % 4 == 1 || j % 4 == 2) != (rep % 2 == 1);
                s[stopped] = serial_on_n1(stopped, target);
            }
            all[0] += s[0];
            all[1] += s[1];
            bench_sample(R_CLUSTER_ISOLATION, n / s[1], NAN, n / s[0]);
        }
    bench_note(R_CLUSTER_ISOLATION, "the ratio of the sums of all blocks %.3f; n1 over all blocks, "
               "stopped vs running: cpu %.1f vs %.1f s, runnable but waiting for a CPU %.1f vs "
               "%.1f s", all[0] / all[1], iso_cpu[1], iso_cpu[0], iso_wait[1], iso_wait[0]);
}

void bench_cluster(void)
{
    if (!bench_wants(R_CLUSTER_PROPAGATE) && !bench_wants(R_CLUSTER_WRITES) &&
        !bench_wants(R_CLUSTER_ISOLATION) && !bench_wants(R_CLUSTER_VIEW_SCALE))
        return;
    say("cluster: a 3-member etcd");
    int rc = te_start(&E, 3, false);
    if (rc < 0) {
        say("cluster: etcd did not start: %s", strerror(-rc));
        goto out;
    }
    if (bench_wants(R_CLUSTER_PROPAGATE) || bench_wants(R_CLUSTER_WRITES) ||
        bench_wants(R_CLUSTER_ISOLATION)) {
        if ((rc = te_host_spawn(&H1, &E, "n1", "heartbeat=100ms")) < 0 ||
            (rc = te_host_spawn(&H3, &E, "n3", "nosync,cluster_view")) < 0) {
            say("cluster: cannot start the hosts: %s", strerror(-rc));
            goto out;
        }
        if (bench_wants(R_CLUSTER_PROPAGATE) || bench_wants(R_CLUSTER_WRITES))
            propagate();
        if (bench_wants(R_CLUSTER_ISOLATION))
            isolation();
        tf_stop(&H1.t);
        tf_stop(&H3.t);
    }
    if (bench_wants(R_CLUSTER_VIEW_SCALE))
        cluster_scale(&E);
out:
    tf_stop(&H1.t);
    tf_stop(&H3.t);
    etcd_signal_all(SIGCONT);
    te_stop(&E);
}
