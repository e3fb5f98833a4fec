/* What a mutation's kind calls (mutate.h), beside the commit pipeline of
 * mutate.c: at validation, room in the store and the writers' view; at
 * validation and apply, where a plugin's current goes; at apply, changes
 * and their events, health, and an instance's record. */
#include "registry/mutate.h"
#include "base/defaults.h"
#include "base/log.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- room in the store ---- */

int mut_check_room(struct reg *reg, uint64_t est)
{
    const struct reg_backend *be = reg->opts.backend;
    if (!be || !reg->room_known || reg->pend_bytes + est <= reg->room)
        return 0;
    /* Room may have come back since the last commit (a file removed). */
    uint64_t room;
    if (be->room(be->ctx, &room) == 0) {
        reg->room = room;
        reg->room_ns = csifs_mono_ns();
    }
    if (reg->pend_bytes + est <= reg->room)
        return 0;
    csifs_why_set(REG_WHY_STORE_FULL);
    return -ENOSPC;
}

static size_t len0(const char *s)
{
    return s ? strlen(s) : 0;
}

uint64_t mut_est_inst(const struct inst *i, size_t extra)
{
    size_t n = 256 + len0(i->socket) + len0(i->fp.provider) + len0(i->fp.version) +
               len0(i->fp.nodeid) + len0(i->fp.topology) + len0(i->fp.capabilities) +
               len0(i->attr[INST_ATTR(REG_A_MOUNT_POINT)]) +
               len0(i->attr[INST_ATTR(REG_A_CONTAINER_MOUNT_POINT)]);
    return MUT_EST_REC + n + extra;
}

/* ---- the writers' view ---- */

static bool queued_add(const struct mut *m, enum reg_kind kind, enum reg_type type,
                       const struct plugin *parent, const char *name)
{
    const struct obj *o = m->obj;
    if (!m->add || o->w_dead || o->kind != kind || o->type != type || strcmp(o->name, name))
        return false;
    return kind == REG_K_PLUGIN || ((const struct inst *)o)->plugin == parent;
}

static struct obj *find_queued(struct reg *reg, enum reg_kind kind, enum reg_type type,
                               const struct plugin *parent, const char *name)
{
    struct mut *lists[] = { reg->inflight, reg->qhead };
    for (int l = 0; l < 2; l++)
        for (struct mut *m = lists[l]; m; m = m->next)
            if (queued_add(m, kind, type, parent, name))
                return m->obj;
    return NULL;
}

struct plugin *mut_find_plugin(struct reg *reg, enum reg_type type, const char *name)
{
    if ((unsigned)type >= REG_NTYPES || !name)
        return NULL;
    struct plugin *p = model_plugin(reg, type, name);
    if (p && !p->o.w_dead)
        return p;
    return (struct plugin *)find_queued(reg, REG_K_PLUGIN, type, NULL, name);
}

struct inst *mut_find_inst(struct reg *reg, struct plugin *p, const char *alloc)
{
    if (!alloc)
        return NULL;
    struct inst *i = model_inst(reg, p, alloc);
    if (i && !i->o.w_dead)
        return i;
    return (struct inst *)find_queued(reg, REG_K_INSTANCE, p->o.type, p, alloc);
}

struct obj *mut_find_seq(struct reg *reg, uint64_t seq)
{
    struct obj *o = model_by_seq(reg, seq);
    return o && !o->w_dead ? o : NULL;
}

/* ---- changes and events ---- */

struct reg_change *mut_emit(struct reg *reg, struct mut *m, enum reg_change_kind ck,
              const struct obj *o, const char *kind, const struct ev_kv *kv,
              const char *reason, enum reg_attr attr)
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
    assert(m->nch < MUT_MAX_CHANGES);
    struct reg_change *c = &m->ch[m->nch++];
    memset(c, 0, sizeof(*c));
    c->kind = ck;
    c->type = o->type;
    c->plugin = p->seq;
    strcpy(c->plugin_name, p->name);
    c->attr = attr;
    c->who = m->who;
    c->req = m->ring.key.unique ? &m->ring.key : NULL;
    if (i) {
        c->inst = o->seq;
        strcpy(c->alloc_name, o->name);
        c->gen = i->gen;
    }
    return c;
}

struct inst *mut_pick_current(const struct plugin *p, const struct inst *gone, bool w)
{
    struct inst *cur = w ? p->w_current : p->current, *first_ready = NULL;
    if (cur == gone || (w && cur && cur->o.w_dead))
        cur = NULL;
    if (cur && (w ? p->w_restoring : p->restoring))
        return cur;
    for (struct obj *o = p->head; o; o = o->next) {
        struct inst *i = model_as_inst(o);
        if (i == gone || (w && o->w_dead) || !(w ? i->w_ready : i->ready))
            continue;
        if ((w ? i->w_health : i->health) == REG_HEALTHY)
            return i;
        if (!first_ready)
            first_ready = i;
    }
    return cur ? cur : first_ready;
}

/* i no longer holds current in the writers' view (mut_probed's twin). */
static void w_probed(struct inst *i)
{
    if (i && i->w_restoring) {
        i->w_restoring = false;
        i->plugin->w_restoring--;
    }
}

bool mut_plan_current(struct mut *m, struct plugin *p, const struct inst *gone,
                      const struct inst *ov, enum reg_health h, bool ready)
{
    if (!p->w_recur) {               /* nothing queued: the view is memory */
        p->w_current = p->current;
        p->w_restoring = p->restoring;
        for (struct obj *o = p->head; o; o = o->next) {
            struct inst *i = model_as_inst(o);
            i->w_health = i->health;
            i->w_ready = i->ready;
            i->w_restoring = i->restoring;
            i->w_was_healthy = i->was_healthy;
        }
    }
    w_probed((struct inst *)gone);
    if (ov) {
        struct inst *i = (struct inst *)ov;
        i->w_health = h;
        i->w_ready = ready;
        w_probed(i);
    }
    m->recur = p;
    struct inst *to = mut_pick_current(p, gone, true);
    if (to == p->w_current)
        return false;
    p->w_current = to;
    m->cur_p = p;
    m->cur_to = to ? to->o.seq : 0;
    return true;
}

void mut_probed(struct inst *i)
{
    if (i->restoring) {
        i->restoring = false;
        i->plugin->restoring--;
    }
}

void mut_update_current(struct reg *reg, struct mut *m, struct plugin *p,
                        const struct inst *gone)
{
    struct inst *cur = mut_pick_current(p, gone, false);
    if (cur == p->current)
        return;
    p->current = cur;
    p->o.changed_ns = model_now_ns();
    struct ev_kv kv[] = { { "alloc", cur ? cur->o.name : "none" }, { NULL, NULL } };
    mut_emit(reg, m, REG_C_CURRENT, &p->o, "current", kv, NULL, 0)->to = cur ? cur->o.seq : 0;
}

void mut_set_health(struct reg *reg, struct mut *m, struct inst *i,
                    enum reg_health h, bool ready, char *reason)
{
    bool changed = h != i->health || ready != i->ready || strcmp(reason, i->reason);
    if (h != i->health)
        i->plugin->health_changes[h]++;
    i->health = h;
    i->ready = ready;
    free(i->reason);
    i->reason = reason;
    if (!changed)
        return;
    i->health_ver++;
    struct ev_kv kv[] = { { "state", reg_health_names[h] }, { "ready", ready ? "1" : "0" },
                          { NULL, NULL } };
    struct reg_change *c = mut_emit(reg, m, REG_C_HEALTH, &i->o, "health", kv, reason, 0);
    c->health = h;                   /* the change itself, for the log */
    c->ready = ready;
    snprintf(c->reason, sizeof(c->reason), "%s", reason);
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
    s->mount_point = or_empty(i->attr[INST_ATTR(REG_A_MOUNT_POINT)]);
    s->container_mount_point = or_empty(i->attr[INST_ATTR(REG_A_CONTAINER_MOUNT_POINT)]);
}
