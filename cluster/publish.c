/* cluster publisher: the thread, the session (lease, info claim,
 * keepalive), the dirty set and the status (see publish.h). */
#include "cluster/publish_int.h"
#include "cluster/value.h"
#include "base/counters.h"
#include "base/defaults.h"
#include "base/log.h"
#include "base/thread.h"

#include <errno.h>
#include <grpc/grpc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RETRY_MS 500

static const char *const state_names[] = {
    [CL_CONNECTING] = "connecting", [CL_CONNECTED] = "connected",
    [CL_DISCONNECTED] = "disconnected", [CL_CONFLICT] = "conflict",
};

static void set_state(struct cl_pub *p, enum cl_state st)
{
    pthread_mutex_lock(&p->mu);
    enum cl_state old = p->st;
    p->st = st;
    pthread_mutex_unlock(&p->mu);
    cnt_set(&cnt.cluster_up, st == CL_CONNECTED);
    if (old != st)
        csifs_log(st == CL_CONNECTED ? LOG_INFO : LOG_WARNING, "cluster: %s", state_names[st]);
}

static void on_change(const struct reg_change *c, void *arg)
{
    if (c->kind == REG_C_HISTORY)
        return;
    struct cl_plugin_ref r = { .type = c->type };
    snprintf(r.name, sizeof(r.name), "%s", c->plugin_name);
    cl_pub_mark(arg, &r);
}

/* Wait on cv until deadline (monotonic ms) or a signal; false once stopping. */
static bool sleep_until(struct cl_pub *p, int64_t deadline_ms, bool wake_on_dirty)
{
    struct timespec ts = { deadline_ms / 1000, (deadline_ms % 1000) * 1000000 };
    pthread_mutex_lock(&p->mu);
    while (!p->stop && !(wake_on_dirty && p->n_dirty) && csifs_mono_ms() < deadline_ms)
        if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT)
            break;
    bool go = !p->stop;
    pthread_mutex_unlock(&p->mu);
    return go;
}

/* ---- the session ---- */

static char *info_value(struct cl_pub *p)
{
    char *v = NULL, stamp[32];
    time_t t = (time_t)(p->started_ns / 1000000000);
    struct tm tm;
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    if (asprintf(&v, "instance %s\nversion %s\nstarted %s\nmount_point %s\n", p->instance,
                 p->version, stamp, p->mnt) < 0)
        return NULL;
    return v;
}

/* The info key as it is: *mod 0 when absent; *theirs the instance it
 * names when not ours (malloc'd). */
static int read_info(struct cl_pub *p, int64_t *mod, char **theirs)
{
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    rq.key = (ProtobufCBinaryData){ strlen(p->info_key), (uint8_t *)p->info_key };
    Etcdserverpb__RangeResponse *r;
    int err = etcd_range(p->c, &rq, &r);
    if (err) {
        cl_pub_note_error(p, "Range", err);
        return err;
    }
    *mod = 0;
    *theirs = NULL;
    if (r->n_kvs) {
        const ProtobufCBinaryData *v = &r->kvs[0]->value;
        const char *s = memmem(v->data, v->len, "instance ", 9);
        size_t off = s ? (size_t)(s - (const char *)v->data) + 9 : v->len;
        size_t n = off < v->len ? strcspn((const char *)v->data + off, "\n") : 0;
        if (n > v->len - off)
            n = v->len - off;
        *mod = r->kvs[0]->mod_revision;
        if (n != CL_INSTANCE_LEN || memcmp(v->data + off, p->instance, n))
            *theirs = n ? strndup((const char *)v->data + off, n) : strdup("?");
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return 0;
}

/* Put info if it is still as read (absent: create_revision 0; ours: the
 * same mod_revision). -EAGAIN when it changed meanwhile. */
static int claim_info(struct cl_pub *p, int64_t mod)
{
    char *v = info_value(p);
    if (!v)
        return -ENOMEM;
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT, *cmpp = &cmp;
    cmp.key = (ProtobufCBinaryData){ strlen(p->info_key), (uint8_t *)p->info_key };
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = mod ? ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD
                     : ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
    cmp.target_union_case = mod ? ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION
                                : ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
    cmp.mod_revision = mod;             /* create_revision shares the union: 0 */
    Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
    put.key = cmp.key;
    put.value = (ProtobufCBinaryData){ strlen(v), (uint8_t *)v };
    put.lease = p->lease;
    Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *opp = &op;
    op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
    op.request_put = &put;
    Etcdserverpb__TxnRequest rq = ETCDSERVERPB__TXN_REQUEST__INIT;
    rq.n_compare = 1;
    rq.compare = &cmpp;
    rq.n_success = 1;
    rq.success = &opp;
    Etcdserverpb__TxnResponse *r;
    int err = etcd_txn(p->c, &rq, &r);
    free(v);
    if (err) {
        cl_pub_note_error(p, "Txn", err);
        return err;
    }
    err = r->succeeded ? 0 : -EAGAIN;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return err;
}

/* The lease: the old one when alive, else a new one (stored before use). */
static int take_lease(struct cl_pub *p)
{
    if (p->lease) {
        int64_t left;
        int err = etcd_lease_ttl(p->c, p->lease, &left);
        if (err == 0 && left > 0)
            return 0;
        if (err && err != -ENOENT) {
            cl_pub_note_error(p, "LeaseTimeToLive", err);
            return err;
        }
        pthread_mutex_lock(&p->mu);
        p->counts.lost_leases++;
        pthread_mutex_unlock(&p->mu);
        csifs_log(LOG_INFO, "cluster: lease %llx is gone; granting a new one",
                (unsigned long long)p->lease);
    }
    int64_t id, ttl;
    int err = etcd_lease_grant(p->c, p->ttl_s, &id, &ttl);
    if (err) {
        cl_pub_note_error(p, "LeaseGrant", err);
        return err;
    }
    pthread_mutex_lock(&p->mu);
    p->lease = id;
    pthread_mutex_unlock(&p->mu);
    if ((err = cl_ident_save_lease(p->state, id)) < 0)
        csifs_log(LOG_WARNING, "cluster: cannot keep the lease ID in %s/cluster.mdb: %s", p->state,
                strerror(-err));
    return 0;
}

static int establish(struct cl_pub *p)
{
    int64_t mod;
    char *theirs = NULL;
    int err = read_info(p, &mod, &theirs);
    if (!err && theirs) {
        pthread_mutex_lock(&p->mu);
        snprintf(p->error, sizeof(p->error),
                 "conflict: node %s is published by another csifs (instance %s)", p->o->node,
                 theirs);
        bool logged = p->st == CL_CONFLICT;
        pthread_mutex_unlock(&p->mu);
        if (!logged)
            csifs_log(LOG_ERR, "cluster: node name %s is in use by another csifs (instance %s, "
                    "key %s): publishing nothing; retrying every %llds", p->o->node, theirs,
                    p->info_key, (long long)p->ttl_s);
        free(theirs);
        return -EADDRINUSE;
    }
    if (!err)
        err = take_lease(p);
    if (!err)
        err = claim_info(p, mod);
    if (!err) {
        /* the reconcile reads every plugin after this: a change made while
         * it runs stays dirty */
        pthread_mutex_lock(&p->mu);
        p->n_dirty = 0;
        pthread_mutex_unlock(&p->mu);
        err = cl_pub_reconcile(p);
    }
    if (err)
        return err;
    p->session = true;
    p->ka_ok_ms = csifs_mono_ms();
    p->ka_next_ms = p->ka_ok_ms + p->ttl_s * 1000 / 3;
    pthread_mutex_lock(&p->mu);
    p->counts.sessions++;
    p->error[0] = '\0';
    pthread_mutex_unlock(&p->mu);
    return 0;
}

static void end_session(struct cl_pub *p)
{
    p->session = false;
    etcd_stream_close(p->ka);
    p->ka = NULL;
    etcd_client_failover(p->c);
}

/* One KeepAlive: 0, -ENOENT when etcd says the lease is gone, or another
 * error (the stream is dropped; the lease is lost only once none was
 * answered for ttl/3 plus the deadline). */
static int keepalive(struct cl_pub *p)
{
    int64_t now = csifs_mono_ms();
    int err = p->ka ? 0 : etcd_stream_open(p->c, ETCD_STREAM_KEEPALIVE, &p->ka);
    Etcdserverpb__LeaseKeepAliveRequest rq = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
    rq.id = p->lease;
    if (!err)
        err = etcd_stream_send(p->ka, &rq.base);
    ProtobufCMessage *m = NULL;
    if (!err)
        err = etcd_stream_recv(p->ka, ETCD_DEADLINE_MS, &m);
    if (!err) {
        Etcdserverpb__LeaseKeepAliveResponse *r = (Etcdserverpb__LeaseKeepAliveResponse *)m;
        err = r->ttl <= 0 ? -ENOENT : 0;
        protobuf_c_message_free_unpacked(m, NULL);
        if (!err) {
            p->ka_ok_ms = csifs_mono_ms();
            p->ka_next_ms = p->ka_ok_ms + p->ttl_s * 1000 / 3;
            return 0;
        }
        cl_pub_note_error(p, "KeepAlive: the lease is gone", -ENOENT);
        return err;
    }
    cl_pub_note_error(p, "KeepAlive", err);
    etcd_stream_close(p->ka);
    p->ka = NULL;
    etcd_client_failover(p->c);
    if (now - p->ka_ok_ms > p->ttl_s * 1000 / 3 + ETCD_DEADLINE_MS)
        return -ETIMEDOUT;
    p->ka_next_ms = now + 100;
    return 0;
}

static void flush(struct cl_pub *p)
{
    pthread_mutex_lock(&p->mu);
    struct cl_plugin_ref *refs = p->dirty;
    size_t n = p->n_dirty;
    p->dirty = NULL;
    p->n_dirty = p->cap_dirty = 0;
    pthread_mutex_unlock(&p->mu);
    p->sent_ms = csifs_mono_ms();
    if (cl_pub_write(p, refs, n) < 0)
        end_session(p);
    free(refs);
}

static void *run(void *arg)
{
    struct cl_pub *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        bool stop = p->stop;
        size_t dirty = p->n_dirty;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        if (!p->session) {
            int err = establish(p);
            if (err) {
                set_state(p, err == -EADDRINUSE ? CL_CONFLICT : CL_DISCONNECTED);
                if (err != -EADDRINUSE)
                    etcd_client_failover(p->c);
                sleep_until(p, csifs_mono_ms() + (err == -EADDRINUSE ? p->ttl_s * 1000 : RETRY_MS),
                            false);
                continue;
            }
            set_state(p, CL_CONNECTED);
            continue;
        }
        int64_t now = csifs_mono_ms();
        if (now >= p->ka_next_ms) {
            if (keepalive(p) < 0) {
                end_session(p);
                set_state(p, CL_DISCONNECTED);
            }
            continue;
        }
        if (dirty && now - p->sent_ms >= CL_COALESCE_MS) {
            flush(p);
            if (!p->session)
                set_state(p, CL_DISCONNECTED);
            continue;
        }
        int64_t until = p->ka_next_ms;
        if (dirty && p->sent_ms + CL_COALESCE_MS < until)
            until = p->sent_ms + CL_COALESCE_MS;
        sleep_until(p, until, !dirty);
    }
    if (p->revoke && p->lease) {
        int err = etcd_lease_revoke(p->c, p->lease);
        if (err && err != -ENOENT)
            cl_pub_note_error(p, "LeaseRevoke", err);
        else if (cl_ident_save_lease(p->state, 0) == 0)
            csifs_log(LOG_INFO, "cluster: lease %llx revoked", (unsigned long long)p->lease);
    }
    etcd_stream_close(p->ka);
    p->ka = NULL;
    return NULL;
}

int cl_pub_start(struct cl_pub **out, const struct cl_opts *o, struct reg *reg,
                 const char *state, const char *mountpoint, const char *version)
{
    struct cl_pub *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->o = o;
    p->reg = reg;
    p->ttl_s = o->ttl_ms / 1000;
    p->started_ns = csifs_real_ns();
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    grpc_init();
    cnt_set(&cnt.cluster_on, 1);
    struct etcd_opts eo = { (const char *const *)o->urls, o->n_urls, o->cacert, o->cert, o->key };
    int err = -ENOMEM;
    if ((p->state = strdup(state)) && (p->mnt = strdup(mountpoint)) &&
        (p->version = strdup(version)) &&
        asprintf(&p->host_prefix, "%s/hosts/%s/", o->prefix, o->node) >= 0 &&
        asprintf(&p->info_key, "%sinfo", p->host_prefix) >= 0)
        err = etcd_client_new(&eo, &p->c);
    if (!err && (err = cl_ident_load(state, p->instance, &p->lease)) < 0)
        csifs_log(LOG_ERR, "cluster: %s/cluster.mdb: %s", state, strerror(-err));
    if (!err)
        err = reg_subscribe_after(reg, on_change, p);
    if (!err && (err = csifs_thread_start(&p->th, "csifs-publish", run, p)) == 0)
        p->started = true;
    if (err) {
        cl_pub_free(p);
        return err;
    }
    *out = p;
    return 0;
}

void cl_pub_stop(struct cl_pub *p, bool revoke)
{
    if (!p || !p->started)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    p->revoke = revoke;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    p->started = false;
}

void cl_pub_free(struct cl_pub *p)
{
    if (!p)
        return;
    cl_pub_stop(p, false);
    etcd_client_free(p->c);
    cl_pub_cache_clear(p);
    free(p->cache);
    free(p->dirty);
    free(p->state);
    free(p->mnt);
    free(p->version);
    free(p->host_prefix);
    free(p->info_key);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
    grpc_shutdown();
}

int cl_pub_status(struct cl_pub *p, char *buf, size_t cap)
{
    char ep[128];
    etcd_client_endpoint(p->c, ep, sizeof(ep));
    pthread_mutex_lock(&p->mu);
    int n = snprintf(buf, cap,
                     "state %s\nendpoint %s\nnode %s\nlease %llx\nrevision %lld\npending %zu\n"
                     "error %s\n",
                     state_names[p->st], ep, p->o->node, (unsigned long long)p->lease,
                     (long long)p->revision, p->n_dirty, p->error);
    pthread_mutex_unlock(&p->mu);
    return n;
}

void cl_pub_counts(struct cl_pub *p, struct cl_pub_counts *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->counts;
    pthread_mutex_unlock(&p->mu);
}
