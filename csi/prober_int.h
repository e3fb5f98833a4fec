/* csi prober: internals shared by csi/prober*.c (not part of the contract).
 *
 * Layers, each using only those below it:
 *   prober.c        the scheduler thread, the registry subscription, resync
 *   prober_round.c  one round per instance (calls, result, next schedule)
 *   prober_watch.c  inotify on the sockets' directories
 *   prober_table.c  the instance table, the timer heap, logging, wake-ups
 *
 * Threads: the scheduler thread owns every struct pinst, the heap, the
 * instance tree and the watch table (no lock). Others only hand it work
 * through the queues under csi_prober.mu and wake it through wake_fd (the
 * registry subscriber through its csifs_later bell: base/later.h).
 */
#ifndef CSIFS_CSI_PROBER_INT_H
#define CSIFS_CSI_PROBER_INT_H

#include "base/defaults.h"
#include "base/knobs.h"
#include "csi/client.h"
#include "csi/prober.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#define PR_BACKOFF_MIN_MS 100
#define PR_BACKOFF_MAX_MS 5000
#define PR_SPREAD_MAX_MS 5000      /* restored instances: over min(heartbeat, this) */
#define PR_UNSCHEDULED UINT32_MAX
/* The scheduler's knobs (values in base/knobs.h); a wake-up starts the
 * rounds due by then, never one early:
 *   The lane: a round starts only while no round that started less than
 *     PR_LANE_MS ago is in flight, so that rounds due together (instances
 *     sharing a millisecond of the grid, the backlog after a stall of the
 *     machine, a burst of pokes) go one after the other instead of queueing
 *     behind each other in the plugins and in csifs. So rounds start at
 *     most one per round trip (probe_call: about 0.3 ms here), or one per
 *     PR_LANE_MS while rounds take longer.
 *   PR_DONE_LAG_MS: a finished call does not wake the scheduler when it
 *     wakes by itself within this many ms anyway (at high rates, for the
 *     next due round) and no due round waits for a lane: a result is then
 *     applied at most this late, and a probe costs one wake-up of the
 *     scheduler, not two. */

/* The calls of a round, in order (PR_SERVICE_CAPS: NodeGetCapabilities or
 * ControllerGetCapabilities by type; csi-controller skips PR_NODE_INFO). */
enum pr_step { PR_PROBE, PR_INFO, PR_PLUGIN_CAPS, PR_NODE_INFO, PR_SERVICE_CAPS };

/* An instance that has a socket, as the scheduler sees it. */
struct pinst {
    LIST_ENTRY(pinst) link;        /* csi_prober.all */
    TAILQ_ENTRY(pinst) lane;       /* csi_prober.lane, while in_lane */
    int64_t lane_ms;               /* when its round took the lane */
    uint64_t seq, gen;             /* registry seq; socket generation probed */
    uint64_t epoch;                /* completions of another epoch are dropped */
    char *path;                    /* the socket */
    struct csi_chan *ch;           /* opened at the first round */
    struct csi_result *fp;         /* what a fingerprint round gathered so far */
    int64_t due_ms;                /* heap key (monotonic ms) */
    int64_t timeout_at_ms;         /* health_timeout passes (socket set + timeout) */
    int64_t latency_us;            /* of every call of the round */
    uint32_t heap_at;              /* PR_UNSCHEDULED when not in the heap */
    int32_t backoff_ms;            /* delay after the next failed round */
    int wd;                        /* inotify watch on the socket's dir, or -1 */
    uint8_t type;                  /* enum reg_type */
    uint8_t step;                  /* enum pr_step */
    bool busy;                     /* a round is in flight */
    bool in_lane;                  /* ... and holds a lane */
    bool poke;                     /* start the next round as soon as this one ends */
    bool need_fp;                  /* this round fingerprints */
    bool refresh_fp;               /* the next round fingerprints */
};

/* Handed from the completion-queue thread: a finished call, or (lost) the
 * connection of the instance's channel was lost. */
struct pdone {
    STAILQ_ENTRY(pdone) link;
    struct csi_prober *p;
    uint64_t seq, epoch;
    bool lost;
    struct csi_result res;
};

struct pr_watch {
    int wd;
    unsigned refs;                 /* instances using it */
};

struct csi_prober {
    struct reg *reg;
    struct csi_client *client;
    struct csi_prober_opts o;
    pthread_t thread;
    bool joinable;
    int wake_fd;                   /* eventfd: the queues below have work */
    int bell;                      /* wake_fd as a csifs_later bell, -1 none */
    int ino_fd;                    /* inotify, -1 if unavailable */

    /* Lock order: mu is a leaf. It is taken inside registry subscriber
     * callbacks (no registry lock held: reg_subscribe_after) and inside csi
     * callbacks; while holding it nothing else is locked and no reg_*,
     * csi_* or blocking call is made. It guards the fields down to the
     * blank line. */
    pthread_mutex_t mu;
    bool go;                       /* subscribed: the thread may scan */
    bool stop;                     /* the thread must end */
    bool stopped;                  /* ignore registry changes */
    bool resync_all;               /* a seq could not be queued: rescan */
    int64_t wakes_at_ms;           /* 0: awake; else when its poll ends by itself */
    uint64_t *dirty;               /* instances whose socket may have changed */
    size_t ndirty, dirty_cap;
    STAILQ_HEAD(, pdone) done;

    /* scheduler thread only */
    void *tree;                    /* tsearch tree of struct pinst by seq */
    LIST_HEAD(, pinst) all;
    size_t ninst;                  /* in all; the heap has room for as many */
    struct pinst **heap;
    size_t nheap, heap_cap;
    TAILQ_HEAD(, pinst) lane;      /* rounds holding a lane, oldest first */
    size_t nlane;
    struct pr_watch *watches;
    size_t nwatch, watch_cap;
    uint64_t epochs;
    bool fd_limit_warned;          /* "Too many open files" logged once */
};

/* ---- prober_table.c ---- */
/* Any thread: make the scheduler look at its queues. */
void pr_wake(struct csi_prober *p);
/* Any thread: queue d for the scheduler and wake it. */
void pr_queue_done(struct csi_prober *p, struct pdone *d);
void pr_log(struct csi_prober *p, int prio, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct pinst *pr_find(struct csi_prober *p, uint64_t seq);
/* A new instance in the table (not scheduled), or NULL on ENOMEM. */
struct pinst *pr_new(struct csi_prober *p, uint64_t seq, enum reg_type type);
/* Unschedule and free pi (its channel, round and watch already gone). */
void pr_free(struct csi_prober *p, struct pinst *pi);
/* (Re)schedule pi at due_ms; never fails (pr_new keeps room for all). */
void pr_schedule(struct csi_prober *p, struct pinst *pi, int64_t due_ms);
void pr_unschedule(struct csi_prober *p, struct pinst *pi);
/* The first instance due by now (taken out of the heap), or NULL. */
struct pinst *pr_take_due(struct csi_prober *p, int64_t now_ms);
/* May a due round start now: a lane is free (expired lanes are given back
 * first). */
bool pr_may_start(struct csi_prober *p, int64_t now_ms);
/* ms until a round may start (a due one, or a lane expired); -1
 * when none is scheduled. *waits: a round is due but every lane is taken
 * (a round that ends frees its lane earlier: its completion must wake the
 * scheduler). */
int pr_next_timeout(struct csi_prober *p, int64_t now_ms, bool *waits);
/* pi's round started: it holds a lane. */
void pr_lane_take(struct csi_prober *p, struct pinst *pi, int64_t now_ms);
/* pi's round is over (or forgotten): its lane, if it still held one, is free. */
void pr_lane_give(struct csi_prober *p, struct pinst *pi);

/* ---- prober_watch.c ---- */
int pr_watch_init(struct csi_prober *p);
void pr_watch_fini(struct csi_prober *p);
/* Watch the socket's directory for the socket file's creation and removal
 * (best effort: without a watch the schedule alone applies). */
void pr_watch_arm(struct csi_prober *p, struct pinst *pi);
void pr_watch_disarm(struct csi_prober *p, struct pinst *pi);
/* Read the inotify events: fn(p, pi, created) for each instance whose
 * socket file was created (true) or removed or renamed away (false); on an
 * overflow, fn(..., true) for every watched instance. */
void pr_watch_read(struct csi_prober *p,
                   void (*fn)(struct csi_prober *p, struct pinst *pi, bool created));

/* ---- prober_round.c ---- */
/* What the caller must do with the instance after a round step. */
enum pr_verdict {
    PR_KEEP,       /* in flight or scheduled */
    PR_DROP,       /* deregistered or socket cleared: forget it */
    PR_RESYNC,     /* the socket changed meanwhile: read it again */
};
/* Start a round on a due instance. */
enum pr_verdict pr_round_start(struct csi_prober *p, struct pinst *pi);
/* Take one finished call (not d->lost); *pi_out the instance it was for,
 * NULL if none (stale: nothing to do). Frees d. */
enum pr_verdict pr_round_done(struct csi_prober *p, struct pdone *d, struct pinst **pi_out);
/* A round at once (or when the one in flight ends), backoff reset, with a
 * fingerprint. */
void pr_poke(struct csi_prober *p, struct pinst *pi);
/* Forget what the round gathered and any call in flight. */
void pr_round_reset(struct csi_prober *p, struct pinst *pi);
/* Open pi's channel if needed (watched: a lost connection pokes pi). */
int pr_round_chan(struct csi_prober *p, struct pinst *pi);

#endif
