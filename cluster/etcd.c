/* etcd: the client, its channels and the unary calls (see etcd.h). */
#include "cluster/etcd_int.h"
#include "base/pb.h"
#include "csi/client.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static _Thread_local char opts_why[160];

const char *etcd_opts_why(void) { return opts_why; }

static int refuse(const char *why)
{
    snprintf(opts_why, sizeof(opts_why), "%s", why);
    return -EINVAL;
}

/* ---- helpers shared with etcd_stream.c ---- */

/* etcd's statuses: UNAVAILABLE for no leader, leader changed or a member
 * out of reach; NOT_FOUND for a lease that is gone; OUT_OF_RANGE for a
 * compacted revision; INVALID_ARGUMENT for a Txn over its limits. */
static const struct { grpc_status_code st; int err; } status_errno[] = {
    { GRPC_STATUS_OK, 0 },
    { GRPC_STATUS_DEADLINE_EXCEEDED, -ETIMEDOUT },
    { GRPC_STATUS_UNAVAILABLE, -ECONNREFUSED },
    { GRPC_STATUS_NOT_FOUND, -ENOENT },
    { GRPC_STATUS_OUT_OF_RANGE, -ERANGE },
    { GRPC_STATUS_INVALID_ARGUMENT, -EINVAL },
    { GRPC_STATUS_CANCELLED, -ECANCELED },
    { GRPC_STATUS_UNAUTHENTICATED, -EACCES },
    { GRPC_STATUS_PERMISSION_DENIED, -EACCES },
};

int etcd_status_errno(grpc_status_code st)
{
    for (size_t i = 0; i < sizeof(status_errno) / sizeof(status_errno[0]); i++)
        if (status_errno[i].st == st)
            return status_errno[i].err;
    return -EIO;
}

void etcd_set_error(struct etcd_client *c, int idx, const char *what)
{
    pthread_mutex_lock(&c->mu);
    snprintf(c->err, sizeof(c->err), "%s (%s)", what, c->ep[idx].target);
    pthread_mutex_unlock(&c->mu);
}

int etcd_current(struct etcd_client *c)
{
    pthread_mutex_lock(&c->mu);
    int i = c->cur;
    pthread_mutex_unlock(&c->mu);
    return i;
}

gpr_timespec etcd_deadline(int ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* ---- the client ---- */

static char *read_pem(const char *path, int *err)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        *err = -errno;
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;
    while (m && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        fwrite(chunk, 1, n, m);
    *err = ferror(f) ? -EIO : 0;
    fclose(f);
    if (!m || fclose(m) != 0) {
        *err = -ENOMEM;
        return NULL;
    }
    if (*err) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* "http://host:port" -> "host:port" in *target; *tls for https. */
static int parse_url(const char *url, char **target, bool *tls)
{
    static const struct { const char *scheme; bool tls; } schemes[] = {
        { "http://", false }, { "https://", true },
    };
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
        size_t sl = strlen(schemes[i].scheme);
        if (strncmp(url, schemes[i].scheme, sl))
            continue;
        const char *hp = url + sl;
        size_t hl = strcspn(hp, "/");
        const char *colon = memrchr(hp, ':', hl);
        if (hl == 0 || !colon || colon == hp || colon + 1 == hp + hl ||
            strspn(colon + 1, "0123456789") != (size_t)(hp + hl - colon - 1) ||
            (hp[hl] == '/' && hp[hl + 1] != '\0'))
            return refuse("cluster: URL must be http(s)://host:port");
        *target = strndup(hp, hl);
        *tls = schemes[i].tls;
        return *target ? 0 : -ENOMEM;
    }
    return refuse("cluster: URL must start with http:// or https://");
}

static grpc_channel_credentials *make_creds(const struct etcd_opts *o, bool tls, int *err)
{
    *err = 0;
    if (!tls)
        return grpc_insecure_credentials_create();
    char *ca = read_pem(o->cacert, err), *cert = NULL, *key = NULL;
    if (ca && o->cert) {
        cert = read_pem(o->cert, err);
        key = cert ? read_pem(o->key, err) : NULL;
    }
    grpc_channel_credentials *cr = NULL;
    if (!*err) {
        grpc_ssl_pem_key_cert_pair pair = { .private_key = key, .cert_chain = cert };
        cr = grpc_ssl_credentials_create(ca, cert ? &pair : NULL, NULL, NULL);
        if (!cr)
            *err = refuse("cluster: TLS credentials refused by gRPC");
    }
    free(ca);
    free(cert);
    free(key);
    return cr;
}

int etcd_opts_check(const struct etcd_opts *o)
{
    opts_why[0] = '\0';
    if (o->n_urls < 1 || o->n_urls > ETCD_MAX_ENDPOINTS)
        return refuse("cluster: 1 to 16 endpoints");
    if (!o->cert != !o->key)
        return refuse("cluster: cluster_cert= and cluster_key= go together");
    bool tls = false;
    for (int i = 0; i < o->n_urls; i++) {
        bool t = false;
        char *target = NULL;
        int err = parse_url(o->urls[i], &target, &t);
        free(target);
        if (err)
            return err;
        if (i > 0 && t != tls)
            return refuse("cluster: all endpoints http:// or all https://");
        tls = t;
    }
    if (tls && !o->cacert)
        return refuse("cluster: https:// needs cluster_cacert=");
    if (!tls && (o->cacert || o->cert))
        return refuse("cluster: cluster_cacert=/cluster_cert= need https://");
    const char *files[] = { o->cacert, o->cert, o->key };
    for (size_t i = 0; i < 3; i++)
        if (files[i] && access(files[i], R_OK) < 0) {
            int e = errno;
            snprintf(opts_why, sizeof(opts_why), "cluster: %.100s: %s", files[i], strerror(e));
            return -e;
        }
    return 0;
}

int etcd_client_new(const struct etcd_opts *o, struct etcd_client **out)
{
    int err = etcd_opts_check(o);
    if (err)
        return err;
    struct etcd_client *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    bool tls = false;
    for (int i = 0; i < o->n_urls && !err; i++) {
        err = parse_url(o->urls[i], &c->ep[i].target, &tls);
        c->n = i + 1;
    }
    grpc_channel_credentials *cr = err ? NULL : make_creds(o, tls, &err);
    grpc_arg args[] = {
        { GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, { .integer = ETCD_RECV_MAX } },
        /* etcd refuses pings more often than --grpc-keepalive-min-time
         * (default 5 s) with GOAWAY; a frozen member is also seen by the
         * streams' own deadlines (cluster/publish.c, cluster/view.c) */
        { GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIME_MS, { .integer = 5000 } },
        { GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIMEOUT_MS, { .integer = 1000 } },
        { GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, { .integer = 0 } },
        { GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, { .integer = 1000 } },
        { GRPC_ARG_INTEGER, GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, { .integer = 100 } },
    };
    grpc_channel_args ca = { sizeof(args) / sizeof(args[0]), args };
    for (int i = 0; i < c->n && !err; i++) {
        c->ep[i].ch = grpc_channel_create(c->ep[i].target, cr, &ca);
        if (!c->ep[i].ch)
            err = -ENOMEM;
    }
    if (cr)
        grpc_channel_credentials_release(cr);
    if (err) {
        etcd_client_free(c);
        return err;
    }
    *out = c;
    return 0;
}

void etcd_client_free(struct etcd_client *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        if (c->ep[i].ch)
            grpc_channel_destroy(c->ep[i].ch);
        free(c->ep[i].target);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void etcd_client_error(struct etcd_client *c, char *buf, size_t cap)
{
    pthread_mutex_lock(&c->mu);
    snprintf(buf, cap, "%s", c->err);
    pthread_mutex_unlock(&c->mu);
}

void etcd_client_endpoint(struct etcd_client *c, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", c->ep[etcd_current(c)].target);
}

void etcd_client_failover(struct etcd_client *c)
{
    pthread_mutex_lock(&c->mu);
    c->cur = (c->cur + 1) % c->n;
    pthread_mutex_unlock(&c->mu);
}

/* ---- unary calls ---- */

/* One try on endpoint idx: 0 with *reply set, or -errno. */
static int unary_once(struct etcd_client *c, int idx, const char *path, const ProtobufCMessage *rq,
                      grpc_byte_buffer **reply)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_call *call = grpc_channel_create_call(c->ep[idx].ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                               grpc_slice_from_static_string(path), NULL,
                                               etcd_deadline(ETCD_DEADLINE_MS), NULL);
    grpc_byte_buffer *send = pb_pack(rq);
    grpc_metadata_array head, trail;
    grpc_metadata_array_init(&head);
    grpc_metadata_array_init(&trail);
    grpc_status_code st = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &head;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = reply;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trail;
    ops[5].data.recv_status_on_client.status = &st;
    ops[5].data.recv_status_on_client.status_details = &details;
    int err = -EIO;
    *reply = NULL;
    if (call && send && grpc_call_start_batch(call, ops, 6, call, NULL) == GRPC_CALL_OK) {
        grpc_event ev = grpc_completion_queue_pluck(cq, call, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                                    NULL);
        err = ev.success ? etcd_status_errno(st) : -EIO;
        if (!err && !*reply)
            err = -EBADMSG;
        if (err) {
            char *msg = grpc_slice_to_c_string(details);
            char what[360];
            const char *name = ev.success ? csi_status_name(st) : "failed";
            snprintf(what, sizeof(what), "%s: %s: %s", path, name ? name : "?",
                     msg && *msg ? msg : "call failed");
            gpr_free(msg);
            etcd_set_error(c, idx, what);
        }
    } else {
        etcd_set_error(c, idx, "gRPC refused the call");
    }
    if (err && *reply) {
        grpc_byte_buffer_destroy(*reply);
        *reply = NULL;
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&head);
    grpc_metadata_array_destroy(&trail);
    if (send)
        grpc_byte_buffer_destroy(send);
    if (call)
        grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    return err;
}

/* The call on each endpoint in turn from the current one, while the
 * transport fails; the one that answered becomes current. */
static int unary(struct etcd_client *c, const char *path, const ProtobufCMessage *rq,
                 const ProtobufCMessageDescriptor *d, ProtobufCMessage **out)
{
    int start = etcd_current(c), err = -ECONNREFUSED;
    for (int k = 0; k < c->n; k++) {
        int idx = (start + k) % c->n;
        grpc_byte_buffer *reply;
        err = unary_once(c, idx, path, rq, &reply);
        if (err == -ETIMEDOUT || err == -ECONNREFUSED)
            continue;
        pthread_mutex_lock(&c->mu);
        c->cur = idx;
        pthread_mutex_unlock(&c->mu);
        if (err)
            return err;
        *out = pb_unpack(d, reply);
        grpc_byte_buffer_destroy(reply);
        if (!*out) {
            etcd_set_error(c, idx, "undecodable reply");
            return -EBADMSG;
        }
        return 0;
    }
    return err;
}

#define UNARY(c, path, rq, desc, out) \
    unary((c), (path), &(rq)->base, &(desc), (ProtobufCMessage **)(out))

int etcd_range(struct etcd_client *c, const Etcdserverpb__RangeRequest *rq,
               Etcdserverpb__RangeResponse **out)
{
    return UNARY(c, "/etcdserverpb.KV/Range", rq,
                 etcdserverpb__range_response__descriptor, out);
}

int etcd_txn(struct etcd_client *c, const Etcdserverpb__TxnRequest *rq,
             Etcdserverpb__TxnResponse **out)
{
    return UNARY(c, "/etcdserverpb.KV/Txn", rq,
                 etcdserverpb__txn_response__descriptor, out);
}

int etcd_compact(struct etcd_client *c, int64_t revision)
{
    Etcdserverpb__CompactionRequest rq = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
    rq.revision = revision;
    Etcdserverpb__CompactionResponse *r;
    int err = UNARY(c, "/etcdserverpb.KV/Compact", &rq,
                    etcdserverpb__compaction_response__descriptor, &r);
    if (!err)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    return err;
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl)
{
    Etcdserverpb__LeaseGrantRequest rq = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
    rq.ttl = ttl_s;
    Etcdserverpb__LeaseGrantResponse *r;
    int err = UNARY(c, "/etcdserverpb.Lease/LeaseGrant", &rq,
                    etcdserverpb__lease_grant_response__descriptor, &r);
    if (err)
        return err;
    if (r->error && *r->error) {
        etcd_set_error(c, etcd_current(c), r->error);
        err = -EIO;
    }
    *id = r->id;
    *granted_ttl = r->ttl;
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return err;
}

int etcd_lease_revoke(struct etcd_client *c, int64_t id)
{
    Etcdserverpb__LeaseRevokeRequest rq = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
    rq.id = id;
    Etcdserverpb__LeaseRevokeResponse *r;
    int err = UNARY(c, "/etcdserverpb.Lease/LeaseRevoke", &rq,
                    etcdserverpb__lease_revoke_response__descriptor, &r);
    if (!err)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    return err;
}

int etcd_lease_ttl(struct etcd_client *c, int64_t id, int64_t *ttl_s)
{
    Etcdserverpb__LeaseTimeToLiveRequest rq = ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
    rq.id = id;
    Etcdserverpb__LeaseTimeToLiveResponse *r;
    int err = UNARY(c, "/etcdserverpb.Lease/LeaseTimeToLive", &rq,
                    etcdserverpb__lease_time_to_live_response__descriptor, &r);
    if (err)
        return err;
    *ttl_s = r->ttl;
    err = r->ttl < 0 ? -ENOENT : 0;     /* etcd 3.4 answers TTL -1 for a lease gone */
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return err;
}

int etcd_prefix_range(const char *prefix, ProtobufCBinaryData *key,
                      ProtobufCBinaryData *range_end)
{
    size_t len = strlen(prefix), n = len;
    uint8_t *e = malloc(len ? len : 1);
    if (!e)
        return -ENOMEM;
    memcpy(e, prefix, len);
    while (n > 0 && e[n - 1] == 0xff)
        n--;
    if (n == 0) {               /* all 0xff (or empty): every key after */
        e[0] = 0;
        n = 1;
    } else {
        e[n - 1]++;
    }
    key->data = (uint8_t *)prefix;
    key->len = len;
    range_end->data = e;
    range_end->len = n;
    return 0;
}
