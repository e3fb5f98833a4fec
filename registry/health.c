/* The health table of DESIGN section 3, applied to probe results. */
#include "registry/mutate.h"

#include "common/defaults.h"

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
    bool ok = p->outcome == REG_PROBE_OK;
    const char *why = p->reason && *p->reason ? p->reason
                      : p->outcome == REG_PROBE_NOT_READY ? "not ready" : "error";
    if (ok && !p->fp && i->health != REG_HEALTHY)
        return -EINVAL;              /* the way to healthy goes through a fingerprint */
    if (ok && p->fp && !fp_ok(i->o.type, p->fp)) {
        ok = false;
        why = "fingerprint: empty node_id";
    }
    out->ready = i->ready;
    out->was_healthy = i->was_healthy;
    out->set_fp = ok && p->fp;
    if (ok) {
        out->health = REG_HEALTHY;
        out->ready = true;
        out->was_healthy = true;
        snprintf(out->reason, sizeof(out->reason), "ok");
    } else if (i->health == REG_HEALTHY || i->was_healthy) {
        out->health = REG_UNHEALTHY;
        snprintf(out->reason, sizeof(out->reason), "%s", why);
    } else if (model_mono_ms() - i->unknown_since_ms >= reg->opts.health_timeout_ms) {
        char d[32];
        out->health = REG_UNHEALTHY;
        snprintf(out->reason, sizeof(out->reason), "did not become healthy within %s",
                 reg_fmt_duration(reg->opts.health_timeout_ms, d, sizeof(d)));
    } else {
        out->health = REG_UNKNOWN;
        snprintf(out->reason, sizeof(out->reason), "%s", why);
    }
    return 0;
}

void health_hist_add(struct inst *i, const struct reg_probe *p, const char *reason)
{
    struct hist *h = &i->hist[(i->hist_head + i->nhist) % REG_HISTORY];
    if (i->nhist == REG_HISTORY)
        i->hist_head = (i->hist_head + 1) % REG_HISTORY;
    else
        i->nhist++;
    h->at_ms = model_now_ns() / 1000000;
    h->latency_us = p->latency_us;
    h->outcome = p->outcome;
    snprintf(h->reason, sizeof(h->reason), "%s", reason);
}

/* ---- reg_probe_result ---- */

struct probe_ctx {
    struct inst *i;
    const struct reg_probe *p;
    struct health_next next;
    struct fp fp;                    /* new fingerprint, when fp_changed */
    bool fp_changed;
    char *reason;
    struct hist *hist;               /* fresh history buffer, if none yet */
};

static void apply_probe(struct reg *reg, struct mut *m, void *ctx)
{
    struct probe_ctx *c = ctx;
    struct inst *i = c->i;
    if (!i->hist) {
        i->hist = c->hist;
        c->hist = NULL;
    }
    health_hist_add(i, c->p, c->next.reason);
    mut_emit(reg, m, REG_C_HISTORY, &i->o, NULL, NULL, NULL);
    if (c->p->fp)
        i->pid = c->p->pid;
    if (c->fp_changed) {
        model_free_fp(&i->fp);
        i->fp = c->fp;
        memset(&c->fp, 0, sizeof(c->fp));
        {
            struct ev_kv kv[] = { { "provider", i->fp.provider },
                                  { "version", i->fp.version },
                                  { "nodeid", i->fp.nodeid }, { NULL, NULL } };
            mut_emit(reg, m, REG_C_FINGERPRINT, &i->o, "fingerprint", kv, NULL);
        }
    }
    bool was_ready = i->ready;
    i->was_healthy = c->next.was_healthy;
    mut_set_health(reg, m, i, c->next.health, c->next.ready, c->reason);
    c->reason = NULL;
    if (!was_ready && i->ready)
        mut_update_current(reg, m, i->plugin);
}

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

int reg_probe_result(struct reg *reg, uint64_t inst, const struct reg_probe *p)
{
    struct probe_ctx c = { .p = p };
    struct mut m = { 0 };
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    c.i = model_as_inst(model_by_seq(reg, inst));
    if (!c.i)
        rc = -ENOENT;
    else if (!c.i->socket || p->gen != c.i->gen)
        rc = -ESTALE;
    else
        rc = health_next(reg, c.i, p, &c.next);
    if (rc == 0 && !c.i->hist && !(c.hist = calloc(REG_HISTORY, sizeof(*c.hist))))
        rc = -ENOMEM;
    if (rc == 0 && !(c.reason = strdup(c.next.reason)))
        rc = -ENOMEM;
    if (rc == 0 && c.next.set_fp && (rc = dup_fp(p->fp, &c.fp)) == 0)
        c.fp_changed = fp_differs(&c.i->fp, &c.fp);
    if (rc == 0) {
        m.commit = c.next.ready != c.i->ready || c.fp_changed;
        if (m.commit) {
            struct store_rec *r = &m.txn.rec[m.txn.n++];
            mut_inst_rec(c.i, r);
            r->u.inst.ready = c.next.ready;
            if (c.fp_changed)
                r->u.inst.fp = (struct reg_fingerprint){
                    c.fp.provider, c.fp.version, c.fp.nodeid, c.fp.max_volumes,
                    c.fp.topology, c.fp.capabilities };
        }
        rc = mut_run(reg, &m, apply_probe, &c);
    }
    free(c.hist);
    free(c.reason);
    model_free_fp(&c.fp);
    pthread_mutex_unlock(&reg->wlock);
    return rc;
}
