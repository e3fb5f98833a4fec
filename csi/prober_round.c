/* csi prober: one round per instance, Probe and (on the way to healthy)
 * the fingerprint calls, one after the other; its result goes to the
 * registry and decides when the next round starts (see prober.h). */
#include "csi/prober_int.h"
#include "csi/internal.h"
#include "registry/counters.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

static enum csi_method step_method(const struct pinst *pi)
{
    switch (pi->step) {
    case PR_PROBE:
        return CSI_PROBE;
    case PR_INFO:
        return CSI_GET_PLUGIN_INFO;
    case PR_PLUGIN_CAPS:
        return CSI_GET_PLUGIN_CAPABILITIES;
    case PR_NODE_INFO:
        return CSI_NODE_GET_INFO;
    case PR_SERVICE_CAPS:
        break;
    }
    return pi->type == REG_NODE ? CSI_NODE_GET_CAPABILITIES : CSI_CONTROLLER_GET_CAPABILITIES;
}

/* Completion-queue thread: hand the result to the scheduler. */
static void call_done(void *arg, struct csi_result *res)
{
    struct pdone *d = arg;
    struct csi_prober *p = d->p;
    d->res = *res;
    memset(res, 0, sizeof(*res));      /* the strings move with d */
    pthread_mutex_lock(&p->mu);
    STAILQ_INSERT_TAIL(&p->done, d, link);
    pthread_mutex_unlock(&p->mu);
    pr_wake(p);
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
    csi_result_clear(&pi->g.r);
    pi->g.latency_us = 0;
    pi->busy = false;
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
    pr_schedule(p, pi, pr_now_ms());
}

/* When the next round starts, by the health the registry now shows. */
static void schedule_next(struct csi_prober *p, struct pinst *pi, enum reg_health h)
{
    int64_t now = pr_now_ms(), due;
    if (h == REG_HEALTHY) {
        pi->backoff_ms = PR_BACKOFF_MIN_MS;
        due = now + p->o.heartbeat_ms;
    } else {
        due = now + pi->backoff_ms;
        pi->backoff_ms = pi->backoff_ms * 2 > PR_BACKOFF_MAX_MS ? PR_BACKOFF_MAX_MS
                                                               : pi->backoff_ms * 2;
        /* one round as health_timeout passes, so `unhealthy` shows on time */
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

/* The round is over: record it, then schedule the next one. */
static void finish(struct csi_prober *p, struct pinst *pi, enum reg_outcome outcome,
                   const char *reason, bool with_fp)
{
    const struct csi_result *g = &pi->g.r;
    struct reg_fingerprint fp = { g->name, g->vendor_version, g->node_id, g->max_volumes,
                                  g->topology, g->capabilities };
    struct reg_probe pr = { .gen = pi->gen, .outcome = outcome, .reason = reason,
                            .latency_us = pi->g.latency_us, .fp = with_fp ? &fp : NULL,
                            .pid = with_fp && outcome == REG_PROBE_OK ? csi_peer_pid(pi->path) : 0 };
    cnt_observe(&cnt.probe[pi->type], pi->g.latency_us);
    int rc = reg_probe_result(p->reg, pi->seq, &pr);
    pr_round_reset(p, pi);
    struct reg_node n = { 0 };
    if (rc == -ENOENT || (rc != -ESTALE && reg_get(p->reg, pi->seq, &n) < 0)) {
        pr_drop(p, pi);                /* deregistered meanwhile */
        return;
    }
    if (rc == -ESTALE || n.gen != pi->gen) {
        pr_resync(p, pi->seq, pr_now_ms());   /* the socket changed meanwhile */
        return;
    }
    if (rc < 0)
        pr_log(p, LOG_WARNING, "%s/%s/%s: cannot record a probe: %s", reg_type_names[n.type],
               n.plugin, n.alloc, strerror(-rc));
    schedule_next(p, pi, n.health);
}

static void fail(struct csi_prober *p, struct pinst *pi, int err)
{
    char reason[128];
    snprintf(reason, sizeof(reason), "internal error: %s", strerror(-err));
    finish(p, pi, REG_PROBE_ERROR, reason, false);
}

void pr_round_start(struct csi_prober *p, struct pinst *pi)
{
    struct reg_node n;
    if (reg_get(p->reg, pi->seq, &n) < 0) {
        pr_drop(p, pi);
        return;
    }
    if (n.gen != pi->gen) {
        pr_resync(p, pi->seq, pr_now_ms());
        return;
    }
    pi->need_fp = n.health != REG_HEALTHY || pi->refresh_fp;
    pi->refresh_fp = false;
    pi->busy = true;
    pi->step = PR_PROBE;
    int rc = pi->ch ? 0 : csi_chan_open(p->client, pi->path, &pi->ch);
    if (rc == 0)
        rc = call_step(p, pi);
    if (rc < 0)
        fail(p, pi, rc);
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
static void advance(struct csi_prober *p, struct pinst *pi, struct csi_result *res)
{
    struct csi_result *g = &pi->g.r;
    int rc = 0;
    switch (pi->step) {
    case PR_PROBE:
        if (!res->ready) {
            finish(p, pi, REG_PROBE_NOT_READY, "not ready", false);
            return;
        }
        if (!pi->need_fp) {
            finish(p, pi, REG_PROBE_OK, NULL, false);
            return;
        }
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
        if ((rc = add_caps(g, res->capabilities)) == 0) {
            finish(p, pi, REG_PROBE_OK, NULL, true);   /* may free pi */
            return;
        }
        break;
    }
    if (rc == 0) {
        pi->step++;
        if (pi->step == PR_NODE_INFO && pi->type != REG_NODE)
            pi->step = PR_SERVICE_CAPS;
        rc = call_step(p, pi);
    }
    if (rc < 0)
        fail(p, pi, rc);
}

void pr_round_done(struct csi_prober *p, struct pdone *d)
{
    struct pinst *pi = pr_find(p, d->seq);
    if (pi && pi->busy && pi->epoch == d->epoch) {
        pi->g.latency_us += d->res.latency_us;
        if (d->res.ok)
            advance(p, pi, &d->res);
        else
            finish(p, pi, REG_PROBE_ERROR, d->res.reason, false);
    }
    csi_result_clear(&d->res);
    free(d);
}
