/* csi: channels, calls, the completion-queue thread and the hang-up
 * watch (see client.h).
 *
 * Each gRPC channel runs on one connection csifs dials itself
 * (grpc_channel_create_from_fd): destroying the channel closes it, so no
 * connection outlives its channel, however a socket changes; a failed dial
 * is a lame channel whose calls fail at once with the dial's errno. A dup of
 * the connection's fd sits in an epoll set (EPOLLRDHUP, one shot) that the
 * watch thread waits on: the plugin closing it is seen at once.
 *
 * Locking: one mutex per client guards its channel list, each channel's call
 * list and generation, every gen and the graveyard, and the in-flight count.
 * It is never held while a callback runs, so callbacks may start calls. gRPC
 * never calls back into this file synchronously: completions arrive only on
 * the queue's thread. A gen is freed only by the watch thread, after its
 * epoll_wait round (or once that thread has ended), so an event it fetched
 * never names freed memory.
 */
#include "csi/client.h"
#include "csi/internal.h"
#include "registry/defaults.h"

#include <errno.h>
#include <fcntl.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/queue.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPLY_BYTES 65536     /* CSI limits replies to a few KiB */

/* One gRPC channel on one connection. A csi_chan moves to a new one after a
 * transport failure or a lost connection; the old one is destroyed when its
 * last call completes. */
struct gen {
    grpc_channel *ch;             /* NULL once destroyed */
    struct csi_chan *chan;        /* while it is chan's current one, else NULL */
    unsigned refs;                /* 1 while current, + 1 per call on it */
    int hupfd;                    /* the dup in the epoll set, or -1 */
    int dial_err;                 /* the dial's errno: a lame channel */
    bool ok;                      /* a call on it succeeded */
    bool hup;                     /* the plugin closed the connection */
    struct csi_client *client;
    LIST_ENTRY(gen) dead;         /* in client->graveyard once destroyed */
};

struct call {
    LIST_ENTRY(call) link;        /* in chan->calls */
    struct csi_chan *chan;
    struct gen *gen;
    grpc_call *call;
    enum csi_method method;
    int timeout_ms;
    int dial_err;                 /* of its gen */
    bool fresh;                   /* no call on its connection had succeeded */
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
    pid_t peer_pid;               /* the listener of the last connection */
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
    pthread_t thread, watcher;
    int ep, wake;                 /* the watch's epoll set and its eventfd */
    LIST_HEAD(, csi_chan) chans;
    LIST_HEAD(, gen) graveyard;   /* destroyed, freed by the watch thread */
    unsigned inflight;            /* started calls whose callback has not returned */
    bool closing, watch_stop;
};

/* ---- generations (under client->mu) ---- */

static struct gen *gen_new(struct csi_client *c, struct csi_chan *chan)
{
    char target[sizeof("unix:") + sizeof(((struct sockaddr_un *)0)->sun_path)];
    grpc_arg args[] = {
        { .type = GRPC_ARG_STRING, .key = GRPC_ARG_DEFAULT_AUTHORITY,
          .value.string = "localhost" },
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
          .value.integer = MAX_REPLY_BYTES },
        /* extras one local connection does not need */
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_CHANNELZ, .value.integer = 0 },
        { .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_HTTP2_BDP_PROBE, .value.integer = 0 },
    };
    grpc_channel_args ca = { .num_args = sizeof(args) / sizeof(args[0]), .args = args };
    struct gen *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->hupfd = -1;
    snprintf(target, sizeof(target), "unix:%s", chan->path);
    pid_t pid = 0;
    int fd = csi_dial(chan->path, &pid);
    if (fd >= 0 && (g->hupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        close(fd);
        fd = -errno;
    }
    if (fd >= 0) {
        struct epoll_event ev = { .events = EPOLLRDHUP | EPOLLONESHOT, .data.ptr = g };
        if (epoll_ctl(c->ep, EPOLL_CTL_ADD, g->hupfd, &ev) < 0) {
            close(g->hupfd);    /* unwatched, it would hide a dead plugin */
            close(fd);
            free(g);
            return NULL;
        }
        g->ch = grpc_channel_create_from_fd(target, fd, c->creds, &ca);   /* owns fd */
        chan->peer_pid = pid;
    } else {
        g->dial_err = -fd;
        g->ch = grpc_lame_client_channel_create(target, GRPC_STATUS_UNAVAILABLE, "dial failed");
        chan->peer_pid = 0;
    }
    if (!g->ch) {
        if (g->hupfd >= 0) {
            epoll_ctl(c->ep, EPOLL_CTL_DEL, g->hupfd, NULL);
            close(g->hupfd);
        }
        free(g);
        return NULL;
    }
    g->refs = 1;
    g->chan = chan;
    g->client = c;
    return g;
}

/* Destroy g's channel (closing its connection) once its last reference
 * goes; the watch thread frees it. */
static void gen_unref(struct gen *g)
{
    if (!g || --g->refs > 0)
        return;
    struct csi_client *c = g->client;
    if (g->hupfd >= 0) {
        epoll_ctl(c->ep, EPOLL_CTL_DEL, g->hupfd, NULL);
        close(g->hupfd);
        g->hupfd = -1;
    }
    grpc_channel_destroy(g->ch);
    g->ch = NULL;
    bool first = LIST_EMPTY(&c->graveyard);
    LIST_INSERT_HEAD(&c->graveyard, g, dead);
    uint64_t one = 1;
    if (first && write(c->wake, &one, sizeof(one)) < 0) {
        /* the counter is full: the thread is awake already */
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

/* A lost connection of chan's current gen g: retire it and return whom to
 * tell (*lost), unless the connection never carried a call. */
struct lost {
    csi_lost_callback *cb;
    void *arg;
    uint64_t cookie;
};

static void gen_lost(struct gen *g, struct lost *out)
{
    struct csi_chan *ch = g->chan;
    g->hup = true;
    if (!g->ok || !ch || ch->cur != g || ch->closed)
        return;                 /* a call's failure retires it instead */
    *out = (struct lost){ ch->lost_cb, ch->lost_arg, ch->lost_cookie };
    gen_retire(ch);
}

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
    struct lost lost = { 0 };
    /* the mutex also orders this thread after call_start_locked's writes */
    pthread_mutex_lock(&c->mu);
    struct csi_chan *ch = k->chan;
    struct gen *g = k->gen;
    k->fresh = !g->ok && !g->dial_err;
    if ((!success || transport_failure(k->status)) && g == ch->cur) {
        gen_retire(ch);         /* the next call dials afresh */
    } else if (success && k->status == GRPC_STATUS_OK && !g->ok) {
        g->ok = true;
        if (g->hup)             /* it hung up before this reply was seen */
            gen_lost(g, &lost);
    }
    gen_unref(g);
    k->gen = NULL;
    pthread_mutex_unlock(&c->mu);

    if (lost.cb)
        lost.cb(lost.arg, lost.cookie);
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

static void *queue_thread(void *arg)
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

/* ---- the watch thread: hang-ups, and freeing destroyed gens ---- */

#define WATCH_BATCH 64

static void free_graveyard(struct csi_client *c)
{
    struct gen *g;
    while ((g = LIST_FIRST(&c->graveyard))) {
        LIST_REMOVE(g, dead);
        free(g);
    }
}

static void *watch_thread(void *arg)
{
    struct csi_client *c = arg;
    struct epoll_event evs[WATCH_BATCH];
    struct lost lost[WATCH_BATCH];
    for (bool stop = false; !stop;) {
        int n = epoll_wait(c->ep, evs, WATCH_BATCH, -1);   /* sleeps until a hang-up */
        int nl = 0;
        pthread_mutex_lock(&c->mu);
        for (int k = 0; k < n; k++) {
            struct gen *g = evs[k].data.ptr;
            if (!g) {
                uint64_t v;
                if (read(c->wake, &v, sizeof(v)) < 0) {
                    /* EAGAIN: another round read it */
                }
            } else if (g->ch) {         /* else destroyed meanwhile */
                lost[nl] = (struct lost){ 0 };
                gen_lost(g, &lost[nl]);
                nl += lost[nl].cb != NULL;
            }
        }
        free_graveyard(c);      /* no event of this round names them any more */
        stop = c->watch_stop;
        pthread_mutex_unlock(&c->mu);
        for (int k = 0; k < nl; k++)
            lost[k].cb(lost[k].arg, lost[k].cookie);
    }
    return NULL;
}

static int watch_start(struct csi_client *c)
{
    c->ep = epoll_create1(EPOLL_CLOEXEC);
    c->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
    int rc = c->ep < 0 || c->wake < 0 || epoll_ctl(c->ep, EPOLL_CTL_ADD, c->wake, &ev) < 0
                 ? errno
                 : pthread_create(&c->watcher, NULL, watch_thread, c);
    if (rc) {
        if (c->ep >= 0)
            close(c->ep);
        if (c->wake >= 0)
            close(c->wake);
    }
    return rc;
}

static void watch_stop(struct csi_client *c)
{
    pthread_mutex_lock(&c->mu);
    c->watch_stop = true;
    pthread_mutex_unlock(&c->mu);
    uint64_t one = 1;
    if (write(c->wake, &one, sizeof(one)) < 0) {
        /* full: it is awake already */
    }
    pthread_join(c->watcher, NULL);
    free_graveyard(c);
    close(c->ep);
    close(c->wake);
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
    LIST_INIT(&c->graveyard);
    rc = pthread_cond_init(&c->idle, NULL);
    if (rc)
        goto fail_mutex;
    if ((rc = watch_start(c)) != 0)
        goto fail_cond;
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
    watch_stop(c);
fail_cond:
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
    pthread_mutex_unlock(&c->mu);
    watch_stop(c);

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

pid_t csi_chan_peer_pid(struct csi_chan *ch)
{
    pthread_mutex_lock(&ch->client->mu);
    pid_t pid = ch->peer_pid;
    pthread_mutex_unlock(&ch->client->mu);
    return pid;
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
