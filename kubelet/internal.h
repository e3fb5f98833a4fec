/* Internal to kubelet/: the table of plugins (kubelet.c), the worker that
 * brings each to what the registry says (worker.c), the sockets (sock.c)
 * and their gRPC servers (server.c). */
#ifndef CSIFS_KUBELET_INTERNAL_H
#define CSIFS_KUBELET_INTERNAL_H

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kubelet/kubelet.h"

#define KUB_PROVIDER_MAX 255
#define KUB_PATH_MAX 107             /* a unix socket address */
#define KUB_STATE_MAX 600

enum ktag_kind { T_NEW, T_RECV, T_DONE, T_SHUTDOWN };
struct ktag {                        /* what a completion-queue event is */
    enum ktag_kind kind;
    void *p;
};

/* One registration socket and its gRPC server. Made and closed by the
 * worker only; the fields are immutable in between (but refs). Freed by
 * the cq thread at the last ref: the owner's (dropped at the server's
 * shutdown tag), one per posted call, one around ks_close's calls. */
struct ksrv {
    struct kubelet *k;
    grpc_server *srv;
    int lfd;                         /* listening, ours (sock.c) */
    ino_t ino;                       /* of path as we bound it */
    char path[KUB_PATH_MAX + 1];     /* DIR/<provider>-reg.sock */
    char plugin[REG_NAME_MAX + 1], provider[KUB_PROVIDER_MAX + 1];
    char endpoint[4200];             /* <mnt>/csi-node/<plugin>/current/socket */
    int refs;                        /* atomic */
    bool closing;                    /* atomic: no new request_call */
    struct ktag t_shutdown;
};

/* A csi-node plugin the registry told us about. srv and provider change
 * on the worker only (under mu); state under mu by the worker and the cq
 * thread (the kubelet's verdict). */
struct kentry {
    char plugin[REG_NAME_MAX + 1];
    char provider[KUB_PROVIDER_MAX + 1];  /* of its current, "" none */
    char state[KUB_STATE_MAX];       /* verdict without newline, "" none */
    struct ksrv *srv;
    bool dirty;                      /* for the worker to look at */
};

/* Lock order: the registry's locks (registry.h), then k->mu, a leaf. It
 * is taken with no registry lock held (subscribers are called with none),
 * or under the registry's read lock in a reg_list callback, never the
 * reverse; and it is never held across a registry call, an event publish,
 * a gRPC call, a socket made or removed, or any wait: only to read or
 * change the table. */
struct kubelet {
    char dir[4096], mnt[4096];
    struct reg *reg;
    pthread_mutex_t mu;
    pthread_cond_t cv;               /* live reached 0 */
    struct kentry *e;
    size_t n, cap;
    bool stop, any_dirty;
    bool listed;                     /* every plugin there was at start is marked */
    int live;                        /* servers not yet destroyed (mu) */
    int efd;                         /* eventfd: wakes the worker */
    pthread_t worker, cq_thread;
    bool have_worker, have_cq;
    grpc_completion_queue *cq;
    /* The fd store (DESIGN 13): handed sockets not yet adopted (the
     * worker's alone once it runs); at a stop with keep (set under mu),
     * what the worker kept for the next image. */
    struct tk_named *inh, *kept;
    size_t ninh, nkept;
    bool keep;
    /* The verdicts kept for a successor (verdicts.c): the memfd (-1 none),
     * what a predecessor kept in it ("\n"-led lines, or NULL), and the
     * lock of its writers, taken before mu. */
    int vfd;
    char *saved;
    pthread_mutex_t save_mu;
};

/* verdicts.c. Its name in the fd store: no provider we serve starts with a
 * dot. open: at start (before the threads), take the handed memfd out of
 * k->inh and read it, or make one and store it. take: the saved verdict of
 * prov into v, true if there is one (worker). save: rewrite it from the
 * table (no lock held). close: at stop, with keep into k->kept for the next
 * image, else closed and out of the store. */
#define KUB_FD_VERDICTS TK_FD_KUBELET ".verdicts"
void kv_open(struct kubelet *k);
bool kv_take(struct kubelet *k, const char *prov, char *v, size_t cap);
void kv_save(struct kubelet *k);
void kv_close(struct kubelet *k, bool keep);

/* The entry of plugin, or NULL; with k->mu held. */
struct kentry *kub_find(struct kubelet *k, const char *plugin);
/* Mark plugin for the worker (adding its entry) and wake it; k->mu held. */
void kub_mark(struct kubelet *k, const char *plugin);
/* Wake the worker. */
void kub_wake(struct kubelet *k);
/* A `kubelet` event and a log line for plugin's new verdict; no lock held. */
void kub_report(struct kubelet *k, const char *plugin, const char *verdict);
/* The worker thread (worker.c). */
void *kub_worker(void *arg);

/* sock.c. Bind path under its dot-name, listen, rename into place: the
 * listening fd and the inode bound; or -errno with the verdict's words
 * (after "error: ") in why. Refuses a path another process serves. */
int ks_listen(const char *path, int *fd, ino_t *ino, char *why, size_t cap);
/* Unlink path if it is still the socket we bound, close fd. */
void ks_unlisten(const char *path, int fd, ino_t ino);
/* The fd store's name of prov's socket: TK_FD_KUBELET prov. */
void ks_fdname(const char *prov, char *name, size_t cap);
/* The handed socket of prov, taken out of k->inh: 0 with fd and ino when
 * it is the socket listening at path; else closed and out of the store,
 * -ENOENT when there was none, another -errno when it was not usable. */
int ks_handed(struct kubelet *k, const char *prov, const char *path, int *fd, ino_t *ino);
/* The handed sockets no plugin took: into k->kept when keep, else closed,
 * out of the store, their paths unlinked when still theirs. */
void ks_handed_rest(struct kubelet *k, bool keep);

/* server.c. Serve the socket (listening fd lfd, bound as ino) for plugin:
 * a started server with a call posted. 0 or -errno. */
int ks_open(struct kubelet *k, struct ksrv **out, const char *plugin, const char *provider,
            const char *path, int lfd, ino_t ino);
/* Accept what waits on s's socket and hand it to its server. */
void ks_accept(struct ksrv *s);
/* Unlink its socket, close it and take it out of the fd store (none of
 * it when its lfd is -1), shut the server down (freed on the cq thread). */
void ks_close(struct ksrv *s);
/* The cq thread. */
void *ks_cq_main(void *arg);
/* From the cq thread: the kubelet's NotifyRegistrationStatus for s. */
void kub_verdict(struct ksrv *s, bool registered, const char *error);
/* From the cq thread: s's server is destroyed. */
void kub_server_gone(struct kubelet *k);

#endif
