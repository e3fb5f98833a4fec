/* cluster publisher internals: publish.c (thread, session, status) and
 * publish_txn.c (values, Txns, reconcile). */
#ifndef CSIFS_CLUSTER_PUBLISH_INT_H
#define CSIFS_CLUSTER_PUBLISH_INT_H

#include "cluster/etcd.h"
#include "cluster/publish.h"

#include <pthread.h>
#include <stdbool.h>

enum cl_state { CL_CONNECTING, CL_CONNECTED, CL_DISCONNECTED, CL_CONFLICT };

struct cl_plugin_ref {
    int type;
    char name[REG_NAME_MAX + 1];
    int64_t marked_us;                  /* first marked dirty (0: by the reconcile) */
};

struct cl_cached {                      /* the last value written of a plugin */
    struct cl_plugin_ref ref;
    char *value;                        /* without its `updated` line */
};

struct cl_pub {
    const struct cl_opts *o;
    struct reg *reg;
    char *state, *mnt, *version, *host_prefix, *info_key;
    struct etcd_client *c;
    pthread_t th;
    bool started;

    pthread_mutex_t mu;                 /* leaf: see publish.h */
    pthread_cond_t cv;                  /* CLOCK_MONOTONIC */
    struct cl_plugin_ref *dirty;
    size_t n_dirty, cap_dirty;
    bool stop, revoke;
    enum cl_state st;
    int64_t revision;
    char error[400];
    struct cl_pub_counts counts;

    /* the thread's own */
    char instance[CL_INSTANCE_LEN + 1];
    int64_t lease, ttl_s;
    bool session;
    struct etcd_stream *ka;
    int64_t ka_ok_ms, ka_next_ms, sent_ms, started_ns;
    struct cl_cached *cache;
    size_t n_cache, cap_cache;
};

/* publish_txn.c */
/* The plugin's value (fields but `updated`), malloc'd; NULL into *out when
 * the plugin is gone. */
int cl_plugin_value(struct reg *reg, const struct cl_plugin_ref *r, char **out);
/* Write the refs' values where they differ from the cache (n refs); on
 * failure the refs not written are returned to the dirty set. */
int cl_pub_write(struct cl_pub *p, const struct cl_plugin_ref *refs, size_t n);
/* The reconcile of a new session: every plugin, stale keys removed. */
int cl_pub_reconcile(struct cl_pub *p);
/* Forget every cached value (a new session writes all again). */
void cl_pub_cache_clear(struct cl_pub *p);
/* Mark a plugin dirty (takes p->mu). */
void cl_pub_mark(struct cl_pub *p, const struct cl_plugin_ref *r);
/* Record the client's last error as the status's (takes p->mu). */
void cl_pub_note_error(struct cl_pub *p, const char *what, int err);

#endif
