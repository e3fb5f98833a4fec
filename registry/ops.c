/* Structural mutations: plugins, instances, sockets, writable attributes.
 * Each validates with wlock held, then hands an apply step to mut_run(). */
#include "registry/mutate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct plugin *plugin_of(struct reg *reg, enum reg_type type, const char *name)
{
    if ((unsigned)type >= REG_NTYPES || !name)
        return NULL;
    return model_plugin(reg, type, name);
}

static struct inst *inst_of(struct reg *reg, uint64_t seq)
{
    return model_as_inst(model_by_seq(reg, seq));
}

/* Grow the indexes now so that linking in apply cannot fail. */
static int reserve_index(struct reg *reg)
{
    struct hlink probe_a, probe_b;
    pthread_rwlock_wrlock(&reg->lock);
    int rc = ht_insert(&reg->seqs, &probe_a, 0);
    if (rc == 0) {
        ht_remove(&reg->seqs, &probe_a);
        rc = ht_insert(&reg->names, &probe_b, 0);
        if (rc == 0)
            ht_remove(&reg->names, &probe_b);
    }
    pthread_rwlock_unlock(&reg->lock);
    return rc;
}

static struct obj *new_obj(struct reg *reg, size_t size, enum reg_kind kind,
                           enum reg_type type, const char *name)
{
    struct obj *o = calloc(1, size);
    if (!o)
        return NULL;
    o->kind = kind;
    o->type = type;
    o->seq = reg->next_seq;
    strcpy(o->name, name);
    o->registered_ns = o->changed_ns = model_now_ns();
    return o;
}

/* ---- plugins ---- */

static void apply_plugin_add(struct reg *reg, struct mut *m, void *ctx)
{
    struct plugin *p = ctx;
    model_link(reg, &p->o, NULL);
    mut_emit(reg, m, REG_C_PLUGIN_ADD, &p->o, "registered", NULL, NULL);
}

int reg_plugin_create(struct reg *reg, enum reg_type type, const char *plugin)
{
    int rc = reg_name_check(plugin);
    if (rc < 0 || (unsigned)type >= REG_NTYPES)
        return rc < 0 ? rc : -EINVAL;
    struct mut m = { .commit = true, .new_seqs = 1 };
    pthread_mutex_lock(&reg->wlock);
    struct plugin *p = NULL;
    if (plugin_of(reg, type, plugin))
        rc = -EEXIST;
    else if ((rc = reserve_index(reg)) == 0 &&
             !(p = (struct plugin *)new_obj(reg, sizeof(*p), REG_K_PLUGIN, type, plugin)))
        rc = -ENOMEM;
    if (rc == 0) {
        m.txn.rec[m.txn.n].op = STORE_PUT_PLUGIN;
        m.txn.rec[m.txn.n++].u.plugin = (struct store_plugin){
            .type = type, .name = p->o.name, .seq = p->o.seq,
            .registered_ns = p->o.registered_ns };
        rc = mut_run(reg, &m, apply_plugin_add, p);
    }
    if (rc < 0)
        free(p);
    pthread_mutex_unlock(&reg->wlock);
    return rc;
}

static void apply_plugin_del(struct reg *reg, struct mut *m, void *ctx)
{
    struct plugin *p = ctx;
    model_unlink(reg, &p->o, NULL);
    mut_emit(reg, m, REG_C_PLUGIN_DEL, &p->o, "deregistered", NULL, NULL);
}

int reg_plugin_remove(struct reg *reg, enum reg_type type, const char *plugin)
{
    struct mut m = { .commit = true };
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    struct plugin *p = plugin_of(reg, type, plugin);
    if (!p)
        rc = -ENOENT;
    else if (p->count)
        rc = -ENOTEMPTY;
    if (rc == 0) {
        m.txn.rec[m.txn.n].op = STORE_DEL_PLUGIN;
        m.txn.rec[m.txn.n++].u.plugin = (struct store_plugin){
            .type = type, .name = p->o.name, .seq = p->o.seq };
        rc = mut_run(reg, &m, apply_plugin_del, p);
    }
    pthread_mutex_unlock(&reg->wlock);
    /* Subscribers saw the change; nobody can reach p any more. */
    if (rc == 0)
        free(p);
    return rc;
}

/* ---- instances ---- */

static void apply_inst_add(struct reg *reg, struct mut *m, void *ctx)
{
    struct inst *i = ctx;
    model_link(reg, &i->o, i->plugin);
    i->plugin->o.changed_ns = i->o.registered_ns;
    mut_emit(reg, m, REG_C_INST_ADD, &i->o, "registered", NULL, NULL);
}

int reg_instance_register(struct reg *reg, enum reg_type type, const char *plugin,
                          const char *alloc)
{
    int rc = reg_name_check(alloc);
    if (rc < 0)
        return rc;
    struct mut m = { .commit = true, .new_seqs = 1 };
    struct inst *i = NULL;
    pthread_mutex_lock(&reg->wlock);
    struct plugin *p = plugin_of(reg, type, plugin);
    if (!p)
        rc = -ENOENT;
    else if (model_inst(reg, p, alloc))
        rc = -EEXIST;
    else if (p->count >= reg->opts.max_instances)
        rc = -ENOSPC;
    else if ((rc = reserve_index(reg)) == 0 &&
             (!(i = (struct inst *)new_obj(reg, sizeof(*i), REG_K_INSTANCE, type, alloc)) ||
              !(i->reason = strdup("no socket set"))))
        rc = -ENOMEM;
    if (rc == 0) {
        i->plugin = p;
        i->health = REG_UNKNOWN;
        i->unknown_since_ms = model_mono_ms();
        mut_inst_rec(i, &m.txn.rec[m.txn.n++]);
        rc = mut_run(reg, &m, apply_inst_add, i);
    }
    if (rc < 0)
        model_free_inst(i);
    pthread_mutex_unlock(&reg->wlock);
    return rc;
}

static void apply_inst_del(struct reg *reg, struct mut *m, void *ctx)
{
    struct inst *i = ctx;
    struct plugin *p = i->plugin;
    model_unlink(reg, &i->o, p);
    p->o.changed_ns = model_now_ns();
    mut_emit(reg, m, REG_C_INST_DEL, &i->o, "deregistered", NULL, NULL);
    if (p->current == i)
        mut_update_current(reg, m, p);
}

int reg_instance_deregister(struct reg *reg, enum reg_type type, const char *plugin,
                            const char *alloc)
{
    struct mut m = { .commit = true };
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    struct plugin *p = plugin_of(reg, type, plugin);
    struct inst *i = p && alloc ? model_inst(reg, p, alloc) : NULL;
    if (!i)
        rc = -ENOENT;
    if (rc == 0) {
        struct store_rec *r = &m.txn.rec[m.txn.n++];
        r->op = STORE_DEL_INST;
        r->u.inst = (struct store_inst){ .type = type, .plugin = p->o.name,
                                         .alloc = i->o.name, .seq = i->o.seq };
        rc = mut_run(reg, &m, apply_inst_del, i);
    }
    pthread_mutex_unlock(&reg->wlock);
    if (rc == 0)
        model_free_inst(i);
    return rc;
}

/* ---- socket ---- */

struct sock_ctx {
    struct inst *i;
    char *target;                    /* NULL clears */
    char *reason;
};

void mut_set_health(struct reg *reg, struct mut *m, struct inst *i,
                       enum reg_health h, bool ready, char *reason)
{
    bool changed = h != i->health || ready != i->ready || strcmp(reason, i->reason);
    i->health = h;
    i->ready = ready;
    free(i->reason);
    i->reason = reason;
    if (!changed)
        return;
    i->health_ver++;
    static const char *const names[] = { "unknown", "healthy", "unhealthy" };
    struct ev_kv kv[] = { { "state", names[h] }, { "ready", ready ? "1" : "0" },
                          { NULL, NULL } };
    mut_emit(reg, m, REG_C_HEALTH, &i->o, "health", kv, reason);
}

static void apply_socket(struct reg *reg, struct mut *m, void *ctx)
{
    struct sock_ctx *s = ctx;
    struct inst *i = s->i;
    free(i->socket);
    i->socket = s->target;
    i->gen++;
    i->pid = 0;
    i->was_healthy = false;
    i->unknown_since_ms = model_mono_ms();
    i->o.changed_ns = model_now_ns();
    model_free_fp(&i->fp);
    struct ev_kv kv[] = { { "target", s->target ? s->target : "" }, { NULL, NULL } };
    mut_emit(reg, m, REG_C_SOCKET, &i->o, "socket", kv, NULL);
    mut_set_health(reg, m, i, REG_UNKNOWN, i->ready, s->reason);
}

int reg_socket_set(struct reg *reg, uint64_t inst, const char *target)
{
    if (target && !*target)
        target = NULL;
    if (target && target[0] != '/')
        return -EINVAL;
    if (target && strlen(target) > REG_SOCKET_MAX)
        return -ENAMETOOLONG;
    struct sock_ctx s = { 0 };
    struct mut m = { .commit = true };
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    s.i = inst_of(reg, inst);
    if (!s.i)
        rc = -ENOENT;
    else if ((!target && !s.i->socket) ||
             (target && s.i->socket && !strcmp(target, s.i->socket)))
        rc = 1;                      /* unchanged: nothing to do */
    else if ((target && !(s.target = strdup(target))) ||
             !(s.reason = strdup(target ? "not yet probed" : "no socket set")))
        rc = -ENOMEM;
    if (rc == 0) {
        struct store_rec *r = &m.txn.rec[m.txn.n++];
        mut_inst_rec(s.i, r);
        r->u.inst.socket = target ? target : "";
        memset(&r->u.inst.fp, 0, sizeof(r->u.inst.fp));
        r->u.inst.fp.provider = r->u.inst.fp.version = r->u.inst.fp.nodeid = "";
        r->u.inst.fp.topology = r->u.inst.fp.capabilities = "";
        rc = mut_run(reg, &m, apply_socket, &s);
    }
    if (rc != 0) {
        free(s.target);
        free(s.reason);
    }
    pthread_mutex_unlock(&reg->wlock);
    return rc < 0 ? rc : 0;
}

/* ---- writable attributes ---- */

struct attr_ctx {
    struct inst *i;
    enum reg_attr attr;
    char *value;                     /* NULL = empty */
};

static void apply_attr(struct reg *reg, struct mut *m, void *ctx)
{
    struct attr_ctx *a = ctx;
    free(a->i->attr[a->attr]);
    a->i->attr[a->attr] = a->value;
    a->i->o.changed_ns = model_now_ns();
    struct ev_kv kv[] = { { "name", reg_attrs[a->attr].name }, { NULL, NULL } };
    mut_emit(reg, m, REG_C_ATTR, &a->i->o, "attr", kv, NULL);
    m->ch[m->nch - 1].attr = a->attr;
}

int reg_attr_store(struct reg *reg, uint64_t inst, enum reg_attr attr,
                   const char *value, size_t len)
{
    if ((unsigned)attr >= REG_NATTRS || !(reg_attrs[attr].flags & REG_AF_WRITABLE))
        return -EACCES;
    if (len && value[len - 1] == '\n')
        len--;
    if (len > REG_VALUE_MAX || (len && (memchr(value, '\0', len) || memchr(value, '\n', len))))
        return -EINVAL;
    struct attr_ctx a = { .attr = attr };
    struct mut m = { .commit = true };
    int rc = 0;
    pthread_mutex_lock(&reg->wlock);
    a.i = inst_of(reg, inst);
    if (!a.i)
        rc = -ENOENT;
    else if (len && !(a.value = strndup(value, len)))
        rc = -ENOMEM;
    if (rc == 0) {
        struct store_rec *r = &m.txn.rec[m.txn.n++];
        mut_inst_rec(a.i, r);
        const char *v = a.value ? a.value : "";
        if (attr == REG_A_MOUNT_POINT)
            r->u.inst.mount_point = v;
        else
            r->u.inst.container_mount_point = v;
        rc = mut_run(reg, &m, apply_attr, &a);
    }
    if (rc < 0)
        free(a.value);
    pthread_mutex_unlock(&reg->wlock);
    return rc;
}
