/* The state memfd (DESIGN 13): what a successor needs beyond LMDB, kept in
 * shared memory that fs/ writes in place (never a syscall per request):
 *   a header (magic, layout version, size, the connection nonce that the
 *   store's ring of committed requests is keyed by), the INIT request as
 *   the kernel sent it, the open-file table (fs.h struct fs_saved_fh), the
 *   pending links (fs/pending.h), the health of every instance (registry.h
 *   struct reg_keep_slot: reg_keep). A handed memfd of another layout is
 *   refused (the connection is then mounted afresh).
 * It outlives the process in the service manager's fd store ("state"). */
#ifndef CSIFS_TAKEOVER_STATE_H
#define CSIFS_TAKEOVER_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "fs/fs.h"

struct tk_state {
    int fd;                          /* the memfd, -1 none */
    void *map;
    size_t size;
};

/* A new, zeroed state memfd. 0 or a negative errno. */
int tk_state_make(struct tk_state *s);
/* Map a handed state memfd (fd is s's from then on, closed on failure):
 * 0, or a negative errno with why (not ours, another layout, too short). */
int tk_state_adopt(struct tk_state *s, int fd, char *why, size_t cap);
/* The parts of it fs_handover uses; takeover: they hold a predecessor's. */
void tk_state_handover(struct tk_state *s, struct fs_handover *h, bool takeover);
/* The connection nonce in it (NULL without a map): 0 until set. */
uint64_t *tk_state_nonce(struct tk_state *s);
/* The registry keeps its health in the state from now on (reg_keep):
 * after the store's restore, before serving and before the prober starts;
 * takeover: the predecessor's health is taken (logged). A failure is
 * logged: the instances concerned show "restored, not yet re-probed". */
void tk_state_keep(struct tk_state *s, struct reg *reg, bool takeover);
void tk_state_close(struct tk_state *s);

#endif
