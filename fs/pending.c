#include "fs/pending.h"

#include "base/defaults.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int pending_init(struct pending *p, int64_t ttl_ms)
{
    pthread_mutex_init(&p->mu, NULL);
    p->own = p->t = calloc(1, sizeof(*p->t));
    p->live = 0;
    p->ttl_ms = ttl_ms;
    if (!p->t)
        return -ENOMEM;
    p->t->next_id = 1;
    return 0;
}

void pending_fini(struct pending *p)
{
    free(p->own);
    p->own = p->t = NULL;
    pthread_mutex_destroy(&p->mu);
}

/* Free slot l: its id goes first (a kill then leaves no half link). */
static void drop(struct pending *p, struct pending_link *l)
{
    __atomic_store_n(&l->id, 0, __ATOMIC_RELEASE);
    p->live--;
}

void pending_adopt(struct pending *p, struct pending_table *t, bool takeover)
{
    pthread_mutex_lock(&p->mu);
    p->t = t;
    p->live = 0;
    if (!takeover) {
        memset(t, 0, sizeof(*t));
        t->next_id = 1;
    }
    for (unsigned k = 0; k < PENDING_SLOTS; k++)
        p->live += t->s[k].id != 0;
    if (!t->next_id)
        t->next_id = 1;
    pthread_mutex_unlock(&p->mu);
    free(p->own);
    p->own = NULL;
}

/* The live link of inst by name (or by id), NULL; drops expired ones on
 * the way. With mu held. */
static struct pending_link *find(struct pending *p, uint64_t inst, const char *name,
                                 uint64_t id)
{
    int64_t now = csifs_mono_ms();
    struct pending_link *hit = NULL;
    for (unsigned k = 0, seen = 0; k < PENDING_SLOTS && seen < p->live; k++) {
        struct pending_link *l = &p->t->s[k];
        if (!l->id)
            continue;
        seen++;
        if (l->expires_ms <= now) {
            drop(p, l);
            seen--;
        } else if (!hit && (name ? l->inst == inst && !strcmp(l->name, name) : l->id == id)) {
            hit = l;
        }
    }
    return hit;
}

int pending_add(struct pending *p, uint64_t inst, const char *name, const char *target,
                struct pending_link *out)
{
    if (strlen(name) > REG_NAME_MAX || strlen(target) > REG_SOCKET_MAX)
        return -ENAMETOOLONG;
    pthread_mutex_lock(&p->mu);
    int rc = find(p, inst, name, 0) ? -EEXIST : -ENOSPC;
    for (unsigned k = 0; rc == -ENOSPC && k < PENDING_SLOTS; k++) {
        struct pending_link *l = &p->t->s[k];
        if (l->id)
            continue;
        l->inst = inst;
        strcpy(l->name, name);
        strcpy(l->target, target);
        l->expires_ms = csifs_mono_ms() + p->ttl_ms;
        __atomic_store_n(&l->id, p->t->next_id++, __ATOMIC_RELEASE);   /* live now */
        p->live++;
        *out = *l;
        rc = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

static int lookup(struct pending *p, uint64_t inst, const char *name, uint64_t id,
                  struct pending_link *out)
{
    pthread_mutex_lock(&p->mu);
    struct pending_link *l = find(p, inst, name, id);
    if (l)
        *out = *l;
    pthread_mutex_unlock(&p->mu);
    return l ? 0 : -ENOENT;
}

int pending_find(struct pending *p, uint64_t inst, const char *name, struct pending_link *out)
{
    return lookup(p, inst, name, 0, out);
}

int pending_get(struct pending *p, uint64_t id, struct pending_link *out)
{
    return lookup(p, 0, NULL, id, out);
}

int pending_del(struct pending *p, uint64_t inst, const char *name)
{
    pthread_mutex_lock(&p->mu);
    struct pending_link *l = find(p, inst, name, 0);
    if (l)
        drop(p, l);
    pthread_mutex_unlock(&p->mu);
    return l ? 0 : -ENOENT;
}
