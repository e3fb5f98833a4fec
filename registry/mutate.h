/* Internal to registry/: the one mutation path.
 *
 *   lock wlock; validate (reads the model: only wlock holders change it);
 *   build the txn; mut_run(): commit -> wrlock, apply, append events ->
 *   unlock -> notify subscribers; unlock wlock.
 *
 * apply must not fail: whatever it needs is allocated during validation.
 */
#ifndef CSIFS_MUTATE_H
#define CSIFS_MUTATE_H

#include "registry/model.h"
#include "registry/store.h"

#define MUT_MAX_CHANGES 8

struct mut {
    struct store_txn txn;
    bool commit;                     /* needs the backend */
    unsigned new_seqs;               /* seqs this mutation takes from next_seq */
    struct reg_change ch[MUT_MAX_CHANGES];
    int nch;
};

typedef void (*mut_apply_fn)(struct reg *reg, struct mut *m, void *ctx);

/* Commit m->txn if m->commit (plus the meta), then apply and notify.
 * Called with wlock held after validation; returns 0 or the commit's error. */
int mut_run(struct reg *reg, struct mut *m, mut_apply_fn apply, void *ctx);

/* Record a change and append its event (from apply, under the write lock).
 * kind: the event kind; kv and reason as ev_append. */
void mut_emit(struct reg *reg, struct mut *m, enum reg_change_kind ck,
              const struct obj *o, const char *kind, const struct ev_kv *kv,
              const char *reason);
/* Set health, ready and reason (taking ownership of reason); emits `health`
 * when any of them changed. */
void mut_set_health(struct reg *reg, struct mut *m, struct inst *i,
                    enum reg_health h, bool ready, char *reason);
/* Recompute p->current; emits `current` if it moved. */
void mut_update_current(struct reg *reg, struct mut *m, struct plugin *p);

/* Fill a txn record with an instance's persisted fields as they are now. */
void mut_inst_rec(const struct inst *i, struct store_rec *r);

/* Health table (health.c): the next state for a probe result. */
struct health_next {
    enum reg_health health;
    bool ready, was_healthy, set_fp;
    char reason[256];
};
int health_next(const struct reg *reg, const struct inst *i, const struct reg_probe *p,
                struct health_next *out);
/* Append a probe to the instance's history; i->hist must be allocated. */
void health_hist_add(struct inst *i, const struct reg_probe *p, const char *reason);

#endif
