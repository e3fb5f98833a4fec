/* The LMDB state store: open (validate, upgrade, set up), the registry's
 * backend (commit, load, room) and the reserve for removals. See store.h.
 * Layers: store.c uses store_check.c and store_upgrade.c, which use
 * store_file.c (lock, fsync, dir) and store_codec.c; none calls upward. */
#include "registry/store_int.h"
#include "base/counters.h"
#include "base/defaults.h"

#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* The lock file, as its holder wrote it:
 *   PID\nconn=NN\nmount=PATH\n   (conn and mount once the holder mounted) */
int store_lock_note(struct store *st, const char *mount, unsigned conn)
{
    char buf[4200];
    int n = snprintf(buf, sizeof(buf), "%ld\nconn=%u\nmount=%s\n", (long)getpid(), conn, mount);
    if (n < 0 || n >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    /* pwrite first, then cut: a reader never sees an empty file */
    if (pwrite(st->lockfd, buf, (size_t)n, 0) != n || ftruncate(st->lockfd, n) < 0)
        return -errno;
    return 0;
}

/* ---- commit ---- */

/* LMDB reports a full disk as ENOSPC, or as EIO after a short write
 * ("short write, filesystem full?" in mdb_page_flush): an EIO with less than
 * 1 MiB left on the filesystem is taken for a full disk. */
static int commit_errno(const struct store *st, int rc)
{
    if (rc == MDB_MAP_FULL || rc == ENOSPC || rc == EDQUOT || rc == EFBIG)
        return -ENOSPC;
    struct statvfs vfs;
    if (rc == EIO && statvfs(st->dir, &vfs) == 0 &&
        (uint64_t)(geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail) * vfs.f_frsize < (1u << 20))
        return -ENOSPC;
    return -EIO;
}

static int put_rec(MDB_txn *txn, MDB_dbi dbi, const struct store_rec *r)
{
    const struct store_plugin *p = &r->u.plugin;
    const struct store_inst *i = &r->u.inst;
    bool plugin = r->op == STORE_PUT_PLUGIN || r->op == STORE_DEL_PLUGIN;
    enum reg_type type = plugin ? p->type : i->type;
    const char *name = plugin ? p->name : i->plugin;
    if ((unsigned)type >= REG_NTYPES || !name || (!plugin && !i->alloc))
        return EINVAL;
    char buf[STORE_KEY_MAX];
    MDB_val key;
    if (plugin)
        store_key_plugin(&key, buf, type, name);
    else
        store_key_inst(&key, buf, type, name, i->alloc);
    if (r->op == STORE_DEL_PLUGIN || r->op == STORE_DEL_INST) {
        int rc = mdb_del(txn, dbi, &key, NULL);
        return rc == MDB_NOTFOUND ? 0 : rc;   /* already gone: the same end */
    }
    if (plugin) {
        Csifs__Store__Plugin m = CSIFS__STORE__PLUGIN__INIT;
        m.type = (Csifs__Store__PluginType)type;
        m.name = (char *)name;
        m.seq = p->seq;
        m.registered_ns = p->registered_ns;
        m.current = p->current;
        return store_put_msg(txn, dbi, &key, SK_PLUGIN, &m.base);
    }
    Csifs__Store__Instance m;
    Csifs__Store__Fingerprint fp;
    store_inst_to_pb(i, &m, &fp);
    return store_put_msg(txn, dbi, &key, SK_INST, &m.base);
}

/* ---- the reserve for removals (DESIGN 7) ----
 *
 * STORE_RESERVE bytes of disk stay allocated past data.mdb's end
 * (fallocate KEEP_SIZE), topped up after every commit, so that LMDB's
 * copy-on-write pages of a removal always find disk. Additions are refused
 * by the registry at validation once room() says they would eat into it. */
#define STORE_RESERVE ((off_t)256 << 10)
#define STORE_ROOM_SLACK ((uint64_t)64 << 10)
#define STORE_RESERVE_STEP ((off_t)32 << 10)

/* LMDB's view of the environment, and the bytes of data.mdb its pages
 * reach (through its last page): 0 or an LMDB error. */
static int env_used(struct store *st, MDB_envinfo *info, unsigned *psize, uint64_t *used)
{
    MDB_stat ms;
    int rc = mdb_env_info(st->env, info);
    if (rc == 0)
        rc = mdb_env_stat(st->env, &ms);
    if (rc == 0) {
        *psize = ms.ms_psize;
        *used = ((uint64_t)info->me_last_pgno + 1) * ms.ms_psize;
    }
    return rc;
}

static void reserve_topup(struct store *st)
{
    int fd;
    struct stat sb;
    MDB_envinfo info;
    unsigned psize;
    uint64_t used;
    /* data.mdb grows only past its last page: no fstat until then. */
    if (env_used(st, &info, &psize, &used) == 0 &&
        (off_t)used + STORE_RESERVE <= __atomic_load_n(&st->reserved_to, __ATOMIC_RELAXED))
        return;
    if (mdb_env_get_fd(st->env, &fd) != 0 || fstat(fd, &sb) < 0)
        return;
    off_t want = sb.st_size + STORE_RESERVE, to = __atomic_load_n(&st->reserved_to,
                                                                   __ATOMIC_RELAXED);
    if (to >= want)
        return;
    /* Step by step: with a nearly full disk keep what can be had. A failure
     * only leaves a smaller reserve (and additions refused by room()). */
    off_t at = to > sb.st_size ? to : sb.st_size;
    for (; at < want; at += STORE_RESERVE_STEP)
        if (fallocate(fd, FALLOC_FL_KEEP_SIZE, at, STORE_RESERVE_STEP) < 0)
            break;
    __atomic_store_n(&st->reserved_to, at, __ATOMIC_RELAXED);
}

/* Bytes of data.mdb that no tree uses: LMDB's free pages, reused before
 * the file grows. 0 when it cannot tell. */
static uint64_t free_in_file(struct store *st, const MDB_envinfo *info, unsigned psize)
{
    MDB_txn *txn;
    MDB_stat fr, mn;
    uint64_t free_pages = 0;
    if (mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) != 0)
        return 0;
    if (mdb_stat(txn, 0, &fr) == 0 && mdb_stat(txn, st->dbi, &mn) == 0) {
        uint64_t used = 2 + fr.ms_branch_pages + fr.ms_leaf_pages + fr.ms_overflow_pages +
                        mn.ms_branch_pages + mn.ms_leaf_pages + mn.ms_overflow_pages;
        uint64_t pages = (uint64_t)info->me_last_pgno + 1;
        free_pages = pages > used ? pages - used : 0;
    }
    mdb_txn_abort(txn);
    return free_pages * psize;
}

static int store_room(void *ctx, uint64_t *bytes)
{
    struct store *st = ctx;
    struct statvfs vfs;
    MDB_envinfo info;
    unsigned psize;
    uint64_t used;
    if (statvfs(st->dir, &vfs) < 0)
        return -errno;
    int rc = env_used(st, &info, &psize, &used);
    if (rc != 0)
        return store_errno(rc);
    uint64_t disk = (uint64_t)(geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail) * vfs.f_frsize;
    uint64_t map = info.me_mapsize > used + (uint64_t)STORE_RESERVE
                   ? info.me_mapsize - used - (uint64_t)STORE_RESERVE : 0;
    /* Until the reserve is whole, what is free goes to it first. */
    struct stat sb;
    int fd;
    off_t to = __atomic_load_n(&st->reserved_to, __ATOMIC_RELAXED);
    if (mdb_env_get_fd(st->env, &fd) == 0 && fstat(fd, &sb) == 0 &&
        to < sb.st_size + STORE_RESERVE) {
        uint64_t missing = (uint64_t)(sb.st_size + STORE_RESERVE - to);
        disk = disk > missing ? disk - missing : 0;
    }
    uint64_t room = disk + free_in_file(st, &info, psize);
    room = room < map ? room : map;
    *bytes = room > STORE_ROOM_SLACK ? room - STORE_ROOM_SLACK : 0;
    return 0;
}

/* Metrics of a commit that went through (counters.h): count, time, size. */
static void count_commit(struct store *st, int64_t t0_us)
{
    unsigned f = 0, psize;
    MDB_envinfo info;
    uint64_t used;
    if (t0_us) {
        cnt_hist_observe(&cnt.store_commit, csifs_mono_us() - t0_us);
        cnt_add(&cnt.store_commits, 1);
        if (mdb_env_get_flags(st->env, &f) == 0 && !(f & MDB_NOSYNC))
            cnt_add(&cnt.store_syncs, 1);   /* one fdatasync; meta pages go O_DSYNC */
    }
    if (env_used(st, &info, &psize, &used) == 0) {
        cnt_set(&cnt.store_used_bytes, used);
        cnt_set(&cnt.store_map_bytes, info.me_mapsize);
    }
}

/* The positions answered since the last commit, into drop: their count (a
 * commit that fails gives them back). */
static size_t ring_answered_take(struct store *st, uint64_t *drop)
{
    pthread_mutex_lock(&st->ans_mu);
    size_t n = st->nans;
    memcpy(drop, st->ans, n * sizeof(*drop));
    st->nans = 0;
    pthread_mutex_unlock(&st->ans_mu);
    return n;
}

static void store_ring_answered(void *ctx, uint64_t pos)
{
    struct store *st = ctx;
    pthread_mutex_lock(&st->ans_mu);
    if (st->nans < STORE_RING_ANSWERED)
        st->ans[st->nans++] = pos;
    pthread_mutex_unlock(&st->ans_mu);
}

static int store_commit(void *ctx, const struct store_txn *t)
{
    struct store *st = ctx;
    int64_t t0 = csifs_mono_us();
    MDB_txn *txn = NULL;
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    for (const struct store_rec *r = t->recs; rc == 0 && r; r = r->next)
        rc = put_rec(txn, st->dbi, r);
    uint64_t drop[STORE_RING_ANSWERED];
    size_t ndrop = rc == 0 ? ring_answered_take(st, drop) : 0;
    for (size_t k = 0; rc == 0 && k < ndrop; k++)
        rc = store_ring_drop(txn, st->dbi, drop[k]);
    uint64_t next = st->ring.next, nonce = __atomic_load_n(&st->ring.nonce, __ATOMIC_RELAXED);
    for (struct store_ring_rec *r = t->ring; rc == 0 && r; r = r->next)
        rc = store_ring_put(txn, st->dbi, nonce, &next, r);
    if (rc == 0 && !t->keep_meta) {
        Csifs__Store__Meta m = CSIFS__STORE__META__INIT;
        m.next_seq = t->meta.next_seq;
        m.ev_reserved = t->meta.ev_reserved;
        rc = store_put_msg(txn, st->dbi, &store_key_meta, SK_META, &m.base);
    }
    if (rc == 0)
        rc = mdb_txn_commit(txn);    /* frees txn, even when it fails */
    else if (txn)
        mdb_txn_abort(txn);
    if (rc == 0) {
        st->ring.next = next;
        count_commit(st, t0);
    }
    for (size_t k = 0; rc != 0 && k < ndrop; k++)
        store_ring_answered(st, drop[k]);    /* the next commit drops them */
    reserve_topup(st);
    return rc == 0 ? 0 : commit_errno(st, rc);
}

/* ---- load ---- */

/* The load keeps every decoded record until the objects are built, then
 * drops them all: their memory comes from chunks freed at once. */
struct arena {
    struct chunk {
        struct chunk *next;
        size_t used, cap;
        _Alignas(16) unsigned char data[];
    } *head;                         /* the chunk being filled */
};

#define ARENA_CHUNK (256u << 10)

static void *arena_alloc(void *arg, size_t size)
{
    struct arena *a = arg;
    struct chunk *c = a->head;
    size = (size + 15) & ~(size_t)15;
    if (!c || c->cap - c->used < size) {
        bool big = size > ARENA_CHUNK / 4;   /* its own chunk, behind the one filled */
        size_t cap = big ? size : ARENA_CHUNK;
        if (!(c = malloc(sizeof(*c) + cap)))
            return NULL;
        *c = (struct chunk){ .next = a->head, .cap = cap };
        if (big && a->head) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            a->head = c;
        }
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

static void arena_free_one(void *data, void *p)
{
    (void)data;
    (void)p;
}

static void arena_free(struct arena *a)
{
    for (struct chunk *c = a->head, *n; c; c = n) {
        n = c->next;
        free(c);
    }
    a->head = NULL;
}

struct lrec {
    enum store_kind kind;
    uint64_t order;                  /* seq, then (sort_lrecs) the order key */
    ProtobufCMessage *msg;
};

struct loader {
    struct lrec *r;
    size_t n, cap;
};

static int load_rec(void *arg, enum store_kind kind, ProtobufCMessage *msg)
{
    struct loader *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        struct lrec *r = realloc(l->r, cap * sizeof(*r));
        if (!r)
            return -ENOMEM;
        l->r = r;
        l->cap = cap;
    }
    uint64_t seq = kind == SK_PLUGIN ? ((Csifs__Store__Plugin *)msg)->seq
                                     : ((Csifs__Store__Instance *)msg)->seq;
    l->r[l->n++] = (struct lrec){ kind, seq, msg };
    return 1;
}

/* Plugins before instances, each in ascending seq. */
static int cmp_lrec(const void *a, const void *b)
{
    const struct lrec *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind == SK_PLUGIN ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The same order by a radix sort: an instance's key gets the bit above
 * every seq. qsort when a seq leaves no bit (or no memory). */
static void sort_lrecs(struct lrec *r, size_t n)
{
    uint64_t all = 0;
    for (size_t k = 0; k < n; k++)
        all |= r[k].order;
    unsigned bits = all ? 64u - (unsigned)__builtin_clzll(all) : 0;
    if (bits < 64) {
        for (size_t k = 0; k < n; k++)
            r[k].order |= (uint64_t)(r[k].kind != SK_PLUGIN) << bits;
        if (store_sort_by_u64(r, n, sizeof(*r), offsetof(struct lrec, order)) == 0)
            return;
        for (size_t k = 0; k < n; k++)
            r[k].order &= ~((uint64_t)1 << bits);
    }
    qsort(r, n, sizeof(*r), cmp_lrec);
}

/* store_open validated every record under the lock it holds (or its caller
 * did, STORE_CHECKED, before taking it): the load decodes each once more,
 * without its CRC or checks, into the arena. */
static int store_load(void *ctx, const struct store_load_cb *cb, struct store_meta *meta)
{
    struct store *st = ctx;
    struct loader l = { 0 };
    struct arena a = { NULL };
    ProtobufCAllocator pa = { arena_alloc, arena_free_one, &a };
    struct store_scan s = { .rec = load_rec, .arg = &l, .alloc = &pa, .trusted = true };
    MDB_txn *txn;
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return store_errno(rc);
    rc = store_scan(txn, st->dbi, STORE_VERSION, &s, st->file, NULL, 0);
    mdb_txn_abort(txn);
    sort_lrecs(l.r, l.n);
    if (rc == 0 && cb->reserve)
        rc = cb->reserve(l.n, cb->arg);
    for (size_t k = 0; k < l.n && rc == 0; k++) {
        if (l.r[k].kind == SK_PLUGIN) {
            struct store_plugin p;
            store_plugin_from_pb((Csifs__Store__Plugin *)l.r[k].msg, &p);
            rc = cb->plugin(&p, cb->arg);
        } else {
            struct store_inst i;
            store_inst_from_pb((Csifs__Store__Instance *)l.r[k].msg, &i);
            rc = cb->inst(&i, cb->arg);
        }
    }
    arena_free(&a);
    free(l.r);
    /* The decoded records were all alive at once, under the objects built
     * from them: give their pages back (memory_100k). */
    malloc_trim(0);
    if (rc == 0 && s.has_meta)
        *meta = s.meta;
    return rc;
}

/* ---- the ring of committed requests ---- */

static int store_ring_find(void *ctx, const struct reg_ring_key *k, int *out)
{
    struct store *st = ctx;
    MDB_txn *txn;
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return store_errno(rc);
    struct store_ring cur = { .nonce = __atomic_load_n(&st->ring.nonce, __ATOMIC_RELAXED),
                              .base = __atomic_load_n(&st->ring.base, __ATOMIC_RELAXED) };
    rc = store_ring_get(txn, st->dbi, &cur, k, out);
    mdb_txn_abort(txn);
    return rc;
}

int store_ring_start(struct store *st, uint64_t nonce, bool fresh)
{
    MDB_txn *txn;
    struct store_ring kept = { 0 };
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc == 0 && !fresh)
        rc = store_ring_ctl_get(txn, st->dbi, &kept);
    struct store_ring now = { .nonce = nonce, .next = st->ring.next, .base = kept.base };
    if (rc == 0 && (fresh || kept.nonce != nonce)) {
        now.base = now.next;         /* what came before is not this connection's */
        if ((rc = store_ring_ctl_put(txn, st->dbi, &now)) == 0) {
            rc = mdb_txn_commit(txn);
            txn = NULL;
        }
    }
    if (txn)
        mdb_txn_abort(txn);
    if (rc != 0)
        return commit_errno(st, rc);
    /* Answered records are dropped, so the newest may be gone and the next
     * position read at open lie below a kept base: never number below it. */
    if (st->ring.next < now.base)
        st->ring.next = now.base;
    __atomic_store_n(&st->ring.nonce, now.nonce, __ATOMIC_RELAXED);
    __atomic_store_n(&st->ring.base, now.base, __ATOMIC_RELAXED);
    return 0;
}

/* ---- open, close ---- */

/* A new store gets its version key at once: a store with records and no
 * version is refused. */
static int init_version(struct store *st)
{
    MDB_txn *txn;
    char buf[12];
    MDB_val val;
    store_version_val(STORE_VERSION, &val, buf);
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc != 0)
        return rc;
    if ((rc = mdb_put(txn, st->dbi, (MDB_val *)&store_key_version, &val, 0)) != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_txn_commit(txn);
}

/* The environment, read-write, after validation; version -1: read it here. */
static int open_env(struct store *st, unsigned flags, int version, char *err, size_t errlen)
{
    MDB_txn *txn;
    int dead, vrc = 0, rc = mdb_env_create(&st->env);
    if (rc == 0 && (rc = mdb_env_set_mapsize(st->env, STORE_MAP_SIZE)) == 0 &&
        (rc = mdb_env_open(st->env, st->dir,
                           MDB_NOTLS | (flags & STORE_NOSYNC ? MDB_NOSYNC : 0), 0600)) == 0 &&
        (rc = mdb_reader_check(st->env, &dead)) == 0 &&
        (rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn)) == 0) {
        if ((rc = mdb_dbi_open(txn, NULL, 0, &st->dbi)) == 0 && version < 0)
            vrc = store_read_version(txn, st->dbi, &version, st->file, err, errlen);
        if (rc == 0)
            rc = store_ring_next(txn, st->dbi, &st->ring.next);
        if (rc == 0)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    if (rc != 0)
        return store_fail(err, errlen, store_errno(rc), "%s: %s", st->file,
                          mdb_strerror(rc));
    if (vrc < 0)
        return vrc;
    if (version == 1)
        return store_upgrade_v1(st->env, st->dbi, st->dir, err, errlen);
    if (version == 0 && (rc = init_version(st)) != 0)
        return store_fail(err, errlen, commit_errno(st, rc), "%s: writing the version: %s",
                          st->file, mdb_strerror(rc));
    reserve_topup(st);
    rc = store_fsync_path(st->dir, true);      /* data.mdb may be new */
    return rc < 0 ? store_fail(err, errlen, rc, "%s: fsync: %s", st->dir, strerror(-rc)) : 0;
}

int store_open(struct store **out, const char *dir, unsigned flags, char *err,
               size_t errlen)
{
    if (flags & ~(STORE_NOSYNC | STORE_CHECKED))
        return store_fail(err, errlen, -EINVAL, "store_open: unknown flags 0x%x", flags);
    struct store *st = calloc(1, sizeof(*st));
    if (!st || !(st->dir = strdup(dir))) {
        free(st);
        return store_fail(err, errlen, -ENOMEM, "%s: out of memory", dir);
    }
    st->lockfd = -1;
    pthread_mutex_init(&st->ans_mu, NULL);
    int version = -1, rc = 0;       /* -1: read by open_env (STORE_CHECKED) */
    if (snprintf(st->file, sizeof(st->file), "%s/%s", dir, STORE_DATA) >= (int)sizeof(st->file))
        rc = store_fail(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
    if (rc == 0)
        rc = store_make_dir(dir, err, errlen);
    if (rc == 0)
        rc = store_lock(dir, true, &st->lockfd, err, errlen);
    if (rc == 0 && !(flags & STORE_CHECKED))
        rc = store_validate(dir, &version, err, errlen);
    if (rc == 0)
        rc = open_env(st, flags, version, err, errlen);
    if (rc < 0) {
        store_close(st);
        return rc;
    }
    st->be = (struct reg_backend){ store_commit, store_load, store_room, store_ring_find,
                                   store_ring_answered, st };
    count_commit(st, 0);
    *out = st;
    return 0;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    if (st->env)
        mdb_env_close(st->env);
    if (st->lockfd >= 0)
        close(st->lockfd);
    pthread_mutex_destroy(&st->ans_mu);
    free(st->dir);
    free(st);
}

const struct reg_backend *store_backend(struct store *st)
{
    return &st->be;
}
