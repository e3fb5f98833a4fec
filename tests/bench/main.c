/* csifs-bench: the benchmark driver (scripts/bench.sh runs it).
 *
 *   csifs-bench [--quick] [--json PATH] [--only ROW]   the benchmark
 *   csifs-bench --requests                             FUSE requests per workload
 *   csifs-bench --child bare|readlinker|cluster-fill ... helpers it runs itself
 *   csifs-bench --child stat PATH N                    N stat()s of PATH (to profile)
 */
#include "tests/bench/bench.h"
#include "tests/lib/plugin_proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

struct bench_cfg cfg;

static void sizes(bool quick)
{
    cfg = (struct bench_cfg){
        .quick = quick, .reps = 3, .plugins = 1000, .insts = 10, .stats = 100000,
        .reg_cycles = 2000, .par_writers = 8, .par_cycles = 250, .live = 1000, .hung = 10,
        .window_s = 20, .call_every_ms = 100, .call_samples = 16, .failovers = 10000,
        .failover_batch = 1000, .events = 100000,
    };
    if (quick) {
        cfg.plugins = 100;
        cfg.stats = 10000;
        cfg.reg_cycles = 200;
        cfg.par_cycles = 25;
        cfg.live = 100;
        cfg.window_s = 1;
        cfg.call_every_ms = 50;
        cfg.call_samples = 8;
        cfg.failovers = 300;
        cfg.failover_batch = 100;
        cfg.events = 5000;
    }
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void on_signal(int sig)
{
    tp_kill_all();
    bench_cluster_kill();
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--child")) {
        if (!strcmp(argv[2], "bare"))
            return bare_main(argc - 3, argv + 3);
        if (!strcmp(argv[2], "readlinker"))
            return readlinker_main(argc - 3, argv + 3);
        if (!strcmp(argv[2], "cluster-fill"))
            return cluster_fill_main(argc - 3, argv + 3);
        if (!strcmp(argv[2], "stat") && argc == 5) {     /* for perf: stat PATH N */
            cfg.stats = atoi(argv[4]);
            return stat_pass(argv[3]) > 0 ? 0 : 1;
        }
        return 2;
    }
    const char *json = NULL, *only = NULL, *quick = getenv("BENCH_QUICK");
    bool requests = false, q = quick && *quick && strcmp(quick, "0");
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--quick"))
            q = true;
        else if (!strcmp(argv[k], "--json") && k + 1 < argc)
            json = argv[++k];
        else if (!strcmp(argv[k], "--only") && k + 1 < argc)
            only = argv[++k];
        else if (!strcmp(argv[k], "--requests"))
            requests = true;
        else {
            fprintf(stderr, "usage: csifs-bench [--quick] [--json PATH] [--only ROW] | "
                            "--requests\n");
            return 2;
        }
    }
    sizes(q);
    cfg.only = only;
    setenv("LC_ALL", "C", 1);          /* ls formats the same way on both sides */
    raise_nofile();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (requests)
        return bench_requests();
    double t0 = now_s();
    bench_tree();
    bench_register();
    bench_ring();
    bench_probe();
    bench_scale();
    bench_kubelet();
    bench_takeover();
    bench_cluster();
    bench_report(json, now_s() - t0);
    return 0;
}
