/* cluster/etcd.h against a real 3-member etcd 3.4 on loopback. */
#include "cluster/etcd.h"
#include "tests/lib/etcdrun.h"
#include "tests/lib/testutil.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <grpc/grpc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct te E;
static struct etcd_client *cli;

static int open_client(const char *ca, const char *cert, const char *key)
{
    const char *urls[TE_MAX];
    for (int i = 0; i < E.n; i++)
        urls[i] = E.url[i];
    struct etcd_opts o = { .urls = urls, .n_urls = E.n, .cacert = ca, .cert = cert, .key = key };
    return etcd_client_new(&o, &cli);
}

static void up(bool tls)
{
    grpc_init();
    cr_assert_eq(te_start(&E, 3, tls), 0, "etcd cluster did not start (logs in %s)", E.dir);
}

static void setup(void)
{
    up(false);
    cr_assert_eq(open_client(NULL, NULL, NULL), 0, "%s", etcd_opts_why());
}

static void teardown(void)
{
    etcd_client_free(cli);
    cli = NULL;
    te_stop(&E);
    grpc_shutdown_blocking();
}

TestSuite(etcd_client, .init = setup, .fini = teardown, .timeout = 120);

static Etcdserverpb__RequestOp *put_op(const char *k, const char *v, int64_t lease)
{
    Etcdserverpb__RequestOp *op = calloc(1, sizeof(*op));
    Etcdserverpb__PutRequest *p = calloc(1, sizeof(*p));
    etcdserverpb__request_op__init(op);
    etcdserverpb__put_request__init(p);
    p->key.data = (uint8_t *)k;
    p->key.len = strlen(k);
    p->value.data = (uint8_t *)v;
    p->value.len = strlen(v);
    p->lease = lease;
    op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op->request_put = p;
    return op;
}

static int put(const char *k, const char *v, int64_t lease)
{
    Etcdserverpb__RequestOp *op = put_op(k, v, lease);
    Etcdserverpb__TxnRequest rq = ETCDSERVERPB__TXN_REQUEST__INIT;
    rq.n_success = 1;
    rq.success = &op;
    Etcdserverpb__TxnResponse *r;
    int err = etcd_txn(cli, &rq, &r);
    if (!err) {
        cr_assert(r->succeeded);
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    free(op->request_put);
    free(op);
    return err;
}

/* Count of keys under prefix (-errno on failure); limit 0 = all. */
static int64_t count_prefix(const char *prefix, int64_t limit, int64_t rev, bool *more)
{
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    cr_assert_eq(etcd_prefix_range(prefix, &rq.key, &rq.range_end), 0);
    rq.limit = limit;
    rq.revision = rev;
    rq.keys_only = true;
    Etcdserverpb__RangeResponse *r;
    int err = etcd_range(cli, &rq, &r);
    free(rq.range_end.data);
    if (err)
        return err;
    int64_t n = (int64_t)r->n_kvs;
    if (more)
        *more = r->more;
    for (size_t i = 0; i < r->n_kvs; i++)
        cr_assert_eq(r->kvs[i]->value.len, 0, "keys_only returned a value");
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return n;
}

Test(etcd_client, txn_puts_and_paged_keys_only_range)
{
    for (int i = 0; i < 5; i++) {
        char k[32];
        snprintf(k, sizeof(k), "/t/k%d", i);
        cr_assert_eq(put(k, "v", 0), 0);
    }
    bool more = false;
    cr_assert_eq(count_prefix("/t/", 0, 0, &more), 5);
    cr_assert(!more);
    cr_assert_eq(count_prefix("/t/", 2, 0, &more), 2);
    cr_assert(more);
    char *out = NULL;
    cr_assert_eq(te_ctl(&E, &out, "get /t/k3 --print-value-only"), 0);
    cr_assert_str_eq(out, "v\n");
    free(out);
}

Test(etcd_client, a_txn_of_129_operations_is_refused_as_invalid)
{
    Etcdserverpb__RequestOp *ops[129];
    char keys[129][16];
    for (int i = 0; i < 129; i++) {
        snprintf(keys[i], sizeof(keys[i]), "/big/%d", i);
        ops[i] = put_op(keys[i], "x", 0);
    }
    Etcdserverpb__TxnRequest rq = ETCDSERVERPB__TXN_REQUEST__INIT;
    rq.n_success = 129;
    rq.success = ops;
    Etcdserverpb__TxnResponse *r;
    cr_assert_eq(etcd_txn(cli, &rq, &r), -EINVAL);
    char err[400];
    etcd_client_error(cli, err, sizeof(err));
    cr_assert(strstr(err, "too many operations"), "%s", err);
    rq.n_success = 127;
    cr_assert_eq(etcd_txn(cli, &rq, &r), 0);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    for (int i = 0; i < 129; i++) {
        free(ops[i]->request_put);
        free(ops[i]);
    }
    cr_assert_eq(count_prefix("/big/", 0, 0, NULL), 127);
}

Test(etcd_client, lease_grant_ttl_revoke)
{
    int64_t id = 0, ttl = 0;
    cr_assert_eq(etcd_lease_grant(cli, 5, &id, &ttl), 0);
    cr_assert_neq(id, 0);
    cr_assert_eq(ttl, 5);
    cr_assert_eq(put("/lease/a", "1", id), 0);
    int64_t left = -1;
    cr_assert_eq(etcd_lease_ttl(cli, id, &left), 0);
    cr_assert(left > 0 && left <= 5, "ttl %lld", (long long)left);
    cr_assert_eq(etcd_lease_revoke(cli, id), 0);
    cr_assert_eq(count_prefix("/lease/", 0, 0, NULL), 0, "revoke left the key");
    cr_assert_eq(etcd_lease_ttl(cli, id, &left), -ENOENT);
    cr_assert_eq(etcd_lease_revoke(cli, id), -ENOENT);
}

Test(etcd_client, keepalive_stream_keeps_a_lease_and_its_end_lets_it_expire)
{
    int64_t id, ttl;
    cr_assert_eq(etcd_lease_grant(cli, 2, &id, &ttl), 0);
    cr_assert_eq(put("/ka/a", "1", id), 0);
    struct etcd_stream *s;
    cr_assert_eq(etcd_stream_open(cli, ETCD_STREAM_KEEPALIVE, &s), 0);
    Etcdserverpb__LeaseKeepAliveRequest rq = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    rq.id = id;
    for (int i = 0; i < 6; i++) {       /* 4 s: twice the TTL */
        cr_assert_eq(etcd_stream_send(s, &rq.base), 0);
        ProtobufCMessage *m;
        cr_assert_eq(etcd_stream_recv(s, (int)tu_ms(1000), &m), 0);
        Etcdserverpb__LeaseKeepAliveResponse *r = (Etcdserverpb__LeaseKeepAliveResponse *)m;
        cr_assert_eq(r->id, id);
        cr_assert_eq(r->ttl, 2);
        protobuf_c_message_free_unpacked(m, NULL);
        tu_sleep_ms(660);
    }
    cr_assert_eq(count_prefix("/ka/", 0, 0, NULL), 1, "the kept lease expired");
    etcd_stream_close(s);
    int64_t end = tu_now_ms() + tu_ms(2000) + 2000;
    while (count_prefix("/ka/", 0, 0, NULL) != 0 && tu_now_ms() < end)
        tu_sleep_ms(100);
    cr_assert_eq(count_prefix("/ka/", 0, 0, NULL), 0, "the key outlived its lease");
}

/* The next WatchResponse with events (or canceled) within ms. */
static Etcdserverpb__WatchResponse *next_watch(struct etcd_stream *s, int ms)
{
    int64_t end = tu_now_ms() + tu_ms(ms);
    while (tu_now_ms() < end) {
        ProtobufCMessage *m;
        int err = etcd_stream_recv(s, 100, &m);
        if (err == -ETIMEDOUT)
            continue;
        cr_assert_eq(err, 0, "watch stream ended");
        Etcdserverpb__WatchResponse *w = (Etcdserverpb__WatchResponse *)m;
        if (w->n_events || w->canceled)
            return w;
        protobuf_c_message_free_unpacked(m, NULL);
    }
    return NULL;
}

static struct etcd_stream *watch_from(const char *prefix, int64_t rev)
{
    struct etcd_stream *s;
    cr_assert_eq(etcd_stream_open(cli, ETCD_STREAM_WATCH, &s), 0);
    Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    cr_assert_eq(etcd_prefix_range(prefix, &cr.key, &cr.range_end), 0);
    cr.start_revision = rev;
    Etcdserverpb__WatchRequest rq = ETCDSERVERPB__WATCH_REQUEST__INIT;
    rq.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
    rq.create_request = &cr;
    cr_assert_eq(etcd_stream_send(s, &rq.base), 0);
    free(cr.range_end.data);
    return s;
}

Test(etcd_client, watch_stream_sees_puts_and_deletes)
{
    struct etcd_stream *s = watch_from("/w/", 0);
    ProtobufCMessage *m;
    cr_assert_eq(etcd_stream_recv(s, (int)tu_ms(2000), &m), 0);
    cr_assert(((Etcdserverpb__WatchResponse *)m)->created);
    protobuf_c_message_free_unpacked(m, NULL);
    cr_assert_eq(te_ctl(&E, NULL, "put /w/a hello"), 0);
    Etcdserverpb__WatchResponse *w = next_watch(s, 3000);
    cr_assert(w);
    cr_assert_eq(w->events[0]->type, ETCDSERVERPB__EVENT__EVENT_TYPE__PUT);
    cr_assert_eq(w->events[0]->kv->key.len, 4);
    cr_assert_eq(memcmp(w->events[0]->kv->value.data, "hello", 5), 0);
    protobuf_c_message_free_unpacked(&w->base, NULL);
    cr_assert_eq(te_ctl(&E, NULL, "del /w/a"), 0);
    w = next_watch(s, 3000);
    cr_assert(w);
    cr_assert_eq(w->events[0]->type, ETCDSERVERPB__EVENT__EVENT_TYPE__DELETE);
    protobuf_c_message_free_unpacked(&w->base, NULL);
    etcd_stream_close(s);
}

Test(etcd_client, compacted_revisions_are_erange_and_a_canceled_watch)
{
    cr_assert_eq(put("/c/a", "1", 0), 0);
    cr_assert_eq(put("/c/a", "2", 0), 0);
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rq.key.data = (uint8_t *)"/c/a";
    rq.key.len = 4;
    Etcdserverpb__RangeResponse *r;
    cr_assert_eq(etcd_range(cli, &rq, &r), 0);
    int64_t rev = r->header->revision;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    cr_assert_eq(etcd_compact(cli, rev), 0);
    cr_assert_eq(count_prefix("/c/", 0, rev - 1, NULL), -ERANGE);
    struct etcd_stream *s = watch_from("/c/", rev - 1);
    Etcdserverpb__WatchResponse *w = next_watch(s, 3000);
    cr_assert(w && w->canceled && w->compact_revision == rev, "no canceled watch");
    protobuf_c_message_free_unpacked(&w->base, NULL);
    etcd_stream_close(s);
}

Test(etcd_client, a_killed_or_stopped_member_is_skipped_within_the_deadline)
{
    cr_assert_eq(put("/f/a", "1", 0), 0);
    char ep[64];
    etcd_client_endpoint(cli, ep, sizeof(ep));
    int cur = -1;
    for (int i = 0; i < E.n; i++)
        if (strstr(E.url[i], ep))
            cur = i;
    cr_assert_geq(cur, 0);
    te_signal(&E, cur, SIGSTOP);
    int64_t t0 = tu_now_ms();
    /* the cluster keeps a quorum: the next endpoint answers */
    int64_t n = -1;
    while ((n = count_prefix("/f/", 0, 0, NULL)) < 0 && tu_now_ms() - t0 < tu_ms(10000))
        ;
    cr_assert_eq(n, 1, "no endpoint answered: %lld", (long long)n);
    etcd_client_endpoint(cli, ep, sizeof(ep));
    cr_assert(!strstr(E.url[cur], ep), "still on the stopped member");
    te_signal(&E, cur, SIGCONT);
    te_signal(&E, (cur + 1) % E.n, SIGKILL);
    /* two members left: at most an election (a few failed tries) */
    t0 = tu_now_ms();
    int err;
    while ((err = put("/f/b", "1", 0)) != 0 && tu_now_ms() - t0 < tu_ms(10000))
        tu_sleep_ms(100);
    cr_assert_eq(err, 0);
    cr_assert_eq(count_prefix("/f/", 0, 0, NULL), 2);
}

Test(etcd_client, bad_urls_and_tls_options_are_refused_clearly)
{
    struct { const char *url, *ca, *cert, *key, *why; } bad[] = {
        { "127.0.0.1:2379", NULL, NULL, NULL, "must start with http:// or https://" },
        { "http://127.0.0.1", NULL, NULL, NULL, "host:port" },
        { "http://:2379", NULL, NULL, NULL, "host:port" },
        { "https://127.0.0.1:2379", NULL, NULL, NULL, "needs cluster_cacert=" },
        { "http://127.0.0.1:2379", "/x", NULL, NULL, "need https://" },
        { "https://127.0.0.1:2379", "/x", "/y", NULL, "go together" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *u[] = { bad[i].url };
        struct etcd_opts o = { u, 1, bad[i].ca, bad[i].cert, bad[i].key };
        struct etcd_client *c = NULL;
        cr_assert_eq(etcd_client_new(&o, &c), -EINVAL, "%s accepted", bad[i].url);
        cr_assert(strstr(etcd_opts_why(), bad[i].why), "%s: %s", bad[i].url, etcd_opts_why());
    }
    const char *u[] = { "https://127.0.0.1:2379" };
    struct etcd_opts o = { u, 1, "/nonexistent/ca.pem", NULL, NULL };
    struct etcd_client *c = NULL;
    cr_assert_eq(etcd_client_new(&o, &c), -ENOENT);
}

static void tls_setup(void)
{
    etcd_client_free(cli);              /* a test's .init runs after the suite's */
    cli = NULL;
    te_stop(&E);
    up(true);
}

Test(etcd_client, tls_with_a_client_certificate, .init = tls_setup)
{
    cr_assert_eq(open_client(E.ca, E.cert, E.key), 0, "%s", etcd_opts_why());
    cr_assert_eq(put("/tls/a", "1", 0), 0);
    cr_assert_eq(count_prefix("/tls/", 0, 0, NULL), 1);
    etcd_client_free(cli);
    cli = NULL;
    char wrong[320];
    snprintf(wrong, sizeof(wrong), "%s/wrongca.pem", E.dir);
    cr_assert_eq(open_client(wrong, E.cert, E.key), 0, "%s", etcd_opts_why());
    cr_assert_eq(count_prefix("/tls/", 0, 0, NULL), -ECONNREFUSED);
    char err[400];
    etcd_client_error(cli, err, sizeof(err));
    cr_log_info("wrong CA: %s", err);
    cr_assert(strstr(err, "Ssl handshake failed") && strstr(err, "certificate verif"), "%s", err);
}
