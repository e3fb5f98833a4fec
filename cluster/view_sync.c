/* cluster view: the thread (Range in pages, then Watch), start, stop and
 * the status (view.h). */
#include "cluster/view_int.h"
#include "cluster/publish.h"
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

#define RETRY_MS    500
#define QUIET_MS    1000                /* a watch this quiet is asked for progress */

static const char *const state_names[] = {
    [CL_V_CONNECTING] = "connecting", [CL_V_CONNECTED] = "connected",
    [CL_V_DISCONNECTED] = "disconnected",
};

static void set_state(struct cl_view *v, enum cl_vstate st, const char *what, int err)
{
    char e[400] = "";
    if (err)
        etcd_client_error(v->c, e, sizeof(e));
    pthread_mutex_lock(&v->mu);
    if (v->st != st)
        csifs_log(st == CL_V_CONNECTED ? LOG_NOTICE : LOG_WARNING, "cluster view: %s%s%s",
                  state_names[st], err ? ": " : "", err ? (*e ? e : strerror(-err)) : "");
    v->st = st;
    if (err && (err == -ESTALE || !*e))
        snprintf(v->error, sizeof(v->error), "%s: %s", what, strerror(-err));
    else if (err)
        snprintf(v->error, sizeof(v->error), "%s", e);
    pthread_mutex_unlock(&v->mu);
}

/* Sleep until ms from now or stop: true when stopping. */
static bool nap(struct cl_view *v, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&v->mu);
    while (!v->stop && pthread_cond_timedwait(&v->cv, &v->mu, &ts) == 0)
        ;
    bool stop = v->stop;
    pthread_mutex_unlock(&v->mu);
    return stop;
}

/* The key for a log line: printable bytes, others as \xHH, cut at 120. */
static void printable(const uint8_t *k, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 5 < cap && i < 120; i++)
        o += (size_t)(k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\'
                          ? snprintf(out + o, cap - o, "%c", k[i])
                          : snprintf(out + o, cap - o, "\\x%02x", k[i]));
    out[o] = '\0';
}

/* One key's put (value given) or delete, under v->mu. */
static void apply(struct cl_view *v, const ProtobufCBinaryData *key,
                  const ProtobufCBinaryData *value, bool put)
{
    struct cl_key k;
    char shown[700];
    if (cl_key_parse(v->o->prefix, key->data, key->len, &k) < 0) {
        if (put) {
            printable(key->data, key->len, shown, sizeof(shown));
            csifs_log(LOG_WARNING, "cluster view: ignored key %s: not %s/hosts/<node>/<type>/"
                      "<plugin>", shown, v->o->prefix);
        }
        return;
    }
    if (k.type < 0)
        return;                         /* a host's info key: not in the view */
    struct cl_record rec;
    if (!put) {
        cl_view_del(v, &k);
    } else if (cl_value_parse(value->data, value->len, &rec) == 0) {
        cl_view_put(v, &k, &rec);
    } else {
        printable(key->data, key->len, shown, sizeof(shown));
        csifs_log(LOG_WARNING, "cluster view: ignored key %s: its value (%zu bytes) is not "
                  "`name value` lines of at most %d bytes", shown, value->len, CL_VALUE_MAX);
        cl_view_del(v, &k);
    }
}

static void set_revision(struct cl_view *v, int64_t rev)
{
    pthread_mutex_lock(&v->mu);
    if (rev > v->revision)
        v->revision = rev;
    cnt_set(&cnt.cluster_view_nodes, v->n_nodes);
    pthread_mutex_unlock(&v->mu);
}

/* A Range of every host's keys in pages at one revision; keys gone since
 * the last sync are removed. 0 with *rev, or -errno. */
static int sync_all(struct cl_view *v, int64_t *rev)
{
    ProtobufCBinaryData start, end;
    int err = etcd_prefix_range(v->hosts, &start, &end);
    if (err)
        return err;
    uint8_t *next = NULL;
    int64_t at = 0, limit = CL_VIEW_PAGE;
    pthread_mutex_lock(&v->mu);
    unsigned gen = ++v->gen;
    pthread_mutex_unlock(&v->mu);
    for (bool more = true; more && !err;) {
        Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
        rq.key = start;
        rq.range_end = end;
        rq.limit = limit;
        rq.revision = at;
        Etcdserverpb__RangeResponse *r = NULL;
        err = etcd_range(v->c, &rq, &r);
        if (err == -EIO && limit > 1) {
            limit /= 2;                 /* a page over the receive limit: smaller pages */
            err = 0;
            continue;
        }
        if (err)
            break;
        if (!at)
            at = r->header ? r->header->revision : 0;
        pthread_mutex_lock(&v->mu);
        for (size_t i = 0; i < r->n_kvs; i++)
            apply(v, &r->kvs[i]->key, &r->kvs[i]->value, true);
        pthread_mutex_unlock(&v->mu);
        cl_view_tell(v);
        more = r->more && r->n_kvs > 0;
        if (more) {                     /* the next page: after the last key */
            const ProtobufCBinaryData *lk = &r->kvs[r->n_kvs - 1]->key;
            uint8_t *n = malloc(lk->len + 1);
            if (!n) {
                err = -ENOMEM;
            } else {
                memcpy(n, lk->data, lk->len);
                n[lk->len] = 0;
                free(next);
                next = n;
                start.data = next;
                start.len = lk->len + 1;
            }
        }
        protobuf_c_message_free_unpacked(&r->base, NULL);
    }
    free(next);
    free(end.data);
    if (err)
        return err;
    pthread_mutex_lock(&v->mu);
    cl_view_sweep(v, gen);
    pthread_mutex_unlock(&v->mu);
    cl_view_tell(v);
    set_revision(v, at);
    *rev = at;
    return 0;
}

static int watch_send(struct etcd_stream *s, int64_t from, const char *hosts, bool progress)
{
    Etcdserverpb__WatchRequest rq = ETCDSERVERPB__WATCH_REQUEST__INIT;
    Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
    Etcdserverpb__WatchProgressRequest pr = ETCDSERVERPB__WATCH_PROGRESS_REQUEST__INIT;
    ProtobufCBinaryData end = { 0, NULL };
    if (progress) {
        rq.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST;
        rq.progress_request = &pr;
    } else {
        int err = etcd_prefix_range(hosts, &cr.key, &end);
        if (err)
            return err;
        cr.range_end = end;
        cr.start_revision = from;
        rq.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
        rq.create_request = &cr;
    }
    int err = etcd_stream_send(s, &rq.base);
    free(end.data);
    return err;
}

/* One watch response: 0, or -ESTALE (compacted: sync again), -EIO. */
static int watched(struct cl_view *v, Etcdserverpb__WatchResponse *r, int64_t *rev)
{
    if (r->compact_revision > 0) {
        csifs_log(LOG_NOTICE, "cluster view: revision %lld is compacted (now %lld): syncing "
                  "again", (long long)*rev, (long long)r->compact_revision);
        return -ESTALE;
    }
    if (r->canceled)
        return -EIO;
    /* a progress answer: every event up to its header's revision was sent
     * (not so for the answer to a create) */
    int64_t last = r->n_events || r->created || !r->header ? 0 : r->header->revision;
    pthread_mutex_lock(&v->mu);
    for (size_t i = 0; i < r->n_events; i++) {
        const Etcdserverpb__Event *e = r->events[i];
        if (!e->kv)
            continue;
        apply(v, &e->kv->key, &e->kv->value, e->type == ETCDSERVERPB__EVENT__EVENT_TYPE__PUT);
        if (e->kv->mod_revision > last)
            last = e->kv->mod_revision;
    }
    pthread_mutex_unlock(&v->mu);
    cl_view_tell(v);
    if (last > *rev)
        *rev = last;
    set_revision(v, *rev);
    return 0;
}

/* Watch from *rev + 1 until the stream fails or goes quiet: -errno, *rev
 * the last revision seen. */
static int watch(struct cl_view *v, int64_t *rev)
{
    struct etcd_stream *s = NULL;
    int err = etcd_stream_open(v->c, ETCD_STREAM_WATCH, &s);
    if (err)
        return err;
    pthread_mutex_lock(&v->mu);
    v->ws = s;
    bool stop = v->stop;
    pthread_mutex_unlock(&v->mu);
    err = stop ? -ECANCELED : watch_send(s, *rev + 1, v->hosts, false);
    int64_t heard = csifs_mono_ms(), asked = 0;
    while (!err) {
        ProtobufCMessage *m = NULL;
        err = etcd_stream_recv(s, 250, &m);
        int64_t now = csifs_mono_ms();
        if (err == -ETIMEDOUT) {
            err = 0;
            pthread_mutex_lock(&v->mu);
            stop = v->stop;
            pthread_mutex_unlock(&v->mu);
            if (stop)
                err = -ECANCELED;
            else if (asked && now - asked > ETCD_DEADLINE_MS)
                err = -ETIMEDOUT;       /* a frozen member: leave it */
            else if (!asked && now - heard > QUIET_MS && !(err = watch_send(s, 0, NULL, true)))
                asked = now;
            continue;
        }
        if (err)
            break;
        heard = now;
        asked = 0;
        err = watched(v, (Etcdserverpb__WatchResponse *)m, rev);
        protobuf_c_message_free_unpacked(m, NULL);
    }
    pthread_mutex_lock(&v->mu);
    v->ws = NULL;
    pthread_mutex_unlock(&v->mu);
    etcd_stream_close(s);
    return err;
}

static void *run(void *arg)
{
    struct cl_view *v = arg;
    int64_t rev = 0;
    bool synced = false;
    for (;;) {
        pthread_mutex_lock(&v->mu);
        bool stop = v->stop;
        pthread_mutex_unlock(&v->mu);
        if (stop)
            break;
        int err = synced ? 0 : sync_all(v, &rev);
        if (err) {
            set_state(v, CL_V_DISCONNECTED, "Range", err);
            etcd_client_failover(v->c);
            nap(v, RETRY_MS);
            continue;
        }
        synced = true;
        set_state(v, CL_V_CONNECTED, NULL, 0);
        err = watch(v, &rev);
        if (err == -ECANCELED)
            break;
        if (err == -ESTALE) {
            synced = false;             /* compacted: Range again */
            continue;
        }
        set_state(v, CL_V_DISCONNECTED, "Watch", err);
        etcd_client_failover(v->c);
        nap(v, err == -ETIMEDOUT ? 0 : 100);
    }
    return NULL;
}

int cl_view_start(struct cl_view **out, const struct cl_opts *o, struct cl_pub *pub,
                  cl_view_changed_fn changed, void *arg)
{
    struct cl_view *v = calloc(1, sizeof(*v));
    if (!v)
        return -ENOMEM;
    v->o = o;
    v->pub = pub;
    v->changed = changed;
    v->arg = arg;
    pthread_mutex_init(&v->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&v->cv, &ca);
    pthread_condattr_destroy(&ca);
    grpc_init();
    cnt_set(&cnt.cluster_view_on, 1);
    struct etcd_opts eo = { (const char *const *)o->urls, o->n_urls, o->cacert, o->cert, o->key };
    int err = asprintf(&v->hosts, "%s/hosts/", o->prefix) < 0 ? -ENOMEM : 0;
    if (err)
        v->hosts = NULL;
    if (!err)
        err = etcd_client_new(&eo, &v->c);
    if (!err && (err = csifs_thread_start(&v->th, "csifs-view", run, v)) == 0)
        v->started = true;
    if (err) {
        cl_view_free(v);
        return err;
    }
    *out = v;
    return 0;
}

void cl_view_stop(struct cl_view *v)
{
    if (!v || !v->started)
        return;
    pthread_mutex_lock(&v->mu);
    v->stop = true;
    if (v->ws)
        etcd_stream_cancel(v->ws);
    pthread_cond_signal(&v->cv);
    pthread_mutex_unlock(&v->mu);
    pthread_join(v->th, NULL);
    v->started = false;
}

void cl_view_free(struct cl_view *v)
{
    if (!v)
        return;
    cl_view_stop(v);
    etcd_client_free(v->c);
    cl_view_model_free(v);
    free(v->hosts);
    pthread_cond_destroy(&v->cv);
    pthread_mutex_destroy(&v->mu);
    free(v);
    grpc_shutdown();
}

int cl_view_status(struct cl_view *v, char **out, size_t *len)
{
    char pub[1024] = "", ep[128];
    etcd_client_endpoint(v->c, ep, sizeof(ep));
    if (v->pub)
        cl_pub_status(v->pub, pub, sizeof(pub));
    pthread_mutex_lock(&v->mu);
    int n = asprintf(out, "%sview_state %s\nview_endpoint %s\nview_revision %lld\n"
                     "view_nodes %zu\nview_error %s\n", pub, state_names[v->st], ep,
                     (long long)v->revision, v->n_nodes, v->error);
    pthread_mutex_unlock(&v->mu);
    if (n < 0)
        return -ENOMEM;
    *len = (size_t)n;
    return 0;
}
