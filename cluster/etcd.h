/* etcd: a small etcd v3 client over gRPC core and protobuf-c (the
 * messages of proto/etcd.proto, etcd 3.4's wire).
 *
 * One etcd_client holds one channel per endpoint (http://host:port, or
 * https://host:port with a CA, and optionally a client certificate and
 * key). Channels use HTTP/2 keepalive pings and take replies up to 8 MiB.
 *
 * Unary calls are synchronous: each try has a 1 s deadline; a try that
 * fails for the transport (UNAVAILABLE, DEADLINE_EXCEEDED) is retried on
 * the next endpoint, each endpoint at most once per call, and the client
 * keeps the endpoint that answered. Streams (Watch, LeaseKeepAlive) run
 * on the client's current endpoint with the metadata `hasleader: true`
 * (etcd then ends them when its member has no leader); each is used by
 * one thread at a time, etcd_stream_cancel excepted.
 *
 * Functions return 0 or a negative errno: -ETIMEDOUT (deadline),
 * -ECONNREFUSED (no endpoint reachable), -EBADMSG (undecodable reply),
 * -EIO (any other failed status), -ENOMEM, -EINVAL. The text of the last
 * failure is etcd_client_error's. Thread-safe; nothing a server does
 * makes them exit or abort. */
#ifndef CSIFS_CLUSTER_ETCD_H
#define CSIFS_CLUSTER_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/etcd.pb-c.h"

#define ETCD_MAX_ENDPOINTS  16
#define ETCD_DEADLINE_MS    1000
#define ETCD_RECV_MAX       (8 * 1024 * 1024)

struct etcd_opts {
    const char *const *urls;    /* n_urls endpoints, all http:// or all https:// */
    int n_urls;
    const char *cacert;         /* PEM files; https only; NULL: none */
    const char *cert, *key;     /* client certificate and its key, both or none */
};

struct etcd_client;

/* Check the URLs ("http://127.0.0.1:2379"), read the PEM files, make the
 * channels; nothing is dialled yet. -EINVAL with etcd_opts_why() saying
 * why (bad URL, mixed schemes, cert without key, https without CA);
 * a PEM file that cannot be read: its -errno. grpc_init is the caller's. */
int etcd_client_new(const struct etcd_opts *o, struct etcd_client **out);
void etcd_client_free(struct etcd_client *c);
/* etcd_client_new's checks alone (no gRPC): 0, -EINVAL, or a PEM file's
 * access() -errno, with etcd_opts_why() saying why. */
int etcd_opts_check(const struct etcd_opts *o);
/* Why the last etcd_client_new of this thread refused, "" if it did not. */
const char *etcd_opts_why(void);
/* The last failure's text ("UNAVAILABLE: ... (127.0.0.1:2379)"), copied into
 * buf; "" when none yet. */
void etcd_client_error(struct etcd_client *c, char *buf, size_t cap);
/* "host:port" of the endpoint in use, copied into buf. */
void etcd_client_endpoint(struct etcd_client *c, char *buf, size_t cap);
/* Use the next endpoint from now on (a stream on the current one failed). */
void etcd_client_failover(struct etcd_client *c);

/* The unary calls. On 0, *out is the decoded reply (free it with
 * protobuf_c_message_free_unpacked(&(*out)->base, NULL)). */
int etcd_range(struct etcd_client *c, const Etcdserverpb__RangeRequest *rq,
               Etcdserverpb__RangeResponse **out);
int etcd_txn(struct etcd_client *c, const Etcdserverpb__TxnRequest *rq,
             Etcdserverpb__TxnResponse **out);
int etcd_compact(struct etcd_client *c, int64_t revision);
/* A lease of ttl_s seconds: *id and *granted_ttl (etcd may raise it). */
int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl);
/* Revoke lease id; one that is gone already is -ENOENT. */
int etcd_lease_revoke(struct etcd_client *c, int64_t id);
/* Remaining TTL of lease id in seconds; -ENOENT when it is gone. */
int etcd_lease_ttl(struct etcd_client *c, int64_t id, int64_t *ttl_s);

/* The range of every key with this prefix: key points at prefix (not
 * copied), range_end (etcd's: the key after them all) is malloc'd; free
 * range_end->data. */
int etcd_prefix_range(const char *prefix, ProtobufCBinaryData *key,
                      ProtobufCBinaryData *range_end);

enum etcd_stream_kind { ETCD_STREAM_WATCH, ETCD_STREAM_KEEPALIVE };
struct etcd_stream;

/* Open a stream on the current endpoint. */
int etcd_stream_open(struct etcd_client *c, enum etcd_stream_kind kind, struct etcd_stream **out);
/* Send one request (a WatchRequest or a LeaseKeepAliveRequest), waiting at
 * most the deadline for it to leave. -EPIPE once the stream has ended. */
int etcd_stream_send(struct etcd_stream *s, const ProtobufCMessage *msg);
/* Wait up to timeout_ms for the next reply: on 0, *out is a decoded
 * Etcdserverpb__WatchResponse or Etcdserverpb__LeaseKeepAliveResponse
 * (free as above). -ETIMEDOUT: nothing yet (call again). -EPIPE: the
 * stream ended; etcd_client_error says how. */
int etcd_stream_recv(struct etcd_stream *s, int timeout_ms, ProtobufCMessage **out);
/* End the stream from any thread: a recv waiting returns -EPIPE. */
void etcd_stream_cancel(struct etcd_stream *s);
/* Cancel, wait for gRPC to let go, free. NULL is a no-op. */
void etcd_stream_close(struct etcd_stream *s);

#endif
