/* store: the registry's durable state (DESIGN section 7).
 *
 * The registry hands its backend the records to commit, one transaction per
 * mutation, and reads them all back at open. A commit that fails changes
 * nothing and returns -ENOSPC (disk or map full) or -EIO.
 */
#ifndef CSIFS_STORE_H
#define CSIFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry/registry.h"

/* A plugin as persisted. */
struct store_plugin {
    enum reg_type type;
    const char *name;
    uint64_t seq;
    int64_t registered_ns;
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

/* Counters that must never go back. */
struct store_meta {
    uint64_t next_seq;               /* next plugin/instance seq */
    uint64_t ev_reserved;            /* event seqs below this may have been used */
};

enum store_op { STORE_PUT_PLUGIN, STORE_DEL_PLUGIN, STORE_PUT_INST, STORE_DEL_INST };
struct store_rec {
    enum store_op op;
    union {
        struct store_plugin plugin;  /* PUT_PLUGIN; DEL_PLUGIN uses type, name */
        struct store_inst inst;      /* PUT_INST; DEL_INST uses type, plugin, alloc */
    } u;
};

#define STORE_TXN_MAX 4
struct store_txn {
    struct store_meta meta;          /* always written */
    struct store_rec rec[STORE_TXN_MAX];
    int n;
};

/* Called for every record at load, plugins before their instances and each
 * kind in ascending seq. Returning non-zero stops the load with that value. */
struct store_load_cb {
    int (*plugin)(const struct store_plugin *p, void *arg);
    int (*inst)(const struct store_inst *i, void *arg);
    void *arg;
};

/* What the registry needs of a durable store. commit: all of txn or nothing,
 * durable when it returns 0. load: every record through cb, and the meta. */
struct reg_backend {
    int (*commit)(void *ctx, const struct store_txn *txn);
    int (*load)(void *ctx, const struct store_load_cb *cb, struct store_meta *meta);
    void *ctx;
};

#endif
