/* cluster publisher (DESIGN 15): this host's registry into etcd.
 *
 * One key per plugin, <prefix>/hosts/<node>/<type>/<plugin>, holding the
 * fields of value.h, and <prefix>/hosts/<node>/info; all on one lease of
 * the process, kept alive every ttl/3 on a LeaseKeepAlive stream.
 *
 * A registry subscriber marks plugins dirty and wakes the publisher's
 * thread; nothing else happens on the mutation's path, so local mutations
 * never wait for etcd. The thread writes only what changed (a value equal
 * to the last one written is skipped), leading-edge coalesced: a change
 * after 100 ms of quiet goes out at once, later ones within the window in
 * one Txn at its end. Every Txn compares the info key's lease with ours, so
 * nothing is written on a lease that is lost or an info key taken over.
 *
 * Session: the instance ID (made once per state dir) and the lease ID are
 * kept in <state>/cluster.mdb. At start the old lease is reused when alive
 * and info names our instance; info is claimed with a Txn (absent, or
 * unchanged since read with our instance); another instance under the node
 * name is a conflict: refused, logged, retried every ttl, never flapped.
 * Then a reconcile: a keys-only Range of the host's prefix, then Txns of at
 * most 127 operations putting every plugin and deleting stale keys. A
 * KeepAlive answered with TTL 0, or none for ttl/3 plus the deadline, or a
 * failed Txn ends the session: the next one (retried every 500 ms) grants
 * a new lease when the old one is gone and reconciles again.
 *
 * Lock: p->mu guards the dirty set and the status; a leaf lock, held for
 * no etcd call and no registry call. */
#ifndef CSIFS_CLUSTER_PUBLISH_H
#define CSIFS_CLUSTER_PUBLISH_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/opts.h"
#include "registry/registry.h"

#define CL_INSTANCE_LEN 32
#define CL_TXN_OPS      127             /* etcd refuses more than 128 per Txn */
#define CL_COALESCE_MS  100

struct cl_pub;

/* Subscribe to reg and start the thread (grpc_init is taken here). o must
 * outlive p; version and the mount point go into the info key. */
int cl_pub_start(struct cl_pub **out, const struct cl_opts *o, struct reg *reg,
                 const char *state, const char *mountpoint, const char *version);
/* Stop the thread; revoke: revoke the lease first (SIGTERM: the keys go at
 * once). The subscription stays (the registry has no unsubscribe): free
 * with cl_pub_free after reg_close. */
void cl_pub_stop(struct cl_pub *p, bool revoke);
void cl_pub_free(struct cl_pub *p);
/* `key value` lines: state connected|connecting|disconnected|conflict,
 * endpoint, node, lease (hex), revision, pending, error. */
int cl_pub_status(struct cl_pub *p, char *buf, size_t cap);

/* Publisher counters (metrics). */
struct cl_pub_counts {
    uint64_t txns, ops, failures, sessions, lost_leases;
};
void cl_pub_counts(struct cl_pub *p, struct cl_pub_counts *out);

/* ident.c: the identity in <state>/cluster.mdb; a missing instance ID is
 * made (random, hex) and stored. lease 0 when none is stored. */
int cl_ident_load(const char *state, char instance[CL_INSTANCE_LEN + 1], int64_t *lease);
int cl_ident_save_lease(const char *state, int64_t lease);

#endif
