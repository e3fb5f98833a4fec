/* Internal to registry/: the objects behind struct reg and their indexes.
 * Callers hold reg->lock (shared to read, exclusive to change). Fields named
 * w_* are the writers' view (memory plus the mutations queued for commit,
 * mutate.h): read and written only with reg->wlock held, never by readers. */
#ifndef CSIFS_MODEL_H
#define CSIFS_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "registry/registry.h"

struct hlink {
    struct hlink *next;
    uint64_t hash;
};
struct htab {
    struct hlink **b;
    size_t nb, n;
};

/* A history reason, interned (model.c): the entries with the same text
 * share one; freed with its last entry. Changed only under wlock and lock
 * (apply), read under lock. */
struct hreason {
    struct hlink l;              /* in reg->reasons */
    struct htab *t;              /* that table (freed without the reg at hand) */
    uint32_t refs;
    char s[];
};

struct hist {                    /* 24 bytes, against 144 with the text inline */
    int64_t at_ms;               /* CLOCK_REALTIME */
    struct hreason *reason;
    uint32_t latency_us;         /* clamped at UINT32_MAX (71 min) */
    uint8_t outcome;             /* enum reg_outcome */
};

struct obj {                     /* common head of plugins and instances */
    struct hlink by_seq, by_name;
    enum reg_kind kind;
    enum reg_type type;
    uint64_t seq;
    char name[REG_NAME_MAX + 1];
    struct obj *prev, *next;     /* siblings, newest first */
    int64_t registered_ns, changed_ns;
    bool w_dead;                 /* a deletion of it is queued or applied */
};

struct plugin {
    struct obj o;
    struct obj *head;            /* instances, newest first */
    uint32_t count;
    uint32_t w_count;            /* count with the queued adds and deletions */
    /* queued mutations whose apply recomputes current (mut_plan_current);
     * while any, current and restoring once they apply (the writers' view;
     * with none, taken again from memory at the next plan) */
    uint32_t w_recur;
    struct inst *w_current;
    uint32_t w_restoring;
    struct inst *current;
    /* current as readers see it: moved to the new one when its
     * REG_C_CURRENT change is notified, after the changes before it (the
     * new current's health: its `ready` page dropped), so that no reader
     * follows current to a ready page still cached from before. */
    struct inst *shown;
    uint32_t restoring;          /* instances restored and not yet probed:
                                  * current holds while any (DESIGN 2) */
    uint64_t saved_current;      /* load only: the persisted current's seq */
    uint64_t probes[3], health_changes[REG_NHEALTH]; /* by outcome, by health (metrics) */
};

struct fp {
    char *provider, *version, *nodeid, *topology, *capabilities;
    int64_t max_volumes;
};

/* Only the writable attributes have values of their own (the others are
 * computed): REG_A_MOUNT_POINT and REG_A_CONTAINER_MOUNT_POINT, adjacent in
 * enum reg_attr (tests/unit/registry.c checks that every REG_AF_WRITABLE one is). */
#define INST_ATTR(a) ((a) - REG_A_MOUNT_POINT)
#define INST_NATTRS (REG_A_CONTAINER_MOUNT_POINT - REG_A_MOUNT_POINT + 1)

struct inst {
    struct obj o;
    struct plugin *plugin;
    char *socket;                /* NULL when unset */
    uint64_t gen;                /* bumped on every socket change */
    uint64_t w_gen;              /* gen once the queued socket changes apply */
    unsigned w_pend;             /* queued mutations of this instance */
    enum reg_health health;
    uint64_t health_ver;         /* bumped when health, ready or reason change */
    char *reason;
    bool ready;
    bool was_healthy;            /* reached healthy since the socket was set */
    bool restoring;              /* restored with a socket, not yet probed */
    /* the writers' view of health, ready, restoring, was_healthy (plugin's
     * w_recur) */
    enum reg_health w_health;
    bool w_ready, w_restoring, w_was_healthy;
    int64_t unknown_since_ms;    /* CLOCK_MONOTONIC: start of health_timeout */
    struct fp fp;
    int32_t pid;                 /* listening process, 0 unknown (memory only) */
    char *attr[INST_NATTRS];     /* writable attribute values by INST_ATTR(a), NULL = empty */
    struct hist *hist;           /* REG_HISTORY entries, allocated on first probe */
    unsigned nhist, hist_head;
    uint32_t kslot;              /* its reg->keep slot + 1, 0 none (keep.c) */
};

struct mut;
typedef void (*reg_ev_fn)(void *arg);

struct reg {
    /* Lock order: notify_mu, then wlock, then lock, then ev_mu or the
     * ring's mutex (both innermost). notify_mu: a leader's turn to call the
     * subscribers and the replies of its committed batch (mutate.c lead; a
     * failed batch's replies are answered without it), so that
     * batches notify in commit order though a leader lets go before its
     * reg_subscribe_after subscribers run. wlock: validation, the commit queue, the w_* fields, and
     * apply (with lock); never held across a commit, fsync or subscriber,
     * nor while a leader calls a mutation's reply (reg_reply_set:
     * the FUSE replies, fuse_reply_*), which run with no registry lock but
     * notify_mu: a reply may take the fs/ locks that FUSE threads take
     * under lock (none of them takes notify_mu). */
    pthread_mutex_t notify_mu;
    pthread_mutex_t wlock;
    pthread_rwlock_t lock;
    struct reg_opts opts;
    /* the commit queue (mutate.c), under wlock */
    struct mut *qhead, **qtail;  /* validated, waiting for a leader */
    struct mut *inflight;        /* the batch being committed */
    size_t qlen, last_batch;     /* queued now; the size of the last batch */
    size_t gather;               /* the commit thread waits for this many queued */
    pthread_cond_t gather_cv;    /* CLOCK_MONOTONIC */
    pthread_cond_t commit_cv;    /* the commit thread waits for a mutation */
    bool commit_started, commit_stop;
    bool leading;                /* a thread leads (the commit thread or reg_lead's):
                                  * what is queued is its (reg_quiesce waits) */
    int notifying;               /* leaders that let go, their batch's answers
                                  * and last subscribers still running
                                  * (reg_quiesce waits) */
    pthread_cond_t idle_cv;      /* reg_quiesce waits: no batch queued or led */
    pthread_t commit_th;
    size_t pend_links;           /* queued objects to link: index room kept */
    uint64_t room, pend_bytes;   /* store room for additions, and queued use */
    bool room_known;
    int64_t room_ns;             /* when room was measured (csifs_mono_ns) */
    /* the events thread: calls ev_subs when events were appended */
    pthread_mutex_t ev_mu;
    pthread_cond_t ev_cv;
    uint64_t ev_kicks;
    bool ev_stop, ev_started;
    pthread_t ev_th;
    struct {
        reg_ev_fn fn;
        void *arg;
    } ev_subs[4];
    int nev_subs;
    struct htab seqs, names;
    struct htab reasons;         /* struct hreason of every history entry */
    struct obj *types[REG_NTYPES]; /* plugins per type, newest first */
    uint32_t ntypes[REG_NTYPES];  /* how many in each list */
    uint64_t next_seq;
    uint64_t seq_reserved;       /* plugin/instance seqs below this are persisted as used */
    struct ev_ring *ring;
    uint64_t ev_reserved;        /* events below this seq are persisted as used */
    struct reg_sub {
        reg_sub_fn fn;
        void *arg;
        bool after;                  /* reg_subscribe_after: once the caller was answered */
    } subs[8];
    int nsubs;
    /* health kept across a takeover (reg_keep; keep.c): under wlock and lock */
    struct reg_keep_table *keep;
    uint32_t nkeep, nfree;
    uint32_t *keep_free;         /* free slot indexes, a stack */
    bool keep_full;              /* "no slot left" was logged */
};

/* hash tables (model.c) */
void ht_init(struct htab *t);
void ht_free(struct htab *t);
/* Grow t so that `more` inserts cannot fail (-ENOMEM changes nothing). */
int ht_reserve(struct htab *t, size_t more);
/* Would `more` inserts make ht_reserve grow t? */
bool ht_full(const struct htab *t, size_t more);
/* Insert; the room must have been reserved. */
void ht_insert(struct htab *t, struct hlink *l, uint64_t hash);
void ht_remove(struct htab *t, struct hlink *l);
uint64_t ht_name_hash(enum reg_type type, uint64_t parent, const char *name);

struct obj *model_by_seq(struct reg *reg, uint64_t seq);
struct plugin *model_plugin(struct reg *reg, enum reg_type type, const char *name);
struct inst *model_inst(struct reg *reg, struct plugin *p, const char *alloc);
struct plugin *model_as_plugin(struct obj *o);
struct inst *model_as_inst(struct obj *o);

/* Room in both indexes for `more` links (-ENOMEM changes nothing). */
int model_reserve(struct reg *reg, size_t more);
/* Link a new object into its indexes (room reserved) and at the front of its
 * siblings; unlink. */
void model_link(struct reg *reg, struct obj *o, struct plugin *parent);
void model_unlink(struct reg *reg, struct obj *o, struct plugin *parent);
/* Frees an unlinked instance; its history puts its reasons back into
 * reg->reasons, so the caller holds reg->wlock and reg->lock (or is alone). */
void model_free_inst(struct inst *i);
/* Interned history reasons (reg->reasons): a reason with text s, room for
 * it reserved, not interned yet (NULL on ENOMEM); the interned twin of
 * *spare, referenced, else *spare itself interned (*spare becomes NULL);
 * drop one reference (NULL: nothing), the last frees it. */
struct hreason *model_reason_new(struct reg *reg, const char *s);
struct hreason *model_reason_intern(struct reg *reg, struct hreason **spare);
void model_reason_put(struct hreason *r);
void model_free_fp(struct fp *f);
/* Write i's health, reason, ready and history to its kept slot (reg_keep),
 * claiming one if it has none; all: its whole history, else the newest
 * entry. Drop: free its slot (its deregistration is applied). Under
 * reg->wlock and reg->lock (exclusive). No-ops without reg_keep. */
void model_keep(struct reg *reg, struct inst *i, bool all);
void model_keep_drop(struct reg *reg, struct inst *i);
int64_t model_now_ns(void);
int64_t model_mono_ms(void);

#endif
