/* The mutation path shared by every registry change: the commit pipeline
 * of mutate.h (the queue, its leader and the commit thread, the answers).
 * What a mutation's kind calls at validation and apply is mutate_apply.c. */
#include "registry/mutate.h"
#include "base/counters.h"
#include "base/defaults.h"
#include "base/knobs.h"
#include "base/later.h"
#include "base/thread.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EV_BLOCK 65536          /* event seqs reserved per meta extension */
/* The store's room (mut_check_room) is measured after a commit at most
 * this often (a statvfs, two fstat and a read transaction); between, each
 * commit takes its batch's estimate off, and a mutation that finds too
 * little has it measured again. Disk used by others shows within this. */
#define MUT_ROOM_STALE_NS 1000000000LL

#ifdef CSIFS_TEST_OPTS
int reg_test_commit_delay_ms;
const char *reg_test_fail_commit;
unsigned reg_test_commits_held;

/* Test builds only: hold the commit, or fail it when the trigger file
 * exists (it is removed: one failure per file). */
static int test_hooks(void)
{
    int ms = __atomic_load_n(&reg_test_commit_delay_ms, __ATOMIC_RELAXED);
    if (ms > 0) {
        __atomic_add_fetch(&reg_test_commits_held, 1, __ATOMIC_RELEASE);
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    const char *f = reg_test_fail_commit;
    return f && unlink(f) == 0 ? -EIO : 0;
}
#else
static int test_hooks(void)
{
    return 0;
}
#endif

/* ---- the leader ---- */

struct subs {
    struct reg_sub s[8];
    int n;
};

static void copy_subs(struct reg *reg, struct subs *out)
{
    out->n = reg->nsubs;
    memcpy(out->s, reg->subs, sizeof(out->s));
}

/* Readers see a new current only now (struct plugin's shown): after the
 * subscribers of every change before it, its instance's health among them. */
static void show_current(struct reg *reg, const struct reg_change *c)
{
    pthread_rwlock_wrlock(&reg->lock);
    struct plugin *p = model_as_plugin(model_by_seq(reg, c->plugin));
    if (p)   /* c->to gone since (removed later in the batch): a later change shows the next */
        p->shown = model_as_inst(model_by_seq(reg, c->to));
    pthread_rwlock_unlock(&reg->lock);
}

/* m's changes to the subscribers of one side of the answer (after: the
 * reg_subscribe_after ones; else the others, and the new current shown). */
static void notify(struct reg *reg, const struct subs *subs, const struct mut *m, bool after)
{
    for (int c = 0; c < m->nch; c++) {
        if (!after && m->ch[c].kind == REG_C_CURRENT)
            show_current(reg, &m->ch[c]);
        for (int s = 0; s < subs->n; s++)
            if (subs->s[s].after == after)
                subs->s[s].fn(&m->ch[c], subs->s[s].arg);
    }
}

/* One record per object, in the order objects first appear in the batch;
 * and the ring's record of every mutation that answers a request. */
static void build_txn(struct mut *batch, struct store_txn *txn)
{
    struct store_rec *head = NULL, **tail = &head;
    struct store_ring_rec **ring = &txn->ring;
    for (struct mut *m = batch; m; m = m->next) {
        if (m->ring.key.unique) {
            m->ring.obj = m->obj ? m->obj->seq : 0;
            *ring = &m->ring;
            ring = &m->ring.next;
        }
        if (!m->k->rec || !m->obj)
            continue;
        struct store_rec *r = NULL;
        for (struct mut *e = batch; e != m && !r; e = e->next)
            if (e->obj == m->obj && e->rec.op != (enum store_op)-1)
                r = &e->rec;
        if (!r) {
            r = &m->rec;
            struct plugin *p = model_as_plugin(m->obj);
            if (p) {
                memset(r, 0, sizeof(*r));
                r->op = STORE_PUT_PLUGIN;
                r->u.plugin = (struct store_plugin){ .type = p->o.type, .name = p->o.name,
                                                     .seq = p->o.seq,
                                                     .registered_ns = p->o.registered_ns };
            } else {
                mut_inst_rec(model_as_inst(m->obj), r);
            }
            *tail = r;
            tail = &r->next;
        }
        m->k->rec(m, r);
        if (m->cur_p) {              /* its plugin's record, with the new current */
            struct plugin *p = m->cur_p;
            r = &m->cur_rec;
            memset(r, 0, sizeof(*r));
            r->op = STORE_PUT_PLUGIN;
            r->u.plugin = (struct store_plugin){ .type = p->o.type, .name = p->o.name,
                                                 .seq = p->o.seq,
                                                 .registered_ns = p->o.registered_ns,
                                                 .current = m->cur_to };
            *tail = r;
            tail = &r->next;
        }
    }
    *ring = NULL;
    txn->recs = head;
}

static void settle(struct reg *reg, struct mut *m, bool applied)
{
    reg->pend_links -= m->add;
    reg->pend_bytes -= m->est;
    struct inst *i = model_as_inst(m->obj);
    if (i)
        i->w_pend--;
    if (m->recur)
        m->recur->w_recur--;
    if (!applied && m->k->undo)
        m->k->undo(reg, m);
}

/* A caller's m (mut_submit) has its outcome rc: a mut_new's has its kind's
 * fin and is freed (no lock held). */
static void finish(struct reg *reg, struct mut *m, int rc)
{
    if (!m->heap)
        return;
    if (m->k->fin)
        m->k->fin(reg, m, rc);
    mut_free(m);
}

/* A queued caller's fin and reply (no lock held), once. Its request
 * answered, the ring's record of it is no longer needed (backend.h
 * ring_answered): a queued mutation answered 0 was committed, and its
 * record has a position (pos) if it had a request's key. */
static void reply_queued(struct reg *reg, struct mut *m, int rc)
{
    if (!m->reply || m->replied)
        return;
    if (m->k->fin)
        m->k->fin(reg, m, rc);
    m->reply(m->reply_arg, rc);
    m->replied = true;
    const struct reg_backend *be = reg->opts.backend;
    if (rc == 0 && m->ring.pos != UINT64_MAX && be && be->ring_answered)
        be->ring_answered(be->ctx, m->ring.pos);
}

/* Answer every mutation of list with rc (wlock held on entry and return):
 * wake the waiting callers; then, with wlock released, answer the queued
 * ones not answered yet (reply_queued), in order, and free them. */
static void answer(struct reg *reg, struct mut *list, int rc)
{
    struct mut *queued = NULL, **tail = &queued;
    for (struct mut *m = list, *next; m; m = next) {
        next = m->next;              /* a woken caller may free m */
        m->rc = rc;
        if (m->reply) {
            m->next = NULL;
            *tail = m;
            tail = &m->next;
        } else {
            m->done = true;
            pthread_cond_signal(&m->cv);
        }
    }
    if (!queued)
        return;
    pthread_mutex_unlock(&reg->wlock);
    for (struct mut *m = queued, *next; m; m = next) {
        next = m->next;
        reply_queued(reg, m, rc);
        mut_free(m);
    }
    pthread_mutex_lock(&reg->wlock);
}

/* Callers answered together come back together: after a batch of n, the
 * commit thread waits up to MUT_GATHER_US for n queued mutations (released
 * wlock) rather than committing the first one alone. A lone caller never
 * waits. */
static void gather(struct reg *reg)
{
    size_t want = reg->last_batch;
    if (want < 2 || reg->qlen >= want)
        return;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_nsec += MUT_GATHER_US * 1000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    reg->gather = want;
    while (reg->qlen < want &&
           pthread_cond_timedwait(&reg->gather_cv, &reg->wlock, &dl) == 0)
        ;
    reg->gather = 0;
}

/* csifs_mutations_total (base/counters.h): what a mutation was, by the first
 * change it made (a probe result: by whether it committed a fingerprint or
 * readiness). */
static const enum cnt_mut by_change[] = {
    [REG_C_PLUGIN_ADD] = CNT_M_MKDIR, [REG_C_INST_ADD] = CNT_M_MKDIR,
    [REG_C_PLUGIN_DEL] = CNT_M_RMDIR, [REG_C_INST_DEL] = CNT_M_RMDIR,
    [REG_C_SOCKET] = CNT_M_SOCKET, [REG_C_ATTR] = CNT_M_ATTR,
    [REG_C_HEALTH] = CNT_M_PROBE, [REG_C_FINGERPRINT] = CNT_M_FINGERPRINT,
    [REG_C_CURRENT] = CNT_M_PROBE, [REG_C_HISTORY] = CNT_M_PROBE,
};

static void count_mutation(const struct reg_change *ch, int nch, bool commit)
{
    if (nch <= 0)
        return;
    enum cnt_mut op = by_change[ch[0].kind];
    if (op == CNT_M_PROBE && commit) {
        op = CNT_M_READY;
        for (int k = 0; k < nch; k++)
            if (ch[k].kind == REG_C_FINGERPRINT)
                op = CNT_M_FINGERPRINT;
    }
    cnt_add(&cnt.mutations[op], 1);
}

static void let_go(struct reg *reg);
static _Thread_local bool leads;     /* this thread leads (reg_leads) */

bool reg_leads(void)
{
    return leads;
}

/* Commit and apply every queued mutation: wlock held on entry and return.
 * True when it let go of the lead (nothing was queued once its events were
 * published): its answers and reg_subscribe_after subscribers then ran
 * while the next caller could lead. */
static bool lead(struct reg *reg)
{
    gather(reg);
    struct mut *batch = reg->qhead;
    reg->qhead = NULL;
    reg->qtail = &reg->qhead;
    reg->inflight = batch;
    size_t nb = reg->qlen;
    reg->qlen = 0;
    reg->last_batch = nb;
    const struct reg_backend *be = reg->opts.backend;
    /* The meta only when a bound moves: the batch's objects took their
     * seqs at validation (below next_seq), its events need ev_need. */
    struct store_txn txn = { .meta = { reg->seq_reserved, reg->ev_reserved }, .keep_meta = true };
    if (reg->next_seq > reg->seq_reserved) {
        txn.meta.next_seq = reg->next_seq + REG_SEQ_BLOCK;
        txn.keep_meta = false;
    }
    uint64_t ev_need = ev_next_seq(reg->ring) + (nb + 64) * MUT_MAX_CHANGES;
    if (ev_need + EV_BLOCK / 2 >= reg->ev_reserved) {
        txn.meta.ev_reserved = ev_need + EV_BLOCK;
        txn.keep_meta = false;
    }
    struct subs subs;
    copy_subs(reg, &subs);
    uint64_t est = 0;
    for (struct mut *m = batch; m; m = m->next)
        est += m->est;
    int64_t t = csifs_mono_ns();
    bool measure = t - reg->room_ns >= MUT_ROOM_STALE_NS;
    pthread_mutex_unlock(&reg->wlock);

    int rc = 0;
    uint64_t room = 0;
    bool room_known = false;
    if (be) {
        rc = test_hooks();
        build_txn(batch, &txn);
        csifs_later_flush_due(t);    /* held by this thread's earlier batches */
        if (rc == 0)
            rc = be->commit(be->ctx, &txn);
        room_known = (measure || rc < 0) && be->room && be->room(be->ctx, &room) == 0;
    }

    pthread_mutex_lock(&reg->wlock);
    struct mut *behind = NULL;
    uint64_t ev0 = 0, ev1 = 0;
    if (rc == 0) {
        pthread_rwlock_wrlock(&reg->lock);
        ev0 = ev_next_seq(reg->ring);
        for (struct mut *m = batch; m; m = m->next)
            m->k->apply(reg, m);
        ev1 = ev_next_seq(reg->ring);
        pthread_rwlock_unlock(&reg->lock);
        reg->ev_reserved = txn.meta.ev_reserved;
        reg->seq_reserved = txn.meta.next_seq;
    } else {
        /* Validated against the failed batch: they fail with it. */
        behind = reg->qhead;
        reg->qhead = NULL;
        reg->qtail = &reg->qhead;
        reg->qlen = 0;
    }
    for (struct mut *m = batch; m; m = m->next)
        settle(reg, m, rc == 0);
    for (struct mut *m = behind; m; m = m->next)
        settle(reg, m, false);
    if (room_known) {
        reg->room = room;
        reg->room_known = true;
        reg->room_ns = t;
    } else if (rc == 0) {            /* at most what the batch took */
        reg->room = reg->room > est ? reg->room - est : 0;
    }
    reg->inflight = NULL;
    answer(reg, behind, rc);
    bool gone = false;
    if (rc == 0) {
        pthread_mutex_unlock(&reg->wlock);
        pthread_mutex_lock(&reg->notify_mu);    /* after the batch before's last subscriber */
        for (struct mut *m = batch; m; m = m->next) {
            count_mutation(m->ch, m->nch, true);
            notify(reg, &subs, m, false);
        }
        mut_publish(reg, ev0, ev1);
        /* With nothing queued the lead is let go before the answers: the
         * caller's next mutation is led at once, not after these last
         * subscribers, and an answer knows that its thread commits nothing
         * more (reg_leads). The FUSE callers first: the prober's wake-up
         * and the like can come after (reg_subscribe_after). */
        pthread_mutex_lock(&reg->wlock);
        if (!reg->qhead) {
            gone = true;
            reg->notifying++;
            let_go(reg);
        }
        pthread_mutex_unlock(&reg->wlock);
        for (struct mut *m = batch; m; m = m->next)
            reply_queued(reg, m, 0);
        for (struct mut *m = batch; m; m = m->next)
            notify(reg, &subs, m, true);
        pthread_mutex_unlock(&reg->notify_mu);
        pthread_mutex_lock(&reg->wlock);
    }
    answer(reg, batch, rc);
    if (gone && --reg->notifying == 0)   /* after its last use of batch and reg */
        pthread_cond_broadcast(&reg->idle_cv);
    return gone;
}

/* Lead every queued batch, then let go (wlock held on entry and return):
 * the commit thread's turn, or a thread's that took the lead at submit. A
 * mutation queued while a leader leads is its, without a wake-up. */
static void lead_all(struct reg *reg)
{
    reg->leading = leads = true;
    while (reg->qhead)
        if (lead(reg))
            return;
    let_go(reg);
}

/* wlock held: nobody leads now. */
static void let_go(struct reg *reg)
{
    reg->leading = leads = false;
    pthread_cond_broadcast(&reg->idle_cv);
    if (reg->commit_stop)
        pthread_cond_signal(&reg->commit_cv);
}

/* The commit thread: leads what no other thread leads, until mut_stop and
 * an empty queue. */
static void *committer(void *arg)
{
    struct reg *reg = arg;
    pthread_mutex_lock(&reg->wlock);
    for (;;) {
        while (reg->leading || (!reg->qhead && !reg->commit_stop))
            pthread_cond_wait(&reg->commit_cv, &reg->wlock);
        if (!reg->qhead)
            break;
        lead_all(reg);
    }
    pthread_mutex_unlock(&reg->wlock);
    return NULL;
}

void mut_stop(struct reg *reg)
{
    pthread_mutex_lock(&reg->wlock);
    reg->commit_stop = true;
    bool started = reg->commit_started;
    pthread_cond_signal(&reg->commit_cv);
    pthread_mutex_unlock(&reg->wlock);
    if (started)
        pthread_join(reg->commit_th, NULL);
    reg_quiesce(reg);                /* a reg_lead thread that let go may still notify */
}

void reg_quiesce(struct reg *reg)
{
    pthread_mutex_lock(&reg->wlock);
    while (reg->qhead || reg->leading || reg->notifying)
        pthread_cond_wait(&reg->idle_cv, &reg->wlock);
    pthread_mutex_unlock(&reg->wlock);
}

struct mut *mut_new(const struct mut_kind *k, size_t ctx_size)
{
    size_t head = (sizeof(struct mut) + 15) & ~(size_t)15;
    struct mut *m = calloc(1, head + ctx_size);
    if (!m)
        return NULL;
    m->k = k;
    m->heap = true;
    m->ctx = ctx_size ? (char *)m + head : NULL;
    return m;
}

void mut_free(struct mut *m)
{
    free(m);
}

static _Thread_local struct {
    reg_reply_fn fn;
    void *arg;
} reply;

void reg_reply_set(reg_reply_fn fn, void *arg)
{
    reply.fn = fn;
    reply.arg = arg;
}

/* reg_lead_offer's, and the registry whose lead this thread took. */
static _Thread_local bool lead_offered;
static _Thread_local struct reg *lead_taken;

void reg_lead_offer(bool on)
{
    lead_offered = on;
}

struct reg *reg_lead_due(void)
{
    struct reg *reg = lead_taken;
    lead_taken = NULL;
    return reg;
}

void reg_lead(struct reg *reg)
{
    pthread_mutex_lock(&reg->wlock);
    lead_all(reg);
    pthread_mutex_unlock(&reg->wlock);
}

static _Thread_local struct reg_caller caller;

void reg_caller_set(const struct reg_caller *c)
{
    if (c)
        caller = *c;
    else
        memset(&caller, 0, sizeof(caller));
}

int mut_submit(struct reg *reg, struct mut *m)
{
    m->who = caller;
    mut_ring_take(&m->ring);
    size_t links = reg->pend_links + (m->add ? 1 : 0);
    int rc = 0;
    if (!reg->commit_started && !reg->commit_stop &&
        (rc = csifs_thread_start(&reg->commit_th, "csifs-commit", committer, reg)) == 0)
        reg->commit_started = true;
    if (!reg->commit_started && rc == 0)
        rc = -ESHUTDOWN;             /* after mut_stop: a bug of the caller */
    if (rc == 0 && links && (ht_full(&reg->seqs, links) || ht_full(&reg->names, links))) {
        pthread_rwlock_wrlock(&reg->lock);
        rc = model_reserve(reg, links);
        pthread_rwlock_unlock(&reg->lock);
    }
    if (rc < 0) {
        if (m->k->undo)
            m->k->undo(reg, m);
        pthread_mutex_unlock(&reg->wlock);
        finish(reg, m, rc);
        return rc;
    }
    reg->pend_links = links;
    reg->pend_bytes += m->est;
    struct inst *i = model_as_inst(m->obj);
    if (i)
        i->w_pend++;
    if (m->recur)
        m->recur->w_recur++;
    m->rec.op = (enum store_op)-1;   /* not the first record of its object yet */
    m->done = false;
    m->next = NULL;
    bool queued = m->heap && reply.fn;
    if (queued) {
        m->reply = reply.fn;
        m->reply_arg = reply.arg;
        reply.fn = NULL;             /* one mutation per reply */
    } else {
        pthread_cond_init(&m->cv, NULL);
    }
    *reg->qtail = m;
    reg->qtail = &m->next;
    bool gathered = ++reg->qlen == reg->gather;
    /* No batch led: this thread takes the lead when it offered to
     * (reg_lead_offer), else the commit thread is woken. A leader takes
     * what is queued before it lets go: no wake-up then. */
    bool wake = !reg->leading;
    if (wake && queued && lead_offered) {
        reg->leading = true;
        lead_taken = reg;
        wake = false;
    }
    /* A queued caller wakes the commit thread after the unlock: woken under
     * wlock, it would wake only to wait for it (a second wake-up). */
    if (queued)
        pthread_mutex_unlock(&reg->wlock);
    if (gathered)
        pthread_cond_signal(&reg->gather_cv);
    if (wake)
        pthread_cond_signal(&reg->commit_cv);
    if (queued)
        return REG_QUEUED;
    while (!m->done)
        pthread_cond_wait(&m->cv, &reg->wlock);
    rc = m->rc;
    pthread_mutex_unlock(&reg->wlock);
    pthread_cond_destroy(&m->cv);
    finish(reg, m, rc);
    return rc;
}

void mut_apply_now(struct reg *reg, struct mut *m)
{
    struct subs subs;
    copy_subs(reg, &subs);
    pthread_rwlock_wrlock(&reg->lock);
    uint64_t ev0 = ev_next_seq(reg->ring);
    m->k->apply(reg, m);
    uint64_t ev1 = ev_next_seq(reg->ring);
    pthread_rwlock_unlock(&reg->lock);
    pthread_mutex_unlock(&reg->wlock);
    count_mutation(m->ch, m->nch, false);
    notify(reg, &subs, m, false);
    notify(reg, &subs, m, true);
    mut_publish(reg, ev0, ev1);
}

void mut_publish(struct reg *reg, uint64_t from, uint64_t to)
{
    /* No reader waits to be woken: the events thread stays asleep. */
    if (ev_publish(reg->ring, from, to) == 0)
        return;
    pthread_mutex_lock(&reg->ev_mu);
    reg->ev_kicks++;
    pthread_cond_signal(&reg->ev_cv);
    pthread_mutex_unlock(&reg->ev_mu);
}
