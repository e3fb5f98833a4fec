/* <mnt>/metrics and <alloc>/stats (DESIGN 11) on a real csifs process. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

static struct tf t;

static void teardown(void)
{
    tp_kill_all();
    tf_stop(&t);
}

TestSuite(metrics, .fini = teardown, .timeout = 240);

static void spawn(const char *opts)
{
    struct tf_opts o = { .tag = "metrics", .extra_opts = opts };
    cr_assert_eq(tf_spawn(&t, &o), 0, "tf_spawn");
}

/* The whole of a size-0 file (read to EOF), malloc'd. */
static char *slurp(const char *rel)
{
    int fd = open(tf_path(&t, rel), O_RDONLY);
    cr_assert_geq(fd, 0, "open %s: %s", rel, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    ssize_t n;
    while (b && (n = read(fd, b + len, cap - len - 1)) > 0)
        if ((len += (size_t)n) + 1 == cap)
            b = realloc(b, cap *= 2);
    close(fd);
    cr_assert(b);
    b[len] = '\0';
    return b;
}

/* The sum of the samples whose line starts with prefix and contains has
 * (NULL: any). */
static double sum(const char *text, const char *prefix, const char *has)
{
    double s = 0;
    size_t pl = strlen(prefix);
    for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
        const char *end = strchr(l, '\n');
        cr_assert(end, "metrics end with a newline");
        if (!strncmp(l, prefix, pl) && (!has || (memmem(l, (size_t)(end - l), has,
                                                         strlen(has)))))
            s += strtod(memrchr(l, ' ', (size_t)(end - l)) + 1, NULL);
    }
    return s;
}

static const char *const families[][2] = {
    { "csifs_build_info", "gauge" }, { "csifs_start_time_seconds", "gauge" },
    { "csifs_plugins", "gauge" }, { "csifs_instances", "gauge" },
    { "csifs_current_info", "gauge" }, { "csifs_current_healthy", "gauge" },
    { "csifs_probes_total", "counter" },
    { "csifs_probe_duration_seconds", "histogram" },
    { "csifs_health_changes_total", "counter" }, { "csifs_events_total", "counter" },
    { "csifs_events_lost_total", "counter" }, { "csifs_event_readers", "gauge" },
    { "csifs_mutations_total", "counter" }, { "csifs_store_commits_total", "counter" },
    { "csifs_store_syncs_total", "counter" },
    { "csifs_store_commit_duration_seconds", "histogram" },
    { "csifs_store_used_bytes", "gauge" }, { "csifs_store_map_bytes", "gauge" },
    { "csifs_fuse_requests_total", "counter" }, { "csifs_plugin_memory_bytes", "gauge" },
    { "csifs_plugin_cpu_seconds_total", "counter" },
};

static void check_families_and_promtool(const char *what)
{
    char *m = slurp("metrics");
    for (size_t k = 0; k < sizeof(families) / sizeof(families[0]); k++) {
        char want[160];
        snprintf(want, sizeof(want), "\n# TYPE %s %s\n", families[k][0], families[k][1]);
        cr_assert(strstr(m, want), "%s: no `# TYPE %s %s`", what, families[k][0],
                  families[k][1]);
        snprintf(want, sizeof(want), "# HELP %s ", families[k][0]);
        cr_assert(strstr(m, want), "%s: no `# HELP %s`", what, families[k][0]);
    }
    free(m);
    cr_assert_eq(system("command -v promtool >/dev/null"), 0,
                 "promtool is missing: install the Debian package `prometheus` "
                 "(scripts/deps.sh installs it)");
    cr_assert_eq(tf_sh(&t, "cat metrics > ../m.prom && promtool check metrics < ../m.prom"), 0,
                 "%s: promtool check metrics refused the snapshot", what);
}

/* 1. Every family, and promtool accepts it: empty, the 551-dir tree, and
 * names using every allowed character. */
Test(metrics, every_family_and_promtool)
{
    spawn("nosync");
    check_families_and_promtool("empty registry");
    for (int p = 0; p < 50; p++)
        cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p%02d && cd csi-node/p%02d && "
                               "mkdir a0 a1 a2 a3 a4 a5 a6 a7 a8 a9", p, p), 0);
    check_families_and_promtool("551-dir tree");
    cr_assert_eq(tf_sh(&t, "mkdir -p 'csi-controller/Az09._-xyz/a.Z_9-' "
                           "'csi-node/0-._aZ/B_.-7'"), 0);
    check_families_and_promtool("every name character");
    char *m = slurp("metrics");
    cr_assert(strstr(m, "csifs_instances{type=\"csi-controller\",plugin=\"Az09._-xyz\","
                        "health=\"unknown\"} 1\n"), "%s", m);
    free(m);
}

static int count_out(const char *cmd)
{
    char c[512];
    snprintf(c, sizeof(c), "{ %s; } > ../count.txt", cmd);
    cr_assert_eq(tf_sh(&t, "%s", c), 0, "%s", cmd);
    return atoi(tf_cat(&t, "../count.txt"));
}

static bool healthy_a(void *arg)
{
    (void)arg;
    const char *h = tf_cat(&t, "csi-node/p/a/health");
    return h && !strcmp(h, "healthy");
}

static bool hung_unhealthy(void *arg)
{
    (void)arg;
    const char *h = tf_cat(&t, "csi-node/h/x/health");
    return h && !strcmp(h, "unhealthy");
}

static bool current_down(void *arg)
{
    (void)arg;
    const char *h = tf_cat(&t, "csi-node/p/current/health");
    return h && !strcmp(h, "unhealthy");
}

/* 2. Consistency with the tree, in one snapshot. */
Test(metrics, agrees_with_the_tree)
{
    spawn("heartbeat=1s,probe_timeout=1s,health_timeout=2s");
    struct tp_proc pa, ph;
    char sa[256], sh[256];
    snprintf(sa, sizeof(sa), "%s/a.sock", t.dir);
    snprintf(sh, sizeof(sh), "%s/h.sock", t.dir);
    cr_assert_eq(tp_start(&pa, "--socket", sa, "--type", "node", (const char *)NULL), 0);
    cr_assert_eq(tp_start(&ph, "--socket", sh, "--type", "node", "--hang", (const char *)NULL),
                 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a csi-node/p/b csi-node/h/x csi-controller/c/y "
                           "csi-controller/c/z && ln -s %s csi-node/p/a/socket && "
                           "ln -s %s csi-node/h/x/socket && rmdir csi-controller/c/z && "
                           "echo /m1 > csi-node/p/b/mount_point && "
                           "echo /m2 > csi-node/p/b/container_mount_point && "
                           "echo /m3 > csi-controller/c/y/mount_point", sa, sh), 0);
    cr_assert(tu_wait_for(healthy_a, NULL, 5000), "a healthy");
    cr_assert(tu_wait_for(hung_unhealthy, NULL, 10000), "x unhealthy");
    char *m = slurp("metrics");
    int dirs = count_out("find csi-* -mindepth 2 -maxdepth 2 -type d | wc -l");
    cr_assert_eq(dirs, 4);
    cr_assert_eq(sum(m, "csifs_instances{", NULL), dirs, "%s", m);
    static const char *const hs[] = { "unknown", "healthy", "unhealthy" };
    for (int h = 0; h < 3; h++) {
        char cmd[200], lab[40];
        snprintf(cmd, sizeof(cmd), "find csi-* -mindepth 3 -maxdepth 3 -name health | xargs cat | grep -cx %s || true", hs[h]);
        snprintf(lab, sizeof(lab), "health=\"%s\"", hs[h]);
        int n = count_out(cmd);
        cr_assert_eq(sum(m, "csifs_instances{", lab), n, "%s: %d dirs, metrics: %s", hs[h], n, m);
    }
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/current"), "a");
    cr_assert(strstr(m, "csifs_current_info{type=\"csi-node\",plugin=\"p\",alloc=\"a\"} 1\n"));
    cr_assert_eq(sum(m, "csifs_current_info{", NULL), 1, "only p has a current: %s", m);
    cr_assert_eq(sum(m, "csifs_plugins{", NULL), 3);
    double probes = sum(m, "csifs_probes_total{type=\"csi-node\",plugin=\"p\"", NULL);
    free(m);
    tu_sleep_ms(2500);               /* two heartbeats */
    m = slurp("metrics");
    cr_assert_gt(sum(m, "csifs_probes_total{type=\"csi-node\",plugin=\"p\"", NULL), probes);
    cr_assert_geq(sum(m, "csifs_health_changes_total{type=\"csi-node\",plugin=\"h\","
                         "health=\"unhealthy\"}", NULL), 1);
    cr_assert_geq(sum(m, "csifs_probe_duration_seconds_count{type=\"csi-node\"}", NULL), 2);
    cr_assert(strstr(m, "\ncsifs_current_healthy{type=\"csi-node\",plugin=\"p\"} 1\n"), "%s", m);
    free(m);
    /* p's only instance dies: current stays on it, and the gauge says 0,
     * as `current/health` does; one sample per plugin with a current */
    cr_assert_geq(tp_kill(&pa), 0);
    cr_assert(tu_wait_for(current_down, NULL, 5000), "p/current still healthy");
    m = slurp("metrics");
    cr_assert(strstr(m, "\ncsifs_current_healthy{type=\"csi-node\",plugin=\"p\"} 0\n"), "%s", m);
    cr_assert_eq(count_out("cat metrics | grep -c '^csifs_current_healthy{'"), 1);
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/current/health"), "unhealthy");
    free(m);
    check_families_and_promtool("current down");
}

/* 2, continued: with no socket set the prober commits nothing, so the
 * counts are exactly ours. */
Test(metrics, mutations_and_syncs_count_exactly)
{
    spawn("");
    char *m0 = slurp("metrics");
    cr_assert_eq(tf_sh(&t, "mkdir csi-node/p && mkdir csi-node/p/a csi-node/p/b && "
                           "echo /m > csi-node/p/a/mount_point && "
                           "echo /c > csi-node/p/a/container_mount_point && "
                           "echo /n > csi-node/p/b/mount_point && rmdir csi-node/p/b"), 0);
    /* refused ones count for nothing */
    cr_assert_neq(tf_sh(&t, "mkdir csi-node/p/a 2>/dev/null"), 0);
    cr_assert_neq(tf_sh(&t, "printf '/a\\n/b' > csi-node/p/a/mount_point 2>/dev/null"), 0);
    char *m1 = slurp("metrics");
    double mut = sum(m1, "csifs_mutations_total{", NULL) - sum(m0, "csifs_mutations_total{", NULL);
    cr_assert_eq(mut, 7, "%s", m1);
    cr_assert_eq(sum(m1, "csifs_mutations_total{op=\"mkdir\"}", NULL) -
                 sum(m0, "csifs_mutations_total{op=\"mkdir\"}", NULL), 3);
    cr_assert_eq(sum(m1, "csifs_mutations_total{op=\"attr\"}", NULL) -
                 sum(m0, "csifs_mutations_total{op=\"attr\"}", NULL), 3);
    double commits = sum(m1, "csifs_store_commits_total ", NULL) -
                     sum(m0, "csifs_store_commits_total ", NULL);
    double syncs = sum(m1, "csifs_store_syncs_total ", NULL) -
                   sum(m0, "csifs_store_syncs_total ", NULL);
    cr_assert_geq(commits, 7);
    cr_assert_geq(syncs, commits, "at least one fsync per commit: %g for %g", syncs, commits);
    cr_assert_gt(sum(m1, "csifs_store_used_bytes ", NULL), 0);
    cr_assert_eq(sum(m1, "csifs_events_total ", NULL) - sum(m0, "csifs_events_total ", NULL), 7);
    free(m0);
    free(m1);
}

static pid_t want_pid;

static bool stats_has_pid(void *arg)
{
    (void)arg;
    char line[64];
    snprintf(line, sizeof(line), "pid %d\n", (int)want_pid);
    char *s = slurp("csi-node/p/a/stats");
    bool ok = !strncmp(s, line, strlen(line));
    free(s);
    return ok;
}

static bool stats_empty(void *arg)
{
    char *s = slurp(arg);
    bool ok = !*s;
    free(s);
    return ok;
}

/* 3. stats: the listener's pid and figures; empty once it is gone. */
Test(metrics, stats_of_the_listening_process)
{
    spawn("heartbeat=1s,probe_timeout=1s,health_timeout=30s");
    struct tp_proc pa;
    char sa[256];
    snprintf(sa, sizeof(sa), "%s/a.sock", t.dir);
    cr_assert_eq(tp_start(&pa, "--socket", sa, "--type", "node", (const char *)NULL), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a csi-node/p/none && ln -s %s csi-node/p/a/socket",
                       sa), 0);
    struct stat st;
    cr_assert_eq(stat(tf_path(&t, "csi-node/p/a/stats"), &st), 0);
    cr_assert_eq(st.st_size, 0, "size 0, as in /proc");
    cr_assert_eq(st.st_mode & 07777, 0444);
    want_pid = pa.pid;
    cr_assert(tu_wait_for(stats_has_pid, NULL, 5000), "stats names the plugin's pid");
    char *s = slurp("csi-node/p/a/stats");
    char *mem = strstr(s, "\nmemory_bytes ");
    cr_assert(mem, "%s", s);
    cr_assert_gt(strtoull(mem + 14, NULL, 10), 0, "%s", s);
    cr_assert(strstr(s, "\nmemory_peak_bytes "), "%s", s);
    cr_assert(strstr(s, "\ncpu_seconds "), "%s", s);
    free(s);
    char *m = slurp("metrics");
    cr_assert(strstr(m, "csifs_plugin_memory_bytes{type=\"csi-node\",plugin=\"p\",alloc=\"a\"} "),
              "%s", m);
    free(m);
    cr_assert(stats_empty("csi-node/p/none/stats"), "no socket: empty");
    cr_assert_geq(tp_kill(&pa), 0);  /* killed and reaped */
    cr_assert(tu_wait_for(stats_empty, "csi-node/p/a/stats", 5000), "gone: empty");
}

/* 5. The errno rows of metrics and stats; nothing changes. */
Test(metrics, refused_unlink_and_writes)
{
    spawn("nosync");
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a"), 0);
    char *m0 = slurp("metrics");
    static const char *const files[] = { "metrics", "csi-node/p/a/stats" };
    for (int k = 0; k < 2; k++) {
        const char *p = tf_path(&t, files[k]);
        cr_assert_eq(unlink(p), -1);
        cr_assert_eq(errno, EPERM, "unlink %s", files[k]);
        cr_assert_eq(open(p, O_WRONLY), -1);
        cr_assert_eq(errno, EACCES, "open %s for writing (even as root)", files[k]);
        cr_assert_eq(open(p, O_RDWR), -1);
        cr_assert_eq(errno, EACCES);
        cr_assert_eq(truncate(p, 0), -1);
        cr_assert_eq(errno, EACCES, "truncate %s", files[k]);
        cr_assert_eq(chmod(p, 0644), -1);
        cr_assert_eq(errno, EPERM);
        cr_assert_eq(rename(p, tf_path(&t, "csi-node/p/a/x")), -1);
        cr_assert_eq(errno, EPERM);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0, "%s still there", files[k]);
    }
    cr_assert_eq(tf_sh(&t, "test \"$(ls | tr '\\n' ' ')\" = 'csi-controller csi-node events metrics '"), 0);
    char *m1 = slurp("metrics");
    cr_assert_eq(sum(m1, "csifs_events_total ", NULL), sum(m0, "csifs_events_total ", NULL),
                 "no event");
    cr_assert_eq(sum(m1, "csifs_mutations_total{", NULL), sum(m0, "csifs_mutations_total{", NULL),
                 "no change");
    free(m0);
    free(m1);
}
