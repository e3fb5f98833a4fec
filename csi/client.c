/* csi: channels, calls and the completion-queue thread (see client.h).
 *
 * Locking: one mutex per client guards its channel list, each channel's call
 * list and generation, every gen's watch state, the doomed list and the
 * in-flight count. It is never held while a callback runs, so callbacks may
 * start calls. gRPC never calls back into
 * this file synchronously: completions arrive only on the queue's thread.
 */
#include "csi/client.h"
#include "registry/defaults.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/un.h>
#include <time.h>

#define MAX_REPLY_BYTES 65536     /* CSI limits replies to a few KiB */

/* What a completion-queue tag is: the first member of struct gen and call. */
enum tag_kind { TAG_CALL, TAG_WATCH };

/* One gRPC channel. A csi_chan moves to a new one after a transport failure
 * or a lost connection; the old one is destroyed when its last call
 * completes, and freed when its connectivity watch has come back too (gRPC
 * core delivers it after grpc_channel_destroy, as SHUTDOWN). */
struct gen {
    enum tag_kind tag;            /* TAG_WATCH: the watch's tag is the gen */
    grpc_channel *ch;             /* NULL once destroyed */
    struct csi_chan *chan;        /* while it is chan's current one, else NULL */
    unsigned refs;                /* 1 while current, + 1 per call on it */
    grpc_connectivity_state seen; /* the state the pending watch started from */
    bool watching;                /* a watch is pending */
    bool doomed;                  /* unused, destroyed once no longer CONNECTING */
    LIST_ENTRY(gen) dlink;        /* in client->doomed while doomed */
    struct csi_client *client;
    bool was_ready;               /* READY since the last loss */
};

struct call {
    enum tag_kind tag;            /* TAG_CALL */
    LIST_ENTRY(call) link;        /* in chan->calls */
    struct csi_chan *chan;
    struct gen *gen;
    grpc_call *call;
    enum csi_method method;
    int timeout_ms;
    csi_callback *cb;
    void *arg;
    int64_t start_ns;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array head, trailers;
    grpc_status_code status;
    grpc_slice details;
};

struct csi_chan {
    struct csi_client *client;
    LIST_ENTRY(csi_chan) link;    /* in client->chans while open */
    LIST_HEAD(, call) calls;      /* in flight */
    struct gen *cur;              /* NULL: dial at the next call */
    bool closed;
    csi_lost_callback *lost_cb;   /* csi_chan_on_lost */
    void *lost_arg;
    uint64_t lost_cookie;
    char path[];
};

struct csi_client {
    pthread_mutex_t mu;
    pthread_cond_t idle;          /* signalled when inflight drops to 0 */
    grpc_completion_queue *cq;
    grpc_channel_credentials *creds;
    pthread_t thread;
    LIST_HEAD(, csi_chan) chans;
    LIST_HEAD(, gen) doomed;      /* unused channels still connecting */
    unsigned inflight;            /* started calls whose callback has not returned */
    bool closing;
};

/* ---- generations (under client->mu) ---- */

static void watch_arm(struct csi_client *c, struct gen *g)
{
    g->seen = grpc_channel_check_connectivity_state(g->ch, 0);
    /* a lame channel (never for a checked path) would only time out */
    if (g->seen == GRPC_CHANNEL_SHUTDOWN)
        return;
    g->watching = true;
    grpc_channel_watch_connectivity_state(g->ch, g->seen, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                          c->cq, g);
}

static struct gen *gen_new(struct csi_client *c, struct csi_chan *chan)
{
    const char *path = chan->path;
    char target[sizeof("unix:") + sizeof(((struct sockaddr_un *)0)->sun_path)];
    grpc_arg args[] = {
        { .type = GRPC_ARG_STRING, .key = GRPC_ARG_DEFAULT_AUTHORITY,
          .value.string = "localhost" },
        /* backoff never beyond the prober's schedule (DESIGN section 3);
         * MIN_RECONNECT_BACKOFF is the connect timeout: left at 20 s. */
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
          .value.integer = 100 },
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
          .value.integer = 5000 },
        /* a fresh channel gets a fresh connection, not a shared one in backoff */
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
          .value.integer = 1 },
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_RETRIES, .value.integer = 0 },
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
          .value.integer = MAX_REPLY_BYTES },
        /* extras a unix socket to one local plugin does not need (measured:
         * buffer and HPACK sizes change nothing of the ~42 KiB a channel
         * takes after a Probe, against ~38 KiB bare; the connectivity
         * watch ~0.7 KiB, the local subchannel pool ~0.6 KiB) */
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_CHANNELZ, .value.integer = 0 },
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION,
          .value.integer = 1 },
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_HTTP2_BDP_PROBE, .value.integer = 0 },
    };
    grpc_channel_args ca = { .num_args = sizeof(args) / sizeof(args[0]), .args = args };
    struct gen *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    snprintf(target, sizeof(target), "unix:%s", path);
    g->ch = grpc_channel_create(target, c->creds, &ca);
    if (!g->ch) {
        free(g);
        return NULL;
    }
    g->tag = TAG_WATCH;
    g->client = c;
    g->refs = 1;
    g->chan = chan;
    if (grpc_channel_check_connectivity_state(g->ch, 0) == GRPC_CHANNEL_IDLE)
        watch_arm(c, g);        /* else a lame channel: nothing to watch */
    return g;
}

static void gen_unref(struct gen *g)
{
    if (g && --g->refs == 0) {
        /* gRPC core 29 strands the connection of a channel destroyed while
         * it connects: wait for its watch to see the attempt end */
        if (g->watching &&
            grpc_channel_check_connectivity_state(g->ch, 0) == GRPC_CHANNEL_CONNECTING) {
            g->doomed = true;
            LIST_INSERT_HEAD(&g->client->doomed, g, dlink);
            return;
        }
        grpc_channel_destroy(g->ch);    /* the pending watch comes back */
        g->ch = NULL;
        if (!g->watching)
            free(g);
    }
}

/* chan's current gRPC channel is no longer used for new calls. */
static void gen_retire(struct csi_chan *chan)
{
    struct gen *g = chan->cur;
    if (!g)
        return;
    chan->cur = NULL;
    g->chan = NULL;
    gen_unref(g);
}

/* ---- the completion-queue thread ---- */

/* Statuses after which the next call dials a fresh channel. */
static bool transport_failure(grpc_status_code s)
{
    return s == GRPC_STATUS_UNAVAILABLE || s == GRPC_STATUS_DEADLINE_EXCEEDED ||
           s == GRPC_STATUS_UNKNOWN || s == GRPC_STATUS_INTERNAL;
}

static void call_result(struct call *k, int success, struct csi_result *res)
{
    res->method = k->method;
    res->status = success ? k->status : GRPC_STATUS_UNKNOWN;
    if (res->status != GRPC_STATUS_OK) {
        char *msg = success ? grpc_slice_to_c_string(k->details) : NULL;
        res->reason = csi_reason(k->method, res->status, msg ? msg : "call failed",
                                 k->timeout_ms);
        gpr_free(msg);
        return;
    }
    if (!k->recv) {
        res->reason = strdup("protocol: no reply message");
        return;
    }
    grpc_byte_buffer_reader rd;
    if (!grpc_byte_buffer_reader_init(&rd, k->recv)) {
        res->reason = strdup("protocol: unreadable reply");
        return;
    }
    grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    if (k->method == CSI_METHOD_COUNT)
        res->ok = true;
    else
        csi_decode(k->method, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all), res);
    grpc_slice_unref(all);
}

static void call_free(struct call *k)
{
    if (k->call)
        grpc_call_unref(k->call);
    if (k->send)
        grpc_byte_buffer_destroy(k->send);
    if (k->recv)
        grpc_byte_buffer_destroy(k->recv);
    grpc_metadata_array_destroy(&k->head);
    grpc_metadata_array_destroy(&k->trailers);
    grpc_slice_unref(k->details);
    free(k);
}

static void chan_free(struct csi_chan *ch)
{
    gen_retire(ch);
    free(ch);
}

/* The channel stays allocated until the callbacks of all its calls have
 * returned, so a callback may use its own channel even if it was closed. */
static void call_done(struct csi_client *c, struct call *k, int success)
{
    int64_t end_ns = csifs_mono_ns();
    struct csi_result res = { 0 };
    /* the mutex also orders this thread after call_start_locked's writes */
    pthread_mutex_lock(&c->mu);
    struct csi_chan *ch = k->chan;
    if ((!success || transport_failure(k->status)) && k->gen == ch->cur)
        gen_retire(ch);         /* the next call dials afresh */
    gen_unref(k->gen);
    k->gen = NULL;
    pthread_mutex_unlock(&c->mu);

    call_result(k, success, &res);
    res.latency_us = (end_ns - k->start_ns) / 1000;
    k->cb(k->arg, &res);
    csi_result_clear(&res);

    pthread_mutex_lock(&c->mu);
    LIST_REMOVE(k, link);
    if (ch->closed && LIST_EMPTY(&ch->calls))
        chan_free(ch);
    if (--c->inflight == 0)
        pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->mu);
    call_free(k);
}

/* A connectivity watch came back: the state of g's channel changed, or the
 * channel was destroyed. A connection lost after READY retires the channel
 * (the next call dials afresh) and tells the csi_chan's owner. */
static void watch_done(struct csi_client *c, struct gen *g)
{
    csi_lost_callback *cb = NULL;
    void *arg = NULL;
    uint64_t cookie = 0;
    pthread_mutex_lock(&c->mu);
    g->watching = false;
    if (!g->ch) {
        free(g);                /* destroyed: this was its last tag */
        pthread_mutex_unlock(&c->mu);
        return;
    }
    grpc_connectivity_state st = grpc_channel_check_connectivity_state(g->ch, 0);
    if (g->doomed && st != GRPC_CHANNEL_CONNECTING) {
        LIST_REMOVE(g, dlink);
        grpc_channel_destroy(g->ch);
        free(g);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    bool lost = g->was_ready && st != GRPC_CHANNEL_READY;
    g->was_ready = st == GRPC_CHANNEL_READY;
    struct csi_chan *ch = g->chan;
    watch_arm(c, g);            /* before any unref: the tag frees g at the end */
    if (lost && ch && ch->cur == g && !ch->closed) {
        cb = ch->lost_cb;
        arg = ch->lost_arg;
        cookie = ch->lost_cookie;
        gen_retire(ch);
    }
    pthread_mutex_unlock(&c->mu);
    if (cb)
        cb(arg, cookie);
}

static void *queue_thread(void *arg)
{
    struct csi_client *c = arg;
    for (;;) {
        /* no timeout: sleeps until there is work; shutdown wakes it */
        grpc_event ev = grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                                   NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (*(enum tag_kind *)ev.tag == TAG_WATCH)
            watch_done(c, ev.tag);
        else
            call_done(c, ev.tag, ev.success);
    }
}

/* ---- client ---- */

int csi_client_new(struct csi_client **out)
{
    struct csi_client *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int rc = pthread_mutex_init(&c->mu, NULL);
    if (rc) {
        free(c);
        return -rc;
    }
    LIST_INIT(&c->chans);
    LIST_INIT(&c->doomed);
    rc = pthread_cond_init(&c->idle, NULL);
    if (rc)
        goto fail_mutex;
    grpc_init();
    c->cq = grpc_completion_queue_create_for_next(NULL);
    c->creds = grpc_insecure_credentials_create();
    if (!c->cq || !c->creds) {
        rc = ENOMEM;
        goto fail_grpc;
    }
    rc = pthread_create(&c->thread, NULL, queue_thread, c);
    if (rc)
        goto fail_grpc;
    *out = c;
    return 0;

fail_grpc:
    if (c->creds)
        grpc_channel_credentials_release(c->creds);
    if (c->cq)
        grpc_completion_queue_destroy(c->cq);
    grpc_shutdown();
    pthread_cond_destroy(&c->idle);
fail_mutex:
    pthread_mutex_destroy(&c->mu);
    free(c);
    return -rc;
}

static void chan_cancel_calls(struct csi_chan *ch)
{
    struct call *k;
    LIST_FOREACH(k, &ch->calls, link)
        grpc_call_cancel(k->call, NULL);
}

void csi_client_free(struct csi_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->closing = true;
    struct csi_chan *ch;
    LIST_FOREACH(ch, &c->chans, link)
        chan_cancel_calls(ch);
    while (c->inflight)
        pthread_cond_wait(&c->idle, &c->mu);
    while ((ch = LIST_FIRST(&c->chans))) {
        LIST_REMOVE(ch, link);
        chan_free(ch);
    }
    struct gen *g;
    while ((g = LIST_FIRST(&c->doomed))) {   /* their watches come back now */
        LIST_REMOVE(g, dlink);
        g->doomed = false;
        grpc_channel_destroy(g->ch);
        g->ch = NULL;
    }
    pthread_mutex_unlock(&c->mu);

    grpc_completion_queue_shutdown(c->cq);
    pthread_join(c->thread, NULL);
    grpc_completion_queue_destroy(c->cq);
    grpc_channel_credentials_release(c->creds);
    grpc_shutdown();
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ---- channels ---- */

int csi_chan_open(struct csi_client *c, const char *socket_path, struct csi_chan **out)
{
    if (!c || !socket_path || socket_path[0] != '/')
        return -EINVAL;
    size_t len = strlen(socket_path);
    if (len >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return -ENAMETOOLONG;
    struct csi_chan *ch = calloc(1, sizeof(*ch) + len + 1);
    if (!ch)
        return -ENOMEM;
    memcpy(ch->path, socket_path, len + 1);
    ch->client = c;
    LIST_INIT(&ch->calls);
    pthread_mutex_lock(&c->mu);
    if (c->closing) {
        pthread_mutex_unlock(&c->mu);
        free(ch);
        return -ESHUTDOWN;
    }
    LIST_INSERT_HEAD(&c->chans, ch, link);
    pthread_mutex_unlock(&c->mu);
    *out = ch;
    return 0;
}

void csi_chan_close(struct csi_chan *ch)
{
    if (!ch)
        return;
    struct csi_client *c = ch->client;
    pthread_mutex_lock(&c->mu);
    ch->closed = true;
    LIST_REMOVE(ch, link);
    chan_cancel_calls(ch);
    if (LIST_EMPTY(&ch->calls))
        chan_free(ch);          /* else the last call's completion frees it */
    pthread_mutex_unlock(&c->mu);
}

const char *csi_chan_path(const struct csi_chan *ch)
{
    return ch->path;
}

void csi_chan_on_lost(struct csi_chan *ch, csi_lost_callback *cb, void *arg, uint64_t cookie)
{
    struct csi_client *c = ch->client;
    pthread_mutex_lock(&c->mu);
    ch->lost_cb = cb;
    ch->lost_arg = arg;
    ch->lost_cookie = cookie;
    pthread_mutex_unlock(&c->mu);
}

void csi_chan_reset(struct csi_chan *ch)
{
    if (!ch)
        return;
    struct csi_client *c = ch->client;
    pthread_mutex_lock(&c->mu);
    chan_cancel_calls(ch);
    gen_retire(ch);
    pthread_mutex_unlock(&c->mu);
}

/* ---- calls ---- */

/* Under client->mu: create k's gRPC call on the channel's current
 * generation and start its one batch. */
static int call_start_locked(struct csi_chan *ch, struct call *k, const char *path)
{
    struct csi_client *c = ch->client;
    if (ch->closed || c->closing)
        return -ESHUTDOWN;
    if (!ch->cur && !(ch->cur = gen_new(c, ch)))
        return -ENOMEM;
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(k->timeout_ms, GPR_TIMESPAN));
    grpc_slice method = grpc_slice_from_copied_string(path);
    k->call = grpc_channel_create_call(ch->cur->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, method,
                                       NULL, deadline, NULL);
    grpc_slice_unref(method);
    if (!k->call)
        return -EIO;
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = k->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &k->head;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &k->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &k->trailers;
    ops[5].data.recv_status_on_client.status = &k->status;
    ops[5].data.recv_status_on_client.status_details = &k->details;
    /* call_done reads k only after taking the mutex, held here */
    k->chan = ch;
    k->start_ns = csifs_mono_ns();
    if (grpc_call_start_batch(k->call, ops, 6, k, NULL) != GRPC_CALL_OK)
        return -EIO;
    k->gen = ch->cur;
    k->gen->refs++;
    LIST_INSERT_HEAD(&ch->calls, k, link);
    c->inflight++;
    return 0;
}

static int call_start(struct csi_chan *ch, enum csi_method m, const char *path, int timeout_ms,
                      csi_callback *cb, void *arg)
{
    if (!ch || !path || timeout_ms <= 0 || !cb)
        return -EINVAL;
    struct call *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    k->method = m;
    k->timeout_ms = timeout_ms;
    k->cb = cb;
    k->arg = arg;
    k->tag = TAG_CALL;
    k->details = grpc_empty_slice();
    grpc_metadata_array_init(&k->head);
    grpc_metadata_array_init(&k->trailers);
    k->send = grpc_raw_byte_buffer_create(NULL, 0);   /* every request is empty */
    int rc = k->send ? 0 : -ENOMEM;
    if (!rc) {
        pthread_mutex_lock(&ch->client->mu);
        rc = call_start_locked(ch, k, path);
        pthread_mutex_unlock(&ch->client->mu);
    }
    if (rc)
        call_free(k);
    return rc;
}

int csi_call(struct csi_chan *ch, enum csi_method m, int timeout_ms, csi_callback *cb, void *arg)
{
    const char *path = csi_method_path(m);
    return path ? call_start(ch, m, path, timeout_ms, cb, arg) : -EINVAL;
}

int csi_call_path(struct csi_chan *ch, const char *path, int timeout_ms, csi_callback *cb,
                  void *arg)
{
    return call_start(ch, CSI_METHOD_COUNT, path, timeout_ms, cb, arg);
}

struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    struct csi_result *res;
};

static void sync_done(void *arg, struct csi_result *res)
{
    struct waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    *w->res = *res;
    memset(res, 0, sizeof(*res));       /* the strings move to the waiter */
    w->done = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int csi_call_sync(struct csi_chan *ch, enum csi_method m, int timeout_ms, struct csi_result *res)
{
    if (!ch || !res)
        return -EINVAL;
    if (pthread_equal(pthread_self(), ch->client->thread))
        return -EDEADLK;
    struct waiter w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .res = res };
    memset(res, 0, sizeof(*res));
    int rc = csi_call(ch, m, timeout_ms, sync_done, &w);
    if (rc)
        return rc;
    pthread_mutex_lock(&w.mu);
    while (!w.done)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    return 0;
}
