/* csi prober: one round per instance, Probe and (on the way to healthy)
 * the fingerprint calls, one after the other; its result goes to the
 * registry and decides when the next round starts (see prober.h). Tells
 * its caller (prober.c) what to do with the instance; calls nothing above
 * the watches and the table. */
#include "csi/prober_int.h"
#include "csi/internal.h"
#include "base/counters.h"

#include <errno.h>
#include <grpc/status.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <syslog.h>
#include <unistd.h>

static enum csi_method step_method(const struct pinst *pi)
{
    static const enum csi_method methods[] = {
        [PR_PROBE] = CSI_PROBE, [PR_INFO] = CSI_GET_PLUGIN_INFO,
        [PR_PLUGIN_CAPS] = CSI_GET_PLUGIN_CAPABILITIES, [PR_NODE_INFO] = CSI_NODE_GET_INFO,
    };
    if (pi->step != PR_SERVICE_CAPS)
        return methods[pi->step];
    return pi->type == REG_NODE ? CSI_NODE_GET_CAPABILITIES : CSI_CONTROLLER_GET_CAPABILITIES;
}

/* Completion-queue thread: hand the result to the scheduler. */
static void call_done(void *arg, struct csi_result *res)
{
    struct pdone *d = arg;
    d->res = *res;
    memset(res, 0, sizeof(*res));      /* the strings move with d */
    pr_queue_done(d->p, d);
}

/* Completion-queue thread: the instance's connection was lost. */
static void conn_lost(void *arg, uint64_t seq)
{
    struct csi_prober *p = arg;
    struct pdone *d = calloc(1, sizeof(*d));
    if (!d)
        return;         /* the next heartbeat finds it */
    d->p = p;
    d->seq = seq;
    d->lost = true;
    pr_queue_done(p, d);
}

int pr_round_chan(struct csi_prober *p, struct pinst *pi)
{
    if (pi->ch)
        return 0;
    /* gRPC starts with the first socket: its timer thread wakes every
     * second while it runs, and a csifs with nothing to probe sleeps */
    int rc = p->client ? 0 : csi_client_new(&p->client);
    if (rc == 0)
        rc = csi_chan_open(p->client, pi->path, &pi->ch);
    if (rc == 0)
        csi_chan_on_lost(pi->ch, conn_lost, p, pi->seq);
    return rc;
}

static int call_step(struct csi_prober *p, struct pinst *pi)
{
    struct pdone *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->p = p;
    d->seq = pi->seq;
    d->epoch = pi->epoch;
    int rc = csi_call(pi->ch, step_method(pi), (int)p->o.probe_timeout_ms, call_done, d);
    if (rc < 0)
        free(d);
    return rc;
}

void pr_round_reset(struct csi_prober *p, struct pinst *pi)
{
    if (pi->fp) {
        csi_result_clear(pi->fp);
        free(pi->fp);
        pi->fp = NULL;
    }
    pi->latency_us = 0;
    pi->busy = false;
    pr_lane_give(p, pi);
    pi->epoch = ++p->epochs;           /* whatever is in flight no longer counts */
}

void pr_poke(struct csi_prober *p, struct pinst *pi)
{
    pi->refresh_fp = true;
    if (pi->busy) {
        pi->poke = true;
        return;
    }
    pi->backoff_ms = PR_BACKOFF_MIN_MS;
    pr_schedule(p, pi, csifs_mono_ms());
}

/* The heartbeat grid: the instance's phase within the interval comes from
 * its seq (Fibonacci hashing spreads any run of seqs evenly), and the next
 * heartbeat is the first slot of its phase after now. */
static int64_t next_slot(const struct csi_prober *p, const struct pinst *pi, int64_t now)
{
    int64_t hb = p->o.heartbeat_ms;
    uint64_t h = pi->seq * UINT64_C(0x9E3779B97F4A7C15);
    int64_t phase = (int64_t)((h >> 32) * (uint64_t)hb >> 32);
    int64_t off = (now - phase) % hb;
    if (off < 0)
        off += hb;
    return now - off + hb;
}

/* When the next round starts, by the health the registry now shows. */
static void schedule_next(struct csi_prober *p, struct pinst *pi, enum reg_health h)
{
    int64_t now = csifs_mono_ms(), due;
    if (h == REG_HEALTHY) {
        pi->backoff_ms = PR_BACKOFF_MIN_MS;
        due = next_slot(p, pi, now);
    } else {
        due = now + pi->backoff_ms;
        pi->backoff_ms = pi->backoff_ms * 2 > PR_BACKOFF_MAX_MS ? PR_BACKOFF_MAX_MS
                                                               : pi->backoff_ms * 2;
        /* one round as health_timeout passes, so `unhealthy` shows on time
         * (the registry counts from the socket's mutation, before this) */
        if (h == REG_UNKNOWN && now < pi->timeout_at_ms && due > pi->timeout_at_ms)
            due = pi->timeout_at_ms;
        pr_watch_arm(p, pi);           /* the socket's dir may exist by now */
    }
    if (pi->poke) {
        pi->poke = false;
        pi->backoff_ms = PR_BACKOFF_MIN_MS;
        due = now;
    }
    pr_schedule(p, pi, due);
}

/* A dial that hit the open-file limit (csifs raised it to the hard limit at
 * start): one warning for the daemon's life, not one per instance past it;
 * each instance's reason says it. */
static void fd_limit_check(struct csi_prober *p, int dial_err, const char *reason)
{
    if (p->fd_limit_warned || dial_err != EMFILE)
        return;
    struct rlimit rl = { 0 };
    getrlimit(RLIMIT_NOFILE, &rl);
    p->fd_limit_warned = true;
    pr_log(p, LOG_WARNING, "the open-file limit (%llu) is reached: instances past it read "
           "\"%s\" (raise LimitNOFILE= or ulimit -n; logged once)",
           (unsigned long long)rl.rlim_cur, reason);
}

/* The round is over: record it, then schedule the next one. */
static enum pr_verdict finish(struct csi_prober *p, struct pinst *pi, enum reg_outcome outcome,
                              const char *reason)
{
    static const struct csi_result none;
    const struct csi_result *g = pi->fp ? pi->fp : &none;
    struct reg_fingerprint fp = { g->name, g->vendor_version, g->node_id, g->max_volumes,
                                  g->topology, g->capabilities };
    struct reg_probe pr = { .gen = pi->gen, .outcome = outcome, .reason = reason,
                            .latency_us = pi->latency_us, .done_ns = csifs_real_ns() };
    cnt_hist_observe(&cnt.probe[pi->type], pi->latency_us);
    pid_t pid = 0;
    if (outcome == REG_PROBE_OK && pi->fp) {
        pid = csi_chan_peer_pid(pi->ch);   /* who listened when it dialled */
        pr.fp = &fp;
        pr.pid = (int32_t)pid;
    }
    int rc = reg_probe_result(p->reg, pi->seq, &pr);
    pr_round_reset(p, pi);
    struct reg_node n = { 0 };
    if (rc == -ENOENT || (rc != -ESTALE && reg_get(p->reg, pi->seq, &n) < 0))
        return PR_DROP;                /* deregistered meanwhile */
    if (rc == -ESTALE || n.gen != pi->gen)
        return PR_RESYNC;              /* the socket changed meanwhile */
    if (rc < 0)
        pr_log(p, LOG_WARNING, "%s/%s/%s: cannot record a probe: %s", reg_type_names[n.type],
               n.plugin, n.alloc, strerror(-rc));
    schedule_next(p, pi, n.health);
    return PR_KEEP;
}

static enum pr_verdict fail(struct csi_prober *p, struct pinst *pi, int err)
{
    char reason[128];
    snprintf(reason, sizeof(reason), "internal error: %s", strerror(-err));
    return finish(p, pi, REG_PROBE_ERROR, reason);
}

static enum pr_verdict dial_failed(struct csi_prober *p, struct pinst *pi, int e)
{
    char reason[160], buf[128];
    snprintf(reason, sizeof(reason), "connect: %s", strerror_r(e, buf, sizeof(buf)));
    fd_limit_check(p, e, reason);
    return finish(p, pi, REG_PROBE_ERROR, reason);
}

/* A failed call: its reason, or the dial error under it (a call that failed
 * on a live connection: is the plugin still there?). The diagnosis is a
 * direct connect() to the socket, made here on the scheduler thread. */
static enum pr_verdict failed_call(struct csi_prober *p, struct pinst *pi,
                                   const struct csi_result *res)
{
    int e = res->dial_err;
    if (!e && res->status == GRPC_STATUS_UNAVAILABLE)
        e = csi_dial_check(pi->path, NULL);
    return e ? dial_failed(p, pi, e) : finish(p, pi, REG_PROBE_ERROR, res->reason);
}

enum pr_verdict pr_round_start(struct csi_prober *p, struct pinst *pi)
{
    struct reg_node n;
    if (reg_get(p->reg, pi->seq, &n) < 0)
        return PR_DROP;
    if (n.gen != pi->gen)
        return PR_RESYNC;
    pi->need_fp = n.health != REG_HEALTHY || pi->refresh_fp;
    pi->refresh_fp = false;
    pi->busy = true;
    pr_lane_take(p, pi, csifs_mono_ms());
    pi->step = PR_PROBE;
    /* Nothing at the path (a plugin registered before it listens): the
     * round's answer is the dial error, and no gRPC channel is made for it
     * (half of csifs's CPU in a register cycle: docs/benchmarks.md). */
    int64_t t0 = csifs_mono_us();
    if (!pi->ch && access(pi->path, F_OK) < 0 && errno == ENOENT) {
        pi->latency_us = csifs_mono_us() - t0;
        return dial_failed(p, pi, ENOENT);   /* what connect() would say */
    }
    int rc = pr_round_chan(p, pi);
    if (rc == 0 && pi->need_fp && !(pi->fp = calloc(1, sizeof(*pi->fp))))
        rc = -ENOMEM;
    if (rc == 0)
        rc = call_step(p, pi);
    return rc < 0 ? fail(p, pi, rc) : PR_KEEP;
}

/* *dst = the string of the result (taken from it). */
static void take(char **dst, char **src)
{
    free(*dst);
    *dst = *src;
    *src = NULL;
}

/* Append src to the capability lines gathered so far. */
static int add_caps(struct csi_result *g, const char *src)
{
    size_t have = g->capabilities ? strlen(g->capabilities) : 0;
    size_t more = src ? strlen(src) : 0;
    char *c = realloc(g->capabilities, have + more + 1);
    if (!c)
        return -ENOMEM;
    memcpy(c + have, src ? src : "", more + 1);
    g->capabilities = c;
    return 0;
}

/* One call of the round ended well: keep what it said, start the next. */
static enum pr_verdict advance(struct csi_prober *p, struct pinst *pi, struct csi_result *res)
{
    struct csi_result *g = pi->fp;
    int rc = 0;
    switch (pi->step) {
    case PR_PROBE:
        if (!res->ready)
            return finish(p, pi, REG_PROBE_NOT_READY, "not ready");
        if (!pi->need_fp)
            return finish(p, pi, REG_PROBE_OK, NULL);
        break;
    case PR_INFO:
        take(&g->name, &res->name);
        take(&g->vendor_version, &res->vendor_version);
        break;
    case PR_PLUGIN_CAPS:
        rc = add_caps(g, res->capabilities);
        break;
    case PR_NODE_INFO:
        take(&g->node_id, &res->node_id);
        take(&g->topology, &res->topology);
        g->max_volumes = res->max_volumes;
        break;
    case PR_SERVICE_CAPS:
        if ((rc = add_caps(g, res->capabilities)) == 0)
            return finish(p, pi, REG_PROBE_OK, NULL);
        break;
    }
    if (rc == 0) {
        pi->step++;
        if (pi->step == PR_NODE_INFO && pi->type != REG_NODE)
            pi->step = PR_SERVICE_CAPS;
        rc = call_step(p, pi);
    }
    return rc < 0 ? fail(p, pi, rc) : PR_KEEP;
}

enum pr_verdict pr_round_done(struct csi_prober *p, struct pdone *d, struct pinst **pi_out)
{
    struct pinst *pi = pr_find(p, d->seq);
    enum pr_verdict v = PR_KEEP;
    if (pi && pi->busy && pi->epoch == d->epoch) {
        pi->latency_us += d->res.latency_us;
        v = d->res.ok ? advance(p, pi, &d->res) : failed_call(p, pi, &d->res);
    } else {
        pi = NULL;
    }
    *pi_out = pi;
    csi_result_clear(&d->res);
    free(d);
    return v;
}
