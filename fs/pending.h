/* Pending links: the temporary symlinks `ln -sfn` makes before renaming them
 * onto `socket` (DESIGN section 5). Memory only, never listed, never evented,
 * dropped after a time-to-live. Guarded by their own mutex (taken after, and
 * never together with, the registry's locks). */
#ifndef CSIFS_PENDING_H
#define CSIFS_PENDING_H

#include <pthread.h>
#include <stdint.h>

#include "registry/registry.h"

struct pending_link {
    uint64_t id, inst;           /* id: for the inode; inst: the instance seq */
    char name[REG_NAME_MAX + 1];
    char target[REG_SOCKET_MAX + 1];
    int64_t expires_ms;          /* CLOCK_MONOTONIC */
    struct pending_link *next;
};

struct pending {
    pthread_mutex_t mu;
    struct pending_link *head;
    uint64_t next_id;
    int64_t ttl_ms;
};

void pending_init(struct pending *p, int64_t ttl_ms);
void pending_fini(struct pending *p);
/* -EEXIST if inst already has one by that name. */
int pending_add(struct pending *p, uint64_t inst, const char *name, const char *target,
                struct pending_link *out);
/* Copy of a live link, by name or by id; -ENOENT. */
int pending_find(struct pending *p, uint64_t inst, const char *name, struct pending_link *out);
int pending_get(struct pending *p, uint64_t id, struct pending_link *out);
/* Remove by name; -ENOENT. */
int pending_del(struct pending *p, uint64_t inst, const char *name);

#endif
