/* The ring of committed requests (store.h "the ring"; DESIGN 13, exactly
 * once): fixed-size records in the main database, one per mutation that
 * answers a FUSE request, written in its commit's transaction and dropped
 * by a later commit once the request is answered. */
#include "registry/store_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The payload after the record header, in the machine's byte order (as
 * LMDB's own file). */
struct ring_val {
    uint64_t n;                      /* position; the key's slot is n % STORE_RING_SIZE */
    uint64_t nonce;                  /* the connection's */
    uint64_t unique;                 /* FUSE_UNIQUE_RESEND cleared */
    uint64_t parent;                 /* the request's nodeid */
    uint64_t obj;                    /* seq of the object written */
    uint32_t opcode;
    int32_t rc;                      /* the outcome answered */
    char name[REG_NAME_MAX + 1];     /* NUL-padded */
};
_Static_assert(sizeof(struct ring_val) == 112, "the ring record's layout (store.h)");

/* The control record's payload ("ring"). */
struct ring_ctl {
    uint64_t nonce, base;
};

#define RING_KEY_LEN 4

/* "r/" and the slot, big endian: the ring's keys sort together, in slot order. */
static void ring_key(MDB_val *key, unsigned char *buf, uint64_t n)
{
    unsigned slot = (unsigned)(n % STORE_RING_SIZE);
    buf[0] = 'r';
    buf[1] = '/';
    buf[2] = (unsigned char)(slot >> 8);
    buf[3] = (unsigned char)slot;
    key->mv_data = buf;
    key->mv_size = RING_KEY_LEN;
}

static bool is_ring_key(const MDB_val *key)
{
    const unsigned char *k = key->mv_data;
    return key->mv_size == RING_KEY_LEN && k[0] == 'r' && k[1] == '/';
}

/* The payload of a ring record (unaligned in LMDB's page): false when it
 * has not a ring record's size. */
static bool ring_read(const MDB_val *val, struct ring_val *v)
{
    if (val->mv_size != STORE_HDR + sizeof(*v))
        return false;
    memcpy(v, (const unsigned char *)val->mv_data + STORE_HDR, sizeof(*v));
    return true;
}

int store_ring_put(MDB_txn *txn, MDB_dbi dbi, uint64_t nonce, uint64_t *next,
                   struct store_ring_rec *r)
{
    struct ring_val v = { .n = *next, .nonce = nonce, .unique = r->key.unique,
                          .parent = r->key.parent, .obj = r->obj, .opcode = r->key.opcode,
                          .rc = r->rc };
    snprintf(v.name, sizeof(v.name), "%s", r->key.name);
    unsigned char buf[RING_KEY_LEN];
    MDB_val key;
    ring_key(&key, buf, v.n);
    int rc = store_put_raw(txn, dbi, &key, SK_RING, &v, sizeof(v));
    if (rc == 0)
        r->pos = (*next)++;
    return rc;
}

int store_ring_drop(MDB_txn *txn, MDB_dbi dbi, uint64_t pos)
{
    unsigned char buf[RING_KEY_LEN];
    MDB_val key, val;
    struct ring_val v;
    ring_key(&key, buf, pos);
    int rc = mdb_get(txn, dbi, &key, &val);
    if (rc == MDB_NOTFOUND || (rc == 0 && (!ring_read(&val, &v) || v.n != pos)))
        return 0;                    /* gone, or its slot holds another */
    /* Fails only as the commit's puts would (map full, I/O): the commit with it. */
    return rc != 0 ? rc : mdb_del(txn, dbi, &key, NULL);
}

int store_ring_check(const MDB_val *key, const MDB_val *val, char *why, size_t whylen)
{
    struct ring_val v;
    unsigned char buf[RING_KEY_LEN];
    MDB_val want;
    bool ctl = !is_ring_key(key);
    size_t size = STORE_HDR + (ctl ? sizeof(struct ring_ctl) : sizeof(v));
    int rc = store_check_hdr(key, val, ctl ? SK_RING_CTL : SK_RING, true, why, whylen);
    if (rc == 0 && val->mv_size != size) {
        snprintf(why, whylen, "is %zu bytes, not the %zu of a ring %s", val->mv_size, size,
                 ctl ? "control" : "record");
        rc = -EBADMSG;
    }
    if (rc < 0 || ctl)
        return rc;
    ring_read(val, &v);
    ring_key(&want, buf, v.n);
    if (key->mv_size != want.mv_size || memcmp(key->mv_data, buf, want.mv_size) ||
        !memchr(v.name, '\0', sizeof(v.name))) {
        snprintf(why, whylen, "does not fit its key (ring position %llu)",
                 (unsigned long long)v.n);
        return -EBADMSG;
    }
    return 0;
}

/* Each ring record in key order, to fn until it returns true (stop).
 * 0 or an LMDB code. */
static int ring_each(MDB_txn *txn, MDB_dbi dbi,
                     bool (*fn)(const MDB_val *key, const MDB_val *val, void *arg), void *arg)
{
    MDB_cursor *c;
    unsigned char buf[RING_KEY_LEN];
    MDB_val key, val;
    int rc = mdb_cursor_open(txn, dbi, &c);
    if (rc != 0)
        return rc;
    ring_key(&key, buf, 0);
    for (rc = mdb_cursor_get(c, &key, &val, MDB_SET_RANGE); rc == 0 && is_ring_key(&key);
         rc = mdb_cursor_get(c, &key, &val, MDB_NEXT))
        if (fn(&key, &val, arg))
            break;
    mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

static bool max_n(const MDB_val *key, const MDB_val *val, void *arg)
{
    (void)key;
    uint64_t *next = arg;
    struct ring_val v;
    if (ring_read(val, &v) && v.n + 1 > *next)
        *next = v.n + 1;
    return false;
}

int store_ring_next(MDB_txn *txn, MDB_dbi dbi, uint64_t *next)
{
    *next = 0;
    return ring_each(txn, dbi, max_n, next);
}

int store_ring_ctl_get(MDB_txn *txn, MDB_dbi dbi, struct store_ring *ctl)
{
    MDB_val val;
    struct ring_ctl c = { 0, 0 };
    int rc = mdb_get(txn, dbi, (MDB_val *)&store_key_ring, &val);
    if (rc == 0 && val.mv_size == STORE_HDR + sizeof(c))
        memcpy(&c, (const unsigned char *)val.mv_data + STORE_HDR, sizeof(c));
    ctl->nonce = c.nonce;
    ctl->base = c.base;
    return rc == MDB_NOTFOUND ? 0 : rc;
}

int store_ring_ctl_put(MDB_txn *txn, MDB_dbi dbi, const struct store_ring *ctl)
{
    struct ring_ctl c = { ctl->nonce, ctl->base };
    return store_put_raw(txn, dbi, &store_key_ring, SK_RING_CTL, &c, sizeof(c));
}

struct ring_q {
    const struct store_ring *cur;
    const struct reg_ring_key *k;
    int *rc;
    int found;                       /* 0 match, -ENOENT */
};

static bool match(const MDB_val *key, const MDB_val *val, void *arg)
{
    struct ring_q *q = arg;
    struct ring_val v;
    if (!ring_read(val, &v) || v.nonce != q->cur->nonce || v.n < q->cur->base ||
        v.unique != q->k->unique)
        return false;
    char why[160];
    if (store_ring_check(key, val, why, sizeof(why)) < 0)
        return true;                 /* damaged: as if none, the request runs again */
    if (v.opcode == q->k->opcode && v.parent == q->k->parent && !strcmp(v.name, q->k->name)) {
        *q->rc = v.rc;
        q->found = 0;
    }
    return true;                     /* a unique is recorded once per connection */
}

int store_ring_get(MDB_txn *txn, MDB_dbi dbi, const struct store_ring *cur,
                   const struct reg_ring_key *k, int *rc)
{
    struct ring_q q = { cur, k, rc, -ENOENT };
    int lrc = ring_each(txn, dbi, match, &q);
    return lrc != 0 ? store_errno(lrc) : q.found;
}
