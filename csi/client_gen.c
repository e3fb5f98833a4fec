/* csi: generations, the gRPC channel on one connection that a csi_chan
 * uses until a failure or a hang-up retires it (client_int.h; all under
 * client->mu). Used by the channels (client.c) and the calls
 * (client_call.c); calls neither. */
#include "csi/client_int.h"
#include "csi/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grpc/grpc_posix.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <unistd.h>

struct gen *cl_gen_new(struct csi_client *c, struct csi_chan *chan)
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
void cl_gen_unref(struct gen *g)
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
void cl_gen_retire(struct csi_chan *chan)
{
    struct gen *g = chan->cur;
    if (!g)
        return;
    chan->cur = NULL;
    g->chan = NULL;
    cl_gen_unref(g);
}

/* A lost connection of chan's current gen g: retire it and return whom to
 * tell (*lost), unless the connection never carried a call. */

void cl_gen_lost(struct gen *g, struct lost *out)
{
    struct csi_chan *ch = g->chan;
    g->hup = true;
    if (!g->ok || !ch || ch->cur != g || ch->closed)
        return;                 /* a call's failure retires it instead */
    *out = (struct lost){ ch->lost_cb, ch->lost_arg, ch->lost_cookie };
    cl_gen_retire(ch);
}

void cl_chan_free(struct csi_chan *ch)
{
    cl_gen_retire(ch);
    free(ch);
}
