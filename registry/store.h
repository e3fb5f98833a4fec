/* store: the LMDB implementation of the registry's backend (backend.h;
 * DESIGN section 7), and the checks and upgrade of a state dir.
 *
 * The registry hands the backend the records of a batch of mutations to
 * commit, one transaction and one fsync per batch (group commit: a batch may
 * hold one mutation or many), and reads them all back at open. A commit that
 * fails changes nothing and returns -ENOSPC (disk or map full) or -EIO.
 */
#ifndef CSIFS_STORE_H
#define CSIFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry/backend.h"

/* ---- the LMDB store (store.c, store_check.c, store_upgrade.c) ----
 *
 * An LMDB environment in a state directory (created 0700; map size 1 GiB; no
 * MDB_WRITEMAP; mdb_reader_check at open) plus <dir>/csifs.lock, flock()ed
 * and holding the owner's pid, so that one process at a time uses a state
 * dir. Keys and records: proto/registry.proto. Every record carries a CRC32.
 *
 * Opening validates the whole store read-only first (store_check, or the
 * caller did: STORE_CHECKED), so a refused store's data.mdb is left
 * byte-for-byte untouched. Refusals, each with a message in err naming the
 * file and the problem:
 *   -EBUSY            another process holds the state dir ("<dir>/csifs.lock:
 *                     state dir in use by pid N")
 *   -ENOTSUP          unknown schema version (neither 1 nor 2)
 *   -ENOKEY           the version key is missing on a non-empty store
 *   -EUCLEAN          LMDB structure damaged: MDB_INVALID, MDB_CORRUPTED,
 *                     MDB_PAGE_NOTFOUND, a bad page found by our own walk,
 *                     or (store_check_forked) LMDB killed by a signal
 *   -EPROTONOSUPPORT  MDB_VERSION_MISMATCH: LMDB file format of another build
 *   -ENODATA          data.mdb is shorter than its meta page says (truncated)
 *   -EBADMSG          a record fails its CRC32, does not decode, or does not
 *                     fit the layout (bad key, name, dangling instance...)
 * Other failures are the system's negative errno (-EACCES, -ENOTDIR, -EIO...).
 *
 * A version 1 store is upgraded to version 2 at open, in one write
 * transaction, after a compacted copy to <dir>/backup-v1-<YYYYMMDDTHHMMSSZ>/.
 */
#define STORE_NOSYNC 1u              /* commit without fsync: benchmarks only */
/* The caller validated dir with store_check_forked just before (csifs's
 * start-up): store_open does not read every record a second time. */
#define STORE_CHECKED 2u
#define STORE_VERSION 2              /* the schema version this code writes */

struct store;

/* Open (creating if needed) the store in dir for this process. err (may be
 * NULL) receives a one-line message on failure. */
int store_open(struct store **out, const char *dir, unsigned flags, char *err,
               size_t errlen);
void store_close(struct store *st);
/* The registry's view of the store (reg_opts.backend); valid until close.
 * Its commit returns 0 once durable, or -ENOSPC (map or disk full) or -EIO
 * with nothing written. */
const struct reg_backend *store_backend(struct store *st);
/* Validate dir as store_open would, read-only: never creates or writes a
 * file (the lock is tested with a shared flock). 0 when dir or its data.mdb
 * does not exist yet. Returns 0 or a refusal above. */
int store_check(const char *dir, char *err, size_t errlen);
/* store_check in a forked child, for a single-threaded caller (csifs before
 * any thread), then in the same child a trial of the first write transaction
 * store_open makes, aborted (data.mdb unchanged; LMDB's lock.mdb is made):
 * a child killed by a signal (LMDB crashing or failing an assertion on
 * damage the page walk missed) is -EUCLEAN, naming data.mdb. */
int store_check_forked(const char *dir, char *err, size_t errlen);
/* The lock file also names what its holder mounted (DESIGN 7), so that a
 * restart can recover a connection its dead holder left wedged. */
int store_lock_note(struct store *st, const char *mount, unsigned conn);
struct store_holder {
    long pid;                        /* 0 when not written yet */
    unsigned conn;                   /* FUSE connection id (minor of st_dev), 0: none */
    char mount[4096];
};
/* 1 when dir's lock is held (tested with a shared flock), 0 when free
 * (*h then names the last holder), or a negative errno (-ENOENT: no lock
 * file). */
int store_lock_holder(const char *dir, struct store_holder *h);
/* ---- the ring of committed requests (DESIGN 13, "Exactly once") ----
 *
 * Every commit also records each of its mutations that answers a FUSE
 * request (registry.h reg_ring_set), in the same transaction: one record of
 * 120 bytes per mutation, kept until the commit after its request's answer
 * (backend.h ring_answered), at most the last STORE_RING_SIZE.
 * Keys in the main database, beside the registry's:
 *   "r/" + slot (2 bytes, big endian), slot = position % STORE_RING_SIZE:
 *       4 bytes; a record takes the slot of the one STORE_RING_SIZE before
 *       it. Value: the record header (store_int.h, kind 4), then 112 bytes
 *       in the machine's byte order (registry/store_ring.c struct
 *       ring_val): position (u64, counting, never reset), connection nonce,
 *       FUSE unique (FUSE_UNIQUE_RESEND cleared), the request's nodeid (the
 *       parent dir, or the file written), seq of the object written (u64
 *       each), FUSE opcode (u32), outcome (i32: 0, or the errno answered),
 *       name (64 bytes, NUL-padded; "" when none). A mkdir's entry is
 *       rebuilt from the registry by its parent and name.
 *   "ring": the control, header (kind 5) then the nonce of the connection
 *       the ring serves and its base (u64 each): the position of its first
 *       record. Records before the base are another connection's.
 * Checked with every record at open (header, CRC, size, slot); the load
 * skips them. A lookup matches only a record of the current nonce at or
 * past the base.
 *
 * store_ring_start, before any commit of the process: commits write nonce
 * into their records, and reg_ring_find matches only this connection's.
 * fresh (a new FUSE connection, whose uniques start again), or a nonce
 * that is not the control's: the ring is emptied, by moving the base to
 * the next position (one small write; no record is deleted, so a restart
 * frees no room that additions could take on a full store: DESIGN 7). A
 * takeover (its nonce is the control's) keeps the ring and its base, and
 * numbers its records from the base at least (the newest record may have
 * been dropped). 0 or -ENOSPC/-EIO. */
#define STORE_RING_SIZE 4096
int store_ring_start(struct store *st, uint64_t nonce, bool fresh);
/* CRC-32 (IEEE 802.3, as zlib's crc32): crc 0 to start, chain by passing
 * the previous result. */
uint32_t store_crc32(uint32_t crc, const void *buf, size_t len);

#endif
