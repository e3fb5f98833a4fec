/* The cluster view (-o cluster_view, DESIGN 15) against a real 3-member
 * etcd: hosts n1, n2 publish (cluster_ttl=2s), n3 has the view.
 * (Covered elsewhere: restart reusing its lease, conflicts, 200 plugins,
 * a restart with etcd down: cluster_publish; the client's TLS and wrong
 * CA: etcd_client.) */
#include "tests/lib/etcdrun.h"
#include "tests/lib/fsrun.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PFX "/csifs/v1/hosts/"
#define TTL_MS 2000

static struct te E;
static struct te_host H1, H2, H3;
static char *pdir;                      /* plugin sockets */

static void setup_tls(bool tls)
{
    te_stop(&E);                        /* a test's .init runs after the suite's */
    if (pdir)
        tu_rmrf(pdir);
    free(pdir);
    pdir = NULL;
    cr_assert_eq(te_start(&E, 3, tls), 0, "etcd cluster did not start");
    pdir = tu_tmpdir("cview");
    cr_assert(pdir);
}

static void setup(void)
{
    setup_tls(false);
}

static void teardown(void)
{
    tp_kill_all();
    if (H3.t.pid > 0)
        kill(H3.t.pid, SIGCONT);
    tf_stop(&H1.t);
    tf_stop(&H2.t);
    tf_stop(&H3.t);
    for (int i = 0; i < E.n; i++)
        if (E.pid[i] > 0)
            te_signal(&E, i, SIGCONT);
    te_stop(&E);
    if (pdir)
        tu_rmrf(pdir);
    free(pdir);
    pdir = NULL;
}

TestSuite(cluster_view, .init = setup, .fini = teardown, .timeout = 120);

struct want {
    struct te_host *h;
    const char *path, *value;           /* value NULL: the path is absent */
};

static bool holds(void *arg)
{
    struct want *w = arg;
    if (!w->value)
        return access(tf_path(&w->h->t, w->path), F_OK) < 0;
    const char *v = tf_cat(&w->h->t, w->path);
    return v && !strcmp(v, w->value);
}

/* Wait until n3's <mnt>/<path> reads value (without its newline), or is
 * absent (value NULL). */
#define WAIT_VIEW(path, value, ms)                                                         \
    do {                                                                                   \
        struct want w_ = { &H3, (path), (value) };                                         \
        cr_assert(tu_wait_for(holds, &w_, (ms)), "%s: want [%s], have [%s]", (path),      \
                  (value) ? (value) : "absent", tf_cat(&H3.t, (path)));                    \
    } while (0)

static const char *sock(const char *name)
{
    return tu_path(pdir, name);
}

/* A healthy csi-node instance <plugin>/<alloc> on host h, served by p. */
static void healthy(struct te_host *h, struct tp_proc *p, const char *plugin, const char *alloc)
{
    char name[100];
    snprintf(name, sizeof(name), "%s-%s", plugin, alloc);
    const char *s = sock(name);
    cr_assert_eq(tp_start(p, "--socket", s, "--type", "node", "--node-id", "node-1", "--topology",
                          "zone=z1", "--topology", "rack=r7", (const char *)NULL), 0);
    cr_assert_eq(tf_sh(&h->t, "mkdir -p csi-node/%s/%s && ln -s '%s' csi-node/%s/%s/socket",
                       plugin, alloc, s, plugin, alloc), 0);
}

/* A `key value` line of n3's cluster/status, into a static buffer. */
static const char *status_of(const char *key)
{
    static char val[200];
    const char *s = tf_cat(&H3.t, "cluster/status");
    size_t kl = strlen(key);
    for (const char *l = s; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "")
        if (!strncmp(l, key, kl) && l[kl] == ' ') {
            size_t n = strcspn(l + kl + 1, "\n");
            snprintf(val, sizeof(val), "%.*s", (int)n, l + kl + 1);
            return val;
        }
    return "";
}

/* The member n3's view watches. */
static int view_member(void)
{
    const char *ep = status_of("view_endpoint");
    for (int i = 0; i < E.n; i++)
        if (*ep && strstr(E.url[i], ep))
            return i;
    return -1;
}

static bool log_has(struct te_host *h, const char *needle)
{
    char *log = te_host_log(h);
    bool ok = log && strstr(log, needle);
    free(log);
    return ok;
}

Test(cluster_view, a_plugin_its_changes_and_its_hosts_leaving)
{
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", "heartbeat=300ms,probe_timeout=300ms"), 0);
    cr_assert_eq(te_host_spawn(&H2, &E, "n2", NULL), 0);
    cr_assert_eq(te_host_spawn(&H3, &E, "n3", "cluster_view"), 0);
    struct tp_proc pa, pb;
    healthy(&H1, &pa, "ebs", "a");
    cr_assert_eq(tf_sh(&H2.t, "mkdir csi-node/ebs"), 0);
    WAIT_VIEW("cluster/csi-node/ebs/n1/health", "healthy", 5000);
    WAIT_VIEW("cluster/csi-node/ebs/n1/nodeid", "node-1", 1000);
    WAIT_VIEW("cluster/csi-node/ebs/n1/topology", "rack=r7\nzone=z1", 1000);
    WAIT_VIEW("cluster/csi-node/ebs/n1/current", "a", 1000);
    WAIT_VIEW("cluster/csi-node/ebs/n2/instances", "0", 5000);
    WAIT_VIEW("cluster/csi-node/ebs/summary", "nodes 2\nnodes_healthy 1", 1000);
    cr_assert_eq(tf_sh(&H3.t, "ls cluster/csi-node/ebs | tr '\\n' ' ' | "
                       "grep -qx 'n1 n2 summary '"), 0, "listing");
    cr_assert_eq(tf_sh(&H3.t, "[ $(stat -c %%s cluster/csi-node/ebs/n1/health) = 8 ]"), 0,
                 "honest size");
    cr_assert_str_eq(status_of("view_state"), "connected");
    cr_assert_eq(tf_sh(&H3.t, "grep -qx 'csifs_cluster_view_nodes 2' metrics && "
                       "promtool check metrics < metrics >/dev/null 2>&1"), 0, "metrics: %s",
                 tf_cat(&H3.t, "metrics"));
    /* read-only, as DESIGN 5 says: EPERM to make names, EACCES to write */
    cr_assert_eq(tf_sh(&H3.t, "mkdir cluster/csi-node/x 2>&1 | grep -q 'not permitted' && "
                       "! rmdir cluster/csi-node/ebs/n1 2>/dev/null && "
                       "(echo x > cluster/csi-node/ebs/n1/health) 2>&1 | grep -q 'denied' && "
                       "! rm -f cluster/status 2>/dev/null"), 0, "writes");

    /* a health change, a current move */
    tp_kill(&pa);
    WAIT_VIEW("cluster/csi-node/ebs/n1/health", "unhealthy", 5000);
    WAIT_VIEW("cluster/csi-node/ebs/summary", "nodes 2\nnodes_healthy 0", 1000);
    healthy(&H1, &pb, "ebs", "b");
    WAIT_VIEW("cluster/csi-node/ebs/n1/current", "b", 5000);
    WAIT_VIEW("cluster/csi-node/ebs/n1/health", "healthy", 1000);

    /* SIGTERM n1: its keys go at once; SIGKILL n2: within the TTL */
    int64_t t0 = tu_now_ms();
    tf_kill(&H1.t, false);
    WAIT_VIEW("cluster/csi-node/ebs/n1", NULL, 1000);
    cr_log_info("SIGTERM n1: gone from the view after %lld ms", (long long)(tu_now_ms() - t0));
    t0 = tu_now_ms();
    tf_kill(&H2.t, true);
    WAIT_VIEW("cluster/csi-node/ebs", NULL, TTL_MS + 2000);
    cr_log_info("SIGKILL n2: gone from the view after %lld ms", (long long)(tu_now_ms() - t0));
    cr_assert_eq(tf_sh(&H3.t, "[ -z \"$(ls cluster/csi-node)\" ] && "
                       "grep -qx 'csifs_cluster_view_nodes 0' metrics"), 0);
}

/* etcdctl's put of key (a shell word) with printf-made value. */
static void put(const char *key, const char *printf_value)
{
    cr_assert_eq(te_ctl(&E, NULL, "put %s \"$(printf '%s')\" >/dev/null", key, printf_value), 0,
                 "put %s", key);
}

static long long revision(void)
{
    char *out = NULL;
    cr_assert_eq(te_ctl(&E, &out, "get -w json /nothing"), 0);
    const char *r = strstr(out, "\"revision\":");
    long long rev = r ? strtoll(r + 11, NULL, 10) : -1;
    free(out);
    return rev;
}

Test(cluster_view, garbage_is_ignored_and_a_compaction_resyncs)
{
    cr_assert_eq(te_host_spawn(&H3, &E, "n3", "cluster_view"), 0);
    put(PFX "x1/csi-node/p", "health healthy\\nnodeid a");
    WAIT_VIEW("cluster/csi-node/p/x1/nodeid", "a", 5000);
    /* bad keys, a huge value, binary bytes */
    put("'" PFX "bad key/csi-node/p'", "health healthy");
    put(PFX "x2/nope/p", "health healthy");
    put(PFX "x2/csi-node/p/deeper", "health healthy");
    put("\"$(printf '" PFX "\\001\\377/csi-node/p')\"", "health healthy");
    cr_assert_eq(te_ctl(&E, NULL, "put " PFX "x3/csi-node/p \"$(head -c 100000 /dev/zero | "
                        "tr '\\0' a)\" >/dev/null"), 0);
    put(PFX "x4/csi-node/p", "health \\001\\002\\377");
    put(PFX "x5/csi-node/p", "nodeid b");
    WAIT_VIEW("cluster/csi-node/p/x5/nodeid", "b", 5000);
    cr_assert(log_has(&H3, "ignored key " PFX "bad key/csi-node/p"));
    cr_assert(log_has(&H3, "ignored key " PFX "x2/nope/p"));
    cr_assert(log_has(&H3, "ignored key " PFX "x2/csi-node/p/deeper"));
    cr_assert(log_has(&H3, "ignored key " PFX "\\x01\\xff/csi-node/p"));
    cr_assert(log_has(&H3, "ignored key " PFX "x3/csi-node/p: its value (100000 bytes)"));
    cr_assert(log_has(&H3, "ignored key " PFX "x4/csi-node/p"));
    cr_assert_eq(tf_sh(&H3.t, "[ \"$(ls cluster/csi-node | tr '\\n' ' ')\" = 'p ' ] && "
                       "[ \"$(ls cluster/csi-node/p | tr '\\n' ' ')\" = 'summary x1 x5 ' ]"), 0,
                 "the view has more than the good keys");

    /* a compaction past the watch's revision: freeze n3, change and compact,
     * kill the member it watched; it re-watches, finds the revision gone,
     * and syncs again */
    int m = view_member();
    cr_assert_geq(m, 0, "view_endpoint %s", status_of("view_endpoint"));
    cr_assert_eq(kill(H3.t.pid, SIGSTOP), 0);
    put(PFX "x6/csi-node/p", "nodeid c");
    cr_assert_eq(te_ctl(&E, NULL, "del " PFX "x1/csi-node/p >/dev/null"), 0);
    put(PFX "x7/csi-node/p", "nodeid d");   /* compacting at the delete could hide it */
    cr_assert_eq(te_ctl(&E, NULL, "compact %lld >/dev/null", revision()), 0);
    te_signal(&E, m, SIGKILL);
    cr_assert_eq(kill(H3.t.pid, SIGCONT), 0);
    WAIT_VIEW("cluster/csi-node/p/x7/nodeid", "d", 5000);
    WAIT_VIEW("cluster/csi-node/p/x6/nodeid", "c", 1000);
    WAIT_VIEW("cluster/csi-node/p/x1", NULL, 1000);
    WAIT_VIEW("cluster/csi-node/p/x5/nodeid", "b", 1000);
    cr_assert(log_has(&H3, "is compacted"), "no re-sync logged");
}

Test(cluster_view, etcd_faults)
{
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    cr_assert_eq(te_host_spawn(&H3, &E, "n3", "cluster_view"), 0);
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/p"), 0);
    WAIT_VIEW("cluster/csi-node/p/n1/instances", "0", 5000);

    /* SIGKILL the leader: after one election both go on */
    int l = te_leader(&E);
    cr_assert_geq(l, 0);
    int64_t t0 = tu_now_ms();
    te_signal(&E, l, SIGKILL);
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/q"), 0);
    WAIT_VIEW("cluster/csi-node/q/n1/instances", "0", 3000 + 2000);
    cr_log_info("leader killed: the view has n1's change after %lld ms",
                (long long)(tu_now_ms() - t0));
    cr_assert_eq(te_restart(&E, l), 0);

    /* SIGSTOP the view's member: its watch leaves it within about 3 s */
    int m = view_member();
    cr_assert_geq(m, 0);
    te_signal(&E, m, SIGSTOP);
    t0 = tu_now_ms();
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/r"), 0);
    WAIT_VIEW("cluster/csi-node/r/n1/instances", "0", 3000 + 2000);
    cr_log_info("member stopped: the view has n1's change after %lld ms",
                (long long)(tu_now_ms() - t0));
    cr_assert_neq(view_member(), m, "still watching the stopped member");
    te_signal(&E, m, SIGCONT);

    /* SIGSTOP all three, longer than the TTL */
    for (int i = 0; i < E.n; i++)
        te_signal(&E, i, SIGSTOP);
    t0 = tu_now_ms();
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/s && rmdir csi-node/q"), 0);
    cr_assert_lt(tu_now_ms() - t0, tu_ms(1000), "mkdir/rmdir waited for etcd");
    int64_t end = tu_now_ms() + tu_ms(5000);
    while (!strcmp(status_of("state"), "connected") && tu_now_ms() < end)
        tu_sleep_ms(50);
    cr_assert_str_neq(status_of("state"), "connected", "status: %s",
                      tf_cat(&H3.t, "cluster/status"));
    cr_log_info("all stopped: n3's status left connected after %lld ms",
                (long long)(tu_now_ms() - t0));
    while (tu_now_ms() - t0 < TTL_MS + 500)
        tu_sleep_ms(50);
    for (int i = 0; i < E.n; i++)
        te_signal(&E, i, SIGCONT);
    t0 = tu_now_ms();
    WAIT_VIEW("cluster/csi-node/s/n1/instances", "0", TTL_MS + 1000);
    WAIT_VIEW("cluster/csi-node/p/n1/instances", "0", TTL_MS + 1000);
    WAIT_VIEW("cluster/csi-node/r/n1/instances", "0", TTL_MS + 1000);
    WAIT_VIEW("cluster/csi-node/q", NULL, TTL_MS + 1000);
    cr_log_info("all continued: the view converged after %lld ms", (long long)(tu_now_ms() - t0));
}

static void tls_setup(void)
{
    setup_tls(true);
}

Test(cluster_view, over_tls_and_a_wrong_ca_refused, .init = tls_setup)
{
    char wrong[400];
    snprintf(wrong, sizeof(wrong), "cluster_view,cluster_cacert=%s/wrongca.pem", E.dir);
    cr_assert_eq(te_host_spawn(&H1, &E, "n1", NULL), 0);
    cr_assert_eq(te_host_spawn(&H3, &E, "n3", "cluster_view"), 0);
    cr_assert_eq(te_host_spawn(&H2, &E, "n2", wrong), 0);
    cr_assert_eq(tf_sh(&H1.t, "mkdir csi-node/p"), 0);
    WAIT_VIEW("cluster/csi-node/p/n1/instances", "0", 5000);
    struct want w = { &H2, "cluster/csi-node/p", NULL };
    cr_assert(holds(&w), "a view over a wrong CA has n1");
    int64_t end = tu_now_ms() + tu_ms(5000);
    while (!strstr(tf_cat(&H2.t, "cluster/status"), "view_state disconnected") &&
           tu_now_ms() < end)
        tu_sleep_ms(50);
    const char *st = tf_cat(&H2.t, "cluster/status");
    cr_log_info("wrong CA: %s", st);
    cr_assert(strstr(st, "view_state disconnected") && strstr(st, "Ssl handshake failed"), "%s",
              st);
    cr_assert(log_has(&H2, "cluster view: disconnected"));
}
