/* Lookup counts: which inodes the kernel holds (node.h). An open-addressing
 * table of (inode, count) under one mutex, taken for a few instructions per
 * entry reply and per forget (never on a cached path: those reach no
 * handler). An inode's home is its object's block of 32 slots (SLOT_BITS),
 * so the children of one directory sit side by side: a listing touches a few
 * neighbouring cache lines, not one line per entry. Linear probing, deletion
 * by backward shift, at most half full. */
#include "fs/node.h"

#include <errno.h>
#include <stdlib.h>

struct lk {
    fuse_ino_t ino;                  /* 0: a free slot (inode 0 is never used) */
    uint64_t n;
};

struct fs_lookups {
    pthread_mutex_t mu;
    struct lk *s;
    size_t cap, n;                   /* cap: a power of two */
    bool blind;                      /* a count was lost (ENOMEM): all are known */
};

static size_t home(const struct fs_lookups *t, fuse_ino_t ino)
{
    uint64_t obj = (uint64_t)ino >> SLOT_BITS;
    uint64_t h = obj * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    return (size_t)((h << SLOT_BITS) | (ino & ((1u << SLOT_BITS) - 1))) & (t->cap - 1);
}

/* The slot holding ino, or the free slot where it would go. */
static size_t find(const struct fs_lookups *t, fuse_ino_t ino)
{
    size_t i = home(t, ino);
    while (t->s[i].ino && t->s[i].ino != ino)
        i = (i + 1) & (t->cap - 1);
    return i;
}

int fs_lookups_init(struct fs *fs)
{
    struct fs_lookups *t = calloc(1, sizeof(*t));
    if (!t || !(t->s = calloc(t->cap = 1024, sizeof(*t->s)))) {
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
    pthread_mutex_destroy(&t->mu);
    free(t->s);
    free(t);
    fs->lookups = NULL;
}

/* Twice the room; false when there is no memory for it. */
static bool grow(struct fs_lookups *t)
{
    struct lk *old = t->s;
    size_t ocap = t->cap;
    struct lk *s = calloc(ocap * 2, sizeof(*s));
    if (!s)
        return false;
    t->s = s;
    t->cap = ocap * 2;
    for (size_t k = 0; k < ocap; k++)
        if (old[k].ino)
            t->s[find(t, old[k].ino)] = old[k];
    free(old);
    return true;
}

void fs_lookups_add(struct fs *fs, fuse_ino_t ino)
{
    struct fs_lookups *t = fs->lookups;
    pthread_mutex_lock(&t->mu);
    size_t i = find(t, ino);
    if (!t->s[i].ino && 2 * (t->n + 1) > t->cap) {
        if (grow(t))
            i = find(t, ino);
        else if (t->n + 1 == t->cap)
            i = t->cap;              /* no free slot left to take it */
    }
    if (i == t->cap) {
        t->blind = true;
    } else {
        if (!t->s[i].ino) {
            t->s[i].ino = ino;
            t->n++;
        }
        t->s[i].n++;
    }
    pthread_mutex_unlock(&t->mu);
}

/* Empty slot i and close the gap behind it. */
static void delete_at(struct fs_lookups *t, size_t i)
{
    size_t mask = t->cap - 1;
    for (size_t j = (i + 1) & mask; t->s[j].ino; j = (j + 1) & mask) {
        size_t h = home(t, t->s[j].ino);
        /* j's entry may move to i unless its home lies cyclically in (i, j] */
        if (((j - h) & mask) >= ((j - i) & mask)) {
            t->s[i] = t->s[j];
            i = j;
        }
    }
    t->s[i] = (struct lk){ 0, 0 };
    t->n--;
}

void fs_lookups_forget(struct fs *fs, fuse_ino_t ino, uint64_t n)
{
    struct fs_lookups *t = fs->lookups;
    pthread_mutex_lock(&t->mu);
    size_t i = find(t, ino);
    if (t->s[i].ino) {
        if (t->s[i].n > n)
            t->s[i].n -= n;
        else
            delete_at(t, i);
    }
    pthread_mutex_unlock(&t->mu);
}

bool fs_lookups_known(struct fs *fs, fuse_ino_t ino)
{
    struct fs_lookups *t = fs->lookups;
    if (ino == FUSE_ROOT_ID || !t)
        return true;
    pthread_mutex_lock(&t->mu);
    bool known = t->s[find(t, ino)].ino || t->blind;
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
