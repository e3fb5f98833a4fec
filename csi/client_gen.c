/* csi: targets, one per socket path, shared by the csi_chans open on it;
 * generations, the gRPC channel on one connection that a target uses until
 * a failure or a hang-up retires it (client_int.h; all under client->mu).
 * Used by the channels (client.c) and the calls (client_call.c); calls
 * neither. */
#include "csi/client_int.h"
#include "csi/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <grpc/grpc_posix.h>
#include <stdio.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <unistd.h>

struct gen *cl_gen_new(struct csi_client *c, struct target *t)
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
    snprintf(target, sizeof(target), "unix:%s", t->path);
    pid_t pid = 0;
    int fd = csi_dial(t->path, &pid);
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
        t->peer_pid = pid;
    } else {
        g->dial_err = -fd;
        g->ch = grpc_lame_client_channel_create(target, GRPC_STATUS_UNAVAILABLE, "dial failed");
        t->peer_pid = 0;
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
    g->tgt = t;
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

/* t's current gRPC channel is no longer used for new calls. */
void cl_gen_retire(struct target *t)
{
    struct gen *g = t->cur;
    if (!g)
        return;
    t->cur = NULL;
    g->tgt = NULL;
    cl_gen_unref(g);
}

static void lost_add(struct lost_list *l, const struct csi_chan *ch)
{
    if (!ch->lost_cb)
        return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 8;
        struct lost *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return;             /* that chan learns it at its next call */
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (struct lost){ ch->lost_cb, ch->lost_arg, ch->lost_cookie };
}

/* A lost connection of its target's current gen g: retire it and add whom
 * to tell (every chan open on the target) to *out, unless the connection
 * never carried a call. */
void cl_gen_lost(struct gen *g, struct lost_list *out)
{
    struct target *t = g->tgt;
    g->hup = true;
    if (!g->ok || !t || t->cur != g)
        return;                 /* a call's failure retires it instead */
    struct csi_chan *ch;
    LIST_FOREACH(ch, &t->users, user)
        lost_add(out, ch);
    cl_gen_retire(t);
}

void cl_lost_tell(struct lost_list *l)
{
    for (size_t k = 0; k < l->n; k++)
        l->v[k].cb(l->v[k].arg, l->v[k].cookie);
    free(l->v);
    *l = (struct lost_list){ 0 };
}

static int target_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

struct target *cl_target_get(struct csi_client *c, const char *path)
{
    const char *key = path;
    struct target **found = tfind(&key, &c->targets, target_cmp);
    if (found)
        return *found;
    size_t len = strlen(path);
    struct target *t = calloc(1, sizeof(*t) + len + 1);
    if (!t)
        return NULL;
    memcpy(t->name, path, len + 1);
    t->path = t->name;
    LIST_INIT(&t->users);
    if (!tsearch(t, &c->targets, target_cmp)) {
        free(t);
        return NULL;
    }
    return t;
}

void cl_chan_free(struct csi_chan *ch)
{
    struct target *t = ch->tgt;
    if (!ch->closed)
        LIST_REMOVE(ch, user);  /* csi_client_free: still open */
    if (--t->refs == 0) {       /* the last chan on it: its connection goes */
        cl_gen_retire(t);
        tdelete(t, &ch->client->targets, target_cmp);
        free(t);
    }
    free(ch);
}
