/* Registry lifetime, names, restore from the backend, and the read side. */
#include "base/log.h"
#include "registry/mutate.h"

#include "base/counters.h"
#include "base/defaults.h"
#include "base/thread.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const reg_type_names[REG_NTYPES] = { "csi-controller", "csi-node" };
_Static_assert(CNT_NTYPES == REG_NTYPES, "base/counters.h counts probes by plugin type");
const char *const reg_health_names[REG_NHEALTH] = { "unknown", "healthy", "unhealthy" };

int reg_type_parse(const char *name)
{
    for (int t = 0; t < REG_NTYPES; t++)
        if (!strcmp(name, reg_type_names[t]))
            return t;
    return -ENOENT;
}

int reg_name_check(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    if (n > NAME_MAX)                /* as every Unix filesystem says */
        return csifs_why_set("name longer than 255 bytes"), -ENAMETOOLONG;
    bool ok = n >= 1 && n <= REG_NAME_MAX && name[0] != '.' && strcmp(name, "current");
    for (size_t k = 0; ok && k < n; k++) {
        char c = name[k];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '.' || c == '_' || c == '-';
    }
    /* only a refusal says why (its hook reads the caller's comm: oplog.c) */
    if (!ok)
        return csifs_why_set("name must be 1-63 of [A-Za-z0-9._-], not starting with '.', "
                             "not 'current'"), -EINVAL;
    csifs_why_clear();
    return 0;
}

/* ---- restore ---- */

static char *dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

/* The load's state: instances come in seq order, mostly a plugin's in a row. */
struct loading {
    struct reg *reg;
    struct plugin *last;
    int64_t now_ms;                  /* one clock read for the whole load */
};

static int load_reserve(size_t n, void *arg)
{
    struct loading *ld = arg;
    return model_reserve(ld->reg, n);
}

static int load_plugin(const struct store_plugin *sp, void *arg)
{
    struct reg *reg = ((struct loading *)arg)->reg;
    if ((unsigned)sp->type >= REG_NTYPES || reg_name_check(sp->name) < 0 ||
        model_plugin(reg, sp->type, sp->name))
        return -EINVAL;
    struct plugin *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->o.kind = REG_K_PLUGIN;
    p->o.type = sp->type;
    p->o.seq = sp->seq;
    strcpy(p->o.name, sp->name);
    p->o.registered_ns = p->o.changed_ns = sp->registered_ns;
    p->saved_current = sp->current;
    int rc = model_reserve(reg, 1);
    if (rc < 0) {
        free(p);
        return rc;
    }
    model_link(reg, &p->o, NULL);
    return 0;
}

static int load_inst(const struct store_inst *si, void *arg)
{
    struct loading *ld = arg;
    struct reg *reg = ld->reg;
    struct plugin *p = ld->last;
    if (!p || p->o.type != si->type || !si->plugin || strcmp(p->o.name, si->plugin))
        p = ld->last = (unsigned)si->type < REG_NTYPES && si->plugin
                       ? model_plugin(reg, si->type, si->plugin) : NULL;
    /* No lookup of a twin: the store's check proved every record matches its
     * key, and keys are unique (store.h). */
    if (!p || reg_name_check(si->alloc) < 0)
        return -EINVAL;
    struct inst *i = calloc(1, sizeof(*i));
    if (!i)
        return -ENOMEM;
    i->o.kind = REG_K_INSTANCE;
    i->o.type = si->type;
    i->o.seq = si->seq;
    strcpy(i->o.name, si->alloc);
    i->o.registered_ns = i->o.changed_ns = si->registered_ns;
    i->plugin = p;
    i->socket = dup_or_null(si->socket);
    i->ready = si->ready;
    i->health = REG_UNKNOWN;
    i->reason = strdup(i->socket ? "restored, not yet re-probed" : "no socket set");
    i->unknown_since_ms = ld->now_ms;
    i->attr[INST_ATTR(REG_A_MOUNT_POINT)] = dup_or_null(si->mount_point);
    i->attr[INST_ATTR(REG_A_CONTAINER_MOUNT_POINT)] = dup_or_null(si->container_mount_point);
    int rc = 0;
    if (si->fp.nodeid && (*si->fp.nodeid || *si->fp.provider)) {
        i->fp.provider = strdup(si->fp.provider);
        i->fp.version = strdup(si->fp.version ? si->fp.version : "");
        i->fp.nodeid = strdup(si->fp.nodeid);
        i->fp.topology = strdup(si->fp.topology ? si->fp.topology : "");
        i->fp.capabilities = strdup(si->fp.capabilities ? si->fp.capabilities : "");
        i->fp.max_volumes = si->fp.max_volumes;
        if (!i->fp.provider || !i->fp.version || !i->fp.nodeid || !i->fp.topology ||
            !i->fp.capabilities)
            rc = -ENOMEM;
    }
    if (!i->reason || (si->socket && *si->socket && !i->socket))
        rc = -ENOMEM;
    if (rc == 0)
        rc = model_reserve(reg, 1);
    if (rc < 0) {
        model_free_inst(i);
        return rc;
    }
    model_link(reg, &i->o, p);
    p->w_count++;
    if (i->socket) {
        /* restored ready: a failed first probe is `unhealthy` (DESIGN 3) */
        i->was_healthy = i->ready;
        i->restoring = true;
        p->restoring++;
    }
    /* Loaded oldest first: the persisted current, else (a store from before
     * it was persisted, or it was not ready) the last ready one. */
    bool saved = p->current && p->current->o.seq == p->saved_current;
    if (i->ready && (i->o.seq == p->saved_current || !saved))
        p->current = p->shown = i;
    return 0;
}

static void free_all(struct reg *reg)
{
    for (int t = 0; t < REG_NTYPES; t++) {
        struct obj *o = reg->types[t], *next;
        for (; o; o = next) {
            struct plugin *p = model_as_plugin(o);
            struct obj *c = p->head, *cn;
            for (; c; c = cn) {
                cn = c->next;
                model_free_inst(model_as_inst(c));
            }
            next = o->next;
            free(p);
        }
        reg->types[t] = NULL;
    }
    ht_free(&reg->seqs);
    ht_free(&reg->names);
    ht_free(&reg->reasons);      /* empty: the last history went with its instance */
}

int reg_open(struct reg **out, const struct reg_opts *opts)
{
    struct reg *reg = calloc(1, sizeof(*reg));
    if (!reg)
        return -ENOMEM;
    reg->opts = *opts;
    if (!reg->opts.events_ring)
        reg->opts.events_ring = CSIFS_EVENTS_RING;
    if (!reg->opts.max_instances)
        reg->opts.max_instances = CSIFS_MAX_INSTANCES;
    if (reg->opts.health_timeout_ms <= 0)
        reg->opts.health_timeout_ms = CSIFS_HEALTH_TIMEOUT_MS;
    reg->next_seq = 1;
    reg->qtail = &reg->qhead;
    pthread_mutex_init(&reg->notify_mu, NULL);
    pthread_mutex_init(&reg->wlock, NULL);
    pthread_rwlock_init(&reg->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&reg->gather_cv, &ca);
    pthread_cond_init(&reg->commit_cv, NULL);
    pthread_cond_init(&reg->idle_cv, NULL);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&reg->ev_mu, NULL);
    pthread_cond_init(&reg->ev_cv, NULL);
    uint64_t ev_first = 1;
    int rc = 0;
    if (reg->opts.backend) {
        struct store_meta meta = { 1, 1 };
        struct loading ld = { reg, NULL, model_mono_ms() };
        struct store_load_cb cb = { load_plugin, load_inst, &ld, load_reserve };
        rc = reg->opts.backend->load(reg->opts.backend->ctx, &cb, &meta);
        /* Seqs below the stored bound may have been handed out: new ones
         * start past it (a gap of up to a block after a restart). */
        reg->next_seq = meta.next_seq > reg->next_seq ? meta.next_seq : reg->next_seq;
        reg->seq_reserved = reg->next_seq;
        /* Seqs below ev_reserved may have been handed out before a crash. */
        ev_first = meta.ev_reserved > 1 ? meta.ev_reserved : 1;
        reg->ev_reserved = ev_first;
    }
    if (rc == 0)
        rc = ev_ring_new(&reg->ring, reg->opts.events_ring, ev_first);
    const struct reg_backend *be = reg->opts.backend;
    if (rc == 0 && be && be->room && be->room(be->ctx, &reg->room) == 0)
        reg->room_known = true;
    if (rc < 0) {
        reg_close(reg);
        return rc;
    }
    *out = reg;
    return 0;
}

void reg_close(struct reg *reg)
{
    if (!reg)
        return;
    mut_stop(reg);                   /* answers what is queued, first */
    pthread_mutex_lock(&reg->ev_mu);
    reg->ev_stop = true;
    pthread_cond_signal(&reg->ev_cv);
    pthread_mutex_unlock(&reg->ev_mu);
    if (reg->ev_started)
        pthread_join(reg->ev_th, NULL);
    pthread_cond_destroy(&reg->ev_cv);
    pthread_cond_destroy(&reg->gather_cv);
    pthread_cond_destroy(&reg->commit_cv);
    pthread_cond_destroy(&reg->idle_cv);
    pthread_mutex_destroy(&reg->ev_mu);
    free_all(reg);
    free(reg->keep_free);            /* the slots stay as they are (reg_keep) */
    ev_ring_free(reg->ring);
    pthread_rwlock_destroy(&reg->lock);
    pthread_mutex_destroy(&reg->wlock);
    pthread_mutex_destroy(&reg->notify_mu);
    free(reg);
}

static int subscribe(struct reg *reg, reg_sub_fn fn, void *arg, bool after)
{
    pthread_mutex_lock(&reg->wlock);
    int rc = -ENOSPC;
    if (reg->nsubs < (int)(sizeof(reg->subs) / sizeof(reg->subs[0]))) {
        reg->subs[reg->nsubs].fn = fn;
        reg->subs[reg->nsubs].arg = arg;
        reg->subs[reg->nsubs].after = after;
        reg->nsubs++;
        rc = 0;
    }
    pthread_mutex_unlock(&reg->wlock);
    return rc;
}

int reg_subscribe(struct reg *reg, reg_sub_fn fn, void *arg)
{
    return subscribe(reg, fn, arg, false);
}

int reg_subscribe_after(struct reg *reg, reg_sub_fn fn, void *arg)
{
    return subscribe(reg, fn, arg, true);
}

/* The events thread: the fan-out to blocked readers, off the writers' path. */
static void *ev_thread(void *arg)
{
    struct reg *reg = arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&reg->ev_mu);
    for (;;) {
        while (reg->ev_kicks == seen && !reg->ev_stop)
            pthread_cond_wait(&reg->ev_cv, &reg->ev_mu);
        if (reg->ev_stop)
            break;
        seen = reg->ev_kicks;
        int n = reg->nev_subs;
        pthread_mutex_unlock(&reg->ev_mu);
        for (int k = 0; k < n; k++)
            reg->ev_subs[k].fn(reg->ev_subs[k].arg);
        pthread_mutex_lock(&reg->ev_mu);
    }
    pthread_mutex_unlock(&reg->ev_mu);
    return NULL;
}

int reg_on_events(struct reg *reg, void (*fn)(void *arg), void *arg)
{
    int rc = -ENOSPC;
    pthread_mutex_lock(&reg->ev_mu);
    if (reg->nev_subs < (int)(sizeof(reg->ev_subs) / sizeof(reg->ev_subs[0]))) {
        rc = 0;
        if (!reg->ev_started) {
            rc = csifs_thread_start(&reg->ev_th, "csifs-events", ev_thread, reg);
            reg->ev_started = rc == 0;
        }
        if (rc == 0) {
            reg->ev_subs[reg->nev_subs].fn = fn;
            reg->ev_subs[reg->nev_subs].arg = arg;
            reg->nev_subs++;
        }
    }
    pthread_mutex_unlock(&reg->ev_mu);
    return rc;
}

struct ev_ring *reg_events(struct reg *reg)
{
    return reg->ring;
}

/* ---- reads ---- */

static void fill_node(const struct obj *o, struct reg_node *n)
{
    memset(n, 0, sizeof(*n));
    n->kind = o->kind;
    n->type = o->type;
    n->seq = o->seq;
    n->registered_ns = o->registered_ns;
    n->changed_ns = o->changed_ns;
    const struct plugin *p = model_as_plugin((struct obj *)o);
    const struct inst *i = model_as_inst((struct obj *)o);
    if (p) {
        strcpy(n->plugin, o->name);
        n->current = p->shown ? p->shown->o.seq : 0;
        n->count = p->count;
    } else {
        strcpy(n->plugin, i->plugin->o.name);
        strcpy(n->alloc, o->name);
        n->parent = i->plugin->o.seq;
        n->gen = i->gen;
        n->health = i->health;
        n->health_ver = i->health_ver;
        n->ready = i->ready;
        n->has_socket = i->socket != NULL;
        n->pid = i->pid;
    }
}

static int get_locked(struct obj *o, struct reg_node *out)
{
    if (!o)
        return -ENOENT;
    if (out)
        fill_node(o, out);
    return 0;
}

int reg_get(struct reg *reg, uint64_t seq, struct reg_node *out)
{
    pthread_rwlock_rdlock(&reg->lock);
    int rc = get_locked(model_by_seq(reg, seq), out);
    pthread_rwlock_unlock(&reg->lock);
    return rc;
}

int reg_plugin_lookup(struct reg *reg, enum reg_type type, const char *plugin,
                      struct reg_node *out)
{
    if ((unsigned)type >= REG_NTYPES || !plugin)
        return -ENOENT;
    pthread_rwlock_rdlock(&reg->lock);
    struct plugin *p = model_plugin(reg, type, plugin);
    int rc = get_locked(p ? &p->o : NULL, out);
    pthread_rwlock_unlock(&reg->lock);
    return rc;
}

int reg_instance_lookup(struct reg *reg, uint64_t plugin_seq, const char *alloc,
                        struct reg_node *out)
{
    pthread_rwlock_rdlock(&reg->lock);
    struct plugin *p = model_as_plugin(model_by_seq(reg, plugin_seq));
    struct inst *i = p && alloc ? model_inst(reg, p, alloc) : NULL;
    int rc = get_locked(i ? &i->o : NULL, out);
    pthread_rwlock_unlock(&reg->lock);
    return rc;
}

int reg_list(struct reg *reg, enum reg_type type, uint64_t parent, uint64_t after,
             int (*fn)(const struct reg_node *n, void *arg), void *arg)
{
    if ((unsigned)type >= REG_NTYPES)
        return -ENOENT;
    int rc = 0;
    pthread_rwlock_rdlock(&reg->lock);
    struct obj *o = reg->types[type];
    if (parent) {
        struct plugin *p = model_as_plugin(model_by_seq(reg, parent));
        o = p && p->o.type == type ? p->head : NULL;
        rc = p && p->o.type == type ? 0 : -ENOENT;
    }
    if (after) {
        /* Siblings are in descending seq: resume at the first one below. */
        struct obj *a = model_by_seq(reg, after);
        if (a && a->type == type && (a->kind == REG_K_PLUGIN) == !parent &&
            (!parent || model_as_inst(a)->plugin->o.seq == parent))
            o = a->next;
        else
            while (o && o->seq >= after)
                o = o->next;
    }
    struct reg_node n;
    for (; o && rc == 0; o = o->next) {
        fill_node(o, &n);
        if (fn(&n, arg))
            break;
    }
    pthread_rwlock_unlock(&reg->lock);
    return rc;
}

static ssize_t copy_out(const char *s, char *buf, size_t cap)
{
    if (!s)
        return -ENOENT;
    size_t n = strlen(s);
    if (cap) {
        size_t k = n < cap ? n : cap - 1;
        memcpy(buf, s, k);
        buf[k] = '\0';
    }
    return (ssize_t)n;
}

ssize_t reg_socket_get(struct reg *reg, uint64_t inst, char *buf, size_t cap)
{
    pthread_rwlock_rdlock(&reg->lock);
    struct inst *i = model_as_inst(model_by_seq(reg, inst));
    ssize_t n = copy_out(i ? i->socket : NULL, buf, cap);
    pthread_rwlock_unlock(&reg->lock);
    return n;
}

ssize_t reg_current_get(struct reg *reg, uint64_t plugin, char *buf, size_t cap)
{
    pthread_rwlock_rdlock(&reg->lock);
    struct plugin *p = model_as_plugin(model_by_seq(reg, plugin));
    ssize_t n = copy_out(p && p->shown ? p->shown->o.name : NULL, buf, cap);
    pthread_rwlock_unlock(&reg->lock);
    return n;
}

unsigned long reg_type_count(struct reg *reg, enum reg_type type)
{
    if ((unsigned)type >= REG_NTYPES)
        return 0;
    pthread_rwlock_rdlock(&reg->lock);
    unsigned long n = reg->ntypes[type];
    pthread_rwlock_unlock(&reg->lock);
    return n;
}

void reg_count(struct reg *reg, unsigned long *plugins, unsigned long *instances)
{
    *plugins = *instances = 0;
    pthread_rwlock_rdlock(&reg->lock);
    for (int t = 0; t < REG_NTYPES; t++)
        for (struct obj *o = reg->types[t]; o; o = o->next) {
            ++*plugins;
            *instances += model_as_plugin(o)->count;
        }
    pthread_rwlock_unlock(&reg->lock);
}
