/* Wake-ups held for a quiet moment. See later.h. */
#include "base/later.h"
#include "base/defaults.h"
#include "base/knobs.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#define LATER_BELLS 8

/* Lock order: mu is a leaf (only write(2) on an eventfd runs under it). */
static struct {
    pthread_mutex_t mu;
    bool used[LATER_BELLS];
    int fd[LATER_BELLS];
    bool held[LATER_BELLS];
    int64_t since;                   /* when the oldest held bell was held */
} bells = { .mu = PTHREAD_MUTEX_INITIALIZER };
static int any_held;                 /* atomic: a flush has work */
static _Thread_local bool holds;

int csifs_later_add(int fd, int *bell)
{
    int rc = -ENOSPC;
    pthread_mutex_lock(&bells.mu);
    for (int b = 0; b < LATER_BELLS && rc < 0; b++)
        if (!bells.used[b]) {
            bells.used[b] = true;
            bells.fd[b] = fd;
            bells.held[b] = false;
            *bell = b;
            rc = 0;
        }
    pthread_mutex_unlock(&bells.mu);
    return rc;
}

void csifs_later_remove(int bell)
{
    if (bell < 0 || bell >= LATER_BELLS)
        return;
    pthread_mutex_lock(&bells.mu);
    bells.used[bell] = bells.held[bell] = false;
    pthread_mutex_unlock(&bells.mu);
}

/* Under bells.mu. */
static void ring_now(int b)
{
    uint64_t one = 1;
    bells.held[b] = false;
    /* fails only when the counter would overflow: the reader is awake anyway */
    (void)!write(bells.fd[b], &one, sizeof(one));
}

void csifs_later_ring(int bell)
{
    if (bell < 0 || bell >= LATER_BELLS)
        return;
    pthread_mutex_lock(&bells.mu);
    if (!bells.used[bell]) {
        /* removed: nobody to wake */
    } else if (!holds) {
        ring_now(bell);
    } else if (!bells.held[bell]) {
        if (!__atomic_load_n(&any_held, __ATOMIC_RELAXED))
            bells.since = csifs_mono_ns();
        bells.held[bell] = true;
        __atomic_store_n(&any_held, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&bells.mu);
}

void csifs_later_hold(bool on)
{
    holds = on;
}

void csifs_later_flush(void)
{
    if (!__atomic_load_n(&any_held, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&bells.mu);
    __atomic_store_n(&any_held, 0, __ATOMIC_RELAXED);
    for (int b = 0; b < LATER_BELLS; b++)
        if (bells.held[b])
            ring_now(b);
    pthread_mutex_unlock(&bells.mu);
}

bool csifs_later_due(int64_t now_ns)
{
    if (!__atomic_load_n(&any_held, __ATOMIC_ACQUIRE))
        return false;
    pthread_mutex_lock(&bells.mu);
    bool due = __atomic_load_n(&any_held, __ATOMIC_RELAXED) && now_ns - bells.since >= FS_SPIN_NS;
    pthread_mutex_unlock(&bells.mu);
    return due;
}

void csifs_later_flush_due(int64_t now_ns)
{
    if (csifs_later_due(now_ns))
        csifs_later_flush();
}
