/* The prober end to end: a csifs process, real csi-test-plugin processes,
 * the tree as a hook and a consumer see it. Every bound is a liveness
 * deadline scaled by tu_ms() (CSIFS_TEST_SLACK). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csi/client.h"
#include "tests/lib/fsrun.h"
#include "tests/lib/plugin_proc.h"
#include "tests/integration/prober_util.h"
#include "tests/lib/testutil.h"

PU_SUITE(prober, "prober", 120)

/* Small intervals keep the suite short. */
#define OPTS "heartbeat=1s,probe_timeout=1s,health_timeout=3s"

#define sock pu_sock
#define reg pu_reg
#define has_event pu_has_event

/* Every probe in the history file of inst: outcome ok and latency below
 * max_ms. Returns how many there were. */
static int history_ok(const char *inst, double max_ms)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "%s/history", inst);
    const char *h = tf_cat(&t, rel);
    cr_assert(h, "%s: %s", rel, strerror(errno));
    int n = 0;
    for (const char *line = h; *line; n++) {
        double ms;
        char outcome[16];
        int end = 0;
        /* "<time> <latency>ms ok": nothing after a plain ok */
        cr_assert_eq(sscanf(line, "%*s %lfms %15s%n", &ms, outcome, &end), 2, "history: %s", line);
        cr_assert_str_eq(outcome, "ok", "history: %s", line);
        cr_assert(line[end] == '\n' || !line[end], "history: %s", line);
        cr_assert_lt(ms, max_ms, "history: %s", line);
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : line + strlen(line);
    }
    return n;
}

/* csi-node/p/a on a node plugin (node id na) at a.sock: healthy, current. */
static void healthy_a(struct tp_proc *pa)
{
    PLUGIN(pa, sock("a.sock"), "--type", "node", "--node-id", "na");
    reg("csi-node/p/a", sock("a.sock"));
    WAIT_CAT("csi-node/p/a/health", "healthy", 2000);
    link_is("csi-node/p/current", "a");
}

/* 1. */
Test(prober, healthy_with_fingerprint_and_current_reaches_plugin)
{
    spawn(OPTS);
    struct tp_proc pa;
    PLUGIN(&pa, sock("a.sock"), "--type", "node", "--name", "csi.example.com",
           "--vendor-version", "2.1.0", "--node-id", "node-17", "--max-volumes", "42",
           "--topology", "zone=z1", "--topology", "region=r1", "--plugin-cap",
           "VOLUME_ACCESSIBILITY_CONSTRAINTS", "--expansion-cap", "ONLINE", "--node-cap",
           "STAGE_UNSTAGE_VOLUME,GET_VOLUME_STATS");
    reg("csi-node/p/a", sock("a.sock"));
    WAIT_CAT("csi-node/p/a/health", "healthy", 2000);
    is("csi-node/p/a/ready", "1");
    is("csi-node/p/a/reason", "ok");
    is("csi-node/p/a/provider", "csi.example.com");
    is("csi-node/p/a/version", "2.1.0");
    is("csi-node/p/a/nodeid", "node-17");
    is("csi-node/p/a/max_volumes", "42");
    is("csi-node/p/a/topology", "region=r1\nzone=z1");
    is("csi-node/p/a/capabilities", "plugin:VOLUME_ACCESSIBILITY_CONSTRAINTS\n"
                                    "expansion:ONLINE\n"
                                    "node:STAGE_UNSTAGE_VOLUME\n"
                                    "node:GET_VOLUME_STATS");
    link_is("csi-node/p/current", "a");
    history_ok("csi-node/p/a", 1000);
    has_event("fingerprint csi-node/p/a provider=csi.example.com version=2.1.0 nodeid=node-17");
    has_event("health csi-node/p/a state=healthy ready=1 reason=ok");
    has_event("current csi-node/p alloc=a");

    /* a consumer dials through both symlinks and reaches the plugin (last:
     * grpc_init in this process, and nothing forks after it) */
    struct csi_client *cli = NULL;
    struct csi_chan *ch = NULL;
    struct csi_result res;
    cr_assert_eq(csi_client_new(&cli), 0);
    cr_assert_eq(csi_chan_open(cli, tf_path(&t, "csi-node/p/current/socket"), &ch), 0);
    cr_assert_eq(csi_call_sync(ch, CSI_NODE_GET_INFO, (int)tu_ms(5000), &res), 0);
    cr_assert(res.ok, "NodeGetInfo through current/socket: %s", res.reason);
    cr_assert_str_eq(res.node_id, "node-17");
    csi_result_clear(&res);
    csi_chan_close(ch);
    csi_client_free(cli);
}

/* 2. The hook's usual order: socket first, plugin later. */
Test(prober, plugin_starting_late_is_healthy_soon_after_it_listens)
{
    /* no round at health_timeout comes to help */
    spawn("heartbeat=1s,probe_timeout=1s,health_timeout=30s");
    reg("csi-node/p/a", sock("a.sock"));
    tu_sleep_ms(2000);
    is("csi-node/p/a/health", "unknown");
    is("csi-node/p/a/reason", "connect: No such file or directory");
    is("csi-node/p/a/ready", "0");
    cr_assert_null(tf_readlink(&t, "csi-node/p/current"));
    struct tp_proc pa;
    PLUGIN(&pa, sock("a.sock"), "--type", "node", "--node-id", "late");
    /* tp_start returns once the plugin listens */
    WAIT_CAT("csi-node/p/a/health", "healthy", 1000);
    is("csi-node/p/a/nodeid", "late");
    link_is("csi-node/p/current", "a");
}

/* csi-node/p/a healthy and current; then b registered on a plugin started
 * with the readiness flag (and its argument, or NULL), and seen not ready.
 * Returns the time b's socket was set. */
static int64_t a_current_then_b_not_ready(struct tp_proc *pa, struct tp_proc *pb,
                                          const char *flag, const char *arg)
{
    spawn(OPTS);
    healthy_a(pa);
    PLUGIN(pb, sock("b.sock"), "--type", "node", "--node-id", "nb", flag, arg);
    int64_t set = tu_now_ms();
    reg("csi-node/p/b", sock("b.sock"));
    WAIT_CAT("csi-node/p/b/reason", "not ready", 1000);
    is("csi-node/p/b/health", "unknown");
    is("csi-node/p/b/ready", "0");
    link_is("csi-node/p/current", "a");
    is("csi-node/p/a/health", "healthy");
    return set;
}

/* 3. */
Test(prober, rolling_update_moves_current_once_the_new_one_is_ready)
{
    struct tp_proc pa, pb;
    int64_t started = a_current_then_b_not_ready(&pa, &pb, "--not-ready-for", "1500");
    cr_assert_lt(tu_now_ms() - started, 1500, "too slow to observe the not-ready window");

    /* ready after 1.5 s; the backoff reaches it within 1.6 s more */
    WAIT_LINK("csi-node/p/current", "b", 1500 + 1600 + 2000);
    is("csi-node/p/b/health", "healthy");
    is("csi-node/p/b/ready", "1");
    is("csi-node/p/b/nodeid", "nb");

    cr_assert_eq(tf_sh(&t, "rmdir csi-node/p/a"), 0);
    link_is("csi-node/p/current", "b");
    cr_assert_eq(tf_sh(&t, "test \"$(ls csi-node/p | tr '\\n' ' ')\" = 'b current '"), 0,
                 "csi-node/p lists b and current");
    is("csi-node/p/b/health", "healthy");
}

/* 4. */
Test(prober, never_ready_turns_unhealthy_after_health_timeout)
{
    struct tp_proc pa, pb;
    int64_t set = a_current_then_b_not_ready(&pa, &pb, "--not-ready", NULL);

    WAIT_CAT("csi-node/p/b/health", "unhealthy", 3000 + 2000);
    cr_assert_geq(tu_now_ms() - set, 3000, "unhealthy before health_timeout");
    is("csi-node/p/b/reason", "did not become healthy within 3s: not ready");
    is("csi-node/p/b/ready", "0");
    has_event("health csi-node/p/b state=unhealthy ready=0 reason=did not become healthy "
              "within 3s: not ready");
    link_is("csi-node/p/current", "a");
    is("csi-node/p/a/health", "healthy");
}

/* 5. */
Test(prober, killed_plugin_is_unhealthy_then_healthy_again_on_restart)
{
    spawn(OPTS);
    struct tp_proc pa, pa2;
    healthy_a(&pa);

    cr_assert_geq(tp_kill(&pa), 0);
    /* one heartbeat + probe_timeout */
    WAIT_CAT("csi-node/p/a/health", "unhealthy", 1000 + 1000 + 500);
    is("csi-node/p/a/reason", "connect: Connection refused");
    is("csi-node/p/a/ready", "1");
    link_is("csi-node/p/current", "a");

    /* down long enough for the backoff to be in its 3.2 s step */
    tu_sleep_ms(3300);
    is("csi-node/p/a/health", "unhealthy");
    link_is("csi-node/p/current", "a");
    PLUGIN(&pa2, sock("a.sock"), "--type", "node", "--node-id", "na");
    WAIT_CAT("csi-node/p/a/health", "healthy", 1000);
    is("csi-node/p/a/reason", "ok");
    link_is("csi-node/p/current", "a");
}

/* 6. */
Test(prober, misbehaving_plugins_cost_the_healthy_one_nothing)
{
    spawn("heartbeat=500ms,probe_timeout=2s,health_timeout=30s");
    struct tp_proc good, hang, garbage, hole;
    PLUGIN(&good, sock("good.sock"), "--type", "node", "--node-id", "good");
    PLUGIN(&hang, sock("hang.sock"), "--type", "node", "--hang");
    PLUGIN(&garbage, sock("garbage.sock"), "--garbage");
    PLUGIN(&hole, sock("hole.sock"), "--blackhole");
    reg("csi-node/good/a", sock("good.sock"));
    WAIT_CAT("csi-node/good/a/health", "healthy", 2000);
    reg("csi-node/hang/a", sock("hang.sock"));
    reg("csi-node/garbage/a", sock("garbage.sock"));
    reg("csi-node/hole/a", sock("hole.sock"));

    /* through two rounds of timeouts of the others */
    int64_t end = tu_now_ms() + 4500;
    while (tu_now_ms() < end) {
        const char *h = tf_cat(&t, "csi-node/good/a/health");
        cr_assert(h && strcmp(h, "healthy") == 0, "good: health %s", h);
        tu_sleep_ms(20);
    }
    is("csi-node/hang/a/reason", "Probe timed out after 2s");
    is("csi-node/hole/a/reason", "Probe timed out after 2s");
    is("csi-node/garbage/a/reason", "protocol: not HTTP/2");
    cr_assert_str_neq(tf_cat(&t, "csi-node/hang/a/health"), "healthy");
    /* the first round fingerprints, then one Probe per heartbeat: none of
     * them waited for the others' deadlines */
    cr_assert_geq(history_ok("csi-node/good/a", (double)tu_ms(250)), 6);
}

/* 7. */
Test(prober, socket_moved_to_another_plugin_clears_then_refingerprints)
{
    spawn(OPTS);
    struct tp_proc p1, p2;
    PLUGIN(&p1, sock("one.sock"), "--type", "node", "--node-id", "n1", "--name", "one",
           "--vendor-version", "1.0", "--max-volumes", "3", "--topology", "zone=z1");
    /* every answer of the second plugin takes 300 ms: the cleared state
     * lasts at least that long */
    PLUGIN(&p2, sock("two.sock"), "--type", "node", "--node-id", "n2", "--name", "two",
           "--vendor-version", "2.0", "--max-volumes", "9", "--topology", "zone=z2",
           "--delay", "300");
    reg("csi-node/p/a", sock("one.sock"));
    WAIT_CAT("csi-node/p/a/health", "healthy", 2000);
    is("csi-node/p/a/nodeid", "n1");

    cr_assert_eq(tf_sh(&t, "ln -sfn '%s' csi-node/p/a/socket", sock("two.sock")), 0);
    link_is("csi-node/p/a/socket", sock("two.sock"));
    is("csi-node/p/a/nodeid", "");
    is("csi-node/p/a/provider", "");
    is("csi-node/p/a/version", "");
    is("csi-node/p/a/max_volumes", "");
    is("csi-node/p/a/topology", "");
    is("csi-node/p/a/capabilities", "");
    is("csi-node/p/a/health", "unknown");
    is("csi-node/p/a/ready", "1");
    link_is("csi-node/p/current", "a");

    /* five calls of 300 ms each */
    WAIT_CAT("csi-node/p/a/nodeid", "n2", 1500 + 2000);
    is("csi-node/p/a/provider", "two");
    is("csi-node/p/a/version", "2.0");
    is("csi-node/p/a/max_volumes", "9");
    is("csi-node/p/a/topology", "zone=z2");
    WAIT_CAT("csi-node/p/a/health", "healthy", 1000);
    link_is("csi-node/p/current", "a");
    has_event("fingerprint csi-node/p/a provider=two version=2.0 nodeid=n2");
}

struct restart_watch {
    bool all_healthy;
};

static bool both_healthy_current_kept(void *arg)
{
    struct restart_watch *w = arg;
    const char *cur = tf_readlink(&t, "csi-node/p/current");
    cr_assert(cur && strcmp(cur, "a2") == 0, "current %s during the re-probe", cur);
    const char *h1 = tf_cat(&t, "csi-node/p/a1/health");
    bool ok = h1 && strcmp(h1, "healthy") == 0;
    const char *h2 = tf_cat(&t, "csi-node/p/a2/health");
    w->all_healthy = ok && h2 && strcmp(h2, "healthy") == 0;
    return w->all_healthy;
}

/* 8. */
Test(prober, restart_reprobes_restored_instances_without_the_hook)
{
    const char *opts = "heartbeat=2s,probe_timeout=5s,health_timeout=30s";
    spawn(opts);
    /* Probe answers late enough that the restored state can be seen */
    char delay[32];
    snprintf(delay, sizeof(delay), "%lld", (long long)tu_ms(600));
    struct tp_proc pp;
    PLUGIN(&pp, sock("p.sock"), "--type", "node", "--node-id", "n1", "--delay", delay,
           "--only", "Probe");
    reg("csi-node/p/a1", sock("p.sock"));
    WAIT_CAT("csi-node/p/a1/health", "healthy", 3000);
    reg("csi-node/p/a2", sock("p.sock"));
    WAIT_CAT("csi-node/p/a2/health", "healthy", 3000);
    link_is("csi-node/p/current", "a2");

    tf_halt(&t);
    spawn(opts);
    for (int k = 1; k <= 2; k++) {
        char rel[64];
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/health", k);
        is(rel, "unknown");
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/reason", k);
        is(rel, "restored, not yet re-probed");
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/ready", k);
        is(rel, "1");
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/nodeid", k);
        is(rel, "n1");
    }
    link_is("csi-node/p/current", "a2");
    /* spread over min(heartbeat, 5 s), then one delayed round each */
    struct restart_watch w = { 0 };
    cr_assert(tu_wait_for(both_healthy_current_kept, &w, 2000 + 5 * 600 + 2000),
              "restored instances not healthy again");
    link_is("csi-node/p/current", "a2");
    has_event("health csi-node/p/a1 state=healthy ready=1 reason=ok");
    has_event("health csi-node/p/a2 state=healthy ready=1 reason=ok");
}

/* 9. */
Test(prober, monolith_under_both_types)
{
    spawn(OPTS);
    struct tp_proc pm;
    PLUGIN(&pm, sock("m.sock"), "--node-id", "mono-node", "--controller-cap",
           "CREATE_DELETE_VOLUME,LIST_VOLUMES", "--node-cap", "STAGE_UNSTAGE_VOLUME");
    reg("csi-controller/m/a", sock("m.sock"));
    reg("csi-node/m/a", sock("m.sock"));
    WAIT_CAT("csi-controller/m/a/health", "healthy", 2000);
    WAIT_CAT("csi-node/m/a/health", "healthy", 2000);
    is("csi-controller/m/a/capabilities", "plugin:CONTROLLER_SERVICE\n"
                                          "controller:CREATE_DELETE_VOLUME\n"
                                          "controller:LIST_VOLUMES");
    is("csi-node/m/a/capabilities", "plugin:CONTROLLER_SERVICE\nnode:STAGE_UNSTAGE_VOLUME");
    is("csi-node/m/a/nodeid", "mono-node");
    is("csi-controller/m/a/provider", "csi-test-plugin");
    is("csi-node/m/a/provider", "csi-test-plugin");
    const char *none = tf_cat(&t, "csi-controller/m/a/nodeid");
    int err = errno;
    cr_assert_null(none);
    cr_assert_eq(err, ENOENT);
    cr_assert_null(tf_cat(&t, "csi-controller/m/a/topology"));
    link_is("csi-controller/m/current", "a");
    link_is("csi-node/m/current", "a");
}

/* 10. */
Test(prober, socket_inside_the_mount_is_probed_without_deadlock)
{
    spawn(OPTS);
    struct tp_proc pa;
    healthy_a(&pa);

    /* b dials a's socket symlink, through the mount */
    reg("csi-node/p/b", tf_path(&t, "csi-node/p/a/socket"));
    WAIT_CAT("csi-node/p/b/health", "healthy", 2000);
    is("csi-node/p/b/nodeid", "na");
    WAIT_LINK("csi-node/p/current", "b", 1000);
    cr_assert_eq(tf_sh(&t, "ls -l csi-node/p/a csi-node/p/b > /dev/null"), 0);

    /* failures are resolved through the mount too: the plugin dies, b
     * turns unhealthy; it comes back, b is healthy again */
    cr_assert_geq(tp_kill(&pa), 0);
    WAIT_CAT("csi-node/p/b/health", "unhealthy", 1000 + 1000 + 500);
    is("csi-node/p/b/reason", "connect: Connection refused");
    PLUGIN(&pa, sock("a.sock"), "--type", "node", "--node-id", "na");
    WAIT_CAT("csi-node/p/b/health", "healthy", 3000);
    link_is("csi-node/p/current", "b");
    cr_assert_eq(tf_sh(&t, "ls -l csi-node/p/a csi-node/p/b > /dev/null"), 0);
}

/* 11. Rounds due at once go one after the other (csi/prober_int.h, lanes):
 * 20 instances wait for one socket; the plugin that then listens answers
 * every call 40 ms late, so each round holds its lane until the lane
 * expires (PR_LANE_MS, 2 ms): the 20 rounds that the socket's creation
 * pokes at once start at least a millisecond apart. Without the lanes they
 * start in the same millisecond. */
#define LANES_N 20

Test(prober, rounds_poked_together_start_one_lane_apart)
{
    spawn("heartbeat=30s,probe_timeout=5s,health_timeout=30s");
    char rel[96];
    for (int i = 0; i < LANES_N; i++) {
        snprintf(rel, sizeof(rel), "csi-node/p/a%d", i);
        reg(rel, sock("slow.sock"));
    }
    for (int i = 0; i < LANES_N; i++) {
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/reason", i);
        WAIT_CAT(rel, "connect: No such file or directory", 2000);
    }
    struct tp_proc pp;
    PLUGIN(&pp, sock("slow.sock"), "--type", "node", "--delay", "40");
    double first = 0, last = 0;
    for (int i = 0; i < LANES_N; i++) {
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/health", i);
        WAIT_CAT(rel, "healthy", 5000);
        /* the round's start: when it ended (its history line's time, not
         * the commit's that recorded it: the first healthy one commits, and
         * a slow commit records several rounds at once), less its calls */
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/history", i);
        const char *h = tf_cat(&t, rel), *ok = h ? strstr(h, "ms ok") : NULL;
        cr_assert(ok, "%s: no ok round in %s", rel, h ? h : strerror(errno));
        while (ok > h && ok[-1] != '\n')
            ok--;
        int hh, mm;
        double ss, ms;
        cr_assert_eq(sscanf(ok, "%*d-%*d-%*dT%d:%d:%lfZ %lfms", &hh, &mm, &ss, &ms), 4, "%s", ok);
        double start = (hh * 3600 + mm * 60 + ss) * 1000 - ms;
        first = i == 0 || start < first ? start : first;
        last = i == 0 || start > last ? start : last;
    }
    /* 19 gaps of at least 1 ms, less the timestamps' rounding to the ms */
    cr_assert_geq(last - first, LANES_N - 1 - 2, "20 rounds started within %.1f ms", last - first);
}
