/* csifs-bench --requests: how many FUSE requests reach csifs per operation
 * of each workload. csifs is mounted in this process here (no prober, a
 * nosync store), so that fs_requests() can be read between steps; the
 * workloads are the benchmark's own (tree.c). Evidence for the README, not
 * a timing. */
#include "tests/bench/bench.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct tf t;
static uint64_t mark;

/* Print the requests since the last step, per operation. Waits for the
 * counter to settle first: the kernel sends RELEASE after close returns. */
static void step(const char *what, long ops)
{
    uint64_t now = fs_requests(t.fs), n;
    do {
        n = now;
        sleep_s(0.2);
        now = fs_requests(t.fs);
    } while (now != n);
    n = now - mark;
    printf("%-44s %9ld ops %9llu requests %8.2f per op\n", what, ops, (unsigned long long)n,
           ops ? (double)n / (double)ops : 0.0);
    fflush(stdout);
    mark = fs_requests(t.fs);
}

/* Make csi-node/<plugin>/<alloc> ready through the registry (no prober). */
static int make_ready(const char *plugin, const char *alloc)
{
    static const struct reg_fingerprint fp = { "bench", "1", "n1", 0, "", "" };
    struct reg_node pn, in;
    int rc = reg_plugin_lookup(t.reg, REG_NODE, plugin, &pn);
    if (rc == 0)
        rc = reg_instance_lookup(t.reg, pn.seq, alloc, &in);
    struct reg_probe pr = { .gen = in.gen, .outcome = REG_PROBE_OK, .fp = &fp };
    return rc ? rc : reg_probe_result(t.reg, in.seq, &pr);
}

static void events(void)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return;
    const char *argv[] = { "cat", tf_path(&t, "events"), NULL };
    pid_t pid = run_bg(argv, -1, fds[1]);
    close(fds[1]);
    char buf[65536];
    long lines = 0;
    ssize_t n;
    step("(set-up)", 0);
    while (lines < 1024 && (n = read(fds[0], buf, sizeof(buf))) > 0)
        for (ssize_t k = 0; k < n; k++)
            lines += buf[k] == '\n';
    step("cat events: lines of a full ring (1,024)", lines);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(fds[0]);
}

static void failover(int n)
{
    char rel[64], buf[64];
    mkdirf(&t, "csi-node/f");
    for (int i = 0; i < n; i++) {
        mkdirf(&t, "csi-node/f/a%d", i);
        symlinkf(&t, "/nonexistent/csi.sock", "csi-node/f/a%d/socket", i);
        snprintf(rel, sizeof(rel), "a%d", i);
        make_ready("f", rel);
    }
    readlink(tf_path(&t, "csi-node/f/current"), buf, sizeof(buf));
    step("(set-up)", 0);
    for (int i = n - 1; i >= 0; i--) {
        snprintf(rel, sizeof(rel), "csi-node/f/a%d", i);
        rmdir(tf_path(&t, rel));
    }
    step("failover: rmdir of current", n);
    for (int i = n - 1; i >= 0; i--) {
        snprintf(rel, sizeof(rel), "csi-node/f/a%d", i);
        mkdirf(&t, "csi-node/f/a%d", i);
        symlinkf(&t, "/nonexistent/csi.sock", "csi-node/f/a%d/socket", i);
        snprintf(rel, sizeof(rel), "a%d", i);
        make_ready("f", rel);
    }
    step("(set-up)", 0);
    for (int i = 0; i < n; i++) {
        snprintf(rel, sizeof(rel), "csi-node/f/a%d", i);
        rmdir(tf_path(&t, rel));
        readlink(tf_path(&t, "csi-node/f/current"), buf, sizeof(buf));
    }
    step("failover: rmdir of current + readlink", n);
}

int bench_requests(void)
{
    struct tf_opts o = { .tag = "bench-requests" };
    int rc = tf_start(&t, &o);
    if (rc < 0)
        return 1;
    int n = cfg.plugins * cfg.insts;
    printf("FUSE requests reaching csifs (fs_requests), tree %d x %d\n", cfg.plugins,
           cfg.insts);
    mark = fs_requests(t.fs);
    if ((rc = tree_build(&t, "/nonexistent/csi.sock")) < 0 || (rc = make_ready("p0", "a0")) < 0) {
        fprintf(stderr, "set-up: %s\n", strerror(-rc));
        tf_stop(&t);
        return 1;
    }
    step("mkdir of a plugin or instance (+ 1 symlink)", cfg.plugins + n);
    step("(set-up)", 0);
    drop_dentries();
    step("(drop_caches: FORGETs)", 0);
    ls_lr(t.mnt);
    step("ls -lR cold (after drop_caches), per dir", cfg.plugins + n + 3);
    ls_lr(t.mnt);
    step("ls -lR again, per dir", cfg.plugins + n + 3);
    ls_lr(t.mnt);
    step("ls -lR a third time, per dir", cfg.plugins + n + 3);
    cat_pass(tf_path(&t, "metrics"));
    step("cat metrics", 1);
    char **paths = health_paths(t.mnt);
    read_pass(paths, n);
    step("open/read/close of health, first time", n);
    read_pass(paths, n);
    step("open/read/close of health, warm", n);
    pread_pass(paths, n);
    step("pread of health through open fds (+ opens)", (long)n * PREAD_PASSES);
    free_paths(paths);
    char deep[4096];
    snprintf(deep, sizeof(deep), "%s/csi-node/p0/current", t.mnt);
    int saved = cfg.stats;
    cfg.stats = 10000;
    stat_pass(deep);
    step("stat of <type>/<plugin>/current", cfg.stats);
    cfg.stats = saved;
    mkdirf(&t, "csi-node/r");
    step("(set-up)", 0);
    uint64_t missed0, inval0 = fs_invalidations(t.fs, &missed0);
    for (int k = 0; k < 100; k++) {
        mkdirf(&t, "csi-node/r/a%d", k);
        symlinkf(&t, "/nonexistent/csi.sock", "csi-node/r/a%d/socket", k);
        char rel[64];
        snprintf(rel, sizeof(rel), "csi-node/r/a%d", k);
        rmdir(tf_path(&t, rel));
    }
    step("register cycle: mkdir + socket symlink + rmdir", 100);
    uint64_t missed1, inval1 = fs_invalidations(t.fs, &missed1);
    printf("%-44s %9d ops %9llu sent     %8llu refused (ENOENT)\n",
           "  its inode invalidations", 100, (unsigned long long)(inval1 - inval0),
           (unsigned long long)(missed1 - missed0));
    events();
    failover(100);
    tf_stop(&t);
    return 0;
}
