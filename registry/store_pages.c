/* A look at data.mdb with pread() before LMDB maps it.
 *
 * LMDB trusts its file: a page past the end of a truncated file is a SIGBUS
 * when read through the map, a garbled page can send it anywhere, and its
 * write path asserts (abort) on what it takes for granted. So before the
 * store opens an environment we read the two meta pages as
 * mdb_env_read_header() does, pick the newest (which must be on the page of
 * its txnid's parity, as LMDB picks it with a lock file), and walk every
 * page reachable from it (the free-page tree and the main tree) checking
 * that each lies inside the file and is well formed: a tree page is exactly
 * a branch or a leaf, a branch has two keys or more (the free tree's root
 * one or more), a leaf one or more, its nodes fill it exactly without
 * overlap at even offsets, with keys of at most 511 bytes in ascending
 * order, a leaf node is plain or big data (neither tree is DUPSORT, csifs
 * has no named databases), an overflow page is one and its page count lies
 * in the meta's, every leaf is at its tree's depth, and the free tree has
 * the flags LMDB gives it, 8-byte txnid keys ascending up to the meta's,
 * and records of descending page numbers the meta counts. No page is used
 * twice (by a tree or the free list): LMDB would hand it out again. The
 * file may end before the meta's last page only where those pages are free
 * (LMDB does not write pages it freed in the same transaction), so a
 * missing tail page that the free list does not hold means the file was
 * truncated.
 *
 * The on-disk layout is LMDB 0.9's (lmdb/mdb.c, MDB_DEVEL off), native
 * endian: page header {pgno_t pgno; u16 pad; u16 flags; u16 lower, upper |
 * u32 overflow pages}, 16 bytes; nodes {u16 lo, hi, flags, ksize; key; data};
 * the meta {u32 magic, version; ptr address; size_t mapsize; MDB_db dbs[2];
 * pgno_t last_pg; txnid_t txnid} follows the header of pages 0 and 1.
 */
#include "registry/store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGEHDRSZ 16u
#define NODESIZE 8u
#define META_SIZE 152u               /* page header + MDB_meta */
#define P_BRANCH 0x01
#define P_LEAF 0x02
#define P_OVERFLOW 0x04
#define P_META 0x08
#define F_BIGDATA 0x01               /* node flags; also F_SUBDATA 0x02, F_DUPDATA 0x04 */
#define MDB_MAGIC 0xBEEFC0DEu
#define MDB_DATA_VERSION 1u
#define MDB_INTEGERKEY 0x08          /* the free tree's flags, always */
#define P_INVALID (~(uint64_t)0)
#define MAX_DEPTH 32                 /* LMDB's CURSOR_STACK */
#define MAX_KEY 511u                 /* LMDB's MDB_MAXKEYSIZE */

/* Offsets in a meta page. */
#define O_FLAGS 10
#define O_MAGIC 16
#define O_VERSION 20
#define O_PSIZE 40                   /* dbs[FREE].md_pad */
#define O_FREE_FLAGS 44               /* md_flags, then md_depth */
#define O_FREE_ROOT 80
#define O_MAIN_FLAGS 92
#define O_MAIN_ROOT 128
#define O_LAST_PG 136
#define O_TXNID 144

struct meta {
    uint32_t psize;
    uint64_t roots[2];               /* free, main */
    uint16_t flags[2], depths[2];    /* the trees' md_flags and md_depth */
    uint64_t last_pg, txnid;
};

struct walk {
    int fd;
    const char *file;
    char *err;
    size_t errlen;
    uint64_t size;                   /* of the file, bytes */
    struct meta m;
    unsigned char *used;             /* a bit per page: in a tree or free */
    uint64_t free_key;               /* the last free-tree key seen, 0: none */
};

static uint16_t rd16(const unsigned char *p, size_t o)
{
    uint16_t v;
    memcpy(&v, p + o, sizeof(v));
    return v;
}

static uint32_t rd32(const unsigned char *p, size_t o)
{
    uint32_t v;
    memcpy(&v, p + o, sizeof(v));
    return v;
}

static uint64_t rd64(const unsigned char *p, size_t o)
{
    uint64_t v;
    memcpy(&v, p + o, sizeof(v));
    return v;
}

static int bad_page(struct walk *w, uint64_t pgno, const char *what)
{
    return store_fail(w->err, w->errlen, -EUCLEAN,
                      "%s: page %llu %s: the LMDB environment is corrupted", w->file,
                      (unsigned long long)pgno, what);
}

/* Pages [pgno, pgno + n) are counted by the meta and lie in the file. */
static int check_range(struct walk *w, uint64_t pgno, uint64_t n)
{
    uint64_t ps = w->m.psize;
    if (pgno < 2 || n == 0 || pgno + n - 1 > w->m.last_pg || pgno + n < pgno)
        return bad_page(w, pgno, "is referenced but lies outside the pages the meta counts");
    if ((pgno + n) * ps > w->size)
        return store_fail(w->err, w->errlen, -ENODATA,
                          "%s: truncated: page %llu lies past the end of the file "
                          "(%llu bytes, its meta page says %llu pages of %u bytes)",
                          w->file, (unsigned long long)(pgno + n - 1),
                          (unsigned long long)w->size, (unsigned long long)w->m.last_pg + 1,
                          w->m.psize);
    return 0;
}

/* Read pages [pgno, pgno + n) into buf, checking they exist. */
static int read_pages(struct walk *w, uint64_t pgno, uint64_t n, unsigned char *buf)
{
    uint64_t ps = w->m.psize;
    int rc = check_range(w, pgno, n);
    if (rc < 0)
        return rc;
    ssize_t r = pread(w->fd, buf, n * ps, (off_t)(pgno * ps));
    if (r < 0)
        return store_fail(w->err, w->errlen, -errno, "%s: read: %s", w->file, strerror(errno));
    if ((uint64_t)r != n * ps)
        return store_fail(w->err, w->errlen, -EIO, "%s: short read at page %llu", w->file,
                          (unsigned long long)pgno);
    if (rd64(buf, 0) != pgno)
        return bad_page(w, pgno, "holds another page number");
    return 0;
}

static int walk_tree(struct walk *w, uint64_t pgno, int depth, bool freedb);

/* Pages [pgno, pgno + n) (within [0, last_pg]) are used once: by one tree
 * node or one free-list entry. Two uses are a loop, a shared page or a free
 * page still in use, and LMDB's write path asserts on them (mdb_page_dirty,
 * mdb_page_touch) when it hands the page out twice. */
static int mark_used(struct walk *w, uint64_t pgno, uint64_t n)
{
    for (uint64_t pg = pgno; pg < pgno + n; pg++) {
        if (w->used[pg / 8] & (1u << pg % 8))
            return bad_page(w, pg, "is used twice (by the trees or the free list)");
        w->used[pg / 8] |= (unsigned char)(1u << pg % 8);
    }
    return 0;
}

/* A free-list record: pgno_t count, then count page numbers, descending
 * (an MDB_IDL, merged as sorted by mdb_page_alloc), each a page the meta
 * counts other than the metas. */
static int free_record(struct walk *w, uint64_t pgno, const unsigned char *d, size_t len)
{
    uint64_t n = len >= 8 ? rd64(d, 0) : 0;
    if (len < 8 || len % 8 || n > len / 8 - 1)
        return bad_page(w, pgno, "holds a free-list record of the wrong size");
    int rc = 0;
    for (uint64_t i = 1, prev = P_INVALID; rc == 0 && i <= n; i++) {
        uint64_t pg = rd64(d, i * 8);
        if (pg < 2 || pg > w->m.last_pg || pg >= prev)
            return bad_page(w, pgno, "holds a free-list record with a page number out of "
                            "order or outside the pages the meta counts");
        rc = mark_used(w, pg, 1);
        prev = pg;
    }
    return rc;
}

/* A free-tree key: the 8-byte txnid of the transaction that freed the
 * pages, ascending through the tree and not after the meta's (else
 * mdb_freelist_save asserts). */
static int free_key(struct walk *w, uint64_t pgno, const unsigned char *node)
{
    uint64_t key = rd16(node, 6) == 8 ? rd64(node, NODESIZE) : 0;
    if (key == 0 || key <= w->free_key || key > w->m.txnid)
        return bad_page(w, pgno, "has a free-list key that is not a transaction id in order");
    w->free_key = key;
    return 0;
}

/* The value of a leaf node with room bytes left in its page; in the free
 * tree, a free-list record. */
static int leaf_value(struct walk *w, uint64_t pgno, const unsigned char *node, size_t room,
                      bool freedb)
{
    size_t ks = rd16(node, 6), ds = rd16(node, 0) | (size_t)rd16(node, 2) << 16;
    const unsigned char *d = node + NODESIZE + ks;
    /* Neither tree is DUPSORT and csifs keeps no named databases: a
     * sub-database or duplicate node sends LMDB through a NULL xcursor. */
    if (rd16(node, 4) & ~F_BIGDATA)
        return bad_page(w, pgno, "has a node with flags its database cannot hold");
    int rc = freedb ? free_key(w, pgno, node) : 0;
    if (rc < 0)
        return rc;
    if (!(rd16(node, 4) & F_BIGDATA)) {
        if (NODESIZE + ks + ds > room)
            return bad_page(w, pgno, "has a node running past its end");
        return freedb ? free_record(w, pgno, d, ds) : 0;
    }
    if (NODESIZE + ks + 8 > room)
        return bad_page(w, pgno, "has a node running past its end");
    uint64_t ov = rd64(d, 0), ps = w->m.psize;
    uint64_t n = (PAGEHDRSZ + ds + ps - 1) / ps;
    rc = check_range(w, ov, n);
    unsigned char *buf = rc < 0 ? NULL : malloc(n * ps);
    if (!buf)
        return rc < 0 ? rc : -ENOMEM;
    rc = read_pages(w, ov, n, buf);
    if (rc == 0 && (rd16(buf, O_FLAGS) != P_OVERFLOW || rd32(buf, 12) < n))
        rc = bad_page(w, ov, "is not the overflow page its node says");
    if (rc == 0)                     /* LMDB frees all mp_pages of it */
        rc = check_range(w, ov, rd32(buf, 12));
    if (rc == 0)
        rc = mark_used(w, ov, rd32(buf, 12));
    if (rc == 0 && freedb)
        rc = free_record(w, ov, buf + PAGEHDRSZ, ds);
    free(buf);
    return rc;
}

/* The page number a branch node points at (48 bits in lo, hi, flags). */
static uint64_t node_pgno(const unsigned char *node)
{
    return (uint64_t)rd16(node, 0) | (uint64_t)rd16(node, 2) << 16 |
           (uint64_t)rd16(node, 4) << 32;
}

/* Order of the keys of nodes a and b (a before b in their page), as the
 * tree compares them: the free tree's as 8-byte integers, the main tree's
 * as bytes, the shorter first on a tie. */
static int key_cmp(const unsigned char *a, const unsigned char *b, bool freedb)
{
    size_t la = rd16(a, 6), lb = rd16(b, 6);
    if (freedb) {
        uint64_t x = rd64(a, NODESIZE), y = rd64(b, NODESIZE);
        return x < y ? -1 : x > y;
    }
    int c = memcmp(a + NODESIZE, b + NODESIZE, la < lb ? la : lb);
    return c ? c : (la > lb) - (la < lb);
}

/* Node k at off of a page with upper: in the page, 2-aligned (LMDB moves
 * nodes as words), its key no longer than LMDB's and, but for the implicit
 * first key of a branch, 8 bytes in the free tree and after the key of the
 * node before it (at prev). */
static bool node_ok(const unsigned char *p, size_t ps, size_t upper, unsigned k, size_t off,
                    size_t prev, bool branch, bool freedb)
{
    size_t ks = off + NODESIZE <= ps ? rd16(p, off + 6) : 0;
    if (off < upper || (off & 1) || off + NODESIZE + ks > ps || ks > MAX_KEY)
        return false;
    if (branch && k == 0)
        return true;
    return (!freedb || ks == 8) &&
           (k == (unsigned)branch || key_cmp(p + prev, p + off, freedb) < 0);
}

/* The nodes of a page fill [upper, ps) exactly, without overlap: LMDB
 * adds a node at upper and, deleting one, moves those below it up by its
 * (even) size (mdb_node_add, mdb_node_del), so an overlap or a node longer
 * than its room has it write past the page. */
static bool nodes_packed(const unsigned char *p, size_t ps, unsigned n, size_t upper,
                         bool branch)
{
    unsigned char cover[65536 / 16];            /* a bit per 2 bytes */
    size_t sum = 0;
    memset(cover, 0, ps / 16);
    for (unsigned k = 0; k < n; k++) {
        size_t off = rd16(p, PAGEHDRSZ + 2 * k);
        if (off < upper || (off & 1) || off + NODESIZE > ps)
            return false;
        size_t ds = rd16(p, off) | (size_t)rd16(p, off + 2) << 16;
        size_t sz = NODESIZE + rd16(p, off + 6) +
                    (branch ? 0 : rd16(p, off + 4) & F_BIGDATA ? 8 : ds);
        sz += sz & 1;
        if (sz > ps - off)
            return false;
        for (size_t u = off / 2; u < (off + sz) / 2; u++) {
            if (cover[u / 8] & (1u << u % 8))
                return false;
            cover[u / 8] |= (unsigned char)(1u << u % 8);
        }
        sum += sz;
    }
    return sum == ps - upper;
}

static int walk_nodes(struct walk *w, uint64_t pgno, const unsigned char *p, int depth,
                      bool freedb)
{
    size_t ps = w->m.psize;
    unsigned flags = rd16(p, O_FLAGS), lower = rd16(p, 12), upper = rd16(p, 14);
    bool branch = flags == P_BRANCH;
    /* Exactly one of branch or leaf: LEAF2 or SUBP pages exist only inside
     * DUPSORT nodes, and a DIRTY page would be written in place through the
     * read-only map. */
    if ((flags != P_BRANCH && flags != P_LEAF) ||
        lower < PAGEHDRSZ || lower > upper || upper > ps || (lower & 1) || (upper & 1))
        return bad_page(w, pgno, "has a bad header");
    /* LMDB empties no page but a root, which it then drops, and it merges a
     * branch left with one child (mdb_rebalance asserts the parent has two;
     * mdb_page_search_root that a main-tree branch has); only the free
     * tree's root may be a branch of one key. A cursor reads node 0 of a
     * leaf without looking whether it has one (mdb_cursor_first). */
    unsigned nodes = (lower - PAGEHDRSZ) / 2;
    if (nodes < (branch ? 1u + !(freedb && depth == 1) : 1u))
        return bad_page(w, pgno, branch ? "is a branch with one key" : "is an empty leaf");
    if (!nodes_packed(p, ps, nodes, upper, branch))
        return bad_page(w, pgno, "has nodes that overlap or leave gaps");
    if (!branch && depth != w->m.depths[!freedb])
        return bad_page(w, pgno, "is a leaf at another depth than its tree's");
    int rc = 0;
    for (unsigned k = 0, prev = 0; rc == 0 && k < nodes; k++) {
        size_t off = rd16(p, PAGEHDRSZ + 2 * k);
        if (!node_ok(p, ps, upper, k, off, prev, branch, freedb))
            rc = bad_page(w, pgno, "has a node outside its bounds or out of order");
        else if (branch)
            rc = walk_tree(w, node_pgno(p + off), depth + 1, freedb);
        else
            rc = leaf_value(w, pgno, p + off, ps - off, freedb);
        prev = (unsigned)off;
    }
    return rc;
}

static int walk_tree(struct walk *w, uint64_t pgno, int depth, bool freedb)
{
    if (depth > MAX_DEPTH)
        return bad_page(w, pgno, "closes a loop in the tree");
    int rc = check_range(w, pgno, 1);
    if (rc < 0 || (rc = mark_used(w, pgno, 1)) < 0)
        return rc;
    unsigned char *p = malloc(w->m.psize);
    if (!p)
        return -ENOMEM;
    rc = read_pages(w, pgno, 1, p);
    if (rc == 0)
        rc = walk_nodes(w, pgno, p, depth, freedb);
    free(p);
    return rc;
}

/* Mirror of mdb_env_read_header(): both metas valid, keep the newest. */
static int read_metas(struct walk *w)
{
    unsigned char b[META_SIZE];
    uint64_t off = 0;
    int newest = 0;
    for (int i = 0; i < 2; i++) {
        ssize_t r = pread(w->fd, b, sizeof(b), (off_t)off);
        if (r < 0)
            return store_fail(w->err, w->errlen, -errno, "%s: read: %s", w->file,
                              strerror(errno));
        bool magic = r >= O_MAGIC + 4 && rd32(b, O_MAGIC) == MDB_MAGIC;
        if ((size_t)r < sizeof(b) && (i == 1 || magic))
            return store_fail(w->err, w->errlen, -ENODATA,
                              "%s: truncated: %llu bytes end inside meta page %d", w->file,
                              (unsigned long long)w->size, i);
        if (!magic || !(rd16(b, O_FLAGS) & P_META))
            return store_fail(w->err, w->errlen, -EUCLEAN,
                              "%s: meta page %d is not an LMDB meta page (MDB_INVALID)",
                              w->file, i);
        if (rd32(b, O_VERSION) != MDB_DATA_VERSION)
            return store_fail(w->err, w->errlen, -EPROTONOSUPPORT,
                              "%s: LMDB data format version %u, this LMDB reads %u "
                              "(MDB_VERSION_MISMATCH)", w->file, rd32(b, O_VERSION),
                              MDB_DATA_VERSION);
        uint32_t ps = rd32(b, O_PSIZE);
        if (i == 0 && (ps < 512 || ps > 65536 || (ps & (ps - 1))))
            return store_fail(w->err, w->errlen, -EUCLEAN,
                              "%s: meta page 0 gives an impossible page size %u (MDB_INVALID)",
                              w->file, ps);
        if (i == 1 && ps != w->m.psize)   /* LMDB maps with the newest meta's */
            return store_fail(w->err, w->errlen, -EUCLEAN,
                              "%s: meta page 1 gives page size %u, meta page 0 %u "
                              "(MDB_INVALID)", w->file, ps, w->m.psize);
        if (i == 0 || rd64(b, O_TXNID) > w->m.txnid) {
            newest = i;
            w->m = (struct meta){ w->m.psize ? w->m.psize : ps,
                                  { rd64(b, O_FREE_ROOT), rd64(b, O_MAIN_ROOT) },
                                  { rd16(b, O_FREE_FLAGS), rd16(b, O_MAIN_FLAGS) },
                                  { rd16(b, O_FREE_FLAGS + 2), rd16(b, O_MAIN_FLAGS + 2) },
                                  rd64(b, O_LAST_PG), rd64(b, O_TXNID) };
        }
        off = w->m.psize;
    }
    /* Transaction N writes meta page N & 1, and with its lock file LMDB
     * takes the meta of a transaction, read or write, as me_metas[txnid &
     * 1] of the newest txnid (mdb_txn_renew0), not the newest page: a
     * newest meta on the other page would have the write path run on the
     * meta this walk did not check. */
    if ((w->m.txnid & 1) != (uint64_t)newest)
        return store_fail(w->err, w->errlen, -EUCLEAN,
                          "%s: meta page %d holds transaction %llu, which belongs on meta "
                          "page %d: the LMDB environment is corrupted", w->file, newest,
                          (unsigned long long)w->m.txnid, (int)(w->m.txnid & 1));
    if (w->m.flags[0] != MDB_INTEGERKEY)   /* else LMDB runs a DUPSORT one without xcursor */
        return store_fail(w->err, w->errlen, -EUCLEAN,
                          "%s: the meta page gives the free-page tree flags 0x%x: the LMDB "
                          "environment is corrupted", w->file, w->m.flags[0]);
    if (w->m.last_pg < 1 || w->m.last_pg > P_INVALID / w->m.psize)
        return store_fail(w->err, w->errlen, -EUCLEAN,
                          "%s: the meta page gives an impossible last page %llu", w->file,
                          (unsigned long long)w->m.last_pg);
    return 0;
}

/* Pages [size / psize, last_pg] must all be free: the trees are in the
 * file (check_range), so any of them used is a free-list entry. */
static int check_tail(struct walk *w)
{
    uint64_t want = w->size / w->m.psize;
    while (want <= w->m.last_pg && (w->used[want / 8] & (1u << want % 8)))
        want++;
    if (want > w->m.last_pg)
        return 0;
    return store_fail(w->err, w->errlen, -ENODATA,
                      "%s: truncated: %llu bytes, but its meta page (txn %llu) says %llu "
                      "pages of %u bytes and page %llu is in use", w->file,
                      (unsigned long long)w->size, (unsigned long long)w->m.txnid,
                      (unsigned long long)w->m.last_pg + 1, w->m.psize,
                      (unsigned long long)want);
}

/* The bitmap of used pages, [0, last_pg]; the metas are used. A file that
 * ends more pages before last_pg than its free list could name (8 bytes
 * each) is truncated. */
static int alloc_used(struct walk *w)
{
    uint64_t pages = w->size / w->m.psize;
    if (w->m.last_pg >= pages && w->m.last_pg - pages >= w->size / 8)
        return store_fail(w->err, w->errlen, -ENODATA,
                          "%s: truncated: %llu bytes, but its meta page (txn %llu) says "
                          "%llu pages of %u bytes", w->file, (unsigned long long)w->size,
                          (unsigned long long)w->m.txnid,
                          (unsigned long long)w->m.last_pg + 1, w->m.psize);
    if (!(w->used = calloc(w->m.last_pg / 8 + 1, 1)))
        return -ENOMEM;
    w->used[0] = 3;
    return 0;
}

int store_check_pages(const char *file, char *err, size_t errlen)
{
    struct walk w = { .file = file, .err = err, .errlen = errlen };
    w.fd = open(file, O_RDONLY | O_CLOEXEC);
    if (w.fd < 0)
        return store_fail(err, errlen, -errno, "%s: %s", file, strerror(errno));
    struct stat st;
    int rc = fstat(w.fd, &st) < 0 ? store_fail(err, errlen, -errno, "%s: %s", file,
                                               strerror(errno)) : 0;
    w.size = (uint64_t)st.st_size;
    if (rc == 0)
        rc = read_metas(&w);
    if (rc == 0)
        rc = alloc_used(&w);
    for (int db = 0; db < 2 && rc == 0; db++)
        if (w.m.roots[db] != P_INVALID)
            rc = walk_tree(&w, w.m.roots[db], 1, db == 0);
    if (rc == 0)
        rc = check_tail(&w);
    if (rc == -ENOMEM)
        store_fail(err, errlen, rc, "%s: out of memory", file);
    free(w.used);
    close(w.fd);
    return rc;
}
