/* make crash-test: SIGKILL csifs under writers, restart it on the stale
 * mount, and check that what the writers were told is what is there.
 *
 * Names of writer w (each writer alone mutates its own names, so its log
 * alone says their state; "shared" plugins hold instances of every writer,
 * whose relative order is checked against real time):
 *   plugins    <type>/p<w>
 *   instances  <type>/{p<w>,shared}/w<w>-<k>, k < CR_K
 * Each writer logs every operation to its own file, one line before the
 * syscall ("B ...") and one after it ("E rc end_ns"); the file is written
 * with write(2) by a process that is not killed, so it survives the kill of
 * csifs. An operation whose end line is missing, or whose rc says the
 * connection went away (ENOTCONN, ECONNABORTED), was in flight: the restored
 * tree may show it done or not done.
 *
 * Takeover mode (TAKEOVER=1, UPGRADE=1: takeover.c) keeps csifs under the
 * test fd store: no operation may be in flight or see the connection go,
 * every answer must be the one the log implies, `socket` is set by the real
 * `ln -sfn` (any failure of it fails), and a syscall longer than the
 * liveness bound fails. Writers run until the stop file exists and wait
 * while the pause file exists (having made <logdir>/w<w>.paused). */
#ifndef CSIFS_CRASH_H
#define CSIFS_CRASH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define CR_K 3                  /* instance names per writer and plugin */
#define CR_SLOTS (2 * 2 * CR_K) /* type x {own, shared} x k */
#define CR_MAX_WRITERS 8
#define CR_VAL 64

enum cr_op {
    CR_PMK, CR_PRM, CR_SMK, CR_IMK, CR_IRM, CR_SOCK, CR_UNSOCK, CR_ATTR, CR_TRUNC,
    CR_READY, CR_NOPS
};
extern const char *const cr_op_names[CR_NOPS];
extern const char *const cr_attr_names[2];   /* mount_point, container_mount_point */

/* One logged operation. slot: the type for plugin ops, else the instance
 * slot; arg: socket target index or attribute; val: socket target or value. */
struct cr_rec {
    enum cr_op op;
    int slot, arg;
    char val[CR_VAL];
    int64_t start_ns, end_ns;   /* CLOCK_MONOTONIC; end INT64_MAX if in flight */
    int rc;                     /* 0, -errno, or 1 (READY read "1") */
    bool inflight;
};

/* The run's layout, shared by writers and the checker. */
struct cr_env {
    const char *mnt;
    const char *socks[2];       /* live plugin sockets; target 2 is a dead path */
    const char *logdir;
    int writers;
    bool takeover;              /* takeover mode (above) */
    const char *stop, *pause;   /* takeover mode: the harness's files */
    int64_t bound_ns;           /* takeover mode: the liveness bound */
    const char *const *extra;   /* takeover mode: other plugins in csi-node */
};

/* A writer's rc when `ln -sfn` exited with status s (its stderr is in
 * <logdir>/w<w>.ln). */
#define CR_LN_FAILED(s) (-1000 - (s))

/* "<type>/p<w>" or "<type>/shared" (own = false), and an instance slot's
 * path relative to the mount, in a static rotating buffer. */
const char *cr_plugin_path(int w, int type, bool own);
const char *cr_slot_path(int w, int slot);
int cr_slot_type(int slot);
bool cr_slot_own(int slot);
int cr_slot_k(int slot);
/* The socket target of index i for writer w. */
const char *cr_target(const struct cr_env *e, int i);

/* writer.c: run writer w until the connection is lost or run_ms pass
 * (takeover mode: until the stop file exists); returns its exit code. */
int cr_writer(const struct cr_env *e, int w, uint64_t seed, int64_t run_ms);
/* check.c: read the logs and the restored tree; 0 when it matches, else 1
 * with what differs on stderr. */
int cr_check(const struct cr_env *e);
/* main.c: the name, state and top of the kernel stack of each thread of
 * pid on stderr (read from /proc: never blocks), for the report of a wedge. */
void cr_show_threads(pid_t pid);
/* takeover.c: the rounds of TAKEOVER=1 (SIGKILL) or UPGRADE=1 (SIGUSR2);
 * the exit code of the crash test. */
int cr_takeover_main(int rounds, uint64_t seed, bool upgrade);

#endif
