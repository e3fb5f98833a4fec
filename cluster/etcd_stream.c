/* etcd: the bidirectional streams, Watch and LeaseKeepAlive (see etcd.h).
 * Each stream has its own completion queue, pumped only by the thread
 * that sends and receives on it, so it makes I/O progress while that
 * thread waits in etcd_stream_recv. */
#include "cluster/etcd_int.h"
#include "base/pb.h"
#include "csi/client.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/support/alloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_START = 1, TAG_SEND, TAG_RECV, TAG_STATUS };

static const struct {
    const char *path;
    const ProtobufCMessageDescriptor *reply;
} kinds[] = {
    [ETCD_STREAM_WATCH] = { "/etcdserverpb.Watch/Watch", &etcdserverpb__watch_response__descriptor },
    [ETCD_STREAM_KEEPALIVE] = { "/etcdserverpb.Lease/LeaseKeepAlive",
                                &etcdserverpb__lease_keep_alive_response__descriptor },
};

struct etcd_stream {
    struct etcd_client *c;
    int idx;
    enum etcd_stream_kind kind;
    grpc_completion_queue *cq;
    grpc_call *call;
    grpc_metadata md;
    grpc_metadata_array head, trail;
    grpc_status_code st;
    grpc_slice details;
    grpc_byte_buffer *send, *recv;
    int pending;                        /* batches not completed yet */
    bool head_asked, recv_posted, recv_done, send_done, status_done, ended;
};

static int start(struct etcd_stream *s, const grpc_op *ops, size_t n, intptr_t tag)
{
    if (grpc_call_start_batch(s->call, ops, n, (void *)tag, NULL) != GRPC_CALL_OK)
        return -EIO;
    s->pending++;
    return 0;
}

static void record_status(struct etcd_stream *s)
{
    char *msg = grpc_slice_to_c_string(s->details);
    char what[360];
    const char *name = csi_status_name(s->st);
    snprintf(what, sizeof(what), "%s: %s: %s", kinds[s->kind].path, name ? name : "?",
             msg && *msg ? msg : "stream ended");
    gpr_free(msg);
    etcd_set_error(s->c, s->idx, what);
}

/* Take one event before the deadline: 0, or -ETIMEDOUT. */
static int pump(struct etcd_stream *s, gpr_timespec deadline)
{
    grpc_event ev = grpc_completion_queue_next(s->cq, deadline, NULL);
    if (ev.type != GRPC_OP_COMPLETE)
        return -ETIMEDOUT;
    s->pending--;
    switch ((intptr_t)ev.tag) {
    case TAG_SEND:
        s->send_done = true;
        if (!ev.success)
            s->ended = true;
        break;
    case TAG_RECV:
        s->recv_done = true;
        if (!ev.success)
            s->ended = true;
        break;
    case TAG_STATUS:
        s->status_done = s->ended = true;
        record_status(s);
        break;
    default:
        if (!ev.success)
            s->ended = true;
        break;
    }
    return 0;
}

int etcd_stream_open(struct etcd_client *c, enum etcd_stream_kind kind, struct etcd_stream **out)
{
    struct etcd_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->c = c;
    s->kind = kind;
    s->idx = etcd_current(c);
    s->details = grpc_empty_slice();
    grpc_metadata_array_init(&s->head);
    grpc_metadata_array_init(&s->trail);
    s->cq = grpc_completion_queue_create_for_next(NULL);
    s->call = grpc_channel_create_call(c->ep[s->idx].ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                       grpc_slice_from_static_string(kinds[kind].path), NULL,
                                       gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    /* etcd ends a stream whose member has no leader (instead of keeping a
     * silent one) when the client says so */
    s->md.key = grpc_slice_from_static_string("hasleader");
    s->md.value = grpc_slice_from_static_string("true");
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = 1;
    ops[0].data.send_initial_metadata.metadata = &s->md;
    ops[1].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[1].data.recv_status_on_client.trailing_metadata = &s->trail;
    ops[1].data.recv_status_on_client.status = &s->st;
    ops[1].data.recv_status_on_client.status_details = &s->details;
    int err = !s->call ? -EIO : start(s, &ops[0], 1, TAG_START);
    if (!err)
        err = start(s, &ops[1], 1, TAG_STATUS);
    if (err) {
        etcd_set_error(c, s->idx, "gRPC refused the stream");
        etcd_stream_close(s);
        return err;
    }
    *out = s;
    return 0;
}

int etcd_stream_send(struct etcd_stream *s, const ProtobufCMessage *msg)
{
    if (s->ended)
        return -EPIPE;
    s->send = pb_pack(msg);
    if (!s->send)
        return -ENOMEM;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = s->send;
    s->send_done = false;
    int err = start(s, &op, 1, TAG_SEND);
    gpr_timespec dl = etcd_deadline(ETCD_DEADLINE_MS);
    while (!err && !s->send_done)
        err = pump(s, dl);
    if (err == -ETIMEDOUT) {
        etcd_set_error(s->c, s->idx, "stream send timed out");
        grpc_call_cancel(s->call, NULL);
        s->ended = true;
    }
    if (s->send_done) {
        grpc_byte_buffer_destroy(s->send);
        s->send = NULL;
    }
    return err ? err : s->ended ? -EPIPE : 0;
}

int etcd_stream_recv(struct etcd_stream *s, int timeout_ms, ProtobufCMessage **out)
{
    if (!s->recv_posted && !s->ended) {
        grpc_op ops[2];
        memset(ops, 0, sizeof(ops));
        size_t n = 0;
        if (!s->head_asked) {           /* first recv: the headers too */
            ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
            ops[n++].data.recv_initial_metadata.recv_initial_metadata = &s->head;
            s->head_asked = true;
        }
        ops[n].op = GRPC_OP_RECV_MESSAGE;
        ops[n++].data.recv_message.recv_message = &s->recv;
        s->recv_done = false;
        if (start(s, ops, n, TAG_RECV))
            s->ended = true;
        else
            s->recv_posted = true;
    }
    gpr_timespec dl = etcd_deadline(timeout_ms);
    while (s->recv_posted && !s->recv_done)
        if (pump(s, dl))
            return -ETIMEDOUT;
    if (s->recv_posted) {
        s->recv_posted = false;
        if (s->recv) {
            *out = pb_unpack(kinds[s->kind].reply, s->recv);
            grpc_byte_buffer_destroy(s->recv);
            s->recv = NULL;
            if (*out)
                return 0;
            etcd_set_error(s->c, s->idx, "undecodable stream reply");
            grpc_call_cancel(s->call, NULL);
            s->ended = true;
            return -EPIPE;
        }
        s->ended = true;
    }
    /* ended: wait a little for the status, to say why */
    dl = etcd_deadline(100);
    while (!s->status_done && !pump(s, dl))
        ;
    return -EPIPE;
}

void etcd_stream_cancel(struct etcd_stream *s)
{
    if (s && s->call)
        grpc_call_cancel(s->call, NULL);
}

void etcd_stream_close(struct etcd_stream *s)
{
    if (!s)
        return;
    if (s->call) {
        grpc_call_cancel(s->call, NULL);
        while (s->pending > 0)
            pump(s, gpr_inf_future(GPR_CLOCK_REALTIME));
        grpc_call_unref(s->call);
    }
    grpc_completion_queue_shutdown(s->cq);
    while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(s->cq);
    if (s->send)
        grpc_byte_buffer_destroy(s->send);
    if (s->recv)
        grpc_byte_buffer_destroy(s->recv);
    grpc_slice_unref(s->details);
    grpc_metadata_array_destroy(&s->head);
    grpc_metadata_array_destroy(&s->trail);
    free(s);
}
