/* Health kept across a takeover (DESIGN 13): the slots of reg_keep
 * (registry.h). Every write runs in a mutation's apply step, with
 * reg->wlock and reg->lock (exclusive) held; reg_keep runs before anything
 * else touches the registry. */
#include "registry/model.h"

#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A slot being written has an odd ver (a kill then leaves it odd). */
static void begin(struct reg_keep_slot *s)
{
    __atomic_store_n(&s->ver, s->ver | 1u, __ATOMIC_RELEASE);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static void end(struct reg_keep_slot *s)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&s->ver, s->ver + 1u, __ATOMIC_RELEASE);
}

static void put_hist(struct reg_keep_slot *s, const struct inst *i, unsigned k)
{
    const struct hist *h = &i->hist[k];
    struct reg_keep_hist *o = &s->hist[k];
    o->at_ms = h->at_ms;
    o->latency_us = h->latency_us;
    o->outcome = h->outcome;
    snprintf(o->reason, sizeof(o->reason), "%s", h->reason ? h->reason->s : "");
}

void model_keep(struct reg *reg, struct inst *i, bool all)
{
    if (!reg->keep)
        return;
    if (!i->kslot) {
        if (!reg->nfree) {
            if (!reg->keep_full)
                csifs_log(LOG_WARNING, "the state memfd has no health slot left (%u): a "
                          "takeover shows some instances as restored", reg->nkeep);
            reg->keep_full = true;
            return;
        }
        i->kslot = reg->keep_free[--reg->nfree] + 1;
        if (i->kslot > reg->keep->hi)    /* before the slot: a restore reads it */
            __atomic_store_n(&reg->keep->hi, i->kslot, __ATOMIC_RELEASE);
        all = true;
    }
    struct reg_keep_slot *s = &reg->keep->slot[i->kslot - 1];
    begin(s);
    s->seq = i->o.seq;
    s->health = (uint8_t)i->health;
    s->ready = i->ready;
    s->was_healthy = i->was_healthy;
    s->unknown_since_ms = i->unknown_since_ms;
    snprintf(s->reason, sizeof(s->reason), "%s", i->reason ? i->reason : "");
    if (all)
        snprintf(s->socket, sizeof(s->socket), "%s", i->socket ? i->socket : "");
    s->nhist = (uint8_t)(i->hist ? i->nhist : 0);
    s->hist_head = i->hist ? i->hist_head : 0;
    if (all) {
        for (unsigned k = 0; k < s->nhist; k++)
            put_hist(s, i, (i->hist_head + k) % REG_HISTORY);
    } else if (s->nhist) {
        put_hist(s, i, (i->hist_head + i->nhist - 1) % REG_HISTORY);
    }
    end(s);
}

void model_keep_drop(struct reg *reg, struct inst *i)
{
    if (!reg->keep || !i->kslot)
        return;
    struct reg_keep_slot *s = &reg->keep->slot[i->kslot - 1];
    begin(s);
    s->seq = 0;
    end(s);
    reg->keep_free[reg->nfree++] = i->kslot - 1;
    i->kslot = 0;
}

/* Is s a whole slot that fits i as the store restored it? */
static bool fits(const struct reg_keep_slot *s, const struct inst *i)
{
    return !(s->ver & 1u) && s->health < REG_NHEALTH && s->nhist <= REG_HISTORY &&
           s->hist_head < REG_HISTORY && s->ready == i->ready &&
           memchr(s->socket, '\0', sizeof(s->socket)) && memchr(s->reason, '\0', sizeof(s->reason)) &&
           !strcmp(s->socket, i->socket ? i->socket : "");
}

/* i takes its health from s (a predecessor's, fits); 0 or -ENOMEM. */
static int take(struct reg *reg, struct inst *i, const struct reg_keep_slot *s)
{
    char *reason = strdup(s->reason);
    struct hist *h = s->nhist && !i->hist ? calloc(REG_HISTORY, sizeof(*h)) : NULL;
    if (!reason || (s->nhist && !i->hist && !h)) {
        free(reason);
        free(h);
        return -ENOMEM;
    }
    if (h)
        i->hist = h;
    for (unsigned k = 0; k < s->nhist; k++) {
        unsigned at = (s->hist_head + k) % REG_HISTORY;
        const struct reg_keep_hist *o = &s->hist[at];
        char txt[REG_KEEP_REASON];
        snprintf(txt, sizeof(txt), "%.*s", (int)sizeof(txt) - 1, o->reason);
        struct hreason *spare = model_reason_new(reg, txt);
        if (!spare)
            return -ENOMEM;          /* the entries so far stay: consistent */
        i->hist[at] = (struct hist){ .at_ms = o->at_ms, .latency_us = o->latency_us,
                                     .outcome = o->outcome < 3 ? o->outcome : REG_PROBE_ERROR,
                                     .reason = model_reason_intern(reg, &spare) };
        free(spare);
        i->nhist = k + 1;
        i->hist_head = s->hist_head;
    }
    i->health = (enum reg_health)s->health;
    free(i->reason);
    i->reason = reason;
    i->was_healthy = s->was_healthy;
    i->unknown_since_ms = s->unknown_since_ms;
    i->health_ver++;
    if (i->restoring) {              /* known: no "restored, not yet re-probed" */
        i->restoring = false;
        i->plugin->restoring--;
    }
    return 0;
}

int reg_keep(struct reg *reg, struct reg_keep_table *t, uint32_t n, bool restore,
             unsigned long *restored)
{
    *restored = 0;
    uint32_t *fr = malloc((n ? n : 1) * sizeof(*fr));
    if (!fr)
        return -ENOMEM;
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    pthread_rwlock_wrlock(&reg->lock);
    reg->keep = t;
    reg->nkeep = n;
    reg->keep_free = fr;
    reg->nfree = 0;
    uint32_t hi = restore ? (t->hi < n ? t->hi : n) : 0;
    for (uint32_t k = n; k-- > hi;)  /* popped lowest first: the used stay dense */
        fr[reg->nfree++] = k;
    if (!restore)
        t->hi = 0;
    for (uint32_t k = hi; k-- > 0;) {
        struct reg_keep_slot *s = &t->slot[k];
        struct inst *i = s->seq ? model_as_inst(model_by_seq(reg, s->seq)) : NULL;
        bool ok = i && !i->kslot && fits(s, i);
        int trc = ok ? take(reg, i, s) : 0;
        if (ok && trc == 0) {
            i->kslot = k + 1;
            (*restored)++;
            continue;
        }
        rc = trc < 0 ? trc : rc;
        if (s->seq || (s->ver & 1u)) {
            begin(s);
            s->seq = 0;
            end(s);
        }
        fr[reg->nfree++] = k;
    }
    pthread_rwlock_unlock(&reg->lock);
    pthread_mutex_unlock(&reg->wlock);
    return rc;
}
