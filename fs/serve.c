/* The FUSE request loop: one thread, which polls /dev/fuse for a short
 * while after each request before it sleeps.
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
 * runnable on it and stops at the first yield that ran another task (on a
 * busy CPU a sleeping thread's request wakes it ahead of the others, a
 * polling one would wait its turn: 35 ms once in events_order), and lasts
 * FS_SPIN_NS after the last request, or while a request handed to a writer
 * is outstanding and FS_SPIN_NS after a writer answered one (a hook's
 * mkdir, symlink, rmdir come one after the other, each after the answer
 * to the one before): an idle csifs sleeps in poll(2) as before. */
#include "fs/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* How long the thread stays awake after a request: more than a reader's
 * work between two requests (ls -lR: about 90 us per directory here). */
#ifndef FS_SPIN_NS                  /* -DFS_SPIN_NS=0: sleep at once, as before */
#define FS_SPIN_NS 200000
#endif
/* How long it stays awake for an outstanding request handed to a writer:
 * a few fsyncs (about 0.3 ms each here); longer ones sleep. */
#define FS_SPIN_HANDED_NS 2000000
/* A sched_yield that took longer ran another task: the CPU is contended. */
#define FS_YIELD_BUSY_NS 20000

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Requests handed to writers and not answered yet; when one last was
 * answered; when the FUSE thread last handed one off. */
static int outstanding;
static int64_t answered_ns;
static _Thread_local int64_t handed_ns;

void fs_serve_handed_off(void)
{
    __atomic_add_fetch(&outstanding, 1, __ATOMIC_RELAXED);
    handed_ns = mono_ns();
}

void fs_serve_answered(void)
{
    __atomic_store_n(&answered_ns, mono_ns(), __ATOMIC_RELAXED);
    __atomic_sub_fetch(&outstanding, 1, __ATOMIC_RELEASE);
}

/* Whether the loop stays awake at now. */
static bool awake(int64_t now, int64_t awake_until)
{
    return now < awake_until ||
           (now < handed_ns + FS_SPIN_HANDED_NS &&
            __atomic_load_n(&outstanding, __ATOMIC_ACQUIRE) > 0) ||
           now < __atomic_load_n(&answered_ns, __ATOMIC_RELAXED) + FS_SPIN_NS;
}

int fs_serve(struct fuse_session *se)
{
    int fd = fuse_session_fd(se), fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    struct fuse_buf buf = { .mem = NULL };
    int64_t awake_until = 0;
    bool contended = false;
    int rc = 0;
    while (!fuse_session_exited(se)) {
        int res = fuse_session_receive_buf(se, &buf);
        int64_t now = res == -EAGAIN ? mono_ns() : 0;
        if (res == -EAGAIN && !contended && awake(now, awake_until)) {
            /* Another task wanted this CPU: sleep instead, so that a
             * request wakes this thread ahead of them as before. */
            sched_yield();
            contended = mono_ns() - now > FS_YIELD_BUSY_NS;
        } else if (res == -EAGAIN) {
            struct pollfd p = { .fd = fd, .events = POLLIN };
            if (poll(&p, 1, -1) < 0 && errno != EINTR) {
                rc = -errno;
                break;
            }
        } else if (res > 0) {
            contended = false;
            fuse_session_process_buf(se, &buf);
            awake_until = mono_ns() + FS_SPIN_NS;
        } else if (res != -EINTR) {
            rc = res;                /* 0: unmounted (libfuse ended the session) */
            break;
        }
    }
    free(buf.mem);
    if (fcntl(fd, F_SETFL, fl) < 0 && rc == 0)
        rc = -errno;
    fuse_session_reset(se);
    return rc;
}
