/* Internal to kubelet/: the registration servers (server.c) and the table
 * of plugins they serve (kubelet.c). */
#ifndef CSIFS_KUBELET_INTERNAL_H
#define CSIFS_KUBELET_INTERNAL_H

#include <grpc/grpc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "kubelet/kubelet.h"

#define KUB_PROVIDER_MAX 255

enum ktag_kind { T_NEW, T_RECV, T_DONE, T_SHUTDOWN };
struct ktag {                        /* what a completion-queue event is */
    enum ktag_kind kind;
    void *p;
};

/* One registration socket and its server. Immutable after ks_open but refs. */
struct ksrv {
    struct kubelet *k;
    grpc_server *srv;
    char path[108];                  /* DIR/<provider>-reg.sock */
    char plugin[REG_NAME_MAX + 1], provider[KUB_PROVIDER_MAX + 1];
    char endpoint[4200];
    int refs;                        /* the owner, each posted call (atomic) */
    struct ktag t_shutdown;
};

struct kentry {
    char plugin[REG_NAME_MAX + 1];
    char provider[KUB_PROVIDER_MAX + 1];  /* of its current, "" none */
    char state[600];                 /* verdict without newline, "" none */
    struct ksrv *srv;
    bool dirty;
};

struct kubelet {
    char dir[4096], mnt[4096];
    struct reg *reg;
    pthread_mutex_t mu;              /* entries; see kubelet.h */
    pthread_cond_t cv;
    struct kentry *e;
    size_t n, cap;
    bool stop, any_dirty;
    uint64_t gen;                    /* dot-names: one per bind */
    pthread_t worker, cq_thread;
    bool have_worker, have_cq;
    grpc_completion_queue *cq;
};

/* Bind s->path under a dot-name, start, rename into place: 0 or -errno. */
int ks_open(struct kubelet *k, struct ksrv **out, const char *plugin, const char *provider,
            const char *path);
/* Unlink its socket, shut the server down (freed on the cq thread). */
void ks_close(struct ksrv *s);
/* The cq thread. */
void *ks_cq_main(void *arg);
/* From the cq thread: the kubelet's NotifyRegistrationStatus for s. */
void kub_verdict(struct ksrv *s, bool registered, const char *error);

#endif
