/* csi client internals shared by client.c (the watch thread, the client
 * and its channels), client_gen.c (generations) and client_call.c (calls
 * and the completion-queue thread). Not part of the module contract. */
#ifndef CSIFS_CSI_CLIENT_INT_H
#define CSIFS_CSI_CLIENT_INT_H

#include "csi/client.h"

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/queue.h>

#define MAX_REPLY_BYTES 65536     /* CSI limits replies to a few KiB */

/* One gRPC channel on one connection. A target moves to a new one after a
 * transport failure or a lost connection; the old one is destroyed when its
 * last call completes. */
struct gen {
    grpc_channel *ch;             /* NULL once destroyed */
    struct target *tgt;           /* while it is tgt's current one, else NULL */
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

/* One socket path: the gRPC channel (current gen) that every csi_chan open
 * on it shares, so that instances on one socket cost one connection and
 * two fds, not each their own. Found by path in client->targets; freed with
 * the last chan that refers to it. */
struct target {
    char *path;                   /* first: the tree compares it (= name) */
    LIST_HEAD(, csi_chan) users;  /* its chans not closed: told of a loss */
    unsigned refs;                /* chans not yet freed */
    struct gen *cur;              /* NULL: dial at the next call */
    pid_t peer_pid;               /* the listener of the last connection */
    char name[];
};

struct csi_chan {
    struct csi_client *client;
    LIST_ENTRY(csi_chan) link;    /* in client->chans while open */
    LIST_ENTRY(csi_chan) user;    /* in tgt->users while open */
    LIST_HEAD(, call) calls;      /* in flight */
    struct target *tgt;
    bool closed;
    csi_lost_callback *lost_cb;   /* csi_chan_on_lost */
    void *lost_arg;
    uint64_t lost_cookie;
};

struct csi_client {
    pthread_mutex_t mu;
    pthread_cond_t idle;          /* signalled when inflight drops to 0 */
    grpc_completion_queue *cq;
    grpc_channel_credentials *creds;
    pthread_t thread, watcher;
    int ep, wake;                 /* the watch's epoll set and its eventfd */
    LIST_HEAD(, csi_chan) chans;
    void *targets;                /* tsearch tree of struct target, by path */
    LIST_HEAD(, gen) graveyard;   /* destroyed, freed by the watch thread */
    unsigned inflight;            /* started calls whose callback has not returned */
    bool closing, watch_stop;
};

/* Whom to tell of a lost connection: every chan sharing it. */
struct lost {
    csi_lost_callback *cb;
    void *arg;
    uint64_t cookie;
};
struct lost_list {
    struct lost *v;
    size_t n, cap;
};
/* Outside the mutex: run the callbacks, free the list. */
void cl_lost_tell(struct lost_list *l);

/* Under client->mu (client_gen.c): */
struct gen *cl_gen_new(struct csi_client *c, struct target *t);
void cl_gen_unref(struct gen *g);
void cl_gen_retire(struct target *t);
void cl_gen_lost(struct gen *g, struct lost_list *out);
/* The target of path, made (refs 0) when there is none; NULL on ENOMEM. */
struct target *cl_target_get(struct csi_client *c, const char *path);
void cl_chan_free(struct csi_chan *ch);
/* The completion-queue thread (client_call.c). */
void *cl_queue_thread(void *arg);

#endif
