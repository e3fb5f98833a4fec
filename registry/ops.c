/* Structural mutations: plugins, instances, sockets, writable attributes.
 * Each validates against the writers' view with wlock held, marks it, and
 * hands a mutation (mut_new) to mut_submit() (mutate.h); its kind's fin
 * frees what the outcome leaves unused, on whichever thread learns it. */
#include "base/log.h"
#include "registry/mutate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct obj *new_obj(struct reg *reg, size_t size, enum reg_kind kind,
                           enum reg_type type, const char *name)
{
    struct obj *o = calloc(1, size);
    if (!o)
        return NULL;
    o->kind = kind;
    o->type = type;
    o->seq = reg->next_seq++;         /* a failed mutation leaves a gap: no reuse */
    strcpy(o->name, name);
    o->registered_ns = o->changed_ns = model_now_ns();
    return o;
}

/* Neither NUL nor control characters (0x01-0x1f but tab, 0x7f) nor newline:
 * DESIGN 5. */
int reg_value_check(const char *v, size_t len)
{
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)v[k];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return csifs_why_set("control characters are not allowed"), -EINVAL;
    }
    return 0;
}

/* ---- plugins ---- */

static void rec_put(struct mut *m, struct store_rec *r)
{
    (void)m;
    (void)r;                          /* the record as built from the object */
}

static void rec_del(struct mut *m, struct store_rec *r)
{
    (void)m;
    r->op = r->op == STORE_PUT_PLUGIN ? STORE_DEL_PLUGIN : STORE_DEL_INST;
}

static void apply_plugin_add(struct reg *reg, struct mut *m)
{
    struct plugin *p = (struct plugin *)m->obj;
    model_link(reg, &p->o, NULL);
    mut_emit(reg, m, REG_C_PLUGIN_ADD, &p->o, "registered", NULL, NULL, 0);
}

/* A new object not linked: freed when its mutation failed. */
static void fin_add(struct reg *reg, struct mut *m, int rc)
{
    (void)reg;
    if (rc < 0)
        free(m->obj);
}

static const struct mut_kind plugin_add = { rec_put, apply_plugin_add, NULL, fin_add };

int reg_plugin_create(struct reg *reg, enum reg_type type, const char *plugin)
{
    int rc = reg_name_check(plugin);
    if (rc < 0 || (unsigned)type >= REG_NTYPES)
        return rc < 0 ? rc : -EINVAL;
    struct mut *m = mut_new(&plugin_add, 0);
    if (!m)
        return -ENOMEM;
    m->add = true;
    m->est = MUT_EST_REC;
    pthread_mutex_lock(&reg->wlock);
    struct plugin *p = NULL;
    if (mut_find_plugin(reg, type, plugin))
        rc = -EEXIST;
    else if ((rc = mut_check_room(reg, m->est)) == 0 &&
             !(p = (struct plugin *)new_obj(reg, sizeof(*p), REG_K_PLUGIN, type, plugin)))
        rc = -ENOMEM;
    if (rc < 0) {
        pthread_mutex_unlock(&reg->wlock);
        mut_free(m);
        return rc;
    }
    m->obj = &p->o;
    return mut_submit(reg, m);
}

static void apply_plugin_del(struct reg *reg, struct mut *m)
{
    struct plugin *p = (struct plugin *)m->obj;
    model_unlink(reg, &p->o, NULL);
    mut_emit(reg, m, REG_C_PLUGIN_DEL, &p->o, "deregistered", NULL, NULL, 0);
}

static void undo_del(struct reg *reg, struct mut *m)
{
    (void)reg;
    m->obj->w_dead = false;
    struct inst *i = model_as_inst(m->obj);
    if (i)
        i->plugin->w_count++;
}

/* Subscribers saw the change; nobody can reach p any more. */
static void fin_plugin_del(struct reg *reg, struct mut *m, int rc)
{
    (void)reg;
    if (rc == 0)
        free(m->obj);
}

static const struct mut_kind plugin_del = { rec_del, apply_plugin_del, undo_del,
                                            fin_plugin_del };

int reg_plugin_remove(struct reg *reg, enum reg_type type, const char *plugin)
{
    struct mut *m = mut_new(&plugin_del, 0);
    if (!m)
        return -ENOMEM;
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    struct plugin *p = mut_find_plugin(reg, type, plugin);
    if (!p)
        rc = -ENOENT;
    else if (p->w_count)
        rc = -ENOTEMPTY;
    if (rc < 0) {
        pthread_mutex_unlock(&reg->wlock);
        mut_free(m);
        return rc;
    }
    p->o.w_dead = true;
    m->obj = &p->o;
    return mut_submit(reg, m);
}

/* ---- instances ---- */

static void apply_inst_add(struct reg *reg, struct mut *m)
{
    struct inst *i = (struct inst *)m->obj;
    model_link(reg, &i->o, i->plugin);
    i->plugin->o.changed_ns = i->o.registered_ns;
    mut_emit(reg, m, REG_C_INST_ADD, &i->o, "registered", NULL, NULL, 0);
}

static void undo_inst_add(struct reg *reg, struct mut *m)
{
    (void)reg;
    ((struct inst *)m->obj)->plugin->w_count--;
}

static void fin_inst_add(struct reg *reg, struct mut *m, int rc)
{
    (void)reg;
    if (rc < 0)
        model_free_inst((struct inst *)m->obj);
}

static const struct mut_kind inst_add = { rec_put, apply_inst_add, undo_inst_add,
                                          fin_inst_add };

int reg_instance_register(struct reg *reg, enum reg_type type, const char *plugin,
                          const char *alloc)
{
    int rc = reg_name_check(alloc);
    if (rc < 0)
        return rc;
    struct mut *m = mut_new(&inst_add, 0);
    if (!m)
        return -ENOMEM;
    m->add = true;
    struct inst *i = NULL;
    pthread_mutex_lock(&reg->wlock);
    struct plugin *p = mut_find_plugin(reg, type, plugin);
    if (!p)
        rc = -ENOENT;
    else if (mut_find_inst(reg, p, alloc))
        rc = -EEXIST;
    else if (p->w_count >= reg->opts.max_instances) {
        static _Thread_local char why[80];
        snprintf(why, sizeof(why), "max_instances (%u) reached for this plugin",
                 reg->opts.max_instances);
        csifs_why_set(why);
        rc = -ENOSPC;
    }
    else if ((rc = mut_check_room(reg, MUT_EST_REC)) == 0 &&
             (!(i = (struct inst *)new_obj(reg, sizeof(*i), REG_K_INSTANCE, type, alloc)) ||
              !(i->reason = strdup("no socket set"))))
        rc = -ENOMEM;
    if (rc < 0) {
        pthread_mutex_unlock(&reg->wlock);
        model_free_inst(i);
        mut_free(m);
        return rc;
    }
    i->plugin = p;
    i->health = REG_UNKNOWN;
    i->unknown_since_ms = model_mono_ms();
    p->w_count++;
    m->obj = &i->o;
    m->est = mut_est_inst(i, 0);
    return mut_submit(reg, m);
}

static void apply_inst_del(struct reg *reg, struct mut *m)
{
    struct inst *i = (struct inst *)m->obj;
    struct plugin *p = i->plugin;
    model_unlink(reg, &i->o, p);
    p->o.changed_ns = model_now_ns();
    mut_emit(reg, m, REG_C_INST_DEL, &i->o, "deregistered", NULL, NULL, 0);
    mut_probed(i);
    model_keep_drop(reg, i);
    mut_update_current(reg, m, p, i);
}

/* Unlinked by the apply; its history still holds references to the shared
 * reasons table, which validation (wlock) and apply (lock) touch: put them
 * back under both. */
static void fin_inst_del(struct reg *reg, struct mut *m, int rc)
{
    if (rc < 0)
        return;
    pthread_mutex_lock(&reg->wlock);
    pthread_rwlock_wrlock(&reg->lock);
    model_free_inst((struct inst *)m->obj);
    pthread_rwlock_unlock(&reg->lock);
    pthread_mutex_unlock(&reg->wlock);
}

static const struct mut_kind inst_del = { rec_del, apply_inst_del, undo_del, fin_inst_del };

int reg_instance_deregister(struct reg *reg, enum reg_type type, const char *plugin,
                            const char *alloc)
{
    struct mut *m = mut_new(&inst_del, 0);
    if (!m)
        return -ENOMEM;
    pthread_mutex_lock(&reg->wlock);
    struct plugin *p = mut_find_plugin(reg, type, plugin);
    struct inst *i = p ? mut_find_inst(reg, p, alloc) : NULL;
    if (!i) {
        pthread_mutex_unlock(&reg->wlock);
        mut_free(m);
        return -ENOENT;
    }
    i->o.w_dead = true;
    p->w_count--;
    m->obj = &i->o;
    mut_plan_current(m, p, i, NULL, REG_UNKNOWN, false);
    return mut_submit(reg, m);
}

/* ---- socket ---- */

struct sock_ctx {
    char *target;                    /* NULL clears */
    char *reason;
};

static void rec_socket(struct mut *m, struct store_rec *r)
{
    struct sock_ctx *s = m->ctx;
    r->u.inst.socket = s->target ? s->target : "";
    memset(&r->u.inst.fp, 0, sizeof(r->u.inst.fp));
    r->u.inst.fp.provider = r->u.inst.fp.version = r->u.inst.fp.nodeid = "";
    r->u.inst.fp.topology = r->u.inst.fp.capabilities = "";
}

static void apply_socket(struct reg *reg, struct mut *m)
{
    struct sock_ctx *s = m->ctx;
    struct inst *i = (struct inst *)m->obj;
    free(i->socket);
    i->socket = s->target;
    s->target = NULL;
    i->gen++;
    i->pid = 0;
    i->was_healthy = false;
    i->unknown_since_ms = model_mono_ms();
    i->o.changed_ns = model_now_ns();
    model_free_fp(&i->fp);
    struct ev_kv kv[] = { { "target", i->socket ? i->socket : "" }, { NULL, NULL } };
    mut_emit(reg, m, REG_C_SOCKET, &i->o, "socket", kv, NULL, 0);
    mut_set_health(reg, m, i, REG_UNKNOWN, i->ready, s->reason);
    s->reason = NULL;
    mut_probed(i);
    model_keep(reg, i, true);
    mut_update_current(reg, m, i->plugin, NULL);
}

static void undo_socket(struct reg *reg, struct mut *m)
{
    (void)reg;
    ((struct inst *)m->obj)->w_gen--;
}

static void fin_socket(struct reg *reg, struct mut *m, int rc)
{
    (void)reg, (void)rc;
    struct sock_ctx *s = m->ctx;     /* what apply did not take */
    free(s->target);
    free(s->reason);
}

static const struct mut_kind socket_set = { rec_socket, apply_socket, undo_socket, fin_socket };

int reg_socket_set(struct reg *reg, uint64_t inst, const char *target)
{
    if (target && !*target)
        target = NULL;
    size_t len = target ? strlen(target) : 0;
    if (target && target[0] != '/')
        return csifs_why_set("socket target must be an absolute path"), -EINVAL;
    if (target && reg_value_check(target, len) < 0)
        return -EINVAL;
    if (len > REG_SOCKET_MAX)
        return -ENAMETOOLONG;
    struct mut *m = mut_new(&socket_set, sizeof(struct sock_ctx));
    if (!m)
        return -ENOMEM;
    struct sock_ctx *s = m->ctx;
    m->est = target ? MUT_EST_REC + len : 0;
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    struct inst *i = model_as_inst(mut_find_seq(reg, inst));
    if (!i)
        rc = -ENOENT;
    else if (!i->w_pend && ((!target && !i->socket) ||
                            (target && i->socket && !strcmp(target, i->socket))))
        rc = 1;                      /* unchanged: nothing to do */
    else if ((rc = mut_check_room(reg, m->est)) == 0 &&
             ((target && !(s->target = strdup(target))) ||
              !(s->reason = strdup(target ? "not yet probed" : "no socket set"))))
        rc = -ENOMEM;
    if (rc != 0) {
        pthread_mutex_unlock(&reg->wlock);
        fin_socket(reg, m, rc);
        mut_free(m);
        return rc < 0 ? rc : 0;
    }
    i->w_gen++;
    m->obj = &i->o;
    /* apply keeps ready as it is then: with changes queued, the view's */
    mut_plan_current(m, i->plugin, NULL, i, REG_UNKNOWN,
                     i->plugin->w_recur ? i->w_ready : i->ready);
    i->w_was_healthy = false;
    return mut_submit(reg, m);
}

/* ---- writable attributes ---- */

struct attr_ctx {
    enum reg_attr attr;
    char *value;                     /* NULL = empty */
};

static void rec_attr(struct mut *m, struct store_rec *r)
{
    struct attr_ctx *a = m->ctx;
    const char *v = a->value ? a->value : "";
    if (a->attr == REG_A_MOUNT_POINT)
        r->u.inst.mount_point = v;
    else
        r->u.inst.container_mount_point = v;
}

static void apply_attr(struct reg *reg, struct mut *m)
{
    struct attr_ctx *a = m->ctx;
    struct inst *i = (struct inst *)m->obj;
    free(i->attr[INST_ATTR(a->attr)]);
    i->attr[INST_ATTR(a->attr)] = a->value;
    a->value = NULL;
    i->o.changed_ns = model_now_ns();
    struct ev_kv kv[] = { { "name", reg_attrs[a->attr].name }, { NULL, NULL } };
    mut_emit(reg, m, REG_C_ATTR, &i->o, "attr", kv, NULL, a->attr);
}

static void fin_attr(struct reg *reg, struct mut *m, int rc)
{
    (void)reg, (void)rc;
    free(((struct attr_ctx *)m->ctx)->value);   /* NULL once applied */
}

static const struct mut_kind attr_set = { rec_attr, apply_attr, NULL, fin_attr };

int reg_attr_store(struct reg *reg, uint64_t inst, enum reg_attr attr,
                   const char *value, size_t len)
{
    if ((unsigned)attr >= REG_NATTRS || !(reg_attrs[attr].flags & REG_AF_WRITABLE))
        return -EACCES;
    if (len && value[len - 1] == '\n')
        len--;
    if (len > REG_VALUE_MAX)
        csifs_why_set("value over 4096 bytes");
    if (len > REG_VALUE_MAX || reg_value_check(value, len) < 0)
        return -EINVAL;
    /* Both writable attributes are paths (DESIGN 5): absolute or empty. */
    if (len && value[0] != '/')
        return -EINVAL;
    struct mut *m = mut_new(&attr_set, sizeof(struct attr_ctx));
    if (!m)
        return -ENOMEM;
    struct attr_ctx *a = m->ctx;
    a->attr = attr;
    m->est = len ? MUT_EST_REC + len : 0;
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    struct inst *i = model_as_inst(mut_find_seq(reg, inst));
    if (!i)
        rc = -ENOENT;
    else if ((rc = mut_check_room(reg, m->est)) == 0 && len && !(a->value = strndup(value, len)))
        rc = -ENOMEM;
    if (rc < 0) {
        pthread_mutex_unlock(&reg->wlock);
        fin_attr(reg, m, rc);
        mut_free(m);
        return rc;
    }
    m->obj = &i->o;
    return mut_submit(reg, m);
}
