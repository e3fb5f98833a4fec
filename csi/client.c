/* csi: the hang-up watch, the client and its channels (see client.h;
 * generations: client_gen.c; calls and the completion-queue thread:
 * client_call.c).
 *
 * Channels open on one socket path share one target (client_gen.c): one
 * gRPC channel at a time, refcounted by those channels, so that many
 * instances on one socket cost one connection, not one each.
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
#include "csi/client_int.h"
#include "base/thread.h"

#include <errno.h>
#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/un.h>
#include <unistd.h>

/* The channel stays allocated until the callbacks of all its calls have
 * returned, so a callback may use its own channel even if it was closed. */

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
    for (bool stop = false; !stop;) {
        int n = epoll_wait(c->ep, evs, WATCH_BATCH, -1);   /* sleeps until a hang-up */
        struct lost_list lost = { 0 };
        pthread_mutex_lock(&c->mu);
        for (int k = 0; k < n; k++) {
            struct gen *g = evs[k].data.ptr;
            if (!g) {
                uint64_t v;
                if (read(c->wake, &v, sizeof(v)) < 0) {
                    /* EAGAIN: another round read it */
                }
            } else if (g->ch) {         /* else destroyed meanwhile */
                cl_gen_lost(g, &lost);
            }
        }
        free_graveyard(c);      /* no event of this round names them any more */
        stop = c->watch_stop;
        pthread_mutex_unlock(&c->mu);
        cl_lost_tell(&lost);
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
                 : -csifs_thread_start(&c->watcher, "csifs-csiwatch", watch_thread, c);
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
    rc = -csifs_thread_start(&c->thread, "csifs-csicalls", cl_queue_thread, c);
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
        cl_chan_free(ch);
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
    struct csi_chan *ch = calloc(1, sizeof(*ch));
    if (!ch)
        return -ENOMEM;
    ch->client = c;
    LIST_INIT(&ch->calls);
    pthread_mutex_lock(&c->mu);
    int rc = c->closing ? -ESHUTDOWN : (ch->tgt = cl_target_get(c, socket_path)) ? 0 : -ENOMEM;
    if (rc < 0) {
        pthread_mutex_unlock(&c->mu);
        free(ch);
        return rc;
    }
    ch->tgt->refs++;
    LIST_INSERT_HEAD(&ch->tgt->users, ch, user);
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
    LIST_REMOVE(ch, user);
    chan_cancel_calls(ch);
    if (LIST_EMPTY(&ch->calls))
        cl_chan_free(ch);          /* else the last call's completion frees it */
    pthread_mutex_unlock(&c->mu);
}

const char *csi_chan_path(const struct csi_chan *ch)
{
    return ch->tgt->path;
}

pid_t csi_chan_peer_pid(struct csi_chan *ch)
{
    pthread_mutex_lock(&ch->client->mu);
    pid_t pid = ch->tgt->peer_pid;
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
    cl_gen_retire(ch->tgt);          /* every chan on the target dials afresh */
    pthread_mutex_unlock(&c->mu);
}
