/* The mutation path shared by every registry change. */
#include "registry/mutate.h"
#include "registry/counters.h"

#include <stdio.h>
#include <string.h>

#define EV_BLOCK 65536          /* event seqs reserved per meta commit */

int mut_run(struct reg *reg, struct mut *m, mut_apply_fn apply, void *ctx)
{
    uint64_t ev_next = ev_next_seq(reg->ring);
    /* Each mutation emits at most MUT_MAX_CHANGES events: keep a block
     * of persisted seqs ahead so a restart never reuses one. */
    bool reserve = reg->opts.backend && ev_next + MUT_MAX_CHANGES >= reg->ev_reserved;
    if (reg->opts.backend && (m->commit || reserve)) {
        m->txn.meta.next_seq = reg->next_seq + m->new_seqs;
        m->txn.meta.ev_reserved = reserve ? ev_next + EV_BLOCK : reg->ev_reserved;
        int rc = reg->opts.backend->commit(reg->opts.backend->ctx, &m->txn);
        if (rc < 0)
            return rc;
        reg->ev_reserved = m->txn.meta.ev_reserved;
    }
    pthread_rwlock_wrlock(&reg->lock);
    apply(reg, m, ctx);
    reg->next_seq += m->new_seqs;
    pthread_rwlock_unlock(&reg->lock);
    reg_cnt_mutation(m->ch, m->nch, m->commit);
    for (int c = 0; c < m->nch; c++)
        for (int s = 0; s < reg->nsubs; s++)
            reg->subs[s].fn(&m->ch[c], reg->subs[s].arg);
    return 0;
}

void mut_emit(struct reg *reg, struct mut *m, enum reg_change_kind ck,
              const struct obj *o, const char *kind, const struct ev_kv *kv,
              const char *reason)
{
    const struct inst *i = model_as_inst((struct obj *)o);
    const struct obj *p = i ? &i->plugin->o : o;
    char path[16 + 2 * REG_NAME_MAX + 2];
    if (i)
        snprintf(path, sizeof(path), "%s/%s/%s", reg_type_names[o->type], p->name, o->name);
    else
        snprintf(path, sizeof(path), "%s/%s", reg_type_names[o->type], p->name);
    if (kind)
        ev_append(reg->ring, kind, path, kv, reason);
    if (m->nch == MUT_MAX_CHANGES)
        return;
    struct reg_change *c = &m->ch[m->nch++];
    memset(c, 0, sizeof(*c));
    c->kind = ck;
    c->type = o->type;
    c->plugin = p->seq;
    c->plugin_name = p->name;
    if (i) {
        c->inst = o->seq;
        c->alloc_name = o->name;
        c->gen = i->gen;
    }
}

void mut_update_current(struct reg *reg, struct mut *m, struct plugin *p)
{
    struct inst *cur = NULL;
    for (struct obj *o = p->head; o && !cur; o = o->next)
        if (model_as_inst(o)->ready)
            cur = model_as_inst(o);
    if (cur == p->current)
        return;
    p->current = cur;
    p->o.changed_ns = model_now_ns();
    struct ev_kv kv[] = { { "alloc", cur ? cur->o.name : "none" }, { NULL, NULL } };
    mut_emit(reg, m, REG_C_CURRENT, &p->o, "current", kv, NULL);
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

void mut_inst_rec(const struct inst *i, struct store_rec *r)
{
    memset(r, 0, sizeof(*r));
    r->op = STORE_PUT_INST;
    struct store_inst *s = &r->u.inst;
    s->type = i->o.type;
    s->plugin = i->plugin->o.name;
    s->alloc = i->o.name;
    s->seq = i->o.seq;
    s->registered_ns = i->o.registered_ns;
    s->socket = or_empty(i->socket);
    s->ready = i->ready;
    s->fp.provider = or_empty(i->fp.provider);
    s->fp.version = or_empty(i->fp.version);
    s->fp.nodeid = or_empty(i->fp.nodeid);
    s->fp.max_volumes = i->fp.max_volumes;
    s->fp.topology = or_empty(i->fp.topology);
    s->fp.capabilities = or_empty(i->fp.capabilities);
    s->mount_point = or_empty(i->attr[REG_A_MOUNT_POINT]);
    s->container_mount_point = or_empty(i->attr[REG_A_CONTAINER_MOUNT_POINT]);
}
