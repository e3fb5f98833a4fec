/* The ring of committed requests (registry.h, DESIGN 13): the key of the
 * request a FUSE thread is about to submit, taken by the mutation it
 * submits (mut_ring_take), and the look-up of a resent one. */
#include "registry/mutate.h"

#include <errno.h>

static _Thread_local struct reg_ring_key ring_key;   /* unique 0: none */

void reg_ring_set(const struct reg_ring_key *k)
{
    if (k)
        ring_key = *k;
    else
        ring_key.unique = 0;
}

void mut_ring_take(struct store_ring_rec *r)
{
    r->key.unique = 0;
    r->pos = UINT64_MAX;             /* none until a commit holds it */
    if (!ring_key.unique)
        return;
    r->key = ring_key;
    r->rc = 0;                       /* a mutation commits, or fails with its batch */
    ring_key.unique = 0;
}

int reg_ring_find(struct reg *reg, const struct reg_ring_key *k, int *rc)
{
    const struct reg_backend *be = reg->opts.backend;
    if (!be || !be->ring_find)
        return -ENOTSUP;
    return be->ring_find(be->ctx, k, rc);
}
