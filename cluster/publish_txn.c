/* cluster publisher: plugin values, Txns of at most 127 operations, the
 * reconcile (see publish.h). Runs on the publisher's thread only. */
#include "cluster/publish_int.h"
#include "cluster/value.h"
#include "base/counters.h"
#include "base/defaults.h"
#include "base/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the dirty set and the status's error (publish.c calls them too) ---- */

void cl_pub_note_error(struct cl_pub *p, const char *what, int err)
{
    char e[400];
    etcd_client_error(p->c, e, sizeof(e));
    pthread_mutex_lock(&p->mu);
    p->counts.failures++;
    if (err == -ESTALE || !*e)
        snprintf(p->error, sizeof(p->error), "%s: %s", what, strerror(-err));
    else
        snprintf(p->error, sizeof(p->error), "%s", e);
    pthread_mutex_unlock(&p->mu);
}

void cl_pub_mark(struct cl_pub *p, const struct cl_plugin_ref *r)
{
    pthread_mutex_lock(&p->mu);
    bool found = false;
    for (size_t i = 0; i < p->n_dirty && !found; i++)
        found = p->dirty[i].type == r->type && !strcmp(p->dirty[i].name, r->name);
    if (!found && p->n_dirty == p->cap_dirty) {
        size_t cap = p->cap_dirty ? 2 * p->cap_dirty : 16;
        struct cl_plugin_ref *n = realloc(p->dirty, cap * sizeof(*n));
        if (n) {
            p->dirty = n;
            p->cap_dirty = cap;
        }
    }
    if (!found && p->n_dirty < p->cap_dirty) {
        p->dirty[p->n_dirty] = *r;
        if (!r->marked_us)
            p->dirty[p->n_dirty].marked_us = csifs_mono_us();
        p->n_dirty++;
    }
    /* (out of memory: the next reconcile publishes it) */
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* ---- values ---- */

/* An attribute as one line: trailing newline dropped, inner ones as ','. */
static void attr_line(struct reg *reg, uint64_t inst, enum reg_attr a, char *buf, size_t cap)
{
    ssize_t n = inst ? reg_attr_show(reg, inst, a, buf, cap) : -ENOENT;
    if (n < 0 || (size_t)n >= cap) {
        buf[0] = '\0';
        return;
    }
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    for (char *s = buf; (s = strchr(s, '\n'));)
        *s = ',';
}

struct counts {
    unsigned healthy;
};

static int count_healthy(const struct reg_node *n, void *arg)
{
    struct counts *c = arg;
    c->healthy += n->health == REG_HEALTHY;
    return 0;
}

int cl_plugin_value(struct reg *reg, const struct cl_plugin_ref *r, char **out)
{
    struct reg_node pl, cur = { 0 };
    *out = NULL;
    if (reg_plugin_lookup(reg, r->type, r->name, &pl) < 0)
        return 0;
    struct counts c = { 0 };
    reg_list(reg, r->type, pl.seq, 0, count_healthy, &c);
    uint64_t inst = pl.current && reg_get(reg, pl.current, &cur) == 0 ? pl.current : 0;
    static const enum reg_attr attrs[] = { REG_A_HEALTH, REG_A_REASON, REG_A_NODEID,
                                           REG_A_PROVIDER, REG_A_VERSION, REG_A_MAX_VOLUMES,
                                           REG_A_TOPOLOGY };
    static const enum cl_field fields[] = { CL_F_HEALTH, CL_F_REASON, CL_F_NODEID,
                                            CL_F_PROVIDER, CL_F_VERSION, CL_F_MAX_VOLUMES,
                                            CL_F_TOPOLOGY };
    enum { NA = sizeof(attrs) / sizeof(attrs[0]) };
    char v[NA][REG_VALUE_MAX + 1], instances[16], healthy[16];
    struct cl_record rec = { 0 };
    rec.field[CL_F_CURRENT] = inst ? cur.alloc : "";
    for (size_t i = 0; i < NA; i++) {
        attr_line(reg, inst, attrs[i], v[i], sizeof(v[i]));
        if (attrs[i] == REG_A_HEALTH && !inst)
            snprintf(v[i], sizeof(v[i]), "none");
        rec.field[fields[i]] = v[i];
    }
    snprintf(instances, sizeof(instances), "%u", pl.count);
    snprintf(healthy, sizeof(healthy), "%u", c.healthy);
    rec.field[CL_F_INSTANCES] = instances;
    rec.field[CL_F_HEALTHY] = healthy;
    return cl_value_format(&rec, out);
}

/* ---- the cache of values written ---- */

static struct cl_cached *cache_find(struct cl_pub *p, const struct cl_plugin_ref *r)
{
    for (size_t i = 0; i < p->n_cache; i++)
        if (p->cache[i].ref.type == r->type && !strcmp(p->cache[i].ref.name, r->name))
            return &p->cache[i];
    return NULL;
}

/* Take value (NULL: the key is gone). */
static void cache_set(struct cl_pub *p, const struct cl_plugin_ref *r, char *value)
{
    struct cl_cached *e = cache_find(p, r);
    if (e) {
        free(e->value);
        if (value) {
            e->value = value;
        } else {
            *e = p->cache[--p->n_cache];
        }
        return;
    }
    if (!value)
        return;
    if (p->n_cache == p->cap_cache) {
        size_t cap = p->cap_cache ? 2 * p->cap_cache : 16;
        struct cl_cached *n = realloc(p->cache, cap * sizeof(*n));
        if (!n) {
            free(value);        /* written again next time: harmless */
            return;
        }
        p->cache = n;
        p->cap_cache = cap;
    }
    p->cache[p->n_cache++] = (struct cl_cached){ *r, value };
}

void cl_pub_cache_clear(struct cl_pub *p)
{
    for (size_t i = 0; i < p->n_cache; i++)
        free(p->cache[i].value);
    p->n_cache = 0;
}

/* ---- Txns ---- */

struct batch {
    struct cl_pub *p;
    size_t n;
    Etcdserverpb__RequestOp ops[CL_TXN_OPS], *opp[CL_TXN_OPS];
    Etcdserverpb__PutRequest puts[CL_TXN_OPS];
    Etcdserverpb__DeleteRangeRequest dels[CL_TXN_OPS];
    char *keys[CL_TXN_OPS], *vals[CL_TXN_OPS];
    struct cl_plugin_ref refs[CL_TXN_OPS];
    bool has_ref[CL_TXN_OPS];
    char *cache_vals[CL_TXN_OPS];       /* the value to cache on success */
};

static void batch_reset(struct batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->keys[i]);
        free(b->vals[i]);
        free(b->cache_vals[i]);
    }
    b->n = 0;
}

static int batch_commit(struct batch *b)
{
    struct cl_pub *p = b->p;
    if (!b->n)
        return 0;
    Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT, *cmpp = &cmp;
    cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
    cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE;
    cmp.key.data = (uint8_t *)p->info_key;
    cmp.key.len = strlen(p->info_key);
    cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
    cmp.lease = p->lease;
    Etcdserverpb__TxnRequest rq = ETCDSERVERPB__TXN_REQUEST__INIT;
    rq.n_compare = 1;
    rq.compare = &cmpp;
    rq.n_success = b->n;
    rq.success = b->opp;
    Etcdserverpb__TxnResponse *r = NULL;
    int err = etcd_txn(p->c, &rq, &r);
    if (!err && !r->succeeded)
        err = -ESTALE;                  /* the lease or info changed under us */
    pthread_mutex_lock(&p->mu);
    p->counts.txns++;
    if (!err) {
        p->counts.ops += b->n;
        p->revision = r->header ? r->header->revision : p->revision;
    }
    pthread_mutex_unlock(&p->mu);
    if (r)
        protobuf_c_message_free_unpacked(&r->base, NULL);
    if (err) {
        cnt_add(&cnt.cluster_publish_error, b->n);
        cl_pub_note_error(p, err == -ESTALE ? "write refused: lease or info key changed" : "Txn",
                          err);
        return err;
    }
    cnt_add(&cnt.cluster_publish_ok, b->n);
    int64_t now = csifs_mono_us();
    for (size_t i = 0; i < b->n; i++)
        if (b->has_ref[i]) {
            if (b->refs[i].marked_us)
                cnt_hist_observe(&cnt.cluster_publish, now - b->refs[i].marked_us);
            cache_set(p, &b->refs[i], b->cache_vals[i]);
            b->cache_vals[i] = NULL;
        }
    batch_reset(b);
    return 0;
}

/* Add a put (val) or a delete (val NULL) of key, both taken; ref (may be
 * NULL) gets cache_val (taken) once committed. */
static int batch_add(struct batch *b, char *key, char *val, const struct cl_plugin_ref *ref,
                     char *cache_val)
{
    int err = b->n == CL_TXN_OPS ? batch_commit(b) : 0;
    if (err || !key) {
        free(key);
        free(val);
        free(cache_val);
        return err ? err : -ENOMEM;
    }
    size_t i = b->n++;
    Etcdserverpb__RequestOp *op = &b->ops[i];
    etcdserverpb__request_op__init(op);
    b->opp[i] = op;
    b->keys[i] = key;
    b->vals[i] = val;
    b->has_ref[i] = ref != NULL;
    if (ref)
        b->refs[i] = *ref;
    b->cache_vals[i] = cache_val;
    if (val) {
        Etcdserverpb__PutRequest *put = &b->puts[i];
        etcdserverpb__put_request__init(put);
        put->key = (ProtobufCBinaryData){ strlen(key), (uint8_t *)key };
        put->value = (ProtobufCBinaryData){ strlen(val), (uint8_t *)val };
        put->lease = b->p->lease;
        op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
        op->request_put = put;
    } else {
        Etcdserverpb__DeleteRangeRequest *del = &b->dels[i];
        etcdserverpb__delete_range_request__init(del);
        del->key = (ProtobufCBinaryData){ strlen(key), (uint8_t *)key };
        op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
        op->request_delete_range = del;
    }
    return 0;
}

static char *plugin_key(struct cl_pub *p, const struct cl_plugin_ref *r)
{
    struct cl_key k = { .type = r->type };
    snprintf(k.node, sizeof(k.node), "%s", p->o->node);
    snprintf(k.plugin, sizeof(k.plugin), "%s", r->name);
    return cl_key_format(p->o->prefix, &k);
}

/* The op for one plugin: a put when its value differs from the cache (or
 * always with force), a delete when it is gone and was written. */
static int add_plugin(struct batch *b, const struct cl_plugin_ref *r, bool force)
{
    struct cl_pub *p = b->p;
    char *v;
    int err = cl_plugin_value(p->reg, r, &v);
    if (err)
        return err;
    struct cl_cached *e = cache_find(p, r);
    if ((!v && !e && !force) || (v && e && !force && !strcmp(v, e->value))) {
        free(v);
        return 0;
    }
    if (!v)
        return batch_add(b, plugin_key(p, r), NULL, r, NULL);
    char stamp[32], *full = NULL;
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    if (asprintf(&full, "%s%s %s\n", v, cl_field_names[CL_F_UPDATED], stamp) < 0) {
        free(v);
        return -ENOMEM;
    }
    return batch_add(b, plugin_key(p, r), full, r, v);
}

int cl_pub_write(struct cl_pub *p, const struct cl_plugin_ref *refs, size_t n)
{
    struct batch *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->p = p;
    int err = 0;
    for (size_t i = 0; i < n && !err; i++)
        err = add_plugin(b, &refs[i], false);
    if (!err)
        err = batch_commit(b);
    batch_reset(b);
    free(b);
    if (err)
        for (size_t i = 0; i < n; i++)
            cl_pub_mark(p, &refs[i]);
    return err;
}

/* ---- reconcile ---- */

struct refs {
    struct cl_plugin_ref *v;
    size_t n, cap;
    int type;
};

static int collect(const struct reg_node *n, void *arg)
{
    struct refs *rs = arg;
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 64;
        struct cl_plugin_ref *v = realloc(rs->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        rs->v = v;
        rs->cap = cap;
    }
    rs->v[rs->n].type = rs->type;
    rs->v[rs->n].marked_us = 0;
    snprintf(rs->v[rs->n].name, sizeof(rs->v[rs->n].name), "%s", n->plugin);
    rs->n++;
    return 0;
}

static bool wanted(struct cl_pub *p, const struct refs *rs, const ProtobufCBinaryData *key)
{
    size_t hl = strlen(p->host_prefix);
    if (key->len == strlen(p->info_key) && !memcmp(key->data, p->info_key, key->len))
        return true;
    for (size_t i = 0; i < rs->n; i++) {
        const char *t = reg_type_names[rs->v[i].type];
        size_t tl = strlen(t), nl = strlen(rs->v[i].name);
        if (key->len == hl + tl + 1 + nl && !memcmp(key->data + hl, t, tl) &&
            key->data[hl + tl] == '/' && !memcmp(key->data + hl + tl + 1, rs->v[i].name, nl))
            return true;
    }
    return false;
}

int cl_pub_reconcile(struct cl_pub *p)
{
    Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
    int err = etcd_prefix_range(p->host_prefix, &rq.key, &rq.range_end);
    if (err)
        return err;
    rq.keys_only = true;
    Etcdserverpb__RangeResponse *r = NULL;
    err = etcd_range(p->c, &rq, &r);
    free(rq.range_end.data);
    if (err) {
        cl_pub_note_error(p, "Range", err);
        return err;
    }
    struct refs rs = { 0 };
    for (rs.type = 0; rs.type < REG_NTYPES && !err; rs.type++)
        err = reg_list(p->reg, rs.type, 0, 0, collect, &rs);
    struct batch *b = err ? NULL : calloc(1, sizeof(*b));
    if (!err && !b)
        err = -ENOMEM;
    if (b) {
        b->p = p;
        cl_pub_cache_clear(p);
        for (size_t i = 0; i < rs.n && !err; i++)
            err = add_plugin(b, &rs.v[i], true);
        for (size_t i = 0; i < r->n_kvs && !err; i++)
            if (!wanted(p, &rs, &r->kvs[i]->key))
                err = batch_add(b, strndup((char *)r->kvs[i]->key.data, r->kvs[i]->key.len),
                                NULL, NULL, NULL);
        if (!err)
            err = batch_commit(b);
        batch_reset(b);
        free(b);
    }
    if (!err)
        csifs_log(LOG_INFO, "cluster: published %zu plugins as %s (lease %llx)", rs.n, p->o->node,
                (unsigned long long)p->lease);
    free(rs.v);
    protobuf_c_message_free_unpacked(&r->base, NULL);
    return err;
}
