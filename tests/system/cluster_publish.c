/* The cluster publisher (DESIGN 15) against a real 3-member etcd: csifs
 * "hosts" with cluster_node=nN, cluster_ttl=2s, csi-test-plugin plugins. */
#include "tests/lib/etcdrun.h"
#include "tests/lib/fsrun.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PFX "/csifs/v1/hosts/"

static struct te E;
static struct te_host H1, H2;
static char *pdir;                      /* plugin sockets */

static void setup(void)
{
    cr_assert_eq(te_start(&E, 3, false), 0, "etcd cluster did not start");
    pdir = tu_tmpdir("cpub");
    cr_assert(pdir);
}

static void teardown(void)
{
    tp_kill_all();
    tf_stop(&H1.t);
    tf_stop(&H2.t);
    te_stop(&E);
    if (pdir)
        tu_rmrf(pdir);
    free(pdir);
    pdir = NULL;
}

TestSuite(cluster_publish, .init = setup, .fini = teardown, .timeout = 180);

static const char *sock(const char *name)
{
    return tu_path(pdir, name);
}

/* A healthy csi-node plugin <plugin>/a on host h, served by p. */
static void healthy(struct te_host *h, struct tp_proc *p, const char *plugin, const char *nodeid)
{
    const char *s = sock(plugin);
    cr_assert_eq(tp_start(p, "--socket", s, "--type", "node", "--node-id", nodeid, "--topology",
                          "zone=z1", "--topology", "rack=r7", (const char *)NULL), 0);
    cr_assert_eq(tf_sh(&h->t, "mkdir -p csi-node/%s/a && ln -s '%s' csi-node/%s/a/socket",
                       plugin, s, plugin), 0);
}

struct want {
    struct te *e;
    const char *key, *needle;           /* needle NULL: the key is absent */
};

static bool holds(void *arg)
{
    struct want *w = arg;
    char *v = te_get(w->e, w->key);
    bool ok = w->needle ? v && strstr(v, w->needle) : !v;
    free(v);
    return ok;
}

#define WAIT_KEY(key, needle, ms)                                                          \
    do {                                                                                   \
        struct want w_ = { &E, (key), (needle) };                                          \
        cr_assert(tu_wait_for(holds, &w_, (ms)), "%s: want %s, have [%s]", (key),          \
                  (needle) ? (needle) : "absent", te_get(&E, (key)));                      \
    } while (0)

Test(cluster_publish, a_healthy_plugin_and_its_changes_are_published)
{
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", "heartbeat=300ms,probe_timeout=300ms"), 0);
    struct tp_proc pa, pb;
    healthy(&H1, &pa, "ebs", "node-1");
    const char *key = PFX "n1/csi-node/ebs";
    WAIT_KEY(key, "health healthy\n", 5000);
    char *v = te_get(&E, key);
    cr_log_info("%s", v);
    static const char *const lines[] = { "current a\n", "nodeid node-1\n",
                                         "topology rack=r7,zone=z1\n", "instances 1\n",
                                         "healthy 1\n", "provider csi-test-plugin\n",
                                         "updated 20" };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        cr_assert(strstr(v, lines[i]), "no [%s] in [%s]", lines[i], v);
    free(v);
    v = te_get(&E, PFX "n1/info");
    cr_assert(v && strstr(v, "instance ") && strstr(v, "mount_point /"), "info: %s", v);
    free(v);

    /* a health change */
    tp_kill(&pa);
    WAIT_KEY(key, "health unhealthy\n", 5000);
    /* a current move: b registered and healthy, a removed */
    cr_assert_eq(tp_start(&pb, "--socket", sock("ebs-b"), "--type", "node", "--node-id", "node-1",
                          (const char *)NULL), 0);
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/ebs/b && ln -s '%s' csi-node/ebs/b/socket",
                       sock("ebs-b")), 0);
    WAIT_KEY(key, "current b\n", 5000);
    WAIT_KEY(key, "health healthy\n", 5000);
    cr_assert_eq(tf_sh(&H1.t, "rmdir csi-node/ebs/a"), 0);
    WAIT_KEY(key, "instances 1\n", 5000);
    cr_assert_eq(tf_sh(&H1.t, "rmdir csi-node/ebs/b && rmdir csi-node/ebs"), 0);
    WAIT_KEY(key, NULL, 3000);
    /* DESIGN 11's cluster families, valid for promtool */
    cr_assert_eq(tf_sh(&H1.t, "grep -qx 'csifs_cluster_up 1' metrics && "
                       "grep -q '^csifs_cluster_publish_total{result=\"ok\"} [1-9]' metrics && "
                       "grep -q '^csifs_cluster_publish_seconds_count [1-9]' metrics && "
                       "promtool check metrics < metrics >/dev/null 2>&1"), 0,
                 "metrics: %s", tf_cat(&H1.t, "metrics"));
}

Test(cluster_publish, sigterm_removes_the_keys_at_once_sigkill_within_the_ttl)
{
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    cr_assert_eq(te_host_spawn(&H2, &E, "n2", NULL), 0);
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/p"), 0);
    cr_assert_eq(tf_sh(&H2.t, "mkdir csi-node/p"), 0);
    WAIT_KEY(PFX "n1/csi-node/p", "instances 0\n", 5000);
    WAIT_KEY(PFX "n2/csi-node/p", "instances 0\n", 5000);
    tf_kill(&H1.t, false);
    /* at once: the lease was revoked before the process exited */
    cr_assert_eq(te_count(&E, PFX "n1/"), 0, "SIGTERM left n1's keys");
    int64_t t0 = tu_now_ms();
    tf_kill(&H2.t, true);
    WAIT_KEY(PFX "n2/csi-node/p", NULL, 2000 + 2000);
    cr_log_info("SIGKILL: n2's keys gone after %lld ms", (long long)(tu_now_ms() - t0));
    cr_assert_eq(te_count(&E, PFX "n2/"), 0);
}

Test(cluster_publish, a_restart_reuses_its_lease_and_is_no_conflict)
{
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/p"), 0);
    WAIT_KEY(PFX "n1/csi-node/p", "instances 0\n", 5000);
    char *before = NULL;
    cr_assert_eq(te_ctl(&E, &before, "get -w json " PFX "n1/info"), 0);
    tf_kill(&H1.t, true);               /* the keys stay until the TTL */
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/q"), 0);
    WAIT_KEY(PFX "n1/csi-node/q", "instances 0\n", 5000);
    tu_sleep_ms(3000);                  /* past the TTL: the reused lease is kept alive */
    cr_assert_eq(te_count(&E, PFX "n1/"), 3);
    char *log = te_host_log(&H1);
    cr_assert(!strstr(log, "conflict") && !strstr(log, "in use by another"), "%s", log);
    cr_assert(!strstr(log, "granting a new one"), "the lease was not reused: %s", log);
    free(log);
    char *lease_before = strstr(before, "\"lease\":");
    char *after = NULL;
    cr_assert_eq(te_ctl(&E, &after, "get -w json " PFX "n1/info"), 0);
    char *lease_after = strstr(after, "\"lease\":");
    cr_assert(lease_before && lease_after);
    cr_assert_eq(strtoll(lease_before + 8, NULL, 10), strtoll(lease_after + 8, NULL, 10));
    free(before);
    free(after);
}

Test(cluster_publish, a_second_csifs_under_the_same_node_name_is_a_conflict)
{
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/mine"), 0);
    WAIT_KEY(PFX "n1/csi-node/mine", "instances 0\n", 5000);
    cr_assert_eq(te_host_spawn(&H2, &E, "n1", NULL), 0);       /* another state dir */
    cr_assert_eq(tf_sh(&H2.t, "mkdir csi-node/theirs"), 0);
    int64_t end = tu_now_ms() + tu_ms(5000);
    char *log = NULL;
    while (tu_now_ms() < end) {
        free(log);
        log = te_host_log(&H2);
        if (strstr(log, "node name n1 is in use by another csifs"))
            break;
        tu_sleep_ms(50);
    }
    cr_assert(strstr(log, "node name n1 is in use by another csifs"), "%s", log);
    free(log);
    tu_sleep_ms(2500);                  /* past a retry: still nothing, no flapping */
    cr_assert_eq(te_count(&E, PFX "n1/csi-node/theirs"), 0);
    cr_assert_eq(te_count(&E, PFX "n1/"), 2);
    char *mine = te_get(&E, PFX "n1/csi-node/mine");
    cr_assert(mine);
    free(mine);
}

Test(cluster_publish, two_hundred_plugins_reconcile_in_several_txns)
{
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    /* made before the publisher: halt, add them, come back */
    tf_kill(&H1.t, false);
    tf_halt(&H1.t);
    struct tf_opts plain = { .tag = "n1" };
    cr_assert_eq(tf_spawn(&H1.t, &plain), 0);
    cr_assert_eq(tf_sh(&H1.t, "for i in $(seq 200); do mkdir csi-node/p$i || exit 1; done"), 0);
    tf_kill(&H1.t, false);
    tf_halt(&H1.t);
    double t0 = te_metric(&E, 0, "etcd_mvcc_txn_total");
    cr_assert_geq(t0, 0);
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    int64_t end = tu_now_ms() + tu_ms(10000);
    while (te_count(&E, PFX "n1/") != 201 && tu_now_ms() < end)
        tu_sleep_ms(50);
    cr_assert_eq(te_count(&E, PFX "n1/"), 201);
    double txns = te_metric(&E, 0, "etcd_mvcc_txn_total") - t0;
    cr_log_info("200 plugins: %.0f write txns", txns);
    /* etcd counts a Txn of more than one operation in etcd_mvcc_txn_total */
    cr_assert_geq(txns, 2, "200 puts in fewer than 2 Txns");
}

Test(cluster_publish, a_restart_with_etcd_down_leaves_no_stale_key)
{
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/keep csi-node/gone"), 0);
    WAIT_KEY(PFX "n1/csi-node/gone", "instances 0\n", 5000);
    for (int i = 0; i < E.n; i++)
        te_signal(&E, i, SIGSTOP);
    tf_kill(&H1.t, true);
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    int64_t t0 = tu_now_ms();
    cr_assert_eq(tf_sh(&H1.t, "rmdir csi-node/gone"), 0);
    cr_assert_lt(tu_now_ms() - t0, tu_ms(1000), "rmdir waited for etcd");
    for (int i = 0; i < E.n; i++)
        te_signal(&E, i, SIGCONT);
    WAIT_KEY(PFX "n1/csi-node/keep", "instances 0\n", 10000);
    WAIT_KEY(PFX "n1/csi-node/gone", NULL, 5000);
    tu_sleep_ms(2500);                  /* and it stays so past a TTL */
    cr_assert_eq(te_count(&E, PFX "n1/"), 2);
}
