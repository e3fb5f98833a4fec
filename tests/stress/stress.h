/* make stress: 8 processes doing random operations on overlapping names of
 * both types, plus an events reader, against one build/asan/csifs, with
 * invariants checked throughout (stress.c says which). */
#ifndef CSIFS_STRESS_H
#define CSIFS_STRESS_H

#include <stdint.h>

#define ST_WORKERS 8
#define ST_PLUGINS 3            /* s0..s2 in each type */
#define ST_ALLOCS 5             /* a0..a4 in each plugin */
#define ST_OP_MS 5000           /* no operation may take longer */

/* Counters shared by every process (an anonymous shared mapping). */
struct st_shared {
    volatile int stop;
    uint64_t ops[ST_WORKERS + 1];       /* last: events lines read */
    int64_t max_op_ms[ST_WORKERS + 1];
    int violations[ST_WORKERS + 1];
};

struct st_env {
    const char *mnt;
    const char *socks[2];
    struct st_shared *sh;
};

/* worker.c */
int st_worker(const struct st_env *e, int id, unsigned seed);
int st_events_reader(const struct st_env *e);
/* Report one broken invariant of process id (stderr, and counted). */
void st_violation(const struct st_env *e, int id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
