/* The health table of DESIGN section 3, applied to probe results. */
#include "registry/mutate.h"

#include "base/defaults.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *reg_fmt_duration(int64_t ms, char *buf, size_t cap)
{
    return csifs_fmt_duration(ms, buf, cap);
}

static bool fp_ok(enum reg_type type, const struct reg_fingerprint *fp)
{
    return type != REG_NODE || (fp->nodeid && *fp->nodeid);
}

int health_next(const struct reg *reg, const struct inst *i, const struct reg_probe *p,
                struct health_next *out)
{
    /* From i as the queued probes leave it: from memory, a probe behind an
     * OK one not applied yet would take its readiness back (DESIGN 3) */
    bool w = i->plugin->w_recur;
    enum reg_health health = w ? i->w_health : i->health;
    bool ready = w ? i->w_ready : i->ready, was_healthy = w ? i->w_was_healthy : i->was_healthy;
    bool ok = p->outcome == REG_PROBE_OK;
    const char *why = p->reason && *p->reason ? p->reason
                      : p->outcome == REG_PROBE_NOT_READY ? "not ready" : "error";
    if (ok && !p->fp && health != REG_HEALTHY)
        return -EINVAL;              /* the way to healthy goes through a fingerprint */
    if (ok && p->fp && !fp_ok(i->o.type, p->fp)) {
        ok = false;
        why = "fingerprint: empty node_id";
    }
    out->probe_outcome = ok ? REG_PROBE_OK : p->outcome == REG_PROBE_OK ? REG_PROBE_ERROR
                                                                        : p->outcome;
    snprintf(out->probe_reason, sizeof(out->probe_reason), "%s", ok ? "ok" : why);
    out->ready = ready;
    out->was_healthy = was_healthy;
    out->set_fp = ok && p->fp;
    if (ok) {
        out->health = REG_HEALTHY;
        out->ready = true;
        out->was_healthy = true;
        snprintf(out->reason, sizeof(out->reason), "ok");
    } else if (health == REG_HEALTHY || was_healthy) {
        out->health = REG_UNHEALTHY;
        snprintf(out->reason, sizeof(out->reason), "%s", why);
    } else if (model_mono_ms() - i->unknown_since_ms >= reg->opts.health_timeout_ms) {
        char d[32];
        out->health = REG_UNHEALTHY;
        /* the stable part, then the last failure's own reason (issue 24) */
        snprintf(out->reason, sizeof(out->reason), "did not become healthy within %s: %.180s",
                 reg_fmt_duration(reg->opts.health_timeout_ms, d, sizeof(d)), why);
    } else {
        out->health = REG_UNKNOWN;
        snprintf(out->reason, sizeof(out->reason), "%s", why);
    }
    return 0;
}

void health_hist_add(struct reg *reg, struct inst *i, const struct reg_probe *p,
                     const struct health_next *n, struct hreason **spare)
{
    struct hist *h = &i->hist[(i->hist_head + i->nhist) % REG_HISTORY];
    if (i->nhist == REG_HISTORY) {
        i->hist_head = (i->hist_head + 1) % REG_HISTORY;
        model_reason_put(h->reason);
    } else {
        i->nhist++;
    }
    h->at_ms = (p->done_ns ? p->done_ns : model_now_ns()) / 1000000;
    h->latency_us = p->latency_us < 0 ? 0 : p->latency_us > UINT32_MAX ? UINT32_MAX
                                                                       : (uint32_t)p->latency_us;
    h->outcome = (uint8_t)n->probe_outcome;
    h->reason = model_reason_intern(reg, spare);
}

/* ---- reg_probe_result ---- */

struct probe_ctx {
    const struct reg_probe *p;
    struct health_next next;
    struct fp fp;                    /* new fingerprint, when fp_changed */
    bool fp_changed;
    char *reason;
    struct hist *hist;               /* fresh history buffer, if none yet */
    struct hreason *spare;           /* the probe's reason, if not interned yet */
};

static void rec_probe(struct mut *m, struct store_rec *r)
{
    struct probe_ctx *c = m->ctx;
    r->u.inst.ready = c->next.ready;
    if (c->fp_changed)
        r->u.inst.fp = (struct reg_fingerprint){ c->fp.provider, c->fp.version, c->fp.nodeid,
                                                 c->fp.max_volumes, c->fp.topology,
                                                 c->fp.capabilities };
}

static void apply_probe(struct reg *reg, struct mut *m)
{
    struct probe_ctx *c = m->ctx;
    struct inst *i = (struct inst *)m->obj;
    if (!i->hist) {
        i->hist = c->hist;
        c->hist = NULL;
    }
    health_hist_add(reg, i, c->p, &c->next, &c->spare);
    i->plugin->probes[c->p->outcome]++;
    struct reg_change *hc = mut_emit(reg, m, REG_C_HISTORY, &i->o, NULL, NULL, NULL, 0);
    hc->outcome = c->next.probe_outcome;
    hc->latency_us = i->hist[(i->hist_head + i->nhist - 1) % REG_HISTORY].latency_us;
    snprintf(hc->reason, sizeof(hc->reason), "%.199s", c->next.probe_reason);
    if (c->p->fp)
        i->pid = c->p->pid;
    if (c->fp_changed) {
        model_free_fp(&i->fp);
        i->fp = c->fp;
        memset(&c->fp, 0, sizeof(c->fp));
        struct ev_kv kv[] = { { "provider", i->fp.provider }, { "version", i->fp.version },
                              { "nodeid", i->fp.nodeid }, { NULL, NULL } };
        mut_emit(reg, m, REG_C_FINGERPRINT, &i->o, "fingerprint", kv, NULL, 0);
    }
    i->was_healthy = c->next.was_healthy;
    mut_set_health(reg, m, i, c->next.health, c->next.ready, c->reason);
    c->reason = NULL;
    mut_probed(i);
    model_keep(reg, i, false);
    mut_update_current(reg, m, i->plugin, NULL);
}

static const struct mut_kind probe_commit = { rec_probe, apply_probe, NULL, NULL };
/* Event seqs are persisted as used in blocks (mutate.c): a probe applied
 * without a commit needs this many left in the block. */
#define PROBE_EV_ROOM 4096

static int dup_fp(const struct reg_fingerprint *in, struct fp *out)
{
    out->provider = strdup(in->provider ? in->provider : "");
    out->version = strdup(in->version ? in->version : "");
    out->nodeid = strdup(in->nodeid ? in->nodeid : "");
    out->topology = strdup(in->topology ? in->topology : "");
    out->capabilities = strdup(in->capabilities ? in->capabilities : "");
    out->max_volumes = in->max_volumes;
    if (out->provider && out->version && out->nodeid && out->topology && out->capabilities)
        return 0;
    model_free_fp(out);
    return -ENOMEM;
}

static bool fp_differs(const struct fp *a, const struct fp *b)
{
    return !a->nodeid || strcmp(a->provider, b->provider) || strcmp(a->version, b->version) ||
           strcmp(a->nodeid, b->nodeid) || strcmp(a->topology, b->topology) ||
           strcmp(a->capabilities, b->capabilities) || a->max_volumes != b->max_volumes;
}

/* The fingerprint i has once its queued probes apply (wlock held; a queued
 * socket change makes the probe stale): from memory alone, a probe behind
 * one that changes it would find it unchanged, and the earlier one's stay. */
static const struct fp *w_fp(const struct reg *reg, const struct inst *i)
{
    const struct fp *f = &i->fp;
    struct mut *lists[] = { reg->inflight, reg->qhead };
    for (int l = 0; l < 2 && i->w_pend; l++)
        for (struct mut *m = lists[l]; m; m = m->next)
            if (m->obj == &i->o && m->k == &probe_commit &&
                ((struct probe_ctx *)m->ctx)->fp_changed)
                f = &((struct probe_ctx *)m->ctx)->fp;
    return f;
}

static size_t fp_len(const struct fp *f)
{
    return strlen(f->provider) + strlen(f->version) + strlen(f->nodeid) + strlen(f->topology) +
           strlen(f->capabilities);
}

int reg_probe_result(struct reg *reg, uint64_t inst, const struct reg_probe *p)
{
    struct probe_ctx c = { .p = p };
    struct mut m = { .k = &probe_commit, .ctx = &c };
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    struct inst *i = model_as_inst(mut_find_seq(reg, inst));
    if (!i)
        rc = -ENOENT;
    else if (p->gen != i->w_gen || !i->socket)
        rc = -ESTALE;                /* changed since, or a change is queued */
    else
        rc = health_next(reg, i, p, &c.next);
    if (rc == 0 && !i->hist && !(c.hist = calloc(REG_HISTORY, sizeof(*c.hist))))
        rc = -ENOMEM;
    if (rc == 0 && !(c.reason = strdup(c.next.reason)))
        rc = -ENOMEM;
    if (rc == 0 && !(c.spare = model_reason_new(reg, c.next.probe_reason)))
        rc = -ENOMEM;
    if (rc == 0 && c.next.set_fp && (rc = dup_fp(p->fp, &c.fp)) == 0)
        c.fp_changed = fp_differs(w_fp(reg, i), &c.fp);
    if (rc == 0 && c.fp_changed)     /* it commits: before the plan (nothing fails after) */
        rc = mut_check_room(reg, m.est = mut_est_inst(i, fp_len(&c.fp)));
    /* queued behind a change of the plugin's current, it must be too: applied
     * now, memory would recompute current without that change */
    bool behind = rc == 0 && i->plugin->w_recur;
    bool moves = rc == 0 && mut_plan_current(&m, i->plugin, NULL, i, c.next.health,
                                             c.next.ready);
    if (rc == 0)
        i->w_was_healthy = c.next.was_healthy;
    bool commit = rc == 0 && (c.next.ready != i->ready || c.fp_changed || moves || behind ||
                              (reg->opts.backend && ev_next_seq(reg->ring) + PROBE_EV_ROOM >=
                                                    reg->ev_reserved));
    m.obj = i ? &i->o : NULL;
    if (rc < 0)
        pthread_mutex_unlock(&reg->wlock);
    else if (commit)
        rc = mut_submit(reg, &m);
    else
        mut_apply_now(reg, &m);         /* health, reason, history: no commit */
    free(c.hist);
    free(c.reason);
    free(c.spare);                   /* not in the table: a twin was, or no apply */
    model_free_fp(&c.fp);
    return rc;
}
