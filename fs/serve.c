/* The FUSE request loop: one thread at a time reads (a second one takes
 * over when a request arrives while the first runs work a handler
 * deferred: below), and it polls /dev/fuse for a short while after each
 * request before it sleeps.
 *
 * Why: on this kind of VM a round trip that has to wake a sleeping thread
 * is dear when the machine is idle. A vCPU with nothing to run halts at
 * once (the guest's haltpoll does not poll), so a reader's request that
 * finds csifs asleep in read() wakes a halted vCPU, and so does the reply:
 * about 1.2-1.6 halts and 26-39 us per pipe round trip between two idle
 * processes, 7-9 us when the answering side polls (docs/benchmarks.md,
 * "What bounds the short rows"). A reader's next request (the RELEASE and
 * OPEN of the next file, the GETATTR of the next directory of `ls -lR`)
 * then finds this thread awake. The poll yields the CPU to anything else
 * runnable on it at each turn and lasts only FS_SPIN_NS after the last
 * request (or longer when its handler asked: fs_serve_stay_awake, a replay
 * of events; a yield that ran others past that ends it: on a busy CPU a sleeping
 * thread's request wakes it ahead of the others, a polling one would wait
 * its turn), and not after one handed to the
 * commit thread (which answers it later): an idle csifs sleeps in poll(2)
 * as before. An answer sent from another thread (a commit's) first wakes
 * the loop's holder if it sleeps (fs_serve_kick): the request the answer
 * releases then finds it polling. */
#include "fs/serve.h"
#include "base/defaults.h"
#include "base/knobs.h"
#include "base/later.h"
#include "base/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* FS_SPIN_NS, how long the thread stays awake after a request (more than a
 * reader's work between two requests: ls -lR about 90 us per directory
 * here; -DFS_SPIN_NS=0 -DFS_STREAM_SPIN_NS=0 sleeps at once): base/knobs.h. */

/* Set by fs_serve_handed_off during a request: its answer comes from
 * another thread, later (the commit thread), so no poll after it. */
static _Thread_local bool handed_off;

/* How long to poll after the request being processed: FS_SPIN_NS, or
 * longer when its handler asked (fs_serve_stay_awake). */
static _Thread_local int64_t stay_ns;

void fs_serve_stay_awake(int64_t ns)
{
    if (ns > stay_ns)
        stay_ns = ns;
}

/* The request being processed (fs_serve_hdr). */
static _Thread_local struct fs_serve_hdr hdr;

const struct fs_serve_hdr *fs_serve_hdr(void)
{
    return &hdr;
}

/* The kernel's header of a request read into memory (with no write_buf
 * handler libfuse never splices: every request is read into b->mem). */
static void read_hdr(const struct fuse_buf *b)
{
    struct fuse_in_header in;
    if (!b->mem || (b->flags & FUSE_BUF_IS_FD) || b->size < sizeof(in)) {
        hdr = (struct fs_serve_hdr){ 0 };
        return;
    }
    memcpy(&in, b->mem, sizeof(in));
    hdr = (struct fs_serve_hdr){ .unique = in.unique, .nodeid = in.nodeid,
                                 .opcode = in.opcode };
}

/* When the last request was finished (atomic): fs_serve_last_done_ns. */
static int64_t last_done_ns;

int64_t fs_serve_last_done_ns(void)
{
    return __atomic_load_n(&last_done_ns, __ATOMIC_RELAXED);
}

void fs_serve_handed_off(void)
{
    handed_off = true;
}

/* fs_serve_keep_init's memory: the INIT request is copied there. */
static void *init_buf;
static uint32_t init_cap, *init_len;

void fs_serve_keep_init(void *buf, uint32_t cap, uint32_t *len)
{
    init_buf = buf;
    init_cap = cap;
    init_len = len;
}

/* A fresh connection's first request is INIT (opcode 26, struct
 * fuse_in_header: len, opcode at 4): keep it for a successor. */
static void keep_init(const struct fuse_buf *b)
{
    uint32_t op;
    if (!init_len || *init_len || !b->mem || b->size < 8 || b->size > init_cap)
        return;
    memcpy(&op, (const char *)b->mem + 4, sizeof(op));
    if (op != 26)
        return;
    memcpy(init_buf, b->mem, b->size);
    __atomic_store_n(init_len, (uint32_t)b->size, __ATOMIC_RELEASE);
}

/* fs_serve_wake's eventfd, polled beside /dev/fuse: a stop asked from a
 * signal handler on any thread, or just before the loop's poll(2), would
 * otherwise wait for the next request. (While the loop is free, below, the
 * stop is seen when the thread that let it go returns, or by the other one
 * at the next request.) Made once, never closed (a handler
 * may write to it at any time), closed on exec. */
static int wake_fd = -1;
static pthread_once_t wake_once = PTHREAD_ONCE_INIT;

static void wake_make(void)
{
    __atomic_store_n(&wake_fd, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), __ATOMIC_RELEASE);
}

int fs_serve_wake_init(void)
{
    pthread_once(&wake_once, wake_make);
    return __atomic_load_n(&wake_fd, __ATOMIC_ACQUIRE) >= 0 ? 0 : -EMFILE;
}

void fs_serve_wake(void)
{
    int fd = __atomic_load_n(&wake_fd, __ATOMIC_ACQUIRE), e = errno;
    uint64_t one = 1;
    if (fd >= 0 && write(fd, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is full, so the loop is woken anyway */
    }
    errno = e;
}

/* Whether a loop thread sleeps in sleep_until_ready (fs_serve_kick). */
static int asleep;
static void (*on_sleep)(void);

void fs_serve_on_sleep(void (*fn)(void))
{
    __atomic_store_n(&on_sleep, fn, __ATOMIC_RELEASE);
}

static bool take_back(void);

void fs_serve_kick(bool done)
{
    if (done && take_back())
        return;
    if (__atomic_load_n(&asleep, __ATOMIC_ACQUIRE))
        fs_serve_wake();
}

/* Sleep until /dev/fuse has a request or fs_serve_wake was called: 1 when
 * woken by the latter. */
static int sleep_until_ready(int fd)
{
    struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
                           { .fd = __atomic_load_n(&wake_fd, __ATOMIC_ACQUIRE),
                             .events = POLLIN } };
    csifs_later_flush();
    void (*fn)(void) = __atomic_load_n(&on_sleep, __ATOMIC_ACQUIRE);
    __atomic_store_n(&asleep, 1, __ATOMIC_RELEASE);
    int got = poll(p, 2, fn ? FS_QUIET_MS : -1);
    if (got == 0) {                  /* idle FS_QUIET_MS: asleep, so a kick still wakes it */
        fn();
        got = poll(p, 2, -1);
    }
    __atomic_store_n(&asleep, 0, __ATOMIC_RELEASE);
    if (got < 0)
        return errno == EINTR ? 0 : -errno;
    uint64_t n;
    if (!(p[1].revents & POLLIN))
        return 0;
    return read(p[1].fd, &n, sizeof(n)) < 0 && errno != EAGAIN ? -errno : 1;
}

/* ---- the loop's two threads ----
 * The thread that called fs_serve and, from the first fs_serve_defer, a
 * standby. One of them at a time holds the loop: reads /dev/fuse and runs
 * the handlers, so handlers never run concurrently. A handler that defers
 * work (a commit to lead) makes its thread let the loop go after the
 * request, run the work, then take the loop again. While the loop is free
 * /dev/fuse is in lp.ep (EPOLLONESHOT), where the other thread sleeps: a
 * request that arrives meanwhile wakes it and it holds the loop, so a
 * reader's request never waits for that work (DESIGN 7); a lone
 * writer's commit, with no request behind it, wakes nobody, and the thread
 * takes the loop back before the answer that ends its work (take_back).
 * Lock order: lp.mu is innermost (only epoll_ctl and the standby's start
 * are called under it). */
static struct {
    pthread_mutex_t mu;
    bool free;                       /* nobody holds the loop (/dev/fuse in ep) */
    bool end;                        /* the loop ended: both threads return */
    bool standby;                    /* the standby thread was started */
    pthread_t th;
    int rc;                          /* the loop's outcome */
    int fd;                          /* /dev/fuse */
    int ep;                          /* epoll: bell, and fd while free */
    int bell;                        /* eventfd, written when the loop ends */
} lp = { .mu = PTHREAD_MUTEX_INITIALIZER, .ep = -1, .bell = -1 };

/* What a handler deferred (fs_serve_defer), and whether this thread is one
 * of the loop's. */
static _Thread_local struct {
    void (*fn)(void *);
    void *arg;
} deferred;
static _Thread_local bool in_loop;
/* Where this thread's deferred work left the loop: held (none, or the
 * loop could not be let go), let go (free_loop), taken back early by the
 * answer that ended the work (take_back). */
static _Thread_local enum { LOOP_HELD, LOOP_LET_GO, LOOP_TAKEN_BACK } mine;

bool fs_serve_can_defer(void)
{
    return in_loop;
}

void fs_serve_defer(void (*fn)(void *), void *arg)
{
    deferred.fn = fn;
    deferred.arg = arg;
}

/* Under lp.mu: /dev/fuse in lp.ep or out of it. In, a request wakes the
 * sleeper (once: EPOLLONESHOT); out, nothing does (disarmed in the set, it
 * would still be woken in the kernel by each request, for nothing). A
 * removal that fails costs the sleeper one spurious wake-up at worst (it
 * finds the loop held), and the next arm re-arms it in place. */
static int arm(void)
{
    struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT };
    if (epoll_ctl(lp.ep, EPOLL_CTL_ADD, lp.fd, &ev) == 0)
        return 0;
    if (errno == EEXIST && epoll_ctl(lp.ep, EPOLL_CTL_MOD, lp.fd, &ev) == 0)
        return 0;
    return -errno;
}

static void disarm(void)
{
    if (epoll_ctl(lp.ep, EPOLL_CTL_DEL, lp.fd, NULL) < 0) {
        /* ENOENT: out already */
    }
}

static void end_loop(int rc)
{
    uint64_t one = 1;
    pthread_mutex_lock(&lp.mu);
    lp.end = true;
    if (rc < 0 && lp.rc == 0)
        lp.rc = rc;
    pthread_mutex_unlock(&lp.mu);
    if (write(lp.bell, &one, sizeof(one)) < 0) {
        /* EAGAIN: the counter is full, so the sleeper is woken anyway */
    }
}

/* Under lp.mu: take the loop if it is free (and not ended). */
static bool take_if_free(void)
{
    bool got = !lp.end && lp.free;
    if (got) {
        lp.free = false;
        disarm();
    }
    return got;
}

/* Take the loop once it is free, sleeping in lp.ep meanwhile; false when
 * the loop ended. */
static bool take_loop(void)
{
    for (;;) {
        pthread_mutex_lock(&lp.mu);
        bool end = lp.end, got = take_if_free();
        pthread_mutex_unlock(&lp.mu);
        if (end || got)
            return got;
        struct epoll_event ev;
        csifs_later_flush();
        if (epoll_wait(lp.ep, &ev, 1, -1) < 0 && errno != EINTR) {
            end_loop(-errno);
            return false;
        }
    }
}

/* fs_serve_kick: the thread that let the loop go takes it back if it is
 * still free, before the answer that ends its work: the requests the
 * answer releases then find it, and the other thread is not woken. */
static bool take_back(void)
{
    if (mine != LOOP_LET_GO)
        return false;
    pthread_mutex_lock(&lp.mu);
    if (take_if_free())
        mine = LOOP_TAKEN_BACK;
    pthread_mutex_unlock(&lp.mu);
    return mine == LOOP_TAKEN_BACK;
}

static int serve_loop(struct fuse_session *se, bool holds);

static void *standby_main(void *arg)
{
    serve_loop(arg, false);
    return NULL;
}

/* Let the loop go (the standby started now if need be: it takes the loop
 * at once, the first time); false when there is no standby: the work then
 * runs with the loop held, as a last resort. */
static bool free_loop(struct fuse_session *se)
{
    pthread_mutex_lock(&lp.mu);
    int rc = arm();
    if (rc == 0 && !lp.standby)
        rc = csifs_thread_start(&lp.th, "csifs-fuse", standby_main, se);
    if (rc == 0)
        lp.standby = lp.free = true;
    else
        disarm();
    pthread_mutex_unlock(&lp.mu);
    return rc == 0;
}

/* Whether to poll again rather than sleep (now: the clock), yielding the
 * CPU to whatever else wants it. A yield that ran another task past the
 * window ends the polling at the next check: a request then wakes a
 * sleeping thread, ahead of the tasks that took the CPU. */
static bool keep_polling(int64_t awake_until, int64_t now)
{
    if (now >= awake_until)
        return false;
    csifs_later_flush_due(now);      /* a wake-up held too long (base/later.h) */
    sched_yield();
    return true;
}

/* The loop of one of its threads; holds: this thread holds it already. */
static int serve_loop(struct fuse_session *se, bool holds)
{
    int fd = fuse_session_fd(se);
    struct fuse_buf buf = { .mem = NULL };
    int64_t awake_until = 0;
    int rc = 0;
    in_loop = true;
    csifs_later_hold(true);
    if (!holds && !take_loop())
        goto out;
    while (!fuse_session_exited(se)) {
        int res = fuse_session_receive_buf(se, &buf);
        if (res == -EAGAIN && keep_polling(awake_until, csifs_mono_ns())) {
            continue;
        } else if (res == -EAGAIN) {
            int woken = sleep_until_ready(fd);
            if (woken < 0) {
                rc = woken;
                break;
            }
            if (woken)               /* fs_serve_wake: a request may follow (below) */
                awake_until = csifs_mono_ns() + FS_SPIN_NS;
        } else if (res > 0) {
            handed_off = false;
            stay_ns = FS_SPIN_NS;
            keep_init(&buf);
            read_hdr(&buf);
            fuse_session_process_buf(se, &buf);
            hdr = (struct fs_serve_hdr){ 0 };
            int64_t done = csifs_mono_ns();
            __atomic_store_n(&last_done_ns, done, __ATOMIC_RELAXED);
            awake_until = handed_off ? 0 : done + stay_ns;
            csifs_later_flush_due(done);
            if (!deferred.fn)
                continue;
            void (*fn)(void *) = deferred.fn;
            deferred.fn = NULL;
            mine = free_loop(se) ? LOOP_LET_GO : LOOP_HELD;
            fn(deferred.arg);
            if (mine == LOOP_HELD)
                continue;
            /* Its answers went out: the requests they release come to this
             * thread if it took the loop back before the last one
             * (fs_serve_kick), else to the holder (woken by the answers if
             * it slept) or, once it lets the loop go, to this one. */
            bool let_go = mine == LOOP_LET_GO;
            mine = LOOP_HELD;
            if (let_go && !take_loop())
                goto out;
            awake_until = csifs_mono_ns() + FS_SPIN_NS;
        } else if (res != -EINTR) {
            rc = res;                /* 0: unmounted (libfuse ended the session) */
            break;
        }
    }
    end_loop(rc);
out:
    in_loop = false;
    csifs_later_hold(false);
    csifs_later_flush();
    free(buf.mem);
    return rc;
}

/* lp's epoll (the bell in it, /dev/fuse not) and bell for fd. */
static int loop_open(int fd)
{
    struct epoll_event bell = { .events = EPOLLIN };
    lp.fd = fd;
    lp.ep = epoll_create1(EPOLL_CLOEXEC);
    lp.bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (lp.ep < 0 || lp.bell < 0 || epoll_ctl(lp.ep, EPOLL_CTL_ADD, lp.bell, &bell) < 0)
        return -errno;
    return 0;
}

static void loop_close(void)
{
    if (lp.ep >= 0)
        close(lp.ep);
    if (lp.bell >= 0)
        close(lp.bell);
    lp.ep = lp.bell = -1;
}

int fs_serve(struct fuse_session *se)
{
    int fd = fuse_session_fd(se), fl = fcntl(fd, F_GETFL);
    if (fs_serve_wake_init() < 0)
        return -EMFILE;
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    lp.free = lp.end = lp.standby = false;
    lp.rc = 0;
    int rc = loop_open(fd);
    if (rc == 0) {
        serve_loop(se, true);
        pthread_mutex_lock(&lp.mu);
        bool standby = lp.standby;
        pthread_mutex_unlock(&lp.mu);
        if (standby)
            pthread_join(lp.th, NULL);
        rc = lp.rc;
    }
    loop_close();
    if (fcntl(fd, F_SETFL, fl) < 0 && rc == 0)
        rc = -errno;
    fuse_session_reset(se);
    return rc;
}
