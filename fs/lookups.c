/* Lookup counts: which inodes the kernel holds (node.h). A hash of inode ->
 * count under one mutex, taken for a few instructions per entry reply and
 * per forget (never on a cached path: those reach no handler). */
#include "fs/node.h"

#include <errno.h>
#include <stdlib.h>

struct lk {
    fuse_ino_t ino;
    uint64_t n;
    struct lk *next;
};

struct fs_lookups {
    pthread_mutex_t mu;
    struct lk **b;
    size_t nb, n;
    bool blind;                      /* a count was lost (ENOMEM): all are known */
};

static size_t bucket(const struct fs_lookups *t, fuse_ino_t ino)
{
    uint64_t h = ino * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (t->nb - 1);
}

int fs_lookups_init(struct fs *fs)
{
    struct fs_lookups *t = calloc(1, sizeof(*t));
    if (!t || !(t->b = calloc(t->nb = 1024, sizeof(*t->b)))) {
        free(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->mu, NULL);
    fs->lookups = t;
    return 0;
}

void fs_lookups_fini(struct fs *fs)
{
    struct fs_lookups *t = fs->lookups;
    if (!t)
        return;
    for (size_t k = 0; k < t->nb; k++)
        for (struct lk *l = t->b[k], *next; l; l = next) {
            next = l->next;
            free(l);
        }
    pthread_mutex_destroy(&t->mu);
    free(t->b);
    free(t);
    fs->lookups = NULL;
}

static void grow(struct fs_lookups *t)
{
    size_t nb = t->nb * 2, old = t->nb;
    struct lk **b = calloc(nb, sizeof(*b)), **ob = t->b;
    if (!b)
        return;                      /* longer chains, still right */
    t->b = b;
    t->nb = nb;
    for (size_t k = 0; k < old; k++)
        for (struct lk *l = ob[k], *next; l; l = next) {
            next = l->next;
            l->next = b[bucket(t, l->ino)];
            b[bucket(t, l->ino)] = l;
        }
    free(ob);
}

void fs_lookups_add(struct fs *fs, fuse_ino_t ino)
{
    struct fs_lookups *t = fs->lookups;
    pthread_mutex_lock(&t->mu);
    struct lk *l = t->b[bucket(t, ino)];
    while (l && l->ino != ino)
        l = l->next;
    if (!l && (l = calloc(1, sizeof(*l)))) {
        l->ino = ino;
        l->next = t->b[bucket(t, ino)];
        t->b[bucket(t, ino)] = l;
        if (++t->n > t->nb)
            grow(t);
    }
    if (l)
        l->n++;
    else
        t->blind = true;

    pthread_mutex_unlock(&t->mu);
}

void fs_lookups_forget(struct fs *fs, fuse_ino_t ino, uint64_t n)
{
    struct fs_lookups *t = fs->lookups;
    pthread_mutex_lock(&t->mu);
    for (struct lk **pp = &t->b[bucket(t, ino)]; *pp; pp = &(*pp)->next) {
        struct lk *l = *pp;
        if (l->ino != ino)
            continue;
        if (l->n > n) {
            l->n -= n;
        } else {
            *pp = l->next;
            free(l);
            t->n--;
        }
        break;
    }
    pthread_mutex_unlock(&t->mu);
}

bool fs_lookups_known(struct fs *fs, fuse_ino_t ino)
{
    struct fs_lookups *t = fs->lookups;
    if (ino == FUSE_ROOT_ID || !t)
        return true;
    pthread_mutex_lock(&t->mu);
    struct lk *l = t->b[bucket(t, ino)];
    while (l && l->ino != ino)
        l = l->next;
    bool known = l || t->blind;
    pthread_mutex_unlock(&t->mu);
    return known;
}

void fs_lookups_blind(struct fs *fs)
{
    struct fs_lookups *t = fs->lookups;
    pthread_mutex_lock(&t->mu);
    t->blind = true;                 /* for good: a predecessor's counts are lost */
    pthread_mutex_unlock(&t->mu);
}
