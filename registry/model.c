/* The registry's objects and indexes: one hash by seq, one by (type, parent,
 * name), and sibling lists kept newest first. */
#include "registry/model.h"

#include "base/defaults.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ht_init(struct htab *t)
{
    t->b = NULL;
    t->nb = t->n = 0;
}

void ht_free(struct htab *t)
{
    free(t->b);
    ht_init(t);
}

static int ht_grow(struct htab *t, size_t nb)
{
    struct hlink **b = calloc(nb, sizeof(*b));
    if (!b)
        return -ENOMEM;
    for (size_t i = 0; i < t->nb; i++) {
        struct hlink *l = t->b[i], *next;
        for (; l; l = next) {
            next = l->next;
            l->next = b[l->hash & (nb - 1)];
            b[l->hash & (nb - 1)] = l;
        }
    }
    free(t->b);
    t->b = b;
    t->nb = nb;
    return 0;
}

/* Chains of one entry on average at most: a bucket array of 8 bytes per
 * entry at worst, 4 at best (memory_100k). */
bool ht_full(const struct htab *t, size_t more)
{
    return t->n + more > t->nb;
}

int ht_reserve(struct htab *t, size_t more)
{
    size_t nb = t->nb ? t->nb : 64;
    while (t->n + more > nb)
        nb *= 2;
    return nb == t->nb ? 0 : ht_grow(t, nb);
}

void ht_insert(struct htab *t, struct hlink *l, uint64_t hash)
{
    l->hash = hash;
    l->next = t->b[hash & (t->nb - 1)];
    t->b[hash & (t->nb - 1)] = l;
    t->n++;
}

void ht_remove(struct htab *t, struct hlink *l)
{
    struct hlink **pp = &t->b[l->hash & (t->nb - 1)];
    for (; *pp; pp = &(*pp)->next) {
        if (*pp == l) {
            *pp = l->next;
            t->n--;
            return;
        }
    }
}

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

uint64_t ht_name_hash(enum reg_type type, uint64_t parent, const char *name)
{
    uint64_t h = 1469598103934665603ULL ^ ((uint64_t)type << 56) ^ parent;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ULL;
    return mix(h);
}

#define CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

struct obj *model_by_seq(struct reg *reg, uint64_t seq)
{
    if (!reg->seqs.nb)
        return NULL;
    uint64_t h = mix(seq);
    for (struct hlink *l = reg->seqs.b[h & (reg->seqs.nb - 1)]; l; l = l->next) {
        struct obj *o = CONTAINER(l, struct obj, by_seq);
        if (o->seq == seq)
            return o;
    }
    return NULL;
}

static struct obj *by_name(struct reg *reg, enum reg_type type, uint64_t parent,
                           const char *name, enum reg_kind kind)
{
    if (!reg->names.nb)
        return NULL;
    uint64_t h = ht_name_hash(type, parent, name);
    for (struct hlink *l = reg->names.b[h & (reg->names.nb - 1)]; l; l = l->next) {
        struct obj *o = CONTAINER(l, struct obj, by_name);
        if (l->hash == h && o->kind == kind && o->type == type &&
            !strcmp(o->name, name) &&
            (kind == REG_K_PLUGIN || model_as_inst(o)->plugin->o.seq == parent))
            return o;
    }
    return NULL;
}

struct plugin *model_as_plugin(struct obj *o)
{
    return o && o->kind == REG_K_PLUGIN ? (struct plugin *)o : NULL;
}

struct inst *model_as_inst(struct obj *o)
{
    return o && o->kind == REG_K_INSTANCE ? (struct inst *)o : NULL;
}

struct plugin *model_plugin(struct reg *reg, enum reg_type type, const char *name)
{
    return model_as_plugin(by_name(reg, type, 0, name, REG_K_PLUGIN));
}

struct inst *model_inst(struct reg *reg, struct plugin *p, const char *alloc)
{
    return model_as_inst(by_name(reg, p->o.type, p->o.seq, alloc, REG_K_INSTANCE));
}

int model_reserve(struct reg *reg, size_t more)
{
    int rc = ht_reserve(&reg->seqs, more);
    return rc < 0 ? rc : ht_reserve(&reg->names, more);
}

void model_link(struct reg *reg, struct obj *o, struct plugin *parent)
{
    ht_insert(&reg->seqs, &o->by_seq, mix(o->seq));
    ht_insert(&reg->names, &o->by_name,
              ht_name_hash(o->type, parent ? parent->o.seq : 0, o->name));
    struct obj **head = parent ? &parent->head : &reg->types[o->type];
    o->prev = NULL;
    o->next = *head;
    if (*head)
        (*head)->prev = o;
    *head = o;
    if (parent)
        parent->count++;
    else
        reg->ntypes[o->type]++;
}

void model_unlink(struct reg *reg, struct obj *o, struct plugin *parent)
{
    ht_remove(&reg->seqs, &o->by_seq);
    ht_remove(&reg->names, &o->by_name);
    struct obj **head = parent ? &parent->head : &reg->types[o->type];
    if (o->prev)
        o->prev->next = o->next;
    else
        *head = o->next;
    if (o->next)
        o->next->prev = o->prev;
    if (parent)
        parent->count--;
    else
        reg->ntypes[o->type]--;
}

void model_free_fp(struct fp *f)
{
    free(f->provider);
    free(f->version);
    free(f->nodeid);
    free(f->topology);
    free(f->capabilities);
    memset(f, 0, sizeof(*f));
}

void model_free_inst(struct inst *i)
{
    if (!i)
        return;
    free(i->socket);
    free(i->reason);
    model_free_fp(&i->fp);
    for (int a = 0; a < INST_NATTRS; a++)
        free(i->attr[a]);
    for (unsigned k = 0; i->hist && k < i->nhist; k++)
        model_reason_put(i->hist[(i->hist_head + k) % REG_HISTORY].reason);
    free(i->hist);
    free(i);
}

int64_t model_now_ns(void)
{
    return csifs_real_ns();
}

int64_t model_mono_ms(void)
{
    return csifs_mono_ms();
}

/* ---- interned history reasons (short, and the same for many probes) ---- */

#define HIST_REASON_MAX 119          /* longer reasons are truncated */

struct hreason *model_reason_new(struct reg *reg, const char *s)
{
    size_t k = strnlen(s, HIST_REASON_MAX);
    struct hreason *r = ht_reserve(&reg->reasons, 1) < 0 ? NULL : malloc(sizeof(*r) + k + 1);
    if (!r)
        return NULL;
    memcpy(r->s, s, k);
    r->s[k] = '\0';
    r->t = &reg->reasons;
    r->refs = 1;
    r->l.hash = ht_name_hash(0, 0, r->s);
    return r;
}

void model_reason_put(struct hreason *r)
{
    if (r && --r->refs == 0) {
        ht_remove(r->t, &r->l);
        free(r);
    }
}

struct hreason *model_reason_intern(struct reg *reg, struct hreason **spare)
{
    struct htab *t = &reg->reasons;
    struct hreason *s = *spare;
    for (struct hlink *l = t->b[s->l.hash & (t->nb - 1)]; l; l = l->next) {
        struct hreason *r = (struct hreason *)l;
        if (l->hash == s->l.hash && !strcmp(r->s, s->s)) {
            r->refs++;
            return r;
        }
    }
    ht_insert(t, &s->l, s->l.hash);     /* room reserved by model_reason_new */
    *spare = NULL;
    return s;
}
