#include "fs/pending.h"

#include "base/defaults.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void pending_init(struct pending *p, int64_t ttl_ms)
{
    pthread_mutex_init(&p->mu, NULL);
    p->head = NULL;
    p->next_id = 1;
    p->ttl_ms = ttl_ms;
}

void pending_fini(struct pending *p)
{
    while (p->head) {
        struct pending_link *l = p->head;
        p->head = l->next;
        free(l);
    }
    pthread_mutex_destroy(&p->mu);
}

/* Drop expired links; with mu held. */
static void expire(struct pending *p)
{
    int64_t now = csifs_mono_ms();
    for (struct pending_link **pp = &p->head; *pp;) {
        if ((*pp)->expires_ms <= now) {
            struct pending_link *l = *pp;
            *pp = l->next;
            free(l);
        } else {
            pp = &(*pp)->next;
        }
    }
}

static struct pending_link **find(struct pending *p, uint64_t inst, const char *name,
                                  uint64_t id)
{
    expire(p);
    struct pending_link **pp = &p->head;
    for (; *pp; pp = &(*pp)->next)
        if (name ? (*pp)->inst == inst && !strcmp((*pp)->name, name) : (*pp)->id == id)
            break;
    return pp;
}

int pending_add(struct pending *p, uint64_t inst, const char *name, const char *target,
                struct pending_link *out)
{
    if (strlen(name) > REG_NAME_MAX || strlen(target) > REG_SOCKET_MAX)
        return -ENAMETOOLONG;
    pthread_mutex_lock(&p->mu);
    int rc = 0;
    struct pending_link *l = NULL;
    if (*find(p, inst, name, 0))
        rc = -EEXIST;
    else if (!(l = calloc(1, sizeof(*l))))
        rc = -ENOMEM;
    if (rc == 0) {
        l->id = p->next_id++;
        l->inst = inst;
        strcpy(l->name, name);
        strcpy(l->target, target);
        l->expires_ms = csifs_mono_ms() + p->ttl_ms;
        l->next = p->head;
        p->head = l;
        *out = *l;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

static int lookup(struct pending *p, uint64_t inst, const char *name, uint64_t id,
                  struct pending_link *out)
{
    pthread_mutex_lock(&p->mu);
    struct pending_link *l = *find(p, inst, name, id);
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
    struct pending_link **pp = find(p, inst, name, 0), *l = *pp;
    if (l) {
        *pp = l->next;
        free(l);
    }
    pthread_mutex_unlock(&p->mu);
    return l ? 0 : -ENOENT;
}
