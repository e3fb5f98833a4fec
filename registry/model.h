/* Internal to registry/: the objects behind struct reg and their indexes.
 * Callers hold reg->lock (shared to read, exclusive to change). */
#ifndef CSIFS_MODEL_H
#define CSIFS_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "registry/registry.h"

struct hlink {
    struct hlink *next;
    uint64_t hash;
};
struct htab {
    struct hlink **b;
    size_t nb, n;
};

struct hist {
    int64_t at_ms;               /* CLOCK_REALTIME */
    int64_t latency_us;
    enum reg_outcome outcome;
    char reason[120];
};

struct obj {                     /* common head of plugins and instances */
    struct hlink by_seq, by_name;
    enum reg_kind kind;
    enum reg_type type;
    uint64_t seq;
    char name[REG_NAME_MAX + 1];
    struct obj *prev, *next;     /* siblings, newest first */
    int64_t registered_ns, changed_ns;
};

struct plugin {
    struct obj o;
    struct obj *head;            /* instances, newest first */
    uint32_t count;
    struct inst *current;
};

struct fp {
    char *provider, *version, *nodeid, *topology, *capabilities;
    int64_t max_volumes;
};

struct inst {
    struct obj o;
    struct plugin *plugin;
    char *socket;                /* NULL when unset */
    uint64_t gen;                /* bumped on every socket change */
    enum reg_health health;
    uint64_t health_ver;         /* bumped when health, ready or reason change */
    char *reason;
    bool ready;
    bool was_healthy;            /* reached healthy since the socket was set */
    int64_t unknown_since_ms;    /* CLOCK_MONOTONIC: start of health_timeout */
    struct fp fp;
    int32_t pid;                 /* listening process, 0 unknown (memory only) */
    char *attr[REG_NATTRS];      /* writable attribute values, NULL = empty */
    struct hist *hist;           /* REG_HISTORY entries, allocated on first probe */
    unsigned nhist, hist_head;
};

struct reg {
    pthread_mutex_t wlock;       /* lock order: wlock, then lock, then the ring */
    pthread_rwlock_t lock;
    struct reg_opts opts;
    struct htab seqs, names;
    struct obj *types[REG_NTYPES]; /* plugins per type, newest first */
    uint64_t next_seq;
    struct ev_ring *ring;
    uint64_t ev_reserved;        /* events below this seq are persisted as used */
    struct {
        reg_sub_fn fn;
        void *arg;
    } subs[8];
    int nsubs;
};

/* hash tables (model.c) */
void ht_init(struct htab *t);
void ht_free(struct htab *t);
int ht_insert(struct htab *t, struct hlink *l, uint64_t hash);
void ht_remove(struct htab *t, struct hlink *l);
uint64_t ht_name_hash(enum reg_type type, uint64_t parent, const char *name);

struct obj *model_by_seq(struct reg *reg, uint64_t seq);
struct plugin *model_plugin(struct reg *reg, enum reg_type type, const char *name);
struct inst *model_inst(struct reg *reg, struct plugin *p, const char *alloc);
struct plugin *model_as_plugin(struct obj *o);
struct inst *model_as_inst(struct obj *o);

/* Link a new object into its indexes and at the front of its siblings
 * (-ENOMEM changes nothing); unlink and free. */
int model_link(struct reg *reg, struct obj *o, struct plugin *parent);
void model_unlink(struct reg *reg, struct obj *o, struct plugin *parent);
void model_free_inst(struct inst *i);
void model_free_fp(struct fp *f);
int64_t model_now_ns(void);
int64_t model_mono_ms(void);

#endif
