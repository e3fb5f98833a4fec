/* The prober notices a dead plugin at once, spreads heartbeats evenly and
 * sleeps while there is nothing to do (issue 16; DESIGN section 3). A csifs
 * process, real csi-test-plugin processes; every bound is a liveness
 * deadline scaled by tu_ms() (CSIFS_TEST_SLACK). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/prober_util.h"

PU_SUITE(prober_death, "death", 180)

/* The default heartbeat: only death detection can be this fast. */
#define OPTS "heartbeat=30s,probe_timeout=1s,health_timeout=3s"

/* csi-node/p/a healthy and current on a node plugin started with extra
 * (NULL-terminated after it) at a.sock. */
static void healthy_a(struct tp_proc *pa, const char *extra)
{
    if (extra)
        PLUGIN(pa, pu_sock("a.sock"), "--type", "node", "--node-id", "na", extra);
    else
        PLUGIN(pa, pu_sock("a.sock"), "--type", "node", "--node-id", "na");
    pu_reg("csi-node/p/a", pu_sock("a.sock"));
    WAIT_CAT("csi-node/p/a/health", "healthy", 2000);
    link_is("csi-node/p/current", "a");
}

#define UNHEALTHY_EV "health csi-node/p/a state=unhealthy"

/* 1. */
Test(prober_death, sigkill_is_unhealthy_at_once_and_restart_healthy_at_once)
{
    spawn(OPTS);
    struct tp_proc pa, pa2;
    healthy_a(&pa, NULL);
    cr_assert_eq(pu_count_events(UNHEALTHY_EV), 0);
    cr_assert_geq(tp_kill(&pa), 0);
    WAIT_CAT("csi-node/p/a/health", "unhealthy", 1000);
    is("csi-node/p/a/reason", "connect: Connection refused");
    is("csi-node/p/a/ready", "1");
    link_is("csi-node/p/current", "a");
    cr_assert_eq(pu_count_events(UNHEALTHY_EV), 1, "one health event");
    PLUGIN(&pa2, pu_sock("a.sock"), "--type", "node", "--node-id", "na");
    WAIT_CAT("csi-node/p/a/health", "healthy", 1000);
    is("csi-node/p/a/reason", "ok");
    link_is("csi-node/p/current", "a");
}

/* Instances on one socket share one connection (one gRPC channel): its
 * loss reaches every one of them at once, and the restarted plugin too. */
Test(prober_death, instances_sharing_a_socket_all_see_its_death_at_once)
{
    spawn(OPTS);
    struct tp_proc pa, pa2;
    healthy_a(&pa, NULL);
    pu_reg("csi-node/p/b", pu_sock("a.sock"));
    pu_reg("csi-node/q/c", pu_sock("a.sock"));
    WAIT_CAT("csi-node/p/b/health", "healthy", 2000);
    WAIT_CAT("csi-node/q/c/health", "healthy", 2000);
    cr_assert_geq(tp_kill(&pa), 0);
    static const char *const all[] = { "csi-node/p/a", "csi-node/p/b", "csi-node/q/c" };
    char rel[64];
    for (int k = 0; k < 3; k++) {
        snprintf(rel, sizeof(rel), "%s/health", all[k]);
        WAIT_CAT(rel, "unhealthy", 1000);
    }
    cr_assert_eq(tf_sh(&t, "rmdir csi-node/p/a"), 0);   /* one user gone: the others go on */
    PLUGIN(&pa2, pu_sock("a.sock"), "--type", "node", "--node-id", "na");
    WAIT_CAT("csi-node/p/b/health", "healthy", 1000);
    WAIT_CAT("csi-node/q/c/health", "healthy", 1000);
}

/* csi-node/p/a, served by the live plugin pa, reads unhealthy with reason
 * within a second (DESIGN 3: noticed at once), in one health event, and
 * current does not move (DESIGN 2). */
static void unhealthy_at_once(const struct tp_proc *pa, const char *reason)
{
    WAIT_CAT("csi-node/p/a/health", "unhealthy", 1000);
    is("csi-node/p/a/reason", reason);
    cr_assert_eq(kill(pa->pid, 0), 0, "the plugin is alive");
    cr_assert_eq(pu_count_events(UNHEALTHY_EV), 1, "one health event");
    link_is("csi-node/p/current", "a");
}
/* 2. */
Test(prober_death, plugin_that_stops_serving_but_lives_is_unhealthy_at_once)
{
    spawn(OPTS);
    struct tp_proc pa;
    healthy_a(&pa, "--signals");
    cr_assert_eq(kill(pa.pid, SIGUSR1), 0);
    unhealthy_at_once(&pa, "connect: Connection refused");
}

/* 2. */
Test(prober_death, socket_file_removed_under_a_serving_plugin_is_unhealthy_at_once)
{
    spawn(OPTS);
    struct tp_proc pa;
    healthy_a(&pa, NULL);
    cr_assert_eq(unlink(pu_sock("a.sock")), 0);
    unhealthy_at_once(&pa, "connect: No such file or directory");
}

/* 3. */
Test(prober_death, connection_that_drops_and_comes_back_flaps_at_most_once)
{
    spawn(OPTS);
    struct tp_proc pa;
    healthy_a(&pa, "--signals");
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(kill(pa.pid, SIGUSR2), 0);     /* every connection closed */
        tu_sleep_ms(500);
    }
    WAIT_CAT("csi-node/p/a/health", "healthy", 1000);
    cr_assert_leq(pu_count_events(UNHEALTHY_EV), 1, "health flapped");
    /* the prober did look: each loss made a probe at once */
    const char *h = tf_cat(&t, "csi-node/p/a/history");
    cr_assert(h);
    int n = 0;
    for (const char *l = h; (l = strchr(l, '\n')); l++)
        n++;
    cr_assert_geq(n + 1, 4, "history after three drops: %s", h);
}

/* ---- 4: heartbeats on a grid ---- */

#define N_EVEN 1000

static bool all_healthy(void *arg)
{
    (void)arg;
    return tf_sh(&t, "test \"$(cat csi-node/*/a0/health | grep -cx healthy)\" -eq %d",
                 N_EVEN) == 0;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" as ms since the epoch, or -1. */
static int64_t utc_ms(const char *s)
{
    struct tm tm = { 0 };
    int ms;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

static int64_t real_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Test(prober_death, heartbeats_of_a_thousand_instances_spread_evenly, .timeout = 300)
{
    /* 1 s, or as much longer as a slow build needs to keep up (the spread
     * is checked per second all the same) */
    char opts[128];
    snprintf(opts, sizeof(opts), "heartbeat=%lldms,probe_timeout=2s,health_timeout=30s",
             (long long)tu_ms(1000));
    spawn(opts);
    struct tp_proc pl;
    char n[16];
    snprintf(n, sizeof(n), "%d", N_EVEN);
    PLUGIN(&pl, pu_sock("l.sock"), "--sockets", n, "--type", "node");
    cr_assert_eq(tf_sh(&t, "i=0; while [ $i -lt %d ]; do mkdir -p csi-node/l$i/a0 && "
                           "ln -s '%s.'$i csi-node/l$i/a0/socket || exit 1; i=$((i+1)); done",
                       N_EVEN, pu_sock("l.sock")), 0);
    cr_assert(tu_wait_for(all_healthy, NULL, 30000), "not all %d healthy", N_EVEN);
    tu_sleep_ms(2000);
    int64_t from = real_ms();
    tu_sleep_ms(10000);
    int64_t to = from + 10000;
    /* per second of the window: its probes, in ten slots of 100 ms */
    static int slots[10][10];
    memset(slots, 0, sizeof(slots));
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cat '%s'/csi-node/*/a0/history", t.mnt);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    char line[512];
    int total = 0;
    while (fgets(line, sizeof(line), f)) {
        int64_t at = utc_ms(line);
        cr_assert_geq(at, 0, "history line %s", line);
        if (at < from || at >= to)
            continue;
        slots[(at - from) / 1000][(at - from) % 1000 / 100]++;
        total++;
    }
    pclose(f);
    cr_assert_geq(total, N_EVEN * 8 * 1000 / tu_ms(1000), "only %d probes in 10 s", total);
    for (int s = 0; s < 10; s++) {
        int sum = 0, max = 0;
        for (int k = 0; k < 10; k++) {
            sum += slots[s][k];
            max = slots[s][k] > max ? slots[s][k] : max;
        }
        cr_assert_leq(max * 4, sum, "second %d: %d of its %d probes in one 100 ms", s, max, sum);
    }
}

/* ---- 5: no idle wake-ups ---- */

/* Context switches of every thread of pid, summed. */
static long long ctxt_switches(pid_t pid)
{
    char dir[64], path[384], v[32];
    snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    cr_assert(d, "%s: %s", dir, strerror(errno));
    long long sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/status", dir, e->d_name);
        /* a thread that just ended has no file: nothing added */
        if (tu_proc_field(path, "voluntary_ctxt_switches", v, sizeof(v)))
            sum += strtoll(v, NULL, 10);
        if (tu_proc_field(path, "nonvoluntary_ctxt_switches", v, sizeof(v)))
            sum += strtoll(v, NULL, 10);
    }
    closedir(d);
    return sum;
}

Test(prober_death, idle_csifs_never_wakes_up)
{
    spawn(OPTS);
    cr_assert_gt(t.pid, 0);
    tu_sleep_ms(1000);      /* start-up settles */
    long long before = ctxt_switches(t.pid);
    tu_sleep_ms(5000);
    long long after = ctxt_switches(t.pid);
    cr_assert_eq(after, before, "%lld context switches in 5 s of idleness", after - before);
}
