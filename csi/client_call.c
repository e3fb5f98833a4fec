/* csi: calls and the completion-queue thread (see client.h; the locking
 * is client.c's). */
#include "csi/client_int.h"
#include "base/defaults.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the completion-queue thread ---- */

/* Statuses after which the next call dials a fresh channel. */
static bool transport_failure(grpc_status_code s)
{
    return s == GRPC_STATUS_UNAVAILABLE || s == GRPC_STATUS_DEADLINE_EXCEEDED ||
           s == GRPC_STATUS_UNKNOWN || s == GRPC_STATUS_INTERNAL;
}

/* gRPC's texts for a call whose transport ended under it (on a connection
 * that never carried a call, what the plugin sent was not HTTP/2: a plugin
 * that died meanwhile is caught by the caller's dial diagnosis). */
static bool transport_gave_up(const char *msg)
{
    return !strcmp(msg, "Transport closed") || !strcmp(msg, "Stream removed");
}

static void call_result(struct call *k, int success, struct csi_result *res)
{
    res->method = k->method;
    res->status = success ? k->status : GRPC_STATUS_UNKNOWN;
    if (res->status != GRPC_STATUS_OK && k->dial_err) {
        char buf[128];
        res->dial_err = k->dial_err;
        if (asprintf(&res->reason, "connect: %s", strerror_r(k->dial_err, buf, sizeof(buf))) < 0)
            res->reason = NULL;
        return;
    }
    if (res->status != GRPC_STATUS_OK) {
        char *msg = success ? grpc_slice_to_c_string(k->details) : NULL;
        if (msg && k->fresh && transport_gave_up(msg)) {
            gpr_free(msg);      /* no HTTP/2 ever came of this connection */
            res->reason = strdup("protocol: not HTTP/2");
            return;
        }
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

static void call_done(struct csi_client *c, struct call *k, int success)
{
    int64_t end_ns = csifs_mono_ns();
    struct csi_result res = { 0 };
    struct lost_list lost = { 0 };
    /* the mutex also orders this thread after call_start_locked's writes */
    pthread_mutex_lock(&c->mu);
    struct csi_chan *ch = k->chan;
    struct gen *g = k->gen;
    k->fresh = !g->ok && !g->dial_err;
    if ((!success || transport_failure(k->status)) && g == ch->tgt->cur) {
        cl_gen_retire(ch->tgt);    /* the next call dials afresh */
    } else if (success && k->status == GRPC_STATUS_OK && !g->ok) {
        g->ok = true;
        if (g->hup)             /* it hung up before this reply was seen */
            cl_gen_lost(g, &lost);
    }
    cl_gen_unref(g);
    k->gen = NULL;
    pthread_mutex_unlock(&c->mu);

    cl_lost_tell(&lost);
    call_result(k, success, &res);
    res.latency_us = (end_ns - k->start_ns) / 1000;
    k->cb(k->arg, &res);
    csi_result_clear(&res);

    pthread_mutex_lock(&c->mu);
    LIST_REMOVE(k, link);
    if (ch->closed && LIST_EMPTY(&ch->calls))
        cl_chan_free(ch);
    if (--c->inflight == 0)
        pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->mu);
    call_free(k);
}

void *cl_queue_thread(void *arg)
{
    struct csi_client *c = arg;
    for (;;) {
        /* no timeout: sleeps until there is work; shutdown wakes it */
        grpc_event ev = grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                                   NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type == GRPC_OP_COMPLETE)
            call_done(c, ev.tag, ev.success);
    }
}

/* ---- calls ---- */

/* Under client->mu: create k's gRPC call on the channel's current
 * generation and start its one batch. */
static int call_start_locked(struct csi_chan *ch, struct call *k, const char *path)
{
    struct csi_client *c = ch->client;
    if (ch->closed || c->closing)
        return -ESHUTDOWN;
    struct target *t = ch->tgt;
    if (!t->cur && !(t->cur = cl_gen_new(c, t)))
        return -ENOMEM;
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(k->timeout_ms, GPR_TIMESPAN));
    grpc_slice method = grpc_slice_from_copied_string(path);
    k->call = grpc_channel_create_call(t->cur->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, method,
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
    k->gen = t->cur;
    k->gen->refs++;
    k->dial_err = k->gen->dial_err;
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
