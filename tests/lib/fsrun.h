/* Run csifs for a test: in this process (a thread serving the mount, the
 * registry at hand) or as a separate `build/csifs -f` process.
 * Both mount under a fresh temp dir (mode 0755) and clean up in tf_stop,
 * which is safe to call on a failed or half-started run. */
#ifndef CSIFS_FSRUN_H
#define CSIFS_FSRUN_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "fs/fs.h"
#include "registry/registry.h"

struct tf {
    char *dir, *mnt, *state;   /* temp dir, its mnt/ and state/ */
    struct reg *reg;           /* in-process only */
    struct fs *fs;
    pthread_t th;
    bool thread;
    pid_t pid;                 /* process mode */
};

struct tf_opts {
    const char *tag;           /* temp dir name part */
    bool memory;               /* in-process: no store */
    bool has_registrar;
    gid_t registrar_gid;
    int64_t pending_ttl_ms;
    int64_t health_timeout_ms;
    const char *extra_opts;    /* process mode: appended to -o */
};

/* In-process: registry (with a store in state/ unless memory) + mount. */
int tf_start(struct tf *t, const struct tf_opts *o);
/* Starting either again after tf_halt reuses the same dir and state. */
/* Separate process: build/csifs -f -o state=<state>[,extra] <mnt>; waits
 * until the mount answers. Reuses t->dir if set (a restart). */
int tf_spawn(struct tf *t, const struct tf_opts *o);
/* SIGTERM (or SIGKILL if kill9) the process and reap it. */
void tf_kill(struct tf *t, bool kill9);
/* Stop whatever runs and unmount, keeping the temp dir (for a restart). */
void tf_halt(struct tf *t);
/* Stop whatever runs, unmount (lazily, aborting through fusectl if stuck),
 * remove the temp dir. */
void tf_stop(struct tf *t);

/* "<mnt>/<rel>" in a static rotating buffer. */
const char *tf_path(struct tf *t, const char *rel);
/* Run a shell command with MNT set to the mount; returns its exit status. */
int tf_sh(struct tf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Read a whole small file into a static buffer, newline stripped; NULL on error. */
const char *tf_cat(struct tf *t, const char *rel);
/* readlink of <mnt>/<rel> into a static buffer; NULL on error. */
const char *tf_readlink(struct tf *t, const char *rel);

#endif
