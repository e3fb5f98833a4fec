/* Internal to the LMDB store (registry/store*.c) and its test tools.
 *
 * A value in LMDB is an 8-byte header followed by a packed protobuf message
 * (proto/registry.proto):
 *   byte 0     STORE_HDR_FORMAT (1)
 *   byte 1     the record kind (enum store_kind)
 *   bytes 2-3  zero
 *   bytes 4-7  CRC32, little endian, of the key, then bytes 0-3, then the
 *              payload: a record moved under another key fails it too.
 * The "version" key is the exception: plain ASCII digits, no header.
 */
#ifndef CSIFS_STORE_INT_H
#define CSIFS_STORE_INT_H

#include <lmdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/types.h>

#include "proto/registry.pb-c.h"
#include "registry/store.h"

#define STORE_MAP_SIZE (1ull << 30)
#define STORE_DATA "data.mdb"
#define STORE_LOCK "csifs.lock"
#define STORE_HDR 8
#define STORE_HDR_FORMAT 1
#define STORE_KEY_MAX 160            /* "i/csi-controller/<63>/<63>" fits */

enum store_kind {
    SK_PLUGIN = 1, SK_INST = 2, SK_META = 3,     /* schema version 2 */
    SK_RING = 4, SK_RING_CTL = 5,                /* the ring (store_ring.c): no message */
    SK_V1_PLUGIN = 11, SK_V1_META = 13,          /* schema version 1 */
};

extern const MDB_val store_key_version, store_key_meta, store_key_ring;

/* The ring of committed requests (store.h, DESIGN 13): the connection
 * whose records the commits write and match (nonce), where the next record
 * goes (next, counting), and the first position of this connection's
 * records (base: those before it are another's, never matched). */
struct store_ring {
    uint64_t nonce, next, base;
};

/* Answered requests whose ring records the next commit drops; past this
 * many, a record stays until its slot is written again. */
#define STORE_RING_ANSWERED 512

struct store {
    MDB_env *env;
    MDB_dbi dbi;
    int lockfd;
    off_t reserved_to;               /* data.mdb's blocks are allocated up to here */
    char *dir;
    char file[4096];                 /* <dir>/data.mdb, for messages */
    struct reg_backend be;
    struct store_ring ring;          /* nonce: set before serving; next: commit thread */
    pthread_mutex_t ans_mu;          /* a leaf lock: guards ans and nans */
    uint64_t ans[STORE_RING_ANSWERED];   /* answered positions (ring_answered) */
    size_t nans;
};

/* Sort n numbers ascending (v may be NULL when n is 0). */
void store_sort_u64(uint64_t *v, size_t n);
/* Sort n elements of size bytes (v) ascending by the uint64_t at byte
 * offset key of each, stably (a radix sort): 0, or -ENOMEM (v unchanged). */
int store_sort_by_u64(void *v, size_t n, size_t size, size_t key);
/* Format a message into err (may be NULL) and return code. */
int store_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A key as printable text (non-printable bytes as \xNN), for messages. */
const char *store_key_text(const MDB_val *key, char *buf, size_t cap);

/* Keys of schema version 2 ("p/<type>/<plugin>", "i/<type>/<plugin>/<alloc>")
 * and of version 1 ("<type>/<plugin>"); buf holds STORE_KEY_MAX bytes. */
void store_key_plugin(MDB_val *key, char *buf, enum reg_type type, const char *plugin);
void store_key_inst(MDB_val *key, char *buf, enum reg_type type, const char *plugin,
                    const char *alloc);
void store_key_v1(MDB_val *key, char *buf, enum reg_type type, const char *plugin);

/* Put msg under key as one record of kind (header, CRC, packed message),
 * written in place with MDB_RESERVE. Returns an LMDB code. */
int store_put_msg(MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, enum store_kind kind,
                  const ProtobufCMessage *msg);
/* The same for a payload that is no message (SK_RING). */
int store_put_raw(MDB_txn *txn, MDB_dbi dbi, const MDB_val *key, enum store_kind kind,
                  const void *payload, size_t n);
/* The header of a record of the expected kind, and its CRC unless !crc:
 * 0, or -EBADMSG with *why saying what is wrong. */
int store_check_hdr(const MDB_val *key, const MDB_val *val, enum store_kind kind, bool crc,
                    char *why, size_t whylen);
/* Check the header and CRC of a record of the expected kind and unpack it.
 * Returns the message (free with protobuf_c_message_free_unpacked) or NULL
 * with *why saying what is wrong. */
ProtobufCMessage *store_unpack(const MDB_val *key, const MDB_val *val, enum store_kind kind,
                               char *why, size_t whylen);
/* The same with the message's memory from a (NULL: malloc); with !crc the
 * CRC is not computed (a record validated under the same lock). */
ProtobufCMessage *store_unpack_with(const MDB_val *key, const MDB_val *val,
                                    enum store_kind kind, ProtobufCAllocator *a, bool crc,
                                    char *why, size_t whylen);

/* The schema version: 1 or 2; 0 for an empty database. Refuses (-ENOKEY,
 * -ENOTSUP) a missing version on a non-empty database or an unknown one. */
int store_read_version(MDB_txn *txn, MDB_dbi dbi, int *version, const char *file,
                       char *err, size_t errlen);
/* ASCII value of the version key. */
void store_version_val(int version, MDB_val *val, char *buf);

/* A protobuf string field, "" when absent. */
static inline const char *store_str(const char *s)
{
    return s ? s : "";
}

static inline bool store_key_eq(const MDB_val *a, const MDB_val *b)
{
    return a->mv_size == b->mv_size && !memcmp(a->mv_data, b->mv_data, a->mv_size);
}

/* (store_scan.c) Every record of a database of schema `version`, decoded and checked on its
 * own (header, CRC, key matching the content, valid type, names and values),
 * handed to rec(); the meta record fills meta and sets has_meta. rec returns
 * 1 when it keeps msg (it frees it later), 0 when scan may free it, or a
 * negative errno to stop (having written its own message to err, if any).
 * Refusals as store.h (-EBADMSG, -EUCLEAN). With `trusted` (the load, after
 * the whole store was validated under the lock it holds) records are only
 * decoded: no CRC, no per-record check. `alloc`: the messages' memory (NULL:
 * malloc). */
struct store_scan {
    int (*rec)(void *arg, enum store_kind kind, ProtobufCMessage *msg);
    void *arg;
    ProtobufCAllocator *alloc;
    bool trusted;
    struct store_meta meta;
    bool has_meta;
    bool has_ring_ctl;               /* the ring's control (written before any commit) */
};
int store_scan(MDB_txn *txn, MDB_dbi dbi, int version, struct store_scan *s,
               const char *file, char *err, size_t errlen);

/* The registry's records from and to protobuf. The store_* structs point
 * into the message (or its strings): valid while the message lives. */
void store_plugin_from_pb(const Csifs__Store__Plugin *m, struct store_plugin *p);
void store_inst_from_pb(const Csifs__Store__Instance *m, struct store_inst *i);
/* fp: storage for the fingerprint submessage (left out when all empty). */
void store_inst_to_pb(const struct store_inst *i, Csifs__Store__Instance *m,
                      Csifs__Store__Fingerprint *fp);

/* store_ring.c: a ring record put in a commit's write txn at *next,
 * which moves on (the caller keeps it once the txn commits), r->pos set;
 * the record at pos dropped (none when its slot holds another); a ring or
 * ring control record checked on its own (store_scan: -EBADMSG); the next
 * position, read at open; the control record ("ring": nonce and base of
 * the connection the ring serves; all 0 when there is none) read and
 * written; the lookup (as reg_ring_find, for cur's nonce and base). LMDB
 * codes but where said. */
int store_ring_put(MDB_txn *txn, MDB_dbi dbi, uint64_t nonce, uint64_t *next,
                   struct store_ring_rec *r);
int store_ring_drop(MDB_txn *txn, MDB_dbi dbi, uint64_t pos);
int store_ring_check(const MDB_val *key, const MDB_val *val, char *why, size_t whylen);
int store_ring_next(MDB_txn *txn, MDB_dbi dbi, uint64_t *next);
int store_ring_ctl_get(MDB_txn *txn, MDB_dbi dbi, struct store_ring *ctl);
int store_ring_ctl_put(MDB_txn *txn, MDB_dbi dbi, const struct store_ring *ctl);
int store_ring_get(MDB_txn *txn, MDB_dbi dbi, const struct store_ring *cur,
                   const struct reg_ring_key *k, int *rc);

/* An LMDB or system error as a negative errno: the refusal codes of store.h
 * for LMDB's corruption codes, -ENOSPC for a full map, else -errno or -EIO. */
int store_errno(int mdb_rc);
/* Walk data.mdb with pread before LMDB maps it (store_pages.c): both meta
 * pages as LMDB checks them, every page reachable from the newest one within
 * the file and well formed, and no page the meta counts missing from the end
 * of the file unless the free list holds it. */
int store_check_pages(const char *file, char *err, size_t errlen);
/* Validate the store in dir read-only (store_check.c); *version as
 * store_read_version, 0 also when there is no data.mdb yet. */
int store_validate(const char *dir, int *version, char *err, size_t errlen);
/* The first write transaction store_open makes on the store in dir (the
 * version key of an empty one, the upgrade of a version 1 one after a
 * compacting copy to /dev/null, the meta record put back on a version 2
 * one), aborted: data.mdb is left unchanged (LMDB's lock.mdb is made, as
 * store_open makes it). For a store that store_validate accepted, run in a
 * child (store_check_forked): LMDB asserts on its write path. */
int store_try_write(const char *dir, char *err, size_t errlen);
/* store_forked.c: check(dir, err, errlen) in a child process; its rc and
 * message, or -EUCLEAN naming data.mdb and `doing` ("reading it") when a
 * signal killed the child. */
typedef int store_check_fn(const char *dir, char *err, size_t errlen);
int store_run_forked(store_check_fn *check, const char *doing, const char *dir, char *err,
                     size_t errlen);
/* store_file.c, the bottom layer (lock, fsync, dir).
 * flock <dir>/csifs.lock: excl (store_open) creates it and writes our pid;
 * shared (store_check) only tests it, and *fd stays -1 when there is no lock
 * file. -EBUSY "state dir in use by pid N" when another process holds it. */
int store_lock(const char *dir, bool excl, int *fd, char *err, size_t errlen);
/* fsync a directory or file by path. */
int store_fsync_path(const char *path, bool dir);
/* mkdir dir 0700 unless it exists (a new entry made durable); -ENOTDIR. */
int store_make_dir(const char *dir, char *err, size_t errlen);

/* store_upgrade.c: back up and upgrade a version 1 store opened read-write;
 * store_upgrade_txn is its write, in txn (not committed): 0 or a refusal
 * with its message. */
int store_upgrade_v1(MDB_env *env, MDB_dbi dbi, const char *dir, char *err, size_t errlen);
int store_upgrade_txn(MDB_txn *txn, MDB_dbi dbi, const char *file, char *err, size_t errlen);

#endif
