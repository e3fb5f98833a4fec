/* Pending links: the temporary symlinks `ln -sfn` makes before renaming them
 * onto `socket` (DESIGN section 5). Never listed, never evented, dropped
 * after a time-to-live. Kept in a fixed table of slots that may be the
 * state memfd's (pending_adopt; DESIGN 13: an `ln -sfn` cut by a takeover
 * still succeeds), written in place. Guarded by their own mutex (taken
 * after, and never together with, the registry's locks). */
#ifndef CSIFS_PENDING_H
#define CSIFS_PENDING_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "registry/registry.h"

#define PENDING_SLOTS 1024u

struct pending_link {            /* a slot: id 0 is free (written last) */
    uint64_t id, inst;           /* id: for the inode; inst: the instance seq */
    int64_t expires_ms;          /* CLOCK_MONOTONIC (system-wide) */
    char name[REG_NAME_MAX + 1];
    char target[REG_SOCKET_MAX + 1];
};

struct pending_table {           /* PENDING_SLOTS of them */
    uint64_t next_id;
    struct pending_link s[PENDING_SLOTS];
};

struct pending {
    pthread_mutex_t mu;
    struct pending_table *t, *own;   /* t: own, or the adopted memory */
    unsigned live;               /* slots in use */
    int64_t ttl_ms;
};

int pending_init(struct pending *p, int64_t ttl_ms);
void pending_fini(struct pending *p);
/* Keep the links in t from now on (it outlives the process), before any
 * link is added: takeover: t holds a predecessor's links, kept; else it is
 * cleared. */
void pending_adopt(struct pending *p, struct pending_table *t, bool takeover);
/* -EEXIST if inst already has one by that name; -ENOSPC with every slot
 * taken. */
int pending_add(struct pending *p, uint64_t inst, const char *name, const char *target,
                struct pending_link *out);
/* Copy of a live link, by name or by id; -ENOENT. */
int pending_find(struct pending *p, uint64_t inst, const char *name, struct pending_link *out);
int pending_get(struct pending *p, uint64_t id, struct pending_link *out);
/* Remove by name; -ENOENT. */
int pending_del(struct pending *p, uint64_t inst, const char *name);

#endif
