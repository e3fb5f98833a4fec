/* The crash test's load besides the writers, in takeover mode (takeover.c):
 * processes that use the mount the way its users do and write down every
 * answer no user may see. Each runs until the stop file exists and appends
 * one line per failure to <dir>/<name>.fail; ld_status tells whether one
 * is stuck in a command longer than the bound. None of them is a child
 * that the harness waits on to make a FUSE call itself. */
#ifndef CSIFS_CRASH_LOAD_H
#define CSIFS_CRASH_LOAD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct ld_env {
    const char *mnt, *dir, *stop;
    int64_t bound_ms;           /* a command longer than this fails */
    const char *canary;         /* a `health` that must read `healthy` throughout */
    const char *current;        /* a `current` read with readlink */
};

/* The readers, in loops of the real commands: `ls -lR <mnt>`, `cat
 * <canary>` (must print healthy), `readlink -v <current>`. ENOENT (an
 * entry removed meanwhile) is the only error they may print. */
enum ld_reader { LD_LS, LD_CAT, LD_READLINK, LD_NREADERS };
extern const char *const ld_reader_names[LD_NREADERS];
pid_t ld_reader(const struct ld_env *l, enum ld_reader k);

/* A process whose cwd is dir: `readlink current` every 10 ms (ENOENT
 * allowed); a line on c->in is answered on c->out with what it reads
 * now ("" for none, "ERR <errno>"). */
struct ld_cwd {
    pid_t pid;
    int in, out;
};
int ld_cwd_start(const struct ld_env *l, const char *dir, struct ld_cwd *c);
/* Its answer into buf; 0, or -errno (-ETIMEDOUT after ms). */
int ld_cwd_ask(struct ld_cwd *c, char *buf, size_t len, int64_t ms);

/* `cat <mnt>/events` with its stdout in <dir>/events.out, stderr in
 * <dir>/events.err. */
pid_t ld_events(const struct ld_env *l);
/* A poll() waiter: opens path, reads it, polls for POLLPRI: exits 0 once
 * woken, 1 when poll() returned nothing in 10 minutes, 2 on an error. */
pid_t ld_poller(const char *path);
/* Is pid (the poller) asleep in poll()? */
bool ld_in_poll(pid_t pid);

/* The failures reader name wrote after byte *off (updated): how many,
 * the first few printed on stderr with prefix. */
int ld_failures(const struct ld_env *l, const char *name, long *off, const char *prefix);
/* Is reader name in a command started more than the bound ago? Its
 * command line into what. */
bool ld_stuck(const struct ld_env *l, const char *name, char *what, size_t len);

#endif
