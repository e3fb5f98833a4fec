/* cluster view internals: view.c (the model, its queries) and view_sync.c
 * (the thread: Range, Watch, status). */
#ifndef CSIFS_CLUSTER_VIEW_INT_H
#define CSIFS_CLUSTER_VIEW_INT_H

#include "cluster/etcd.h"
#include "cluster/view.h"
#include "registry/registry.h"

#include <pthread.h>

struct vobj {                           /* head of a plugin or a node's key */
    struct cl_view_obj o;               /* o.fields, o.nodes, o.healthy kept current */
    struct vobj *by_id, *by_name;       /* hash chains */
};
struct vnode {
    struct vobj h;                      /* first */
    struct vplugin *pl;
    struct cl_record rec;
    unsigned gen;                       /* the last sync that saw it */
};
struct vplugin {
    struct vobj h;                      /* first */
    struct vnode **nodes;               /* by id */
    size_t n, cap;
};
struct vlist {                          /* a type's plugins, by id */
    struct vplugin **p;
    size_t n, cap;
};

enum cl_vstate { CL_V_CONNECTING, CL_V_CONNECTED, CL_V_DISCONNECTED };

struct cl_view {
    const struct cl_opts *o;
    struct cl_pub *pub;
    cl_view_changed_fn changed;
    void *arg;
    struct etcd_client *c;
    char *hosts;                        /* "<prefix>/hosts/" */
    pthread_t th;
    bool started;

    pthread_mutex_t mu;                 /* leaf: see view.h */
    pthread_cond_t cv;                  /* CLOCK_MONOTONIC: stop */
    bool stop;
    struct etcd_stream *ws;             /* the watch, for cl_view_free's cancel */
    enum cl_vstate st;
    int64_t revision;
    char error[400];
    /* the model */
    struct vobj **by_id, **by_name;
    size_t nb, n_objs, n_nodes;
    struct vlist types[REG_NTYPES];
    uint64_t next_id;
    unsigned gen;

    /* the thread's own: changes made under mu, told after it */
    struct cl_view_change *ch;
    size_t n_ch, cap_ch;
};

/* view.c, under v->mu (the thread): a key's value put (rec taken, cleared
 * on return), a key gone, the keys not seen by sync gen removed. */
void cl_view_put(struct cl_view *v, const struct cl_key *k, struct cl_record *rec);
void cl_view_del(struct cl_view *v, const struct cl_key *k);
void cl_view_sweep(struct cl_view *v, unsigned gen);
/* Without v->mu: tell the changes made so far. */
void cl_view_tell(struct cl_view *v);
/* Free the whole model (cl_view_free). */
void cl_view_model_free(struct cl_view *v);

#endif
