/* registry: the in-memory model of csifs and its rules (DESIGN sections 1-4).
 *
 * Objects: two fixed types (csi-controller, csi-node); plugins under a type;
 * instances (allocations) under a plugin, kept newest first by a sequence
 * number. Plugins and instances share one monotonic sequence, so a seq
 * names exactly one object for ever (the FUSE layer derives inode numbers
 * from it). `current` of a plugin is its newest ready instance that is
 * healthy; with none healthy it stays; while an instance restored at start
 * awaits its first probe it holds; each move is committed (the plugin's
 * record keeps it) and is one `current` event (DESIGN 2).
 *
 * Every mutation takes one path: validate (against memory plus what is
 * queued) -> commit (the store, if any; concurrent mutations share one
 * commit) -> apply in memory -> append events -> notify subscribers ->
 * publish the events (readable from the ring only now) -> the caller's
 * return (a FUSE caller's answer comes before the reg_subscribe_after
 * subscribers run). A refused or failed mutation changes nothing. All
 * functions return 0 or a negative errno (DESIGN section 5). All are
 * thread-safe.
 *
 * Locks, in the only order they may be taken (model.h declares them):
 *   0. reg->notify_mu (mutex) a leader's turn to call the subscribers and
 *                           replies of its batch (subscribers run in
 *                           commit order); taken with no other held;
 *   1. reg->wlock  (mutex)  validation and the commit queue; never held
 *                           across a commit, an fsync or a subscriber;
 *   2. reg->lock   (rwlock) guards the model; held only in memory;
 *   3. the events ring's own mutex (events.h), the events thread's mutex,
 *      the store's list of answered requests (ans_mu: a leaf, taken under
 *      notify_mu by a reply, or by a commit).
 * Readers take only 2 (shared), so they never wait for a commit.
 * Subscriber callbacks run with no registry lock held but notify_mu (for a
 * committed batch's changes; a reply too): they may read the registry but
 * must not mutate it or lead, nor wait for anything a FUSE request serves
 * (the FUSE thread that leads next waits for notify_mu).
 */
#ifndef CSIFS_REGISTRY_H
#define CSIFS_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "registry/events.h"

enum reg_type { REG_CONTROLLER = 0, REG_NODE = 1, REG_NTYPES };
enum reg_health { REG_UNKNOWN = 0, REG_HEALTHY, REG_UNHEALTHY, REG_NHEALTH };
enum reg_kind { REG_K_NONE = 0, REG_K_PLUGIN, REG_K_INSTANCE };

#define REG_NAME_MAX 63      /* plugin and alloc names */
#define REG_SOCKET_MAX 107   /* a unix socket address */
#define REG_VALUE_MAX 4096   /* writable attribute value */
#define REG_HISTORY 16       /* probes kept in `history` */

/* A duration as DESIGN writes it: "30s" when whole seconds, else "250ms". */
const char *reg_fmt_duration(int64_t ms, char *buf, size_t cap);

/* "csi-controller", "csi-node". */
extern const char *const reg_type_names[REG_NTYPES];
/* "unknown", "healthy", "unhealthy": the health file, events, metrics. */
extern const char *const reg_health_names[REG_NHEALTH];
/* Type by directory name, or -ENOENT. */
int reg_type_parse(const char *name);
/* 0 if name is a valid plugin/alloc name, -ENAMETOOLONG over 255 bytes
 * (NAME_MAX), else -EINVAL. */
int reg_name_check(const char *name);
/* 0 if len bytes of v hold no NUL, newline or other control character
 * (0x01-0x1f but tab, 0x7f), else -EINVAL (DESIGN 5). */
int reg_value_check(const char *v, size_t len);

/* Attribute files of an instance dir, in the order `ls -U` lists them. */
enum reg_attr {
    REG_A_HEALTH, REG_A_REASON, REG_A_READY, REG_A_PROVIDER, REG_A_VERSION,
    REG_A_NODEID, REG_A_MAX_VOLUMES, REG_A_TOPOLOGY, REG_A_CAPABILITIES,
    REG_A_MOUNT_POINT, REG_A_CONTAINER_MOUNT_POINT, REG_A_REGISTERED,
    REG_A_HISTORY, REG_NATTRS
};
#define REG_AF_WRITABLE  1u   /* 0644, store() accepted */
#define REG_AF_NODE_ONLY 2u   /* exists only under csi-node */
#define REG_AF_POLL      4u   /* poll() wakes when it changes */
struct reg_attr_def {
    const char *name;
    unsigned flags;
};
/* The one attribute table; indexed by enum reg_attr. */
extern const struct reg_attr_def reg_attrs[REG_NATTRS];
/* Attribute by file name for a type, or -ENOENT. */
int reg_attr_lookup(enum reg_type type, const char *name);
/* Whether attribute a (any number) is a file of an instance of type:
 * every one under csi-node, all but the REG_AF_NODE_ONLY ones elsewhere. */
bool reg_attr_exists(enum reg_type type, unsigned a);

struct reg_backend;
struct reg_opts {
    size_t events_ring;          /* events kept for replay; 0 = 1024 */
    unsigned max_instances;      /* per plugin; 0 = 10000 */
    int64_t health_timeout_ms;   /* 0 = 30000 */
    const struct reg_backend *backend; /* durable state (store.h); NULL = memory only */
};

struct reg;

/* Make a registry. With opts->backend, restores what it holds (health
 * unknown, reason "restored, not yet re-probed") and commits every later
 * mutation to it before applying it. reg_close() leaves the backend open. */
int reg_open(struct reg **out, const struct reg_opts *opts);
void reg_close(struct reg *reg);
/* Wait until no batch is queued or being committed: every mutation queued
 * before the call has been committed (or failed), its subscribers have run
 * and its caller was answered. Stops nothing: whoever wants the registry
 * to stay idle stops its mutators first (an upgrade in place, DESIGN 13:
 * then nothing of the registry waits for the kernel any more). */
void reg_quiesce(struct reg *reg);

/* ---- mutations ----
 * Each returns 0 once committed and applied, or a negative errno (refused:
 * nothing changed). A caller that must not wait for the commit (the FUSE
 * thread) sets a reply first: reg_reply_set(fn, arg); the next of these
 * calls on its thread then returns REG_QUEUED once validated and queued, and
 * fn(arg, rc) is called exactly once, later, on the thread that led its
 * commit (the registry's commit thread, or reg_lead's) with no registry
 * lock held but notify_mu (above), after the commit that holds it (rc 0)
 * or its failure (rc < 0; nothing applied). A later batch may have
 * been committed and applied by then (the lead let go: reg_leads). A
 * call refused at validation, or with nothing to commit, returns as
 * without a reply and fn is not called. Clear it after the call either
 * way: reg_reply_set(NULL, NULL). fn must not call the registry's
 * mutations (it would wait on itself). */
#define REG_QUEUED 1
typedef void (*reg_reply_fn)(void *arg, int rc);
void reg_reply_set(reg_reply_fn fn, void *arg);
/* A thread that sets a reply may also offer to lead the commit itself
 * (reg_lead_offer(true) around the call): a REG_QUEUED mutation that finds
 * no batch being committed is then left to it instead of to the commit
 * thread, whose wake-up it saves. reg_lead_due() says so (the registry, or
 * NULL; it clears), and the thread must then call reg_lead(reg) as soon as
 * it holds nothing a reader waits for (the FUSE thread: once it has let
 * its loop go, fs_serve_defer, DESIGN 7): it commits and answers every
 * batch queued until the queue is empty, fn called on it then. Until it
 * does, the thread makes no other registry mutation (it would wait for
 * itself). */
void reg_lead_offer(bool on);
struct reg *reg_lead_due(void);
void reg_lead(struct reg *reg);
/* From fn: whether its thread still leads, so may commit again before it
 * returns (a batch queued behind); false once the lead was let go (the
 * queue was empty after this commit). */
bool reg_leads(void);
int reg_plugin_create(struct reg *reg, enum reg_type type, const char *plugin);
/* -ENOTEMPTY while it has instances. */
int reg_plugin_remove(struct reg *reg, enum reg_type type, const char *plugin);
/* Puts a new instance at the front; -EEXIST (nothing changes) if present,
 * -ENOENT without the plugin, -ENOSPC past max_instances. */
int reg_instance_register(struct reg *reg, enum reg_type type, const char *plugin,
                          const char *alloc);
int reg_instance_deregister(struct reg *reg, enum reg_type type, const char *plugin,
                            const char *alloc);
/* target NULL or "" clears. Absolute, at most 107 bytes. Resets health to
 * unknown and clears the fingerprint; ready is kept. */
int reg_socket_set(struct reg *reg, uint64_t inst, const char *target);
/* Writable attribute: one trailing newline stripped; at most 4096 bytes, no
 * NUL or newline inside (-EINVAL); len 0 clears. -EACCES if not writable. */
int reg_attr_store(struct reg *reg, uint64_t inst, enum reg_attr attr,
                   const char *value, size_t len);

/* What a plugin told us on the way to healthy (all strings NUL-terminated;
 * topology and capabilities are newline-terminated lines, maybe empty). */
struct reg_fingerprint {
    const char *provider, *version, *nodeid;
    int64_t max_volumes;
    const char *topology, *capabilities;
};
enum reg_outcome { REG_PROBE_OK, REG_PROBE_NOT_READY, REG_PROBE_ERROR };
struct reg_probe {
    uint64_t gen;                   /* socket generation probed (reg_socket_gen) */
    enum reg_outcome outcome;
    const char *reason;             /* NOT_READY/ERROR: short and stable */
    int64_t latency_us;
    /* When the round ended (csifs_real_ns; 0: now): its history line's
     * time, not the later one of the commit that may record it. */
    int64_t done_ns;
    const struct reg_fingerprint *fp; /* required with OK unless healthy */
    /* With fp: the pid listening on the socket (SO_PEERCRED at the
     * fingerprint), 0 unknown. Kept in memory only, shown as reg_node.pid;
     * a socket change resets it to 0. */
    int32_t pid;
};
/* Apply one probe result through the health table of DESIGN section 3.
 * -ESTALE if the socket changed since gen; -EINVAL for OK without a
 * fingerprint while not healthy. A failed fingerprint (csi-node with an empty
 * node id) counts as an error. Commits when ready or the fingerprint changes. */
int reg_probe_result(struct reg *reg, uint64_t inst, const struct reg_probe *p);

/* ---- reads ---- */
struct reg_node {
    enum reg_kind kind;
    enum reg_type type;
    uint64_t seq, parent;           /* parent: the plugin of an instance */
    char plugin[REG_NAME_MAX + 1];
    char alloc[REG_NAME_MAX + 1];   /* "" for a plugin */
    int64_t registered_ns;          /* CLOCK_REALTIME of the mkdir */
    int64_t changed_ns;             /* last change of the node (for ctime/mtime) */
    /* plugin: current instance (0 if none) and instance count;
     * instance: socket generation and health. */
    uint64_t current;
    uint32_t count;
    uint64_t gen;
    uint64_t health_ver;            /* bumped whenever health, ready or reason change */
    enum reg_health health;
    bool ready, has_socket;
    int32_t pid;                    /* instance: reg_probe.pid of its last fingerprint */
};
/* Node by seq, or -ENOENT. */
int reg_get(struct reg *reg, uint64_t seq, struct reg_node *out);
int reg_plugin_lookup(struct reg *reg, enum reg_type type, const char *plugin,
                      struct reg_node *out);
int reg_instance_lookup(struct reg *reg, uint64_t plugin_seq, const char *alloc,
                        struct reg_node *out);
/* Children of a type (parent 0, plugins) or of a plugin (instances), newest
 * first, starting after the child with seq `after` (0 = from the start).
 * fn returns non-zero to stop. fn runs under the registry's read lock: it
 * must not call the registry (build what it needs from n). */
int reg_list(struct reg *reg, enum reg_type type, uint64_t parent, uint64_t after,
             int (*fn)(const struct reg_node *n, void *arg), void *arg);
/* The content of an attribute file into buf (up to cap bytes; always
 * NUL-terminated if cap > 0). Returns the full length or a negative errno. */
ssize_t reg_attr_show(struct reg *reg, uint64_t inst, enum reg_attr attr,
                      char *buf, size_t cap);
/* Symlink targets: the instance's socket, or the plugin's current alloc name.
 * -ENOENT when unset. Return length as above. */
ssize_t reg_socket_get(struct reg *reg, uint64_t inst, char *buf, size_t cap);
ssize_t reg_current_get(struct reg *reg, uint64_t plugin, char *buf, size_t cap);

/* csifs_why() of an addition refused because the state store is full (the
 * reserve of DESIGN 7 is kept for removals). */
#define REG_WHY_STORE_FULL "the state store is full (disk or map)"

/* How many plugins and instances the registry holds now. */
void reg_count(struct reg *reg, unsigned long *plugins, unsigned long *instances);
/* How many plugins of type there are (0 for an unknown type). */
unsigned long reg_type_count(struct reg *reg, enum reg_type type);

/* The events ring (read it with events.h). */
struct ev_ring *reg_events(struct reg *reg);

/* ---- subscriptions ---- */
enum reg_change_kind {
    REG_C_PLUGIN_ADD, REG_C_PLUGIN_DEL, REG_C_INST_ADD, REG_C_INST_DEL,
    REG_C_SOCKET, REG_C_ATTR, REG_C_HEALTH, REG_C_FINGERPRINT, REG_C_CURRENT,
    REG_C_HISTORY                   /* a probe was recorded (no event line) */
};
/* Who asked for a change: the FUSE request's caller (fs/oplog.c sets it
 * for its thread around each mutating handler). pid 0: nobody (the
 * prober's probes). */
struct reg_caller {
    uint32_t uid;
    int32_t pid;
};
/* This thread's next mutations are c's (NULL: nobody's). */
void reg_caller_set(const struct reg_caller *c);

/* ---- Exactly once (DESIGN 13) ----
 * A FUSE request that mutates names itself for its thread's next mutation
 * (reg_ring_set, around the registry call as reg_reply_set): the commit
 * that holds the mutation records the key in the store's ring of committed
 * requests, in the same transaction (store.h). A request the kernel sends
 * again after a takeover (FUSE_UNIQUE_RESEND) asks reg_ring_find first. */
struct reg_ring_key {
    uint64_t unique;                /* FUSE unique, FUSE_UNIQUE_RESEND cleared; 0: none */
    uint64_t parent;                /* the request's nodeid: the dir, or the file */
    uint32_t opcode;                /* FUSE opcode */
    char name[REG_NAME_MAX + 1];    /* the name it acts on, "" for none */
};
/* This thread's next mutation answers k's request (NULL: none's). A
 * mutation takes the key: one mutation per request. */
void reg_ring_set(const struct reg_ring_key *k);
/* The outcome recorded for a committed request of this connection (the
 * store's nonce) with k's unique, opcode, parent and name: 0 and *rc;
 * -ENOENT when the ring holds none (never committed, evicted, another
 * connection) or one that differs; -ENOTSUP without a ring (no backend). */
int reg_ring_find(struct reg *reg, const struct reg_ring_key *k, int *rc);

struct reg_change {
    enum reg_change_kind kind;
    enum reg_type type;
    uint64_t plugin, inst;          /* seqs; inst 0 for plugin-level changes */
    char plugin_name[REG_NAME_MAX + 1];   /* copies: valid while c is */
    char alloc_name[REG_NAME_MAX + 1];    /* "" for plugin-level changes */
    enum reg_attr attr;             /* REG_C_ATTR */
    uint64_t gen;                   /* REG_C_SOCKET: the new generation */
    uint64_t to;                    /* REG_C_CURRENT: the new current (0: none) */
    struct reg_caller who;          /* whose mutation it came from */
    const struct reg_ring_key *req; /* the FUSE request it answers (NULL: none) */
    /* REG_C_HEALTH: the change itself (health, ready, reason);
     * REG_C_HISTORY: the probe's outcome (as health), reason, latency */
    enum reg_health health;
    enum reg_outcome outcome;
    bool ready;
    uint32_t latency_us;
    char reason[200];
};
typedef void (*reg_sub_fn)(const struct reg_change *c, void *arg);
/* At most 8 subscribers in all; called in commit order, after the change
 * is visible to readers, with no registry lock held but notify_mu (calls for changes of
 * different commits never overlap; a probe result that is not committed
 * may be notified alongside a commit's). reg_subscribe's run before the
 * change's events are readable from the ring and before the mutating call
 * returns (what the caller reads next must be right: the kernel's caches);
 * reg_subscribe_after's once a FUSE caller (reg_reply_set) was answered,
 * before a waiting one returns and before the next batch's subscribers,
 * but maybe after the next batch was applied: for what only marks work
 * for later (the prober's, the cluster publisher's, the kubelet's), and
 * the log's lines (fs/oplog.c: what they show that may change is read
 * before the answer). The reg_subscribe_after subscribers of a change run
 * on the thread that ran its reg_subscribe ones, in the same order. */
int reg_subscribe(struct reg *reg, reg_sub_fn fn, void *arg);
int reg_subscribe_after(struct reg *reg, reg_sub_fn fn, void *arg);
/* At most 4: fn(arg) runs on the registry's events thread, soon after events
 * were published while some reader watched the ring (ev_watch; several
 * publishes may give one call). For waking readers of the events ring
 * without holding up the writers. */
int reg_on_events(struct reg *reg, void (*fn)(void *arg), void *arg);

/* ---- health across a takeover (DESIGN 13) ----
 * The health, reason, `ready` and `history` of each instance, kept in a
 * caller's memory that outlives the process (the state memfd,
 * takeover/state.h): a fixed-size slot per instance, claimed by its seq.
 * Written in place (no syscall) by the registry's apply step, so under
 * reg->wlock and reg->lock held exclusively: a probe result (registry/
 * health.c), a socket change (ops.c); freed when a deregistration is
 * applied. reg_close leaves the slots as they are (an upgrade in place
 * hands them on). A slot being written has an odd ver: a process killed
 * then leaves it odd, and it is ignored. */
#define REG_KEEP_REASON 120             /* a history reason: at most 119 bytes */
struct reg_keep_hist {
    int64_t at_ms;                   /* CLOCK_REALTIME */
    uint32_t latency_us;
    uint8_t outcome;                 /* enum reg_outcome */
    char reason[REG_KEEP_REASON];
};
struct reg_keep_slot {
    uint32_t ver;                    /* odd while being written */
    uint8_t health, ready, was_healthy, nhist;
    uint64_t seq;                    /* the instance's, 0 a free slot */
    int64_t unknown_since_ms;        /* CLOCK_MONOTONIC (system-wide) */
    uint32_t hist_head, pad;
    char socket[REG_SOCKET_MAX + 1]; /* what health was learnt for */
    char reason[256];
    struct reg_keep_hist hist[REG_HISTORY];   /* as the instance's ring */
};
struct reg_keep_table {
    uint32_t hi, pad;                /* slots below hi were ever used */
    struct reg_keep_slot slot[];
};
/* Keep health in t's n slots from now on: call once, after reg_open and
 * before any mutation or probe. restore: the slots are a predecessor's;
 * every instance with a valid slot (same seq, socket and `ready` as the
 * store restored) takes its health, reason, ready and history from it and
 * is no longer "restored, not yet re-probed" (no event, `current` as
 * persisted); the other slots are freed. Else t is taken as cleared (a
 * fresh memfd: only the slots used are ever touched).
 * *restored: how many instances took theirs. 0 or -ENOMEM. */
int reg_keep(struct reg *reg, struct reg_keep_table *t, uint32_t n, bool restore,
             unsigned long *restored);

#ifdef CSIFS_TEST_OPTS
/* Test builds only (-o debug_commit_delay_ms=, -o debug_fail_commit=):
 * every commit is held this long; when the file reg_test_fail_commit names
 * exists, the next commit removes it and fails with EIO. */
extern int reg_test_commit_delay_ms;
extern const char *reg_test_fail_commit;
/* Commits held so far (atomic): a test knows its batch is taken, being
 * committed and not yet applied once this grows. */
extern unsigned reg_test_commits_held;
#endif

#endif
