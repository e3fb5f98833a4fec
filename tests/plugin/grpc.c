/* csi-test-plugin: the gRPC core server. No method is registered with the
 * server: one grpc_server_request_call is always posted, every call arrives
 * through it, and calls to a method this plugin does not serve are answered
 * UNIMPLEMENTED (gRPC core would leave them waiting for their deadline). One
 * thread drives the completion queue; delayed replies wait in a list. */
#include "tests/plugin/plugin.h"

#include "base/defaults.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS 50          /* how often the loop looks at plug_stop */

enum tag_kind { TAG_NEW, TAG_DONE, TAG_SHUTDOWN };
struct tag {
    enum tag_kind kind;
    struct pcall *pc;
};

/* One call, freed when nothing refers to it any more. */
struct pcall {
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array head;
    int refs;               /* batches in flight + 1 while in the delayed list */
    int cancelled;          /* RECV_CLOSE_ON_SERVER */
    enum csi_method method;
    grpc_byte_buffer *reply;
    grpc_slice status_msg;
    int64_t due_ms;
    struct pcall *next;     /* delayed list, by due time */
    struct tag t_new, t_done;
};

struct server {
    const struct plug_cfg *cfg;
    grpc_server *srv;
    grpc_completion_queue *cq;
    int64_t start_ms;
    long calls;             /* calls subject to the faults */
    bool stopping;
    struct pcall *delayed;
};

static int64_t now_ms(void)
{
    return csifs_mono_ms();
}

static void pcall_unref(struct pcall *pc)
{
    if (--pc->refs > 0)
        return;
    if (pc->call)
        grpc_call_unref(pc->call);
    grpc_call_details_destroy(&pc->details);
    grpc_metadata_array_destroy(&pc->head);
    if (pc->reply)
        grpc_byte_buffer_destroy(pc->reply);
    grpc_slice_unref(pc->status_msg);
    free(pc);
}

static int post_request(struct server *s)
{
    struct pcall *pc = calloc(1, sizeof(*pc));
    if (!pc)
        return -1;
    pc->refs = 1;
    pc->status_msg = grpc_empty_slice();
    pc->t_new = (struct tag){ TAG_NEW, pc };
    pc->t_done = (struct tag){ TAG_DONE, pc };
    grpc_call_details_init(&pc->details);
    grpc_metadata_array_init(&pc->head);
    if (grpc_server_request_call(s->srv, &pc->call, &pc->details, &pc->head, s->cq, s->cq,
                                 &pc->t_new) != GRPC_CALL_OK) {
        pcall_unref(pc);
        return -1;
    }
    return 0;
}

static void start_batch(struct pcall *pc, const grpc_op *ops, size_t n)
{
    pc->refs++;
    if (grpc_call_start_batch(pc->call, ops, n, &pc->t_done, NULL) != GRPC_CALL_OK) {
        fprintf(stderr, "csi-test-plugin: grpc_call_start_batch failed\n");
        pc->refs--;
    }
}

/* Answer with status code (and the reply message when OK). */
static void answer(struct pcall *pc, grpc_status_code code, const char *msg)
{
    grpc_op ops[3];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (pc->reply) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = pc->reply;
    }
    pc->status_msg = grpc_slice_from_copied_string(msg);
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n++].data.send_status_from_server.status_details = &pc->status_msg;
    start_batch(pc, ops, n);
}

static void reply(struct server *s, struct pcall *pc, bool faulted)
{
    const struct plug_cfg *cfg = s->cfg;
    if (faulted && cfg->error_code >= 0) {
        answer(pc, (grpc_status_code)cfg->error_code, cfg->error_msg);
        return;
    }
    pc->reply = plug_reply(cfg, pc->method, now_ms() - s->start_ms);
    if (pc->reply)
        answer(pc, GRPC_STATUS_OK, "");
    else
        answer(pc, GRPC_STATUS_RESOURCE_EXHAUSTED, "csi-test-plugin: out of memory");
}

static void delay(struct server *s, struct pcall *pc)
{
    struct pcall **p = &s->delayed;
    pc->due_ms = now_ms() + s->cfg->delay_ms;
    while (*p && (*p)->due_ms <= pc->due_ms)
        p = &(*p)->next;
    pc->next = *p;
    *p = pc;
    pc->refs++;
}

static void new_call(struct server *s, struct pcall *pc)
{
    const struct plug_cfg *cfg = s->cfg;
    if (!s->stopping && post_request(s) != 0)
        fprintf(stderr, "csi-test-plugin: grpc_server_request_call failed\n");
    grpc_op close_op;
    memset(&close_op, 0, sizeof(close_op));
    close_op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    close_op.data.recv_close_on_server.cancelled = &pc->cancelled;
    start_batch(pc, &close_op, 1);

    char *path = grpc_slice_to_c_string(pc->details.method);
    int m = csi_method_from_path(path);
    if (m < 0 || !plug_serves(cfg, (enum csi_method)m)) {
        char msg[512];
        snprintf(msg, sizeof(msg), "csi-test-plugin does not serve %s", path);
        gpr_free(path);
        answer(pc, GRPC_STATUS_UNIMPLEMENTED, msg);
        return;
    }
    gpr_free(path);
    pc->method = (enum csi_method)m;
    bool faulted = cfg->only < 0 || cfg->only == m;
    if (faulted && cfg->exit_on_call && ++s->calls == cfg->exit_on_call)
        _exit(3);       /* a crash: no cleanup, the socket file stays */
    if (faulted && cfg->hang)
        return;         /* freed when the client gives up (RECV_CLOSE) */
    if (faulted && cfg->delay_ms > 0)
        delay(s, pc);
    else
        reply(s, pc, faulted);
}

/* Answer the delayed calls that are due; the ms until the next one, at most TICK_MS. */
static int64_t run_delayed(struct server *s)
{
    int64_t now = now_ms();
    while (s->delayed && (s->delayed->due_ms <= now || s->stopping)) {
        struct pcall *pc = s->delayed;
        s->delayed = pc->next;
        if (!s->stopping)
            reply(s, pc, true);
        pcall_unref(pc);
    }
    int64_t wait = s->delayed ? s->delayed->due_ms - now : TICK_MS;
    return wait < TICK_MS ? wait : TICK_MS;
}

static void on_event(struct server *s, grpc_event ev, bool *shut)
{
    struct tag *t = ev.tag;
    switch (t->kind) {
    case TAG_NEW:
        if (ev.success)
            new_call(s, t->pc);
        pcall_unref(t->pc);      /* the request's reference */
        break;
    case TAG_DONE:
        pcall_unref(t->pc);
        break;
    case TAG_SHUTDOWN:
        *shut = true;
        break;
    }
}

/* Listen on every socket, start, and announce READY. */
static int listen_all(struct server *s, const struct plug_cfg *cfg)
{
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    int rc = 0;
    for (size_t i = 0; i < cfg->nsockets && !rc && !cfg->signals; i++) {
        char *addr = NULL;
        if (asprintf(&addr, "unix:%s", cfg->sockets[i]) < 0 ||
            !grpc_server_add_http2_port(s->srv, addr, creds)) {
            fprintf(stderr, "csi-test-plugin: cannot listen on %s\n", cfg->sockets[i]);
            rc = -1;
        }
        free(addr);
    }
    grpc_server_credentials_release(creds);
    grpc_server_start(s->srv);
    if (!rc && cfg->signals && plug_fd_listen(cfg, s->srv) != 0) {
        fprintf(stderr, "csi-test-plugin: cannot listen\n");
        rc = -1;
    }
    if (!rc && post_request(s) != 0) {
        fprintf(stderr, "csi-test-plugin: grpc_server_request_call failed\n");
        rc = -1;
    }
    if (!rc)
        plug_announce(cfg);
    return rc;
}

/* Serve until plug_stop (or at once when stop), then shut down: pending
 * calls are cancelled, the socket files removed. */
static void run(struct server *s, bool stop)
{
    struct tag t_shutdown = { TAG_SHUTDOWN, NULL };
    bool shut = false;
    while (!shut) {
        if ((plug_stop || stop) && !s->stopping) {
            s->stopping = true;
            grpc_server_shutdown_and_notify(s->srv, s->cq, &t_shutdown);
            grpc_server_cancel_all_calls(s->srv);
        }
        int64_t wait = run_delayed(s);
        grpc_event ev = grpc_completion_queue_next(
            s->cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(wait, GPR_TIMESPAN)),
            NULL);
        if (ev.type == GRPC_OP_COMPLETE)
            on_event(s, ev, &shut);
    }
    grpc_server_destroy(s->srv);
    grpc_completion_queue_shutdown(s->cq);
    for (;;) {   /* the last completions free their calls */
        grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
        if (ev.type == GRPC_OP_COMPLETE)
            on_event(s, ev, &shut);
    }
}

int plug_serve_grpc(const struct plug_cfg *cfg)
{
    struct server s = { .cfg = cfg, .start_ms = now_ms() };
    grpc_init();
    s.cq = grpc_completion_queue_create_for_next(NULL);
    s.srv = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(s.srv, s.cq, NULL);
    int rc = listen_all(&s, cfg);
    run(&s, rc != 0);
    if (cfg->signals)
        plug_fd_stop(cfg);
    grpc_completion_queue_destroy(s.cq);
    grpc_shutdown();
    return rc;
}
