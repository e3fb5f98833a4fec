/* Internal to registry/: the one mutation path, a group-commit pipeline.
 *
 *   1. A caller takes wlock and validates against the writers' view: the
 *      model plus every mutation queued and not yet applied (the w_* fields
 *      of model.h, and mut_find_plugin/mut_find_inst for queued adds). It
 *      allocates everything apply will need, marks the writers' view, and
 *      calls mut_submit(), which reserves index room and queues it.
 *   2. A leader, one at a time (reg->leading; the last subscribers of one
 *      that let go may run beside the next, step 3): the registry's commit
 *      thread (started with the first mutation), or a queued caller that
 *      offered to lead (reg_lead_offer) and found none, in reg_lead. It
 *      takes every queued mutation, releases wlock, builds one LMDB transaction
 *      (build_txn, the one place a batch's transaction is made: one record
 *      per object, later mutations of the same object patch its record),
 *      commits it (one fsync), then under wlock and one write lock of the
 *      model applies the batch in order and appends its events (not yet
 *      readable).
 *   3. With no registry lock held it calls the subscribers for each change,
 *      in commit order, publishes the batch's events (mut_publish), then
 *      answers every mutation of the batch: a queued one (reg_reply_set)
 *      has its kind's fin and its reply called on the leader's thread,
 *      still with no registry lock held, before the reg_subscribe_after
 *      subscribers run; a waiting caller is woken after them. The leader
 *      leads again while anything is queued; with nothing queued after its
 *      batch's events were published it lets go before the answers, so
 *      that a caller's next mutation is led at once and an answer knows its
 *      thread commits nothing more (reg_leads). Another leader may then
 *      commit and apply the next batch before these answers go out (an
 *      answer that reads the registry sees it; the kernel keeps FUSE calls
 *      on the same name apart until answered), its subscribers after these
 *      ones: reg->notify_mu keeps the batches' subscribers in commit order.
 * A failed commit fails its batch and every mutation queued behind it (they
 * were validated against it): their marks are undone, nothing is applied.
 * A mutation that needs no commit (a probe result changing only health,
 * reason and history) is applied at once by mut_apply_now.
 *
 * apply cannot fail: the objects and strings it links are allocated at
 * validation, the indexes have room reserved, and a mutation emits at most
 * MUT_MAX_CHANGES changes (asserted).
 *
 * mutate.c is the pipeline (mut_new, mut_submit, the commit thread,
 * mut_apply_now, mut_publish); mutate_apply.c what a kind calls: at
 * validation, room in the store (mut_check_room) and the writers' view
 * (mut_find_*); mut_plan_current; at apply, mut_emit, mut_set_health,
 * mut_update_current and mut_inst_rec (which build_txn also uses).
 */
#ifndef CSIFS_MUTATE_H
#define CSIFS_MUTATE_H

#include <pthread.h>

#include "registry/backend.h"
#include "registry/model.h"

#define MUT_MAX_CHANGES 4            /* probe: history, fingerprint, health, current */
#define MUT_EST_REC (4 * 4096 + 256) /* store bytes a record may cost (pages copied) */

struct mut;
struct mut_kind {
    /* Patch r, the record of m->obj in this txn (NULL: writes none). */
    void (*rec)(struct mut *m, struct store_rec *r);
    void (*apply)(struct reg *reg, struct mut *m);
    /* Undo the marks of the writers' view (NULL: none). */
    void (*undo)(struct reg *reg, struct mut *m);
    /* Once its outcome rc is known, with no lock held: free what the
     * mutation no longer needs (NULL: nothing). Only for mut_new's. */
    void (*fin)(struct reg *reg, struct mut *m, int rc);
};

struct mut {
    const struct mut_kind *k;
    void *ctx;
    struct obj *obj;                 /* the object whose record it writes */
    bool add;                        /* obj is new: linked by apply */
    uint64_t est;                    /* store bytes it may add; 0 for removals */
    struct store_rec rec;            /* obj's record, when first in its txn */
    /* The plugin whose current this mutation moves, found at validation
     * (mut_plan_current): its record, with the new current, joins the txn. */
    struct reg_caller who;           /* the caller's, at submit */
    struct store_ring_rec ring;      /* the request it answers (reg_ring_set), at submit */
    struct plugin *cur_p;
    uint64_t cur_to;
    struct plugin *recur;            /* whose current its apply recomputes (counted
                                      * in its w_recur while queued) */
    struct store_rec cur_rec;
    struct reg_change ch[MUT_MAX_CHANGES];
    int nch;
    /* queue state, under wlock */
    int rc;
    bool done, heap;                 /* heap: made by mut_new, freed by the path */
    pthread_cond_t cv;               /* a waiting caller's (no reply) */
    reg_reply_fn reply;              /* a queued caller's (reg_reply_set) */
    bool replied;                    /* reply called (reply_queued): only freed now */
    void *reply_arg;
    struct mut *next;
};

/* A mutation of kind k with ctx_size bytes of zeroed context (m->ctx), or
 * NULL. Whoever refuses it before mut_submit frees it with mut_free
 * (k->fin is not called then); mut_submit owns it. */
struct mut *mut_new(const struct mut_kind *k, size_t ctx_size);
void mut_free(struct mut *m);

/* -ENOSPC when the store has no room for est more bytes of additions
 * (the reserve of DESIGN 7 is for removals). Called with wlock held. */
int mut_check_room(struct reg *reg, uint64_t est);
/* Bytes an instance's record may take in the store, for est. */
uint64_t mut_est_inst(const struct inst *i, size_t extra);

/* The writers' view of a plugin or instance by name, queued adds included,
 * queued deletions excluded. wlock held. */
struct plugin *mut_find_plugin(struct reg *reg, enum reg_type type, const char *name);
struct inst *mut_find_inst(struct reg *reg, struct plugin *p, const char *alloc);
/* The writers' view of an object by seq (queued deletions excluded). */
struct obj *mut_find_seq(struct reg *reg, uint64_t seq);

/* The ring key this thread set (reg_ring_set), into r (unique 0: none),
 * and cleared: at submit. */
void mut_ring_take(struct store_ring_rec *r);

/* Queue m (validated, wlock held). Returns with wlock RELEASED. When m is
 * mut_new's and this thread set a reply (reg_reply_set): REG_QUEUED at once,
 * the reply to come. Otherwise waits: 0 once applied and notified, or the
 * commit's error (nothing of m applied, its undo run) or -ENOMEM (index
 * room; undo run); a mut_new's m has had its fin and is freed then. */
int mut_submit(struct reg *reg, struct mut *m);
/* Stop the commit thread once it has answered every queued mutation (at
 * reg_close; nothing may be submitted after). */
void mut_stop(struct reg *reg);
/* Apply m now without a commit (wlock held; returns with it released), then
 * notify. */
void mut_apply_now(struct reg *reg, struct mut *m);

/* Record a change and append its event (from apply, under the write lock).
 * kind: the event kind; kv and reason as ev_append; attr for REG_C_ATTR.
 * Returns the change, for the fields only its kind has. */
struct reg_change *mut_emit(struct reg *reg, struct mut *m, enum reg_change_kind ck,
              const struct obj *o, const char *kind, const struct ev_kv *kv,
              const char *reason, enum reg_attr attr);
/* Set health, ready and reason (taking ownership of reason); emits `health`
 * when any of them changed. */
void mut_set_health(struct reg *reg, struct mut *m, struct inst *i,
                    enum reg_health h, bool ready, char *reason);
/* Where p's current goes (DESIGN 2): the newest ready instance that is
 * healthy; with none, it stays (or, when it is `gone` or there is none, the
 * newest ready one); while an instance restored at start awaits its first
 * probe, it holds. `gone` as removed. w: on the writers' view (queued
 * deletions removed too), else on memory. */
struct inst *mut_pick_current(const struct plugin *p, const struct inst *gone, bool w);
/* At validation (wlock): when the change moves p's current, note it in m so
 * that the plugin's record joins the commit (each move is committed).
 * Returns whether it moves. It plans on the writers' view (w_current,
 * w_health, ...: memory plus the queued changes of p's current, in queue
 * order, which is apply order) and marks it with this change, so that a
 * move apply makes is the move committed (a plan on memory alone missed
 * the queued ones: memory and store then disagreed on current). A probe
 * behind such a change is queued, never applied at once. */
bool mut_plan_current(struct mut *m, struct plugin *p, const struct inst *gone,
                      const struct inst *ov, enum reg_health h, bool ready);
/* Recompute p->current (mut_pick_current, `gone` as there); emits
 * `current` if it moved. */
void mut_update_current(struct reg *reg, struct mut *m, struct plugin *p,
                        const struct inst *gone);
/* i has had its first probe since the restore (or lost its socket): it
 * no longer holds its plugin's current. */
void mut_probed(struct inst *i);

/* Fill a txn record with an instance's persisted fields as they are now. */
void mut_inst_rec(const struct inst *i, struct store_rec *r);

/* Publish the events with seqs from..to-1, appended by one apply (under
 * wlock, so ranges come in seq order), once the subscribers for their
 * changes ran: readers see them only then (events.h), in seq order (waits
 * for a concurrent earlier range). Then wakes the events thread if a
 * reader waits (ev_watch). No lock held. from == to (no event): nothing. */
void mut_publish(struct reg *reg, uint64_t from, uint64_t to);

/* Health table (health.c): the next state for a probe result, from i as the
 * writers' view has it (its plugin's w_recur: the queued probes applied). */
struct health_next {
    enum reg_health health;
    bool ready, was_healthy, set_fp;
    char reason[256];                /* the instance's reason */
    enum reg_outcome probe_outcome;  /* this probe's own outcome and reason, */
    char probe_reason[256];          /* for history (DESIGN 3) */
};
int health_next(const struct reg *reg, const struct inst *i, const struct reg_probe *p,
                struct health_next *out);
/* Append a probe to the instance's history; i->hist must be allocated and
 * *spare hold a reason with n->probe_reason's text (model_reason_new) (taken when that text is
 * not interned yet: then *spare becomes NULL). */
void health_hist_add(struct reg *reg, struct inst *i, const struct reg_probe *p,
                     const struct health_next *n, struct hreason **spare);

#endif
