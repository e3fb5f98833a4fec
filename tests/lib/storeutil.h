/* Helpers for the tests of the LMDB store: a store with a registry on it,
 * registry snapshots as text, file checksums, raw LMDB edits. */
#ifndef CSIFS_STOREUTIL_H
#define CSIFS_STOREUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry/registry.h"
#include "registry/store.h"

struct su {
    const char *dir;                 /* the state dir */
    unsigned flags;                  /* store_open flags */
    struct store *st;
    struct reg *reg;
    char err[512];                   /* store_open's message */
};

/* store_open then reg_open on it; returns the first error (store's message
 * in s->err). */
int su_open(struct su *s);
/* reg_close and store_close (either may be unset). */
void su_close(struct su *s);

/* Create the plugin unless it exists, then register alloc. Returns the
 * instance's seq (> 0) or a negative errno. */
int64_t su_register(struct reg *reg, enum reg_type type, const char *plugin,
                    const char *alloc);
/* The seq of an instance, or a negative errno. */
int64_t su_inst(struct reg *reg, enum reg_type type, const char *plugin, const char *alloc);
/* Set the socket and feed a successful probe with a fingerprint (provider
 * "test.csi", nodeid "node-<alloc>"): the instance becomes healthy and ready. */
int su_make_ready(struct reg *reg, uint64_t inst, const char *socket);

/* Everything a restart must keep, as text (malloc'd): per type and plugin,
 * newest first, `current`, and each instance's ready, socket, mount_point;
 * with full also seqs, registration times and fingerprints. */
char *su_dump(struct reg *reg, bool full);

/* CRC32 of a whole file; 0 or a negative errno. */
int su_file_crc(const char *path, uint32_t *crc);
/* Write (val != NULL) or delete key in the environment in dir with plain
 * LMDB, as a damaged or foreign store would have it. 0 or an LMDB code. */
int su_raw_put(const char *dir, const char *key, const void *val, size_t len);

/* rel (a path from the top of the source tree) as found from the working
 * directory (make check runs at the top) or up from the binary
 * (build/tests/unit/): 0 or -ENOENT (out then holds rel). */
int su_source_path(const char *rel, char *out, size_t cap);
/* Copy the file from to a new file to (mode 0600): 0 or a negative errno. */
int su_copy_file(const char *from, const char *to);

#endif
