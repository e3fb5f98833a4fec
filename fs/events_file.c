/* The events file: per-open cursors, deferred reads, interrupts, poll. */
#include "fs/events_file.h"
#include "fs/kinds.h"
#include "fs/serve.h"
#include "base/knobs.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* st_blksize of events. A reader sizes its reads by it (coreutils:
 * max(128 KiB, st_blksize)). 1 MiB is what one request can carry (libfuse's
 * default max_write sets the kernel's max_pages to 256), so a replay of the
 * ring costs an eighth of the round trips of 128 KiB reads
 * (docs/benchmarks.md, events_replay). */
#define FS_EVENTS_BLKSIZE (1 << 20)

struct reader {
    struct fs_fh h;                  /* first */
    struct ev_cursor cur;
    struct fuse_pollhandle *ph;      /* armed poll, or NULL */
    LIST_ENTRY(reader) link;         /* fs_events.readers */
};

/* A read kept for later. Found by id (never by pointer) from the interrupt
 * callback, which libfuse may run concurrently with our reply. */
struct waiter {
    uint64_t id;
    fuse_req_t req;
    struct reader *r;
    size_t size;
    struct waiter *next;
};

struct fs_events {
    pthread_mutex_t mu;
    LIST_HEAD(, reader) readers;
    struct waiter *waiting;
    uint64_t next_id;
    unsigned nreaders;
};

int fs_events_init(struct fs *fs)
{
    fs->events = calloc(1, sizeof(*fs->events));
    if (!fs->events)
        return -ENOMEM;
    pthread_mutex_init(&fs->events->mu, NULL);
    LIST_INIT(&fs->events->readers);
    fs->events->next_id = 1;
    return 0;
}

void fs_events_fini(struct fs *fs)
{
    struct fs_events *e = fs->events;
    if (!e)
        return;
    while (e->waiting) {
        struct waiter *w = e->waiting;
        e->waiting = w->next;
        fuse_reply_err(w->req, EINTR);
        free(w);
    }
    /* no reader is left: fs_destroy released every open file first */
    pthread_mutex_destroy(&e->mu);
    free(e);
    fs->events = NULL;
}

unsigned fs_events_readers(struct fs *fs)
{
    struct fs_events *e = fs->events;
    pthread_mutex_lock(&e->mu);
    unsigned n = e->nreaders;
    pthread_mutex_unlock(&e->mu);
    return n;
}

unsigned fs_parked(struct fs *fs)
{
    struct fs_events *e = fs->events;
    unsigned n = 0;
    pthread_mutex_lock(&e->mu);
    for (struct waiter *w = e->waiting; w; w = w->next)
        n++;
    pthread_mutex_unlock(&e->mu);
    return n;
}

int fs_events_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                   struct fs_fh **out)
{
    (void)n;
    struct fs_events *e = fs->events;
    if ((fi->flags & O_ACCMODE) != O_RDONLY)
        return -EACCES;
    struct reader *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    ev_cursor_init(reg_events(fs->reg), &r->cur);
    pthread_mutex_lock(&e->mu);
    LIST_INSERT_HEAD(&e->readers, r, link);
    e->nreaders++;
    pthread_mutex_unlock(&e->mu);
    *out = &r->h;
    fi->direct_io = 1;
    fi->nonseekable = 1;
    return 0;
}

/* Answer a read from the ring; with e->mu held. Returns false (and does not
 * answer) when there is nothing to read. The ring's spans are pinned
 * (ev_read_iov), copied out with no ring lock held, and the reply written
 * from that copy: the kernel copies from a buffer just written (in cache)
 * faster than from the ring's pages, measured (docs/benchmarks.md,
 * events_replay). With no memory for the copy, from the ring itself. */
static bool answer(struct fs *fs, fuse_req_t req, struct reader *r, size_t size)
{
    struct ev_ring *ring = reg_events(fs->reg);
    struct iovec iov[EV_READ_IOV];
    struct ev_pin pin;
    int niov;
    size_t n = ev_read_iov(ring, &r->cur, size, iov, &niov, &pin);
    char stack[16384];
    char *buf = n <= sizeof(stack) ? stack : malloc(n);
    if (n && buf) {
        ev_iov_copy(buf, iov, niov);
        ev_read_done(ring, &pin);
        fuse_reply_buf(req, buf, n);
    } else {
        if (n)
            fuse_reply_iov(req, iov, niov);
        ev_read_done(ring, &pin);
    }
    if (buf != stack)
        free(buf);
    /* A full read of a large buffer: a replay goes on, and its next READ
     * comes once the reader wrote this one out (FS_STREAM_SPIN_NS). Only
     * on the loop's thread: a parked read the events thread answers does
     * not make the loop stay awake. */
    if (n == size && size >= FS_EVENTS_BLKSIZE / 4)
        fs_serve_stay_awake(FS_STREAM_SPIN_NS);
    return n > 0;
}

/* A parked read or an armed poll waits to be woken: the registry wakes the
 * events thread only while some reader watches (events.h ev_watch). */
static void watch(struct fs *fs, int delta)
{
    ev_watch(reg_events(fs->reg), delta);
}

static void on_interrupt(fuse_req_t req, void *data)
{
    struct fs *fs = fuse_req_userdata(req);
    struct fs_events *e = fs->events;
    uint64_t id = (uint64_t)(uintptr_t)data;
    pthread_mutex_lock(&e->mu);
    for (struct waiter **pp = &e->waiting; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            struct waiter *w = *pp;
            *pp = w->next;
            fuse_reply_err(w->req, EINTR);
            free(w);
            watch(fs, -1);
            break;
        }
    }
    pthread_mutex_unlock(&e->mu);
}

void fs_events_read(struct fs *fs, fuse_req_t req, struct fs_fh *h, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)off;                       /* a stream: the cursor is the position */
    struct fs_events *e = fs->events;
    struct reader *r = (struct reader *)h;
    struct waiter *w = NULL;
    int err = 0;
    if (!(fi->flags & O_NONBLOCK) && !(w = calloc(1, sizeof(*w)))) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    pthread_mutex_lock(&e->mu);
    uint64_t id = e->next_id++;
    pthread_mutex_unlock(&e->mu);
    /* Registered before queueing: see on_interrupt. */
    if (w)
        fuse_req_interrupt_func(req, on_interrupt, (void *)(uintptr_t)id);
    pthread_mutex_lock(&e->mu);
    if (w)
        watch(fs, 1);                /* before the look: see ev_watch */
    if (answer(fs, req, r, size))
        err = 0;
    else if (!w)
        err = EAGAIN;
    else if (fuse_req_interrupted(req))
        err = EINTR;
    else {
        *w = (struct waiter){ .id = id, .req = req, .r = r, .size = size, .next = e->waiting };
        e->waiting = w;
        w = NULL;
    }
    if (w)
        watch(fs, -1);               /* answered or failed: not parked */
    pthread_mutex_unlock(&e->mu);
    free(w);
    if (err)
        fuse_reply_err(req, err);
}

void fs_events_poll(struct fs *fs, fuse_req_t req, struct fs_fh *h, struct fuse_file_info *fi,
                    struct fuse_pollhandle *ph)
{
    (void)fi;
    struct fs_events *e = fs->events;
    struct reader *r = (struct reader *)h;
    pthread_mutex_lock(&e->mu);
    if (ph && !r->ph)
        watch(fs, 1);                /* before the look: see ev_watch */
    bool ready = ev_ready(reg_events(fs->reg), &r->cur);
    if (ph) {
        if (r->ph)
            fuse_pollhandle_destroy(r->ph);
        r->ph = ph;
    }
    pthread_mutex_unlock(&e->mu);
    fuse_reply_poll(req, ready ? POLLIN | POLLRDNORM : 0);
}

void fs_events_release(struct fs *fs, struct fs_fh *h)
{
    struct fs_events *e = fs->events;
    struct reader *r = (struct reader *)h;
    pthread_mutex_lock(&e->mu);
    e->nreaders--;
    for (struct waiter **pp = &e->waiting; *pp;) {
        if ((*pp)->r == r) {
            struct waiter *w = *pp;
            *pp = w->next;
            fuse_reply_err(w->req, EINTR);
            free(w);
            watch(fs, -1);
        } else {
            pp = &(*pp)->next;
        }
    }
    LIST_REMOVE(r, link);
    if (r->ph) {
        fuse_pollhandle_destroy(r->ph);
        watch(fs, -1);
    }
    pthread_mutex_unlock(&e->mu);
    free(r);
}

void fs_events_restarted(struct fs *fs, struct fs_fh *h)
{
    struct fs_events *e = fs->events;
    struct reader *r = (struct reader *)h;
    pthread_mutex_lock(&e->mu);
    r->cur.next = ev_published(reg_events(fs->reg));
    r->cur.off = 0;
    snprintf(r->cur.pend, sizeof(r->cur.pend), "restarted\n");
    pthread_mutex_unlock(&e->mu);
}

void fs_events_wake(struct fs *fs)
{
    struct fs_events *e = fs->events;
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    for (struct waiter **pp = &e->waiting; *pp;) {
        struct waiter *w = *pp;
        if (answer(fs, w->req, w->r, w->size)) {
            *pp = w->next;
            free(w);
            watch(fs, -1);
        } else {
            pp = &w->next;
        }
    }
    struct reader *r;
    LIST_FOREACH(r, &e->readers, link) {
        if (r->ph && ev_ready(reg_events(fs->reg), &r->cur)) {
            fuse_lowlevel_notify_poll(r->ph);
            fuse_pollhandle_destroy(r->ph);
            r->ph = NULL;
            watch(fs, -1);
        }
    }
    pthread_mutex_unlock(&e->mu);
}

void fs_events_stat(struct fs *fs, const struct fs_node *n, struct stat *st)
{
    (void)fs;
    (void)n;
    st->st_blksize = FS_EVENTS_BLKSIZE;
}
