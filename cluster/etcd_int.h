/* etcd client internals shared by etcd.c (client, unary calls) and
 * etcd_stream.c (streams). */
#ifndef CSIFS_CLUSTER_ETCD_INT_H
#define CSIFS_CLUSTER_ETCD_INT_H

#include "cluster/etcd.h"

#include <grpc/grpc.h>
#include <pthread.h>

struct etcd_endpoint {
    char *target;               /* "host:port" */
    grpc_channel *ch;
};

struct etcd_client {
    /* Guards cur and err; a leaf lock (nothing is called under it). */
    pthread_mutex_t mu;
    int cur;
    char err[400];
    int n;
    struct etcd_endpoint ep[ETCD_MAX_ENDPOINTS];
};

/* -errno for a call's final status; 0 for OK. */
int etcd_status_errno(grpc_status_code st);
/* Record the failure text "<what> (<target>)". */
void etcd_set_error(struct etcd_client *c, int idx, const char *what);
/* The current endpoint's index. */
int etcd_current(struct etcd_client *c);
/* A deadline ms from now. */
gpr_timespec etcd_deadline(int ms);

#endif
