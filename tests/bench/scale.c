/* The scale rows on a 1,000 x 100 tree (100,000 instances, no sockets),
 * made with nosync: restart_100k, from the start of a durable csifs on that
 * state until a readdir of csi-node lists all 1,000 plugins; memory_100k,
 * the growth of RssAnon (anonymous memory only: libraries and data.mdb are
 * file pages) from a csifs on an empty state to one restored with the tree
 * and listed, per instance. */
#include "tests/bench/bench.h"

#include <math.h>
#include <string.h>

#define SCALE_PLUGINS 1000
#define SCALE_INSTS 100

static int build(struct tf *t, int plugins, int insts)
{
    int rc = 0;
    for (int p = 0; rc == 0 && p < plugins; p++) {
        rc = mkdirf(t, "csi-node/s%d", p);
        for (int a = 0; rc == 0 && a < insts; a++)
            rc = mkdirf(t, "csi-node/s%d/i%d", p, a);
    }
    return rc;
}

void bench_scale(void)
{
    if (!bench_wants(R_RESTART_100K) && !bench_wants(R_MEMORY_100K))
        return;
    int plugins = cfg.quick ? 100 : SCALE_PLUGINS, insts = cfg.quick ? 10 : SCALE_INSTS;
    struct tf t = { 0 };
    say("scale: %d plugins x %d instances", plugins, insts);
    if (daemon_start(&t, "bench-scale", "nosync") < 0)
        return;
    sleep_s(0.2);
    long empty = proc_rss_anon_kib(t.pid);
    double t0 = now_s();
    int rc = build(&t, plugins, insts);
    if (rc < 0) {
        say("scale: set-up failed: %s", strerror(-rc));
        daemon_stop(&t);
        return;
    }
    say("scale: built in %.1f s", now_s() - t0);
    for (int rep = 0; rep < cfg.reps; rep++) {
        double ms = restart_until_listed(&t, plugins);
        if (isnan(ms))
            break;
        sleep_s(0.2);
        long full = proc_rss_anon_kib(t.pid);
        bench_sample(R_RESTART_100K, ms, NAN, NAN);
        if (empty > 0 && full > 0)
            bench_sample(R_MEMORY_100K, (double)(full - empty) / ((double)plugins * insts), NAN, NAN);
    }
    bench_note(R_MEMORY_100K, "RssAnon %ld KiB on an empty state", empty);
    daemon_stop(&t);
}
