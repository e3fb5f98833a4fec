/* Open-file handles as checked tokens (DESIGN 13, node.h): fi->fh is never
 * a pointer. A token is (gen << 32) | (slot + 1) in a table of saved
 * handles (struct fs_saved_fh) that may live in memory a successor
 * inherits (fs_handover); the pointers to this process's state are beside
 * it. A token whose slot is free or of another generation is stale
 * (EBADF). A live slot with no state here is a predecessor's open file: it
 * is opened again from its inode (adopted); an events reader then gets
 * `restarted` and the live stream. Lock: fs->fh_mu (a leaf: never held
 * across a kind's open, which may take the registry's lock). */
#include "fs/node.h"
#include "fs/events_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#define FH_SLOTS 65536u              /* open files at once; past it EMFILE */

int fs_fh_table_init(struct fs *fs)
{
    if (!fs->fhs) {                  /* no handover memory: a private table */
        fs->own_fhs = calloc(FH_SLOTS, sizeof(*fs->own_fhs));
        fs->fhs = fs->own_fhs;
        fs->nfhs = FH_SLOTS;
    }
    free(fs->fh_ptr);
    fs->fh_ptr = calloc(fs->nfhs ? fs->nfhs : 1, sizeof(*fs->fh_ptr));
    return fs->fhs && fs->fh_ptr ? 0 : -ENOMEM;
}

void fs_fh_table_fini(struct fs *fs)
{
    free(fs->fh_ptr);
    free(fs->own_fhs);
    fs->fh_ptr = NULL;
    fs->own_fhs = NULL;
    fs->fhs = NULL;
}

static uint64_t token_of(const struct fs_saved_fh *s, uint32_t k)
{
    return ((uint64_t)s->gen << 32) | (uint64_t)(k + 1);
}

int fs_fh_put(struct fs *fs, struct fs_fh *h, fuse_ino_t ino, int flags, uint64_t *token)
{
    int rc = -EMFILE;
    pthread_mutex_lock(&fs->fh_mu);
    for (uint32_t n = 0; n < fs->nfhs; n++) {
        uint32_t k = (fs->fh_hint + n) % fs->nfhs;
        struct fs_saved_fh *s = &fs->fhs[k];
        if (__atomic_load_n(&s->live, __ATOMIC_ACQUIRE))
            continue;
        s->ino = ino;
        s->kind = (uint32_t)h->kind;
        s->flags = (uint32_t)flags;
        s->kh = 0;
        s->gen++;
        __atomic_store_n(&s->live, 1, __ATOMIC_RELEASE);   /* last: a crash never half-shows it */
        fs->fh_ptr[k] = h;
        h->slot = k;
        fs->fh_hint = k + 1;
        *token = token_of(s, k);
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&fs->fh_mu);
    return rc;
}

/* With fh_mu held: the slot of a token, or -1 when stale. */
static long slot_of(struct fs *fs, uint64_t token)
{
    uint64_t k = (token & 0xffffffffu) - 1;
    if ((token & 0xffffffffu) == 0 || k >= fs->nfhs)
        return -1;
    const struct fs_saved_fh *s = &fs->fhs[k];
    return s->live && token_of(s, (uint32_t)k) == token ? (long)k : -1;
}

int fs_fh_open(struct fs *fs, fuse_ino_t ino, struct fuse_file_info *fi, int kind,
               struct fs_fh **out)
{
    struct fs_node n;
    int rc = fs_resolve(fs, ino, &n);
    const struct fs_kind_def *k = rc == 0 ? &fs_kinds[n.kind] : NULL;
    if (rc == 0 && kind >= 0 && (int)n.kind != kind)
        rc = -EBADF;                 /* another file there now */
    else if (rc == 0 && !k->open)
        rc = -EISDIR;
    else if (rc == 0 && (fi->flags & O_ACCMODE) != O_RDONLY && !k->write)
        rc = -EACCES;                /* read-only kinds, even for root */
    else if (rc == 0 && (rc = k->open(fs, &n, fi, out)) == 0) {
        (*out)->kind = n.kind;
        (*out)->n = n;
    }
    return rc;
}

/* A predecessor's open file in slot k (token), opened again here: the
 * kind's open runs without fh_mu (it may take the registry's lock). */
static struct fs_fh *adopt(struct fs *fs, uint32_t k, uint64_t token, fuse_ino_t ino)
{
    pthread_mutex_lock(&fs->fh_mu);
    const struct fs_saved_fh *s = &fs->fhs[k];
    bool same = s->ino == ino;
    struct fuse_file_info fi = { .flags = (int)s->flags };
    int kind = (int)s->kind;
    pthread_mutex_unlock(&fs->fh_mu);
    struct fs_fh *h = NULL, *had = NULL;
    if (!same || fs_fh_open(fs, ino, &fi, kind, &h) < 0)
        return NULL;
    pthread_mutex_lock(&fs->fh_mu);
    bool live = slot_of(fs, token) == (long)k;   /* not released meanwhile */
    if (live && !(had = fs->fh_ptr[k])) {        /* nor adopted by another thread */
        h->slot = k;
        fs->fh_ptr[k] = h;
        LIST_INSERT_HEAD(&fs->open_fhs, h, link);
    }
    pthread_mutex_unlock(&fs->fh_mu);
    if (!live || had) {
        fs_kinds[h->kind].release(fs, h);
        return had;
    }
    if (h->kind == K_EVENTS)
        fs_events_restarted(fs, h);
    return h;
}

struct fs_fh *fs_fh_get(struct fs *fs, uint64_t token, fuse_ino_t ino)
{
    pthread_mutex_lock(&fs->fh_mu);
    long k = slot_of(fs, token);
    struct fs_fh *h = k < 0 ? NULL : fs->fh_ptr[k];
    pthread_mutex_unlock(&fs->fh_mu);
    return k < 0 || h ? h : adopt(fs, (uint32_t)k, token, ino);
}

void fs_fh_note_kh(struct fs *fs, const struct fs_fh *h, uint64_t kh)
{
    __atomic_store_n(&fs->fhs[h->slot].kh, kh, __ATOMIC_RELAXED);
}

void fs_fh_drop(struct fs *fs, struct fs_fh *h)
{
    /* with fh_mu held (fh_release) */
    __atomic_store_n(&fs->fhs[h->slot].live, 0, __ATOMIC_RELEASE);
    fs->fh_ptr[h->slot] = NULL;
}

struct fs_fh *fs_fh_released(struct fs *fs, uint64_t token)
{
    pthread_mutex_lock(&fs->fh_mu);
    long k = slot_of(fs, token);
    struct fs_fh *h = k >= 0 ? fs->fh_ptr[k] : NULL;
    if (k >= 0 && !h)                /* a predecessor's, never used here */
        __atomic_store_n(&fs->fhs[k].live, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&fs->fh_mu);
    return h;
}

unsigned fs_fh_polled(struct fs *fs, uint64_t *kh, unsigned cap)
{
    unsigned n = 0;
    pthread_mutex_lock(&fs->fh_mu);
    for (uint32_t k = 0; k < fs->nfhs && n < cap; k++)
        if (fs->fhs[k].live && fs->fhs[k].kh)
            kh[n++] = fs->fhs[k].kh;
    pthread_mutex_unlock(&fs->fh_mu);
    return n;
}
