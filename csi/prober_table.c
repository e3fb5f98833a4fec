/* csi prober: the instance table, the timer heap (a binary min-heap on
 * due_ms), the lanes, logging and wake-ups: the bottom layer (see
 * prober_int.h). */
#include "csi/prober_int.h"

#include <limits.h>
#include <search.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void pr_log(struct csi_prober *p, int prio, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (p->o.log)
        p->o.log(prio, "%s", msg);
    else
        fprintf(stderr, "csifs: prober: %s\n", msg);
}

void pr_wake(struct csi_prober *p)
{
    uint64_t one = 1;
    /* fails only when the counter would overflow: it is awake anyway */
    (void)!write(p->wake_fd, &one, sizeof(one));
}

void pr_queue_done(struct csi_prober *p, struct pdone *d)
{
    pthread_mutex_lock(&p->mu);
    /* the scheduler takes the whole queue: one wake-up per batch */
    bool first = STAILQ_EMPTY(&p->done);
    STAILQ_INSERT_TAIL(&p->done, d, link);
    if (first && p->wakes_at_ms && p->wakes_at_ms <= csifs_mono_ms() + PR_DONE_LAG_MS)
        first = false;                 /* it takes the queue by then anyway */
    pthread_mutex_unlock(&p->mu);
    if (first)
        pr_wake(p);
}

/* ---- the heap ---- */

static void heap_put(struct csi_prober *p, size_t at, struct pinst *pi)
{
    p->heap[at] = pi;
    pi->heap_at = (uint32_t)at;
}

static void heap_up(struct csi_prober *p, size_t at)
{
    while (at > 0) {
        size_t up = (at - 1) / 2;
        struct pinst *a = p->heap[at], *b = p->heap[up];
        if (b->due_ms <= a->due_ms)
            break;
        heap_put(p, at, b);
        heap_put(p, up, a);
        at = up;
    }
}

static void heap_down(struct csi_prober *p, size_t at)
{
    for (;;) {
        size_t l = 2 * at + 1, r = l + 1, min = at;
        if (l < p->nheap && p->heap[l]->due_ms < p->heap[min]->due_ms)
            min = l;
        if (r < p->nheap && p->heap[r]->due_ms < p->heap[min]->due_ms)
            min = r;
        if (min == at)
            return;
        struct pinst *a = p->heap[at];
        heap_put(p, at, p->heap[min]);
        heap_put(p, min, a);
        at = min;
    }
}

void pr_unschedule(struct csi_prober *p, struct pinst *pi)
{
    size_t at = pi->heap_at;
    if (pi->heap_at == PR_UNSCHEDULED)
        return;
    pi->heap_at = PR_UNSCHEDULED;
    struct pinst *last = p->heap[--p->nheap];
    if (at == p->nheap)
        return;
    heap_put(p, at, last);
    heap_up(p, at);
    heap_down(p, last->heap_at);
}

void pr_schedule(struct csi_prober *p, struct pinst *pi, int64_t due_ms)
{
    pr_unschedule(p, pi);
    pi->due_ms = due_ms;
    heap_put(p, p->nheap++, pi);
    heap_up(p, pi->heap_at);
}

struct pinst *pr_take_due(struct csi_prober *p, int64_t now_ms)
{
    if (!p->nheap || p->heap[0]->due_ms > now_ms)
        return NULL;
    struct pinst *pi = p->heap[0];
    pr_unschedule(p, pi);
    return pi;
}

/* ---- lanes ---- */

void pr_lane_take(struct csi_prober *p, struct pinst *pi, int64_t now_ms)
{
    pr_lane_give(p, pi);
    pi->lane_ms = now_ms;
    pi->in_lane = true;
    TAILQ_INSERT_TAIL(&p->lane, pi, lane);
    p->nlane++;
}

void pr_lane_give(struct csi_prober *p, struct pinst *pi)
{
    if (!pi->in_lane)
        return;
    pi->in_lane = false;
    TAILQ_REMOVE(&p->lane, pi, lane);
    p->nlane--;
}

/* Give back the lanes of rounds in flight for PR_LANE_MS: a slow or hung
 * plugin holds one that long at most. */
static void lanes_expire(struct csi_prober *p, int64_t now_ms)
{
    struct pinst *pi;
    while ((pi = TAILQ_FIRST(&p->lane)) && pi->lane_ms + PR_LANE_MS <= now_ms)
        pr_lane_give(p, pi);
}

bool pr_may_start(struct csi_prober *p, int64_t now_ms)
{
    lanes_expire(p, now_ms);
    return p->nlane == 0;            /* one lane */
}

int pr_next_timeout(struct csi_prober *p, int64_t now_ms, bool *waits)
{
    *waits = false;
    if (!p->nheap)
        return -1;
    int64_t at = p->heap[0]->due_ms;
    *waits = at <= now_ms && !pr_may_start(p, now_ms);
    if (*waits)      /* due, every lane taken: the first lane to expire */
        at = TAILQ_FIRST(&p->lane)->lane_ms + PR_LANE_MS;
    int64_t ms = at - now_ms;
    return ms <= 0 ? 0 : ms > INT_MAX ? INT_MAX : (int)ms;
}

/* ---- the table ---- */

static int cmp_seq(const void *a, const void *b)
{
    uint64_t x = ((const struct pinst *)a)->seq, y = ((const struct pinst *)b)->seq;
    return x < y ? -1 : x > y;
}

struct pinst *pr_find(struct csi_prober *p, uint64_t seq)
{
    struct pinst key = { .seq = seq };
    void **n = tfind(&key, &p->tree, cmp_seq);
    return n ? *n : NULL;
}

struct pinst *pr_new(struct csi_prober *p, uint64_t seq, enum reg_type type)
{
    if (p->ninst == p->heap_cap) {
        size_t cap = p->heap_cap ? 2 * p->heap_cap : 64;
        struct pinst **h = realloc(p->heap, cap * sizeof(*h));
        if (!h)
            return NULL;
        p->heap = h;
        p->heap_cap = cap;
    }
    struct pinst *pi = calloc(1, sizeof(*pi));
    if (!pi)
        return NULL;
    pi->seq = seq;
    pi->type = (uint8_t)type;
    pi->heap_at = PR_UNSCHEDULED;
    pi->wd = -1;
    pi->epoch = ++p->epochs;
    if (!tsearch(pi, &p->tree, cmp_seq)) {
        free(pi);
        return NULL;
    }
    LIST_INSERT_HEAD(&p->all, pi, link);
    p->ninst++;
    return pi;
}

void pr_free(struct csi_prober *p, struct pinst *pi)
{
    pr_unschedule(p, pi);
    pr_lane_give(p, pi);
    tdelete(pi, &p->tree, cmp_seq);
    LIST_REMOVE(pi, link);
    p->ninst--;
    free(pi->path);
    free(pi);
}
