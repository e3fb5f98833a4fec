/* The registration servers: one gRPC core server per socket, all on one
 * completion queue served by one thread (see kubelet.h). The socket is
 * ours (sock.c): each accepted connection is handed to the server. */
#include "kubelet/internal.h"
#include "base/log.h"
#include "base/pb.h"
#include "proto/pluginregistration.pb-c.h"

#include <grpc/grpc_posix.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One call, from request to its last batch. */
struct kcall {
    struct ksrv *s;
    grpc_call *call;
    grpc_call_details d;
    grpc_metadata_array md;
    grpc_byte_buffer *recv, *send;
    grpc_slice status;
    int cancelled;
    struct ktag t_new, t_recv, t_done;
};

static void srv_unref(struct ksrv *s)
{
    if (__atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(s);
}

static void call_free(struct kcall *c)
{
    if (c->call)
        grpc_call_unref(c->call);
    grpc_call_details_destroy(&c->d);
    grpc_metadata_array_destroy(&c->md);
    if (c->recv)
        grpc_byte_buffer_destroy(c->recv);
    if (c->send)
        grpc_byte_buffer_destroy(c->send);
    grpc_slice_unref(c->status);
    struct ksrv *s = c->s;
    free(c);
    srv_unref(s);
}

static int post(struct ksrv *s)
{
    struct kcall *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
    c->s = s;
    c->status = grpc_empty_slice();
    c->t_new = (struct ktag){ T_NEW, c };
    c->t_recv = (struct ktag){ T_RECV, c };
    c->t_done = (struct ktag){ T_DONE, c };
    grpc_call_details_init(&c->d);
    grpc_metadata_array_init(&c->md);
    if (grpc_server_request_call(s->srv, &c->call, &c->d, &c->md, s->k->cq, s->k->cq,
                                 &c->t_new) != GRPC_CALL_OK) {
        call_free(c);
        return -EIO;
    }
    return 0;
}

static grpc_byte_buffer *get_info(struct ksrv *s)
{
    Pluginregistration__PluginInfo pi = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    char *versions[] = { "1.0.0" };
    pi.type = "CSIPlugin";
    pi.name = s->provider;
    pi.endpoint = s->endpoint;
    pi.n_supported_versions = 1;
    pi.supported_versions = versions;
    return pb_pack(&pi.base);
}

/* The message received, decoded as a RegistrationStatus: recorded. */
static grpc_byte_buffer *notify(struct ksrv *s, grpc_byte_buffer *recv, grpc_status_code *code)
{
    Pluginregistration__RegistrationStatus *st = (Pluginregistration__RegistrationStatus *)
        pb_unpack(&pluginregistration__registration_status__descriptor, recv);
    if (!st) {
        *code = GRPC_STATUS_INVALID_ARGUMENT;
        return NULL;
    }
    kub_verdict(s, st->plugin_registered, st->error ? st->error : "");
    pluginregistration__registration_status__free_unpacked(st, NULL);
    Pluginregistration__RegistrationStatusResponse r =
        PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
    return pb_pack(&r.base);
}

static const char get_info_path[] = "/pluginregistration.Registration/GetInfo";
static const char notify_path[] = "/pluginregistration.Registration/NotifyRegistrationStatus";

/* The request message is in: answer (any other method UNIMPLEMENTED). */
static void answer(struct kcall *c)
{
    grpc_status_code code = GRPC_STATUS_OK;
    const char *msg = "";
    if (grpc_slice_str_cmp(c->d.method, get_info_path) == 0)
        c->send = get_info(c->s);
    else if (grpc_slice_str_cmp(c->d.method, notify_path) == 0)
        c->send = notify(c->s, c->recv, &code);
    else
        code = GRPC_STATUS_UNIMPLEMENTED, msg = "csifs serves only pluginregistration";
    if (code == GRPC_STATUS_OK && !c->send)
        code = GRPC_STATUS_RESOURCE_EXHAUSTED, msg = "csifs: out of memory";
    if (code == GRPC_STATUS_INVALID_ARGUMENT)
        msg = "csifs: undecodable RegistrationStatus";
    c->status = grpc_slice_from_copied_string(msg);
    grpc_op ops[4];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (code == GRPC_STATUS_OK) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->send;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n++].data.send_status_from_server.status_details = &c->status;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    if (grpc_call_start_batch(c->call, ops, n, &c->t_done, NULL) != GRPC_CALL_OK)
        call_free(c);
}

static void on_new(struct kcall *c, bool ok)
{
    if (!ok) {                       /* shutting down */
        call_free(c);
        return;
    }
    if (!__atomic_load_n(&c->s->closing, __ATOMIC_ACQUIRE) && post(c->s) < 0)
        csifs_log(LOG_WARNING, "kubelet: %s: cannot wait for the next call", c->s->path);
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &c->recv;
    if (grpc_call_start_batch(c->call, &op, 1, &c->t_recv, NULL) != GRPC_CALL_OK)
        call_free(c);
}

void *ks_cq_main(void *arg)
{
    struct kubelet *k = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(k->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC),
                                                   NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        struct ktag *t = ev.tag;
        struct kcall *c = t->p;
        switch (t->kind) {
        case T_NEW: on_new(c, ev.success); break;
        case T_RECV:
            if (ev.success)
                answer(c);
            else
                call_free(c);
            break;
        case T_DONE: call_free(c); break;
        case T_SHUTDOWN: {
            struct ksrv *s = t->p;
            grpc_server_destroy(s->srv);
            srv_unref(s);
            kub_server_gone(k);
            break;
        }
        }
    }
    return NULL;
}

int ks_open(struct kubelet *k, struct ksrv **out, const char *plugin, const char *provider,
            const char *path, int lfd, ino_t ino)
{
    struct ksrv *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->k = k;
    s->refs = 1;
    s->lfd = lfd;
    s->ino = ino;
    s->t_shutdown = (struct ktag){ T_SHUTDOWN, s };
    snprintf(s->path, sizeof(s->path), "%s", path);
    snprintf(s->plugin, sizeof(s->plugin), "%s", plugin);
    snprintf(s->provider, sizeof(s->provider), "%s", provider);
    snprintf(s->endpoint, sizeof(s->endpoint), "%s/csi-node/%s/current/socket", k->mnt, plugin);
    s->srv = grpc_server_create(NULL, NULL);
    if (!s->srv) {
        free(s);
        return -ENOMEM;
    }
    grpc_server_register_completion_queue(s->srv, k->cq, NULL);
    grpc_server_start(s->srv);
    pthread_mutex_lock(&k->mu);
    k->live++;
    pthread_mutex_unlock(&k->mu);
    int rc = post(s);
    if (rc < 0) {
        s->lfd = -1;                 /* the caller's still */
        ks_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void ks_accept(struct ksrv *s)
{
    for (int i = 0; i < 64; i++) {   /* the rest at the next poll */
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                csifs_log(LOG_WARNING, "kubelet: %s: accept: %s", s->path, strerror(errno));
            return;
        }
        grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
        grpc_server_add_channel_from_fd(s->srv, fd, cr);   /* owns fd now */
        grpc_server_credentials_release(cr);
    }
}

void ks_close(struct ksrv *s)
{
    __atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);   /* the cq thread may free it */
    __atomic_store_n(&s->closing, true, __ATOMIC_RELEASE);
    if (s->lfd >= 0) {
        char name[sizeof(((struct tk_named *)0)->name)];
        ks_fdname(s->provider, name, sizeof(name));
        ks_unlisten(s->path, s->lfd, s->ino);   /* the kubelet deregisters */
        tk_store_remove(name);
    }
    grpc_server_shutdown_and_notify(s->srv, s->k->cq, &s->t_shutdown);
    grpc_server_cancel_all_calls(s->srv);
    srv_unref(s);
}
