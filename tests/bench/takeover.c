/* The restart-without-unmount rows (DESIGN 13) on the tree (cfg.plugins x
 * cfg.insts, durable), csifs started by the test fd store
 * (tests/lib/holder.h) as systemd would:
 *   takeover  SIGKILL of csifs; the holder reaps it and starts the next,
 *             which takes the connection over: ms from the kill until a
 *             request the successor answers returns to its caller;
 *   upgrade   SIGUSR2 (re-execution in place): the longest single stat()
 *             of a stat loop across it.
 * The request, and each stat of the loop, is a stat() of a name that is
 * not there: csifs never lets the kernel cache a negative entry, so each
 * one is a LOOKUP csifs itself answers (ENOENT), never the kernel's cache. */
#include "tests/bench/bench.h"
#include "tests/lib/holder.h"
#include "tests/lib/mntwatch.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static struct holder h;
static struct tf t;
static unsigned ready;          /* READY=1 the holder has seen */
static char absent[4200];       /* the path stat()ed */
static double reaped[64], readied[64];   /* takeover: ms from the kill, for the note */
static int nsplit;

static pid_t start(const char *opts)
{
    char bin[4200], o[4400], log[4200];
    snprintf(bin, sizeof(bin), "%s/csifs", tu_build_dir());
    snprintf(o, sizeof(o), "state=%s%s%s", t.state, opts ? "," : "", opts ? opts : "");
    snprintf(log, sizeof(log), "%s/csifs.log", t.dir);
    char *argv[] = { bin, "-f", "-o", o, t.mnt, NULL };
    h.log = log;
    pid_t pid = hd_spawn(&h, argv);
    if (pid < 0 || !hd_wait_ready(&h, ++ready, 30000)) {
        say("takeover: csifs -o %s sent no READY=1", o);
        return -1;
    }
    return pid;
}

/* One stat of the absent name: its errno (ENOENT when csifs answered). */
static int stat_absent(void)
{
    struct stat st;
    return stat(absent, &st) == 0 ? 0 : errno;
}

struct first {
    double done;                /* when the request returned */
    int err;
};

static void *first_request(void *arg)
{
    struct first *f = arg;
    f->err = stat_absent();
    f->done = now_s();
    return NULL;
}

/* SIGKILL, reap, start the next (as systemd: only once the old one is
 * reaped); ms until the first request returned, NAN on a failure. */
static double takeover(pid_t *pid)
{
    struct first f = { 0, 0 };
    pthread_t th;
    double t0 = now_s();
    kill(*pid, SIGKILL);
    if (!hd_reap(*pid, 10000)) {
        say("takeover: the killed csifs was not reaped");
        return NAN;
    }
    *pid = 0;
    double t1 = now_s();
    pthread_create(&th, NULL, first_request, &f);   /* queued until the successor serves */
    *pid = start(NULL);
    double t2 = now_s();
    pthread_join(th, NULL);
    if (nsplit < 64)
        reaped[nsplit] = (t1 - t0) * 1000, readied[nsplit++] = (t2 - t0) * 1000;
    if (*pid < 0 || f.err != ENOENT) {
        say("takeover: the first request after the kill got %s", strerror(f.err));
        return NAN;
    }
    return (f.done - t0) * 1000;
}

struct loop {
    volatile bool stop;
    double max_ms;
    int errors, first_err;
    long n;
};

static void *stat_loop(void *arg)
{
    struct loop *l = arg;
    while (!l->stop) {
        double t0 = now_s();
        int e = stat_absent();
        double ms = (now_s() - t0) * 1000;
        if (e != ENOENT && !l->errors++)
            l->first_err = e;
        if (ms > l->max_ms)
            l->max_ms = ms;
        l->n++;
    }
    return NULL;
}

/* SIGUSR2 under a stat loop: its longest stat, NAN on a failure. */
static double upgrade(pid_t pid)
{
    struct loop l = { .stop = false };
    pthread_t th;
    pthread_create(&th, NULL, stat_loop, &l);
    sleep_s(0.2);
    kill(pid, SIGUSR2);
    bool ok = hd_wait_ready(&h, ++ready, 30000);
    sleep_s(0.2);
    l.stop = true;
    pthread_join(th, NULL);
    if (!ok || l.errors) {
        say("upgrade: %s, %d stats failed (%s)", ok ? "READY=1" : "no READY=1", l.errors,
            strerror(l.first_err));
        return NAN;
    }
    return l.max_ms;
}

static int prepare(struct tp_proc *plug)
{
    char sock[4200];
    t.dir = tu_tmpdir("bench-takeover");
    if (!t.dir || asprintf(&t.mnt, "%s/mnt", t.dir) < 0 ||
        asprintf(&t.state, "%s/state", t.dir) < 0 || mkdir(t.mnt, 0755) != 0)
        return -ENOMEM;
    snprintf(sock, sizeof(sock), "%s/plugin.sock", t.dir);
    snprintf(absent, sizeof(absent), "%s/csi-node/p0/not-there", t.mnt);
    int rc = tp_start(plug, "--socket", sock, "--type", "node", NULL);
    if (rc < 0)
        return rc;
    pid_t pid = start("nosync");         /* built fast, then served durable */
    if (pid < 0)
        return -EIO;
    double t0 = now_s();
    rc = tree_build(&t, sock);
    if (rc == 0 && !wait_files(&t, "csi-node/p%d/a0/health", 1, "healthy", 30))
        rc = -ETIMEDOUT;
    say("takeover: tree built in %.1f s, csi-node lists %d plugins", now_s() - t0,
        dir_entries(tf_path(&t, "csi-node")));
    kill(pid, SIGTERM);
    if (!hd_reap(pid, 30000))
        return -ETIMEDOUT;
    return rc;
}

void bench_takeover(void)
{
    if (!bench_wants(R_TAKEOVER) && !bench_wants(R_UPGRADE))
        return;
    struct tp_proc plug;
    ready = 0;
    say("takeover: %d plugins x %d instances, the test fd store", cfg.plugins, cfg.insts);
    int rc = hd_start(&h);
    if (rc == 0 && (rc = prepare(&plug)) < 0)
        say("takeover: set-up failed: %s", strerror(-rc));
    pid_t pid = rc == 0 ? start(NULL) : -1;
    for (int rep = 0; pid > 0 && rep < cfg.reps; rep++) {
        if (bench_wants(R_TAKEOVER)) {
            double ms = takeover(&pid);
            if (!isnan(ms))
                bench_sample(R_TAKEOVER, ms, NAN, NAN);
        }
        if (pid > 0 && bench_wants(R_UPGRADE)) {
            double ms = upgrade(pid);
            if (!isnan(ms))
                bench_sample(R_UPGRADE, ms, NAN, NAN);
        }
    }
    if (nsplit)
        bench_note(R_TAKEOVER, "median: reaped at %.1f ms, READY=1 at %.1f ms",
                   bench_median(reaped, (size_t)nsplit), bench_median(readied, (size_t)nsplit));
    if (pid > 0) {
        kill(pid, SIGTERM);
        hd_reap(pid, 30000);
    }
    if (t.mnt)
        mw_unmount_all(t.mnt);
    tp_stop(&plug);
    hd_stop(&h);
    if (t.dir)
        tu_rmrf(t.dir);
    free(t.dir);
    free(t.mnt);
    free(t.state);
    memset(&t, 0, sizeof(t));
}
