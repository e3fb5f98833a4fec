/* csi prober: internals shared by csi/prober*.c (not part of the contract).
 *
 * Threads: the scheduler thread owns every struct pinst, the heap, the
 * instance tree and the watch table (no lock). Others only hand it work
 * through the queues under csi_prober.mu and wake it through wake_fd.
 */
#ifndef CSIFS_CSI_PROBER_INT_H
#define CSIFS_CSI_PROBER_INT_H

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
#define PR_UNSCHEDULED ((size_t)-1)

/* The calls of a round, in order (PR_SERVICE_CAPS: NodeGetCapabilities or
 * ControllerGetCapabilities by type; csi-controller skips PR_NODE_INFO). */
enum pr_step { PR_PROBE, PR_INFO, PR_PLUGIN_CAPS, PR_NODE_INFO, PR_SERVICE_CAPS };

/* What a round has gathered towards a fingerprint: the fields of the
 * fingerprint calls' results (capabilities of both calls, concatenated). */
struct pr_gather {
    struct csi_result r;
    int64_t latency_us;            /* of every call of the round */
};

/* An instance that has a socket, as the scheduler sees it. */
struct pinst {
    LIST_ENTRY(pinst) link;        /* csi_prober.all */
    uint64_t seq, gen;             /* registry seq; socket generation probed */
    enum reg_type type;
    char path[REG_SOCKET_MAX + 1];
    struct csi_chan *ch;           /* opened at the first round */
    uint64_t epoch;                /* completions of another epoch are dropped */
    bool busy;                     /* a round is in flight */
    bool poke;                     /* start the next round as soon as this one ends */
    bool need_fp;                  /* this round fingerprints */
    bool refresh_fp;               /* the next round fingerprints (socket file re-created) */
    enum pr_step step;
    struct pr_gather g;
    int64_t due_ms;                /* heap key (monotonic ms) */
    size_t heap_at;                /* PR_UNSCHEDULED when not in the heap */
    int64_t backoff_ms;            /* delay after the next failed round */
    int64_t timeout_at_ms;         /* health_timeout passes (socket set + timeout) */
    int wd;                        /* inotify watch on the socket's dir, or -1 */
};

/* A finished call, handed from the completion-queue thread. */
struct pdone {
    STAILQ_ENTRY(pdone) link;
    struct csi_prober *p;
    uint64_t seq, epoch;
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
    int ino_fd;                    /* inotify, -1 if unavailable */

    /* Lock order: mu is a leaf. It is taken inside registry subscriber
     * callbacks (the registry's writer mutex held) and inside csi
     * callbacks; while holding it nothing else is locked and no reg_*,
     * csi_* or blocking call is made. It guards the fields down to the
     * blank line. */
    pthread_mutex_t mu;
    bool go;                       /* subscribed: the thread may scan */
    bool stop;                     /* the thread must end */
    bool stopped;                  /* ignore registry changes */
    bool resync_all;               /* a seq could not be queued: rescan */
    uint64_t *dirty;               /* instances whose socket may have changed */
    size_t ndirty, dirty_cap;
    STAILQ_HEAD(, pdone) done;

    /* scheduler thread only */
    void *tree;                    /* tsearch tree of struct pinst by seq */
    LIST_HEAD(, pinst) all;
    size_t ninst;                  /* in all; the heap has room for as many */
    struct pinst **heap;
    size_t nheap, heap_cap;
    struct pr_watch *watches;
    size_t nwatch, watch_cap;
    uint64_t epochs;
};

int64_t pr_now_ms(void);
/* Any thread: make the scheduler look at its queues. */
void pr_wake(struct csi_prober *p);
void pr_log(struct csi_prober *p, int prio, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* prober.c */
struct pinst *pr_find(struct csi_prober *p, uint64_t seq);
/* Read the instance's socket and generation from the registry and bring pi
 * in line: a new or changed socket closes the channel and schedules a round
 * at due_ms; no socket or no instance drops it. */
void pr_resync(struct csi_prober *p, uint64_t seq, int64_t due_ms);
/* Forget pi: channel closed, watch and schedule removed, freed. */
void pr_drop(struct csi_prober *p, struct pinst *pi);
void pr_schedule(struct csi_prober *p, struct pinst *pi, int64_t due_ms);

/* prober_round.c */
/* Start a round on a due instance (may drop or resync it). */
void pr_round_start(struct csi_prober *p, struct pinst *pi);
/* Take one finished call (frees d). */
void pr_round_done(struct csi_prober *p, struct pdone *d);
/* A round at once (or when the one in flight ends), backoff reset. */
void pr_poke(struct csi_prober *p, struct pinst *pi);
/* Forget what the round gathered and any call in flight. */
void pr_round_reset(struct csi_prober *p, struct pinst *pi);

/* prober_watch.c */
int pr_watch_init(struct csi_prober *p);
void pr_watch_fini(struct csi_prober *p);
/* Watch the socket's directory for the socket file's creation (best
 * effort: without a watch the backoff alone applies). */
void pr_watch_arm(struct csi_prober *p, struct pinst *pi);
void pr_watch_disarm(struct csi_prober *p, struct pinst *pi);
/* Read the inotify events and poke the instances whose socket appeared. */
void pr_watch_read(struct csi_prober *p);

#endif
