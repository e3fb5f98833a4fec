/* backend: what the registry model needs of durable state, and the records
 * it hands over (DESIGN section 7). The model includes only this header; the
 * LMDB store (store.h) is one implementation.
 */
#ifndef CSIFS_BACKEND_H
#define CSIFS_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "registry/registry.h"

/* A plugin as persisted. */
struct store_plugin {
    enum reg_type type;
    const char *name;
    uint64_t seq;
    int64_t registered_ns;
    uint64_t current;                /* seq of its current instance, 0: none */
};

/* An instance as persisted: everything but health, reason and history. */
struct store_inst {
    enum reg_type type;
    const char *plugin, *alloc;
    uint64_t seq;
    int64_t registered_ns;
    const char *socket;              /* "" when unset */
    bool ready;
    struct reg_fingerprint fp;       /* strings "" when unset */
    const char *mount_point, *container_mount_point;
};

/* Counters that must never go back: bounds, each reserved ahead in blocks
 * (plugin/instance seqs REG_SEQ_BLOCK at a time; event seqs: registry/
 * mutate.c), so that most commits leave the meta as it is. After a restart
 * new seqs start at the stored bound: they skip what was reserved. */
#define REG_SEQ_BLOCK 4096
struct store_meta {
    uint64_t next_seq;               /* plugin/instance seqs below this may have been used */
    uint64_t ev_reserved;            /* event seqs below this may have been used */
};

enum store_op { STORE_PUT_PLUGIN, STORE_DEL_PLUGIN, STORE_PUT_INST, STORE_DEL_INST };
struct store_rec {
    struct store_rec *next;          /* the next record of the same txn */
    enum store_op op;
    union {
        struct store_plugin plugin;  /* PUT_PLUGIN; DEL_PLUGIN uses type, name */
        struct store_inst inst;      /* PUT_INST; DEL_INST uses type, plugin, alloc */
    } u;
};

/* A committed request, for the ring (registry.h reg_ring_set). */
struct store_ring_rec {
    struct store_ring_rec *next;     /* the next of the same txn */
    struct reg_ring_key key;
    int32_t rc;                      /* the outcome answered */
    uint64_t obj;                    /* seq of the object it wrote (mkdir: the new one) */
    uint64_t pos;                    /* set by the commit: where the ring holds it */
};

/* One transaction: the records in list order (a later record of the same
 * key wins), the ring's records, and the meta unless keep_meta (the stored
 * meta stands: neither bound moved). */
struct store_txn {
    struct store_meta meta;
    bool keep_meta;
    const struct store_rec *recs;
    struct store_ring_rec *ring;
};

/* Called for every record at load, plugins before their instances and each
 * kind in ascending seq. Returning non-zero stops the load with that value. */
struct store_load_cb {
    int (*plugin)(const struct store_plugin *p, void *arg);
    int (*inst)(const struct store_inst *i, void *arg);
    void *arg;
    int (*reserve)(size_t n, void *arg);   /* optional: n records follow */
};

/* What the registry needs of a durable store.
 *   commit: all of txn or nothing, durable when it returns 0; -ENOSPC (disk
 *           or map full) or -EIO with nothing written. Called by one thread
 *           at a time, with no registry lock held.
 *   load:   every record through cb, and the meta.
 *   room:   (may be NULL: no limit) bytes that additions may still take
 *           without eating into the reserve kept for deletions (DESIGN 7);
 *           refreshed by the registry after each commit.
 *   ring_find: (may be NULL: no ring) as reg_ring_find; any thread.
 *   ring_answered: (may be NULL) the request of the ring's record at pos
 *           (store_ring_rec.pos, set by a commit that went through) has
 *           been answered: the kernel never sends it again, so a later
 *           commit may drop the record. Any thread; takes only the
 *           store's own leaf lock. */
struct reg_backend {
    int (*commit)(void *ctx, const struct store_txn *txn);
    int (*load)(void *ctx, const struct store_load_cb *cb, struct store_meta *meta);
    int (*room)(void *ctx, uint64_t *bytes);
    int (*ring_find)(void *ctx, const struct reg_ring_key *k, int *rc);
    void (*ring_answered)(void *ctx, uint64_t pos);
    void *ctx;
};

#endif
