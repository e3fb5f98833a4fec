/* cluster view: the model and its queries (view.h). */
#include "cluster/view_int.h"
#include "base/defaults.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- hash tables: by id (ids are dense) and by name ---- */

static size_t name_hash(enum cl_vo_kind kind, int type, const char *plugin, const char *node)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(kind * 7 + type);
    for (const char *s = plugin; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h = (h ^ '/') * 1099511628211ull;
    for (const char *s = node; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

static struct vobj *by_id(struct cl_view *v, uint64_t id)
{
    if (!v->nb)
        return NULL;
    for (struct vobj *o = v->by_id[id % v->nb]; o; o = o->by_id)
        if (o->o.id == id)
            return o;
    return NULL;
}

static struct vobj *by_name(struct cl_view *v, enum cl_vo_kind kind, int type,
                            const char *plugin, const char *node)
{
    if (!v->nb)
        return NULL;
    for (struct vobj *o = v->by_name[name_hash(kind, type, plugin, node) % v->nb]; o;
         o = o->by_name)
        if (o->o.kind == kind && o->o.type == type && !strcmp(o->o.plugin, plugin) &&
            !strcmp(o->o.node, node))
            return o;
    return NULL;
}

static void link_obj(struct cl_view *v, struct vobj *o)
{
    size_t i = o->o.id % v->nb, j = name_hash(o->o.kind, o->o.type, o->o.plugin,
                                              o->o.node) % v->nb;
    o->by_id = v->by_id[i];
    v->by_id[i] = o;
    o->by_name = v->by_name[j];
    v->by_name[j] = o;
}

static void unlink_chain(struct vobj **pp, struct vobj *o, size_t off)
{
    for (; *pp; pp = (struct vobj **)((char *)*pp + off))
        if (*pp == o) {
            *pp = *(struct vobj **)((char *)o + off);
            return;
        }
}

static void unlink_obj(struct cl_view *v, struct vobj *o)
{
    unlink_chain(&v->by_id[o->o.id % v->nb], o, offsetof(struct vobj, by_id));
    unlink_chain(&v->by_name[name_hash(o->o.kind, o->o.type, o->o.plugin, o->o.node) % v->nb],
                 o, offsetof(struct vobj, by_name));
    v->n_objs--;
}

/* Room for one more object: 0 or -ENOMEM. */
static int grow(struct cl_view *v)
{
    if (v->n_objs < v->nb)
        return 0;
    size_t nb = v->nb ? 2 * v->nb : 256, ob = v->nb;
    struct vobj **i = calloc(nb, sizeof(*i)), **n = calloc(nb, sizeof(*n));
    if (!i || !n) {
        free(i);
        free(n);
        return -ENOMEM;
    }
    struct vobj **oi = v->by_id;
    free(v->by_name);
    v->by_id = i;
    v->by_name = n;
    v->nb = nb;
    for (size_t b = 0; b < ob; b++)
        for (struct vobj *o = oi[b], *next; o; o = next) {
            next = o->by_id;
            link_obj(v, o);
        }
    free(oi);
    return 0;
}

/* ---- arrays by id ---- */

/* Index of the first element whose id is above after. */
static size_t first_after(struct vobj *const *a, size_t n, uint64_t after)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a[mid]->o.id <= after)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int append(void ***a, size_t *n, size_t *cap, void *x)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        void **p = realloc(*a, c * sizeof(*p));
        if (!p)
            return -ENOMEM;
        *a = p;
        *cap = c;
    }
    (*a)[(*n)++] = x;
    return 0;
}

static void remove_at(void **a, size_t *n, struct vobj *o)
{
    size_t i = first_after((struct vobj *const *)a, *n, o->o.id - 1);
    if (i < *n && a[i] == o) {
        memmove(&a[i], &a[i + 1], (*n - i - 1) * sizeof(*a));
        (*n)--;
    }
}

/* ---- changes ---- */

static void note(struct cl_view *v, enum cl_vc_kind kind, const struct vobj *o, unsigned gone)
{
    if (v->n_ch == v->cap_ch) {
        size_t c = v->cap_ch ? 2 * v->cap_ch : 64;
        struct cl_view_change *p = realloc(v->ch, c * sizeof(*p));
        if (!p)
            return;                     /* the kernel's caches then expire on their own */
        v->ch = p;
        v->cap_ch = c;
    }
    struct cl_view_change *c = &v->ch[v->n_ch++];
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->type = o->o.type;
    c->plugin_id = o->o.kind == CL_VO_PLUGIN ? o->o.id : o->o.plugin_id;
    c->node_id = o->o.kind == CL_VO_NODE ? o->o.id : 0;
    memcpy(c->plugin, o->o.plugin, sizeof(c->plugin));
    memcpy(c->node, o->o.node, sizeof(c->node));
    c->gone = gone;
}

void cl_view_tell(struct cl_view *v)
{
    for (size_t i = 0; i < v->n_ch; i++)
        if (v->changed)
            v->changed(v->arg, &v->ch[i]);
    v->n_ch = 0;
}

/* ---- updates (the thread, under v->mu) ---- */

static bool healthy(const struct cl_record *r)
{
    return r->field[CL_F_HEALTH] && !strcmp(r->field[CL_F_HEALTH], "healthy");
}

static unsigned present(const struct cl_record *r)
{
    unsigned m = 0;
    for (int f = 0; f < CL_NFIELDS; f++)
        if (r->field[f])
            m |= 1u << f;
    return m;
}

static bool same(const struct cl_record *a, const struct cl_record *b)
{
    for (int f = 0; f < CL_NFIELDS; f++)
        if (!a->field[f] != !b->field[f] || (a->field[f] && strcmp(a->field[f], b->field[f])))
            return false;
    return true;
}

static struct vobj *new_obj(struct cl_view *v, size_t size, enum cl_vo_kind kind,
                            const struct cl_key *k)
{
    struct vobj *o = grow(v) == 0 ? calloc(1, size) : NULL;
    if (!o)
        return NULL;
    o->o.kind = kind;
    o->o.id = ++v->next_id;
    o->o.type = k->type;
    o->o.changed_ns = csifs_real_ns();
    snprintf(o->o.plugin, sizeof(o->o.plugin), "%s", k->plugin);
    if (kind == CL_VO_NODE)
        snprintf(o->o.node, sizeof(o->o.node), "%s", k->node);
    link_obj(v, o);
    v->n_objs++;
    return o;
}

static struct vplugin *plugin_of(struct cl_view *v, const struct cl_key *k)
{
    struct vobj *o = by_name(v, CL_VO_PLUGIN, k->type, k->plugin, "");
    if (o)
        return (struct vplugin *)o;
    struct vplugin *p = (struct vplugin *)new_obj(v, sizeof(*p), CL_VO_PLUGIN, k);
    struct vlist *l = &v->types[k->type];
    if (p && append((void ***)&l->p, &l->n, &l->cap, p) < 0) {
        unlink_obj(v, &p->h);
        free(p);
        return NULL;
    }
    if (p)
        note(v, CL_VC_PLUGIN_ADD, &p->h, 0);
    return p;
}

/* p, left with no node, goes. */
static void drop_plugin_if_empty(struct cl_view *v, struct vplugin *p)
{
    if (p->n)
        return;
    struct vlist *l = &v->types[p->h.o.type];
    note(v, CL_VC_PLUGIN_DEL, &p->h, 0);
    remove_at((void **)l->p, &l->n, &p->h);
    unlink_obj(v, &p->h);
    free(p->nodes);
    free(p);
}

void cl_view_put(struct cl_view *v, const struct cl_key *k, struct cl_record *rec)
{
    struct vnode *n = (struct vnode *)by_name(v, CL_VO_NODE, k->type, k->plugin, k->node);
    if (n) {
        n->gen = v->gen;
        if (same(&n->rec, rec)) {
            cl_record_clear(rec);
            return;
        }
        unsigned gone = n->h.o.fields & ~present(rec);
        n->pl->h.o.healthy += (size_t)healthy(rec) - (size_t)healthy(&n->rec);
        cl_record_clear(&n->rec);
        n->rec = *rec;
        memset(rec, 0, sizeof(*rec));
        n->h.o.fields = present(&n->rec);
        n->h.o.changed_ns = n->pl->h.o.changed_ns = csifs_real_ns();
        note(v, CL_VC_NODE_SET, &n->h, gone);
        return;
    }
    struct vplugin *p = plugin_of(v, k);
    n = p ? (struct vnode *)new_obj(v, sizeof(*n), CL_VO_NODE, k) : NULL;
    if (n && append((void ***)&p->nodes, &p->n, &p->cap, n) < 0) {
        unlink_obj(v, &n->h);
        free(n);
        n = NULL;
    }
    if (!n) {
        if (p)                          /* made for this node: no empty plugin stays */
            drop_plugin_if_empty(v, p);
        cl_record_clear(rec);           /* out of memory: the next sync tries again */
        return;
    }
    n->pl = p;
    n->gen = v->gen;
    n->rec = *rec;
    memset(rec, 0, sizeof(*rec));
    n->h.o.plugin_id = p->h.o.id;
    n->h.o.fields = present(&n->rec);
    p->h.o.nodes = p->n;
    p->h.o.healthy += healthy(&n->rec);
    p->h.o.changed_ns = n->h.o.changed_ns;
    v->n_nodes++;
    note(v, CL_VC_NODE_ADD, &n->h, 0);
}

static void drop_node(struct cl_view *v, struct vnode *n)
{
    struct vplugin *p = n->pl;
    note(v, CL_VC_NODE_DEL, &n->h, 0);
    remove_at((void **)p->nodes, &p->n, &n->h);
    p->h.o.nodes = p->n;
    p->h.o.healthy -= healthy(&n->rec);
    p->h.o.changed_ns = csifs_real_ns();
    unlink_obj(v, &n->h);
    cl_record_clear(&n->rec);
    free(n);
    v->n_nodes--;
    drop_plugin_if_empty(v, p);
}

void cl_view_del(struct cl_view *v, const struct cl_key *k)
{
    struct vobj *o = by_name(v, CL_VO_NODE, k->type, k->plugin, k->node);
    if (o)
        drop_node(v, (struct vnode *)o);
}

void cl_view_sweep(struct cl_view *v, unsigned gen)
{
    for (int t = 0; t < REG_NTYPES; t++)
        for (size_t i = v->types[t].n; i-- > 0;) {
            struct vplugin *p = v->types[t].p[i];
            for (size_t j = p->n; j-- > 0;) {
                if (p->nodes[j]->gen == gen)
                    continue;
                bool last = p->n == 1;
                drop_node(v, p->nodes[j]);
                if (last)
                    break;              /* p went with its last node */
            }
        }
}

void cl_view_model_free(struct cl_view *v)
{
    for (int t = 0; t < REG_NTYPES; t++) {
        for (size_t i = 0; i < v->types[t].n; i++) {
            struct vplugin *p = v->types[t].p[i];
            for (size_t j = 0; j < p->n; j++) {
                cl_record_clear(&p->nodes[j]->rec);
                free(p->nodes[j]);
            }
            free(p->nodes);
            free(p);
        }
        free(v->types[t].p);
    }
    free(v->by_id);
    free(v->by_name);
    free(v->ch);
}

/* ---- queries (any thread) ---- */

int cl_view_get(struct cl_view *v, uint64_t id, struct cl_view_obj *out)
{
    pthread_mutex_lock(&v->mu);
    struct vobj *o = by_id(v, id);
    if (o)
        *out = o->o;
    pthread_mutex_unlock(&v->mu);
    return o ? 0 : -ENOENT;
}

int cl_view_find(struct cl_view *v, int type, const char *plugin, const char *node,
                 struct cl_view_obj *out)
{
    pthread_mutex_lock(&v->mu);
    struct vobj *o = by_name(v, node ? CL_VO_NODE : CL_VO_PLUGIN, type, plugin,
                             node ? node : "");
    if (o)
        *out = o->o;
    pthread_mutex_unlock(&v->mu);
    return o ? 0 : -ENOENT;
}

void cl_view_list(struct cl_view *v, int type, uint64_t plugin_id, uint64_t after,
                  int (*fn)(const struct cl_view_obj *o, void *arg), void *arg)
{
    if (type < 0 || type >= REG_NTYPES)
        return;
    pthread_mutex_lock(&v->mu);
    struct vobj **a = (struct vobj **)v->types[type].p;
    size_t n = v->types[type].n;
    if (plugin_id) {
        struct vobj *o = by_id(v, plugin_id);
        struct vplugin *p = o && o->o.kind == CL_VO_PLUGIN ? (struct vplugin *)o : NULL;
        a = p ? (struct vobj **)p->nodes : NULL;
        n = p ? p->n : 0;
    }
    for (size_t i = first_after(a, n, after); i < n; i++)
        if (fn(&a[i]->o, arg))
            break;
    pthread_mutex_unlock(&v->mu);
}

/* snprintf-like: the full length, up to cap bytes copied. */
static ssize_t copy_out(char *buf, size_t cap, const char *s, size_t len)
{
    if (buf && cap)
        memcpy(buf, s, len < cap ? len : cap);
    return (ssize_t)len;
}

ssize_t cl_view_field(struct cl_view *v, uint64_t node_id, int field, char *buf, size_t cap)
{
    if (field < 0 || field >= CL_NFIELDS)
        return -ENOENT;
    pthread_mutex_lock(&v->mu);
    struct vobj *o = by_id(v, node_id);
    const char *s = o && o->o.kind == CL_VO_NODE ? ((struct vnode *)o)->rec.field[field] : NULL;
    ssize_t len = -ENOENT;
    if (s) {
        size_t l = strlen(s);
        len = copy_out(buf, cap, s, l);
        if (buf && l < cap)
            buf[l] = '\n';
        if (field == CL_F_TOPOLOGY && buf)          /* pairs as lines, like the local file */
            for (size_t i = 0; i < l && i < cap; i++)
                if (buf[i] == ',')
                    buf[i] = '\n';
        len++;
    }
    pthread_mutex_unlock(&v->mu);
    return len;
}

ssize_t cl_view_summary(struct cl_view *v, uint64_t plugin_id, char *buf, size_t cap)
{
    struct cl_view_obj o;
    if (cl_view_get(v, plugin_id, &o) < 0 || o.kind != CL_VO_PLUGIN)
        return -ENOENT;
    char s[64];
    int n = snprintf(s, sizeof(s), "nodes %zu\nnodes_healthy %zu\n", o.nodes, o.healthy);
    return copy_out(buf, cap, s, (size_t)n);
}

size_t cl_view_nodes(struct cl_view *v)
{
    pthread_mutex_lock(&v->mu);
    size_t n = v->n_nodes;
    pthread_mutex_unlock(&v->mu);
    return n;
}
