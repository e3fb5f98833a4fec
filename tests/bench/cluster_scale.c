/* cluster_view_scale: 1,000 simulated hosts x 5 plugins in etcd, written
 * by a child process (`csifs-bench --child cluster-fill`, with csifs's own
 * etcd client and the publisher's key and value encoders, cluster/value.h),
 * then a csifs host with -o cluster_view on that prefix: ms from its start
 * (fork) until the summary of each of the 5 plugins reads `nodes 1000`;
 * and its RssAnon then, less that of the same csifs whose view is of an
 * empty prefix (both fresh each repetition, the order alternating). */
#include "tests/bench/bench.h"
#include "tests/lib/etcdrun.h"

#include "cluster/etcd.h"
#include "cluster/value.h"
#include "registry/registry.h"

#include <errno.h>
#include <grpc/grpc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCALE_HOSTS   1000
#define SCALE_PLUGINS 5
#define SCALE_PREFIX  "/bench/scale"
#define EMPTY_PREFIX  "/bench/empty"

/* ---- the child: csifs-bench --child cluster-fill URL PREFIX HOSTS PLUGINS ---- */

/* Host h's plugin j as its publisher would write it. */
static int fill_kv(const char *prefix, int h, int j, char **key, char **val)
{
    struct cl_key k = { .type = REG_NODE };
    snprintf(k.node, sizeof(k.node), "host-%04d", h);
    snprintf(k.plugin, sizeof(k.plugin), "p%d", j);
    char nodeid[80], topo[160];
    snprintf(nodeid, sizeof(nodeid), "i-%012x", h * 7919 + j);
    snprintf(topo, sizeof(topo), "topology.kubernetes.io/region=r1,"
             "topology.kubernetes.io/zone=z%d", h % 3);
    struct cl_record r = { 0 };
    r.field[CL_F_CURRENT] = "alloc-3f2a9c1e";
    r.field[CL_F_HEALTH] = "healthy";
    r.field[CL_F_REASON] = "ok";
    r.field[CL_F_NODEID] = nodeid;
    r.field[CL_F_PROVIDER] = k.plugin;
    r.field[CL_F_VERSION] = "1.4.2";
    r.field[CL_F_MAX_VOLUMES] = "39";
    r.field[CL_F_TOPOLOGY] = topo;
    r.field[CL_F_INSTANCES] = "1";
    r.field[CL_F_HEALTHY] = "1";
    r.field[CL_F_UPDATED] = "2026-12-02T12:00:00Z";
    *key = cl_key_format(prefix, &k);
    return *key ? cl_value_format(&r, val) : -ENOMEM;
}

/* Txns of up to 127 puts (etcd's limit is 128 operations). */
static int fill(struct etcd_client *c, const char *prefix, int hosts, int plugins)
{
    enum { OPS = 127 };
    Etcdserverpb__RequestOp ops[OPS], *opp[OPS];
    Etcdserverpb__PutRequest puts[OPS];
    char *keys[OPS], *vals[OPS];
    int total = hosts * plugins, err = 0;
    for (int base = 0; base < total && !err; base += OPS) {
        int n = total - base < OPS ? total - base : OPS, k = 0;
        for (; k < n && !err; k++) {
            vals[k] = NULL;
            err = fill_kv(prefix, (base + k) / plugins, (base + k) % plugins, &keys[k], &vals[k]);
            if (err) {
                free(keys[k]);
                break;
            }
            etcdserverpb__put_request__init(&puts[k]);
            puts[k].key = (ProtobufCBinaryData){ strlen(keys[k]), (uint8_t *)keys[k] };
            puts[k].value = (ProtobufCBinaryData){ strlen(vals[k]), (uint8_t *)vals[k] };
            etcdserverpb__request_op__init(&ops[k]);
            ops[k].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
            ops[k].request_put = &puts[k];
            opp[k] = &ops[k];
        }
        if (!err) {
            Etcdserverpb__TxnRequest rq = ETCDSERVERPB__TXN_REQUEST__INIT;
            Etcdserverpb__TxnResponse *r = NULL;
            rq.n_success = (size_t)n;
            rq.success = opp;
            if ((err = etcd_txn(c, &rq, &r)) == 0)
                protobuf_c_message_free_unpacked(&r->base, NULL);
        }
        for (int i = 0; i < k; i++) {
            free(keys[i]);
            free(vals[i]);
        }
    }
    return err;
}

int cluster_fill_main(int argc, char **argv)
{
    if (argc != 4)
        return 2;
    const char *urls[] = { argv[0] };
    struct etcd_opts o = { .urls = urls, .n_urls = 1 };
    struct etcd_client *c;
    int hosts = atoi(argv[2]), plugins = atoi(argv[3]);
    grpc_init();
    int err = etcd_client_new(&o, &c);
    if (!err) {
        err = fill(c, argv[1], hosts, plugins);
        if (err) {
            char why[400];
            etcd_client_error(c, why, sizeof(why));
            fprintf(stderr, "cluster-fill: %s: %s\n", strerror(-err), why);
        }
        etcd_client_free(c);
    }
    grpc_shutdown_blocking();
    printf("%d\n", err ? 0 : hosts * plugins);
    return err ? 1 : 0;
}

/* ---- the row ---- */

/* Every plugin's summary reads `nodes <SCALE_HOSTS>`: true within timeout_s. */
static bool view_full(struct te_host *h, double timeout_s)
{
    char want[32], buf[256];
    snprintf(want, sizeof(want), "nodes %d\n", SCALE_HOSTS);
    for (double end = now_s() + timeout_s; now_s() < end; sleep_s(0.002)) {
        int j = 0;
        while (j < SCALE_PLUGINS && readf(&h->t, buf, sizeof(buf), "cluster/csi-node/p%d/summary",
                                          j) > 0 && !strncmp(buf, want, strlen(want)))
            j++;
        if (j == SCALE_PLUGINS)
            return true;
    }
    return false;
}

static bool view_connected(struct te_host *h, double timeout_s)
{
    char buf[4096];
    for (double end = now_s() + timeout_s; now_s() < end; sleep_s(0.01))
        if (readf(&h->t, buf, sizeof(buf), "cluster/status") > 0 &&
            strstr(buf, "\nview_state connected\n"))
            return true;
    return false;
}

/* A fresh view host on prefix: ms from its start to a full view (NAN for
 * the empty prefix: its view connected), its RssAnon (KiB) into *rss. */
static double view_host(struct te *e, const char *prefix, int rep, long *rss)
{
    struct te_host h = { 0 };
    char node[32], extra[128];
    bool empty = !strcmp(prefix, EMPTY_PREFIX);
    snprintf(node, sizeof(node), "%s%d", empty ? "empty" : "scale", rep);
    snprintf(extra, sizeof(extra), "nosync,cluster_view,cluster_prefix=%s", prefix);
    double t0 = now_s(), ms = NAN;
    *rss = -1;
    if (te_host_spawn(&h, e, node, extra) < 0) {
        say("cluster_view_scale: cannot start %s", node);
        return NAN;
    }
    bool ok = empty ? view_connected(&h, 10) : view_full(&h, 30);
    double t1 = now_s();
    if (!ok)
        say("cluster_view_scale: %s: the view did not %s", node, empty ? "connect" : "fill");
    else if (!empty)
        ms = (t1 - t0) * 1e3;
    sleep_s(0.5);                   /* what the view keeps, not its passing peaks */
    if (ok)
        *rss = proc_rss_anon_kib(h.t.pid);
    tf_stop(&h.t);
    return ms;
}

void cluster_scale(struct te *e)
{
    char hosts[16], plugins[16];
    snprintf(hosts, sizeof(hosts), "%d", SCALE_HOSTS);
    snprintf(plugins, sizeof(plugins), "%d", SCALE_PLUGINS);
    const char *argv[] = { self_exe(), "--child", "cluster-fill", e->url[0], SCALE_PREFIX, hosts,
                           plugins, NULL };
    double t0 = now_s(), keys = run_value(argv);
    if (keys != SCALE_HOSTS * SCALE_PLUGINS) {
        say("cluster_view_scale: the fill failed");
        return;
    }
    say("cluster: %.0f keys written in %.2f s", keys, now_s() - t0);
    for (int rep = 0; rep < cfg.reps; rep++) {
        long rss, base;
        double ms;
        if (rep % 2 == 0) {
            ms = view_host(e, SCALE_PREFIX, rep, &rss);
            view_host(e, EMPTY_PREFIX, rep, &base);
        } else {
            view_host(e, EMPTY_PREFIX, rep, &base);
            ms = view_host(e, SCALE_PREFIX, rep, &rss);
        }
        bench_sample(R_CLUSTER_VIEW_SCALE, ms,
                     rss < 0 || base < 0 ? NAN : (double)(rss - base) / 1024.0, NAN);
    }
    bench_note(R_CLUSTER_VIEW_SCALE, "%d hosts x %d plugins (%d keys); RssAnon against the same "
               "csifs viewing an empty prefix", SCALE_HOSTS, SCALE_PLUGINS,
               SCALE_HOSTS * SCALE_PLUGINS);
}
