/* serve: the FUSE request loop of one session (serve.c says why it polls
 * before it sleeps). Runs on the calling thread (and, once a handler
 * defers work, on a second one: one of the two reads at a time) until the
 * session is unmounted or exits (fuse_session_exit, libfuse's signal
 * handlers); returns 0 or a negative errno once both are done. */
#ifndef CSIFS_SERVE_H
#define CSIFS_SERVE_H

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

int fs_serve(struct fuse_session *se);
/* Wake the loop so that it sees fuse_session_exit at once: async-signal
 * safe, any thread. fs_serve_wake_init (fs_serve calls it too) makes its
 * eventfd: call it before a signal handler may call fs_serve_wake. */
int fs_serve_wake_init(void);
void fs_serve_wake(void);
/* Before an answer sent from any thread: the requests it releases find a
 * reader awake. done: the thread blocks on nothing more before it returns
 * (no further commit). A loop thread that let the loop go for deferred
 * work (fs_serve_defer) then takes it back if it is still free; otherwise
 * the loop's reader is woken if it sleeps (no wake-up is left pending when
 * it polls already). */
void fs_serve_kick(bool done);
/* From a handler on the FUSE thread: this request is answered by another
 * thread later (the registry's commit thread), so the loop does not poll
 * after it. */
void fs_serve_handed_off(void);
/* From a handler: after this request, keep reading at least ns before
 * sleeping (a reader that streams sends its next request once it has
 * consumed this answer). No effect off the loop's threads. */
void fs_serve_stay_awake(int64_t ns);
/* Whether this thread runs the loop (fs_serve_defer is honoured). */
bool fs_serve_can_defer(void);
/* From a handler: once this request is processed, the thread lets the
 * loop go, runs fn(arg), then reads again, or waits its turn if the other
 * thread took the loop. A request that arrives meanwhile wakes that second
 * thread (started on first use, when it takes the loop at once), which
 * reads it and holds the loop from then on. Work that may block (a
 * commit's fsync) thus never makes a request wait. The last one set per
 * request runs. */
void fs_serve_defer(void (*fn)(void *), void *arg);

/* The request being processed on this thread, from its struct
 * fuse_in_header (libfuse 3.14 has no accessor for a request's unique):
 * for a handler the loop called; all zero outside one. A handler that
 * answers later copies what it needs. */
struct fs_serve_hdr {
    uint64_t unique, nodeid;
    uint32_t opcode;
};
#define FS_UNIQUE_RESEND (1ull << 63)   /* FUSE_UNIQUE_RESEND (7.40): sent again */
const struct fs_serve_hdr *fs_serve_hdr(void);

/* fn (NULL: none) is called by the loop's holder once it has slept idle
 * FS_QUIET_MS (base/knobs.h): a quiet moment to give back what a busy spell
 * kept (fs/oplog.c: callers' comm files). Set before serving. */
void fs_serve_on_sleep(void (*fn)(void));

/* When the FUSE thread last finished a request (csifs_mono_ns; 0: none
 * yet). Any thread: /healthz (DESIGN 14) reads it. */
int64_t fs_serve_last_done_ns(void);

/* Copy the first INIT request read (at most cap bytes) to buf and its
 * length to *len, unless *len is already set (DESIGN 13: a successor
 * replays it). One session per process. */
void fs_serve_keep_init(void *buf, uint32_t cap, uint32_t *len);

#endif
