/* csi prober: the top layer: life cycle, the scheduler thread, the
 * registry subscription, and bringing each instance in line with the
 * registry (see prober.h and prober_int.h for the layers below). */
#include "csi/prober_int.h"
#include "base/later.h"
#include "base/thread.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <syslog.h>
#include <unistd.h>

/* Forget pi: channel closed, watch and schedule removed, freed. */
static void drop(struct csi_prober *p, struct pinst *pi)
{
    csi_chan_close(pi->ch);     /* its calls are cancelled: stale epoch */
    pi->ch = NULL;
    pr_round_reset(p, pi);
    pr_watch_disarm(p, pi);
    pr_free(p, pi);
}

/* The instance, and its socket path as of the same generation. 0; -ENOENT;
 * -EAGAIN while it keeps changing (its change events follow). */
static int read_socket(struct csi_prober *p, uint64_t seq, struct reg_node *n, char *path)
{
    for (int tries = 0; tries < 4; tries++) {
        int rc = reg_get(p->reg, seq, n);
        if (rc < 0 || n->kind != REG_K_INSTANCE || !n->has_socket)
            return rc < 0 ? rc : 0;
        uint64_t gen = n->gen;
        ssize_t len = reg_socket_get(p->reg, seq, path, REG_SOCKET_MAX + 1);
        if ((rc = reg_get(p->reg, seq, n)) < 0)
            return rc;
        if (len >= 0 && len <= REG_SOCKET_MAX && n->gen == gen)
            return 0;
    }
    return -EAGAIN;
}

/* Read the instance's socket and generation from the registry and bring pi
 * in line: a new or changed socket closes the channel and schedules a round
 * at due_ms; no socket or no instance drops it. */
static void resync(struct csi_prober *p, uint64_t seq, int64_t due_ms)
{
    struct reg_node n;
    char path[REG_SOCKET_MAX + 1];
    int rc = read_socket(p, seq, &n, path);
    struct pinst *pi = pr_find(p, seq);
    if (rc == -EAGAIN)
        return;
    if (rc < 0 || n.kind != REG_K_INSTANCE || !n.has_socket) {
        if (pi)
            drop(p, pi);
        return;
    }
    if (pi && pi->gen == n.gen)
        return;                         /* nothing changed for the prober */
    char *copy = strdup(path);
    if (!copy || (!pi && !(pi = pr_new(p, seq, n.type)))) {
        free(copy);
        pr_log(p, LOG_ERR, "%s/%s/%s: cannot probe: %s", reg_type_names[n.type], n.plugin,
               n.alloc, strerror(ENOMEM));
        return;
    }
    csi_chan_close(pi->ch);
    pi->ch = NULL;
    pr_round_reset(p, pi);
    pr_watch_disarm(p, pi);
    pi->gen = n.gen;
    free(pi->path);
    pi->path = copy;
    pi->poke = false;
    pi->backoff_ms = PR_BACKOFF_MIN_MS;
    pi->timeout_at_ms = csifs_mono_ms() + p->o.health_timeout_ms;
    pr_watch_arm(p, pi);
    pr_schedule(p, pi, due_ms);
}

/* ---- scanning the registry ---- */

struct seqs {
    uint64_t *v;
    size_t n, cap;
    bool oom;
    bool sockets_only;
};

static int seqs_add(struct seqs *s, uint64_t seq)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        uint64_t *v = realloc(s->v, cap * sizeof(*v));
        if (!v) {
            s->oom = true;
            return 1;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = seq;
    return 0;
}

static int collect(const struct reg_node *n, void *arg)
{
    struct seqs *s = arg;
    return s->sockets_only && !n->has_socket ? 0 : seqs_add(s, n->seq);
}

/* Every instance with a socket: restored ones spread over min(heartbeat,
 * 5 s); otherwise (a change could not be queued) every instance and every
 * instance known to the prober is brought in line at once. */
static void scan(struct csi_prober *p, bool restored)
{
    struct seqs plugins = { 0 }, insts = { .sockets_only = true };
    /* reg_list fails only for a plugin removed meanwhile (-ENOENT): it has
     * nothing to list, and its instances' removals are queued changes */
    for (int t = 0; t < REG_NTYPES; t++) {
        plugins.n = 0;
        (void)reg_list(p->reg, t, 0, 0, collect, &plugins);
        for (size_t k = 0; k < plugins.n; k++)
            (void)reg_list(p->reg, t, plugins.v[k], 0, collect, &insts);
    }
    size_t listed = insts.n;
    struct pinst *pi;
    LIST_FOREACH(pi, &p->all, link)
        if (seqs_add(&insts, pi->seq))
            break;
    if (plugins.oom || insts.oom)
        pr_log(p, LOG_ERR, "cannot list the registry: %s", strerror(ENOMEM));
    int64_t now = csifs_mono_ms();
    int64_t spread = p->o.heartbeat_ms < PR_SPREAD_MAX_MS ? p->o.heartbeat_ms : PR_SPREAD_MAX_MS;
    for (size_t k = 0; k < insts.n; k++)
        resync(p, insts.v[k],
                  restored && k < listed ? now + spread * (int64_t)k / (int64_t)listed : now);
    free(plugins.v);
    free(insts.v);
}

/* ---- the scheduler thread ---- */

static void free_done(struct pdone *d)
{
    csi_result_clear(&d->res);
    free(d);
}

/* What the other threads queued: taken under mu, handled without it. */
struct batch {
    bool stop, go, all;
    uint64_t *dirty;
    size_t ndirty;
    STAILQ_HEAD(, pdone) done;
};

static void take_batch(struct csi_prober *p, struct batch *b)
{
    STAILQ_INIT(&b->done);
    pthread_mutex_lock(&p->mu);
    b->stop = p->stop;
    b->go = p->go;
    b->all = p->resync_all;
    p->resync_all = false;
    b->dirty = p->dirty;
    b->ndirty = p->ndirty;
    p->dirty = NULL;
    p->ndirty = p->dirty_cap = 0;
    STAILQ_CONCAT(&b->done, &p->done);
    p->wakes_at_ms = 0;
    pthread_mutex_unlock(&p->mu);
}

/* Publish when the scheduler's poll of timeout ms ends by itself
 * (pr_queue_done then need not wake it), unless a due round waits for a
 * lane: a finished call frees one, so it must wake the thread. */
static void sleeping(struct csi_prober *p, int timeout, bool waits, int64_t now_ms)
{
    pthread_mutex_lock(&p->mu);
    p->wakes_at_ms = timeout < 0 || waits ? INT64_MAX : now_ms + timeout;
    pthread_mutex_unlock(&p->mu);
}

/* What a round step told the caller to do with the instance. */
static void obey(struct csi_prober *p, struct pinst *pi, enum pr_verdict v)
{
    if (v == PR_DROP)
        drop(p, pi);
    else if (v == PR_RESYNC)
        resync(p, pi->seq, csifs_mono_ms());
}

/* inotify: the socket file appeared (probe at once, with a fingerprint), or
 * went away (close the channel and probe afresh: the dial then fails). */
static void socket_file(struct csi_prober *p, struct pinst *pi, bool created)
{
    if (!created) {
        csi_chan_close(pi->ch);
        pi->ch = NULL;
        pr_round_reset(p, pi);
    }
    pr_poke(p, pi);
}

static void handle_done(struct csi_prober *p, struct pdone *d)
{
    if (d->lost) {
        /* a healthy plugin's connection broke: probe at once */
        struct pinst *pi = pr_find(p, d->seq);
        if (pi)
            pr_poke(p, pi);
        free(d);
        return;
    }
    struct pinst *pi;
    enum pr_verdict v = pr_round_done(p, d, &pi);
    if (pi)
        obey(p, pi, v);
}

static void *scheduler(void *arg)
{
    struct csi_prober *p = arg;
    bool scanned = false;
    for (;;) {
        struct batch b;
        take_batch(p, &b);
        if (b.go && !scanned && !b.stop) {
            scan(p, true);
            scanned = true;
        }
        if (b.all && !b.stop)
            scan(p, false);
        int64_t now = csifs_mono_ms();
        for (size_t k = 0; k < b.ndirty && !b.stop; k++)
            resync(p, b.dirty[k], now);
        free(b.dirty);
        struct pdone *d;
        while ((d = STAILQ_FIRST(&b.done))) {
            STAILQ_REMOVE_HEAD(&b.done, link);
            if (b.stop)
                free_done(d);
            else
                handle_done(p, d);
        }
        if (b.stop)
            return NULL;
        now = csifs_mono_ms();
        struct pinst *pi;
        while (pr_may_start(p, now) && (pi = pr_take_due(p, now)))
            obey(p, pi, pr_round_start(p, pi));
        struct pollfd fds[2] = { { .fd = p->wake_fd, .events = POLLIN },
                                 { .fd = p->ino_fd, .events = POLLIN } };
        now = csifs_mono_ms();
        bool waits = false;
        int timeout = b.go ? pr_next_timeout(p, now, &waits) : -1;
        sleeping(p, timeout, waits, now);
        if (poll(fds, p->ino_fd >= 0 ? 2 : 1, timeout) < 0 &&
            errno != EINTR)
            pr_log(p, LOG_ERR, "poll: %s", strerror(errno));
        uint64_t n;
        if (fds[0].revents & POLLIN)
            (void)!read(p->wake_fd, &n, sizeof(n));
        if (fds[1].revents & POLLIN)
            pr_watch_read(p, socket_file);
    }
}

/* ---- the registry subscription (any mutating thread, after the answer) ---- */

static void on_change(const struct reg_change *c, void *arg)
{
    struct csi_prober *p = arg;
    if (c->kind != REG_C_SOCKET && c->kind != REG_C_INST_DEL)
        return;
    pthread_mutex_lock(&p->mu);
    if (!p->stopped && p->ndirty == p->dirty_cap) {
        size_t cap = p->dirty_cap ? 2 * p->dirty_cap : 16;
        uint64_t *v = realloc(p->dirty, cap * sizeof(*v));
        if (v) {
            p->dirty = v;
            p->dirty_cap = cap;
        } else {
            p->resync_all = true;    /* nothing is lost: the thread rescans */
        }
    }
    if (!p->stopped && p->ndirty < p->dirty_cap)
        p->dirty[p->ndirty++] = c->inst;
    pthread_mutex_unlock(&p->mu);
    if (p->bell >= 0)
        csifs_later_ring(p->bell);   /* a FUSE loop's thread: at its next quiet moment */
    else
        pr_wake(p);
}

/* ---- life cycle ---- */

int csi_prober_start(struct csi_prober **out, struct reg *reg, const struct csi_prober_opts *o)
{
    if (!out || !reg)
        return -EINVAL;
    struct csi_prober *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    int rc = -pthread_mutex_init(&p->mu, NULL);
    if (rc < 0) {
        free(p);
        return rc;
    }
    p->reg = reg;
    if (o)
        p->o = *o;
    if (p->o.heartbeat_ms <= 0)
        p->o.heartbeat_ms = CSIFS_HEARTBEAT_MS;
    if (p->o.probe_timeout_ms <= 0 || p->o.probe_timeout_ms > INT_MAX)
        p->o.probe_timeout_ms = p->o.probe_timeout_ms <= 0 ? CSIFS_PROBE_TIMEOUT_MS : INT_MAX;
    if (p->o.health_timeout_ms <= 0)
        p->o.health_timeout_ms = CSIFS_HEALTH_TIMEOUT_MS;
    p->ino_fd = p->bell = -1;
    LIST_INIT(&p->all);
    TAILQ_INIT(&p->lane);
    STAILQ_INIT(&p->done);
    p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (p->wake_fd < 0)
        rc = -errno;
    else if (csifs_later_add(p->wake_fd, &p->bell) < 0)
        p->bell = -1;                /* rung at once, as without */
    if (rc == 0)
        rc = pr_watch_init(p);
    if (rc == 0 && (rc = csifs_thread_start(&p->thread, "csifs-prober", scheduler, p)) == 0)
        p->joinable = true;
    /* last: once subscribed, p must outlive the registry's mutations */
    if (rc == 0)
        rc = reg_subscribe_after(reg, on_change, p);
    if (rc < 0) {
        csi_prober_stop(p);
        csi_prober_free(p);
        return rc;
    }
    pthread_mutex_lock(&p->mu);
    p->go = true;
    pthread_mutex_unlock(&p->mu);
    pr_wake(p);
    *out = p;
    return 0;
}

void csi_prober_stop(struct csi_prober *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    bool again = p->stopped;
    p->stop = p->stopped = true;
    pthread_mutex_unlock(&p->mu);
    if (again)
        return;
    if (p->joinable) {
        pr_wake(p);
        pthread_join(p->thread, NULL);
        p->joinable = false;
    }
    struct pinst *pi;
    while ((pi = LIST_FIRST(&p->all)))
        drop(p, pi);
    csi_client_free(p->client);     /* the callbacks of cancelled calls run */
    p->client = NULL;
    pthread_mutex_lock(&p->mu);
    struct pdone *d;
    while ((d = STAILQ_FIRST(&p->done))) {
        STAILQ_REMOVE_HEAD(&p->done, link);
        free_done(d);
    }
    free(p->dirty);
    p->dirty = NULL;
    p->ndirty = p->dirty_cap = 0;
    pthread_mutex_unlock(&p->mu);
    pr_watch_fini(p);
    free(p->heap);
    p->heap = NULL;
    p->nheap = p->heap_cap = 0;
}

void csi_prober_free(struct csi_prober *p)
{
    if (!p)
        return;
    csi_prober_stop(p);
    csifs_later_remove(p->bell);
    if (p->wake_fd >= 0)
        close(p->wake_fd);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
