/* Recovering a wedged holder's state dir. See recover.h. */
#include "cmd/recover.h"
#include "cmd/mountpoint.h"
#include "base/defaults.h"
#include "base/log.h"
#include "registry/store.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define LOCK_WAIT_MS 4000            /* the zombie exits once its thread is freed */
#define TAKEOVER_WAIT_MS 5000        /* the predecessor's exit frees csifs.lock */

/* 'Z' for a zombie, another state letter, or 0 when there is no such process. */
static char proc_state(long pid)
{
    char path[64], line[256], st = 0;
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    while (!st && fgets(line, sizeof(line), f))
        if (!strncmp(line, "State:", 6))
            sscanf(line + 6, " %c", &st);
    fclose(f);
    return st ? st : '?';
}

/* The lock is free (h is its last holder's note) but names mnt's
 * connection, which another process holds (a forked child of the old csifs,
 * say: a wedge) and which does not answer: abort it, so that
 * csifs_mountpoint_prepare finds the mount dead (ENOTCONN) and unmounts it.
 * Never merely because the probe timed out; never another state dir's
 * mount (its connection is not the one our lock file names). */
static void recover_held(const struct store_holder *h, const char *mnt, bool fuse_fd_handed)
{
    /* With a FUSE fd handed over (a restart without unmount, DESIGN 13) the
     * connection is ours to take over: this rule must not fire. */
    if (fuse_fd_handed)
        return;
    char type[64];
    unsigned conn = 0;
    if (!h->conn || strcmp(h->mount, mnt) ||
        csifs_mount_find(mnt, type, sizeof(type), &conn) != 1 || strcmp(type, "fuse.csifs") ||
        conn != h->conn)
        return;
    long holder = csifs_conn_holder(conn);
    if (holder <= 0 || csifs_mount_probe(mnt) != -ETIMEDOUT)
        return;
    csifs_log(LOG_WARNING, "%s: the FUSE connection %u of a dead csifs (pid %ld) is held by "
              "pid %ld and does not answer: aborting it", mnt, conn, h->pid, holder);
    int rc = csifs_conn_abort(conn);
    if (rc < 0)
        csifs_log(LOG_WARNING, "cannot abort FUSE connection %u: %s", conn, strerror(-rc));
}

int csifs_state_recover(const char *state, const char *mnt, bool fuse_fd_handed, char *err,
                        size_t errlen)
{
    struct store_holder h;
    int busy = store_lock_holder(state, &h);
    if (busy == 0)
        recover_held(&h, mnt, fuse_fd_handed);
    if (busy != 1 || h.pid <= 0)
        return 0;                    /* free, no lock file, or not written yet */
    char s = proc_state(h.pid);
    if (s && s != 'Z')
        return 0;                    /* alive: store_check says who */
    csifs_log(LOG_WARNING, "%s: lock held by pid %ld, %s: aborting its FUSE connection %u (%s)",
            state, h.pid, s ? "a zombie" : "dead", h.conn, *h.mount ? h.mount : "no mount");
    /* a zombie still holds its connection, so the id cannot be another's;
     * for a vanished pid, abort only what the mount table confirms */
    char type[64];
    unsigned conn = 0;
    bool ours = s == 'Z' || (*h.mount && csifs_mount_find(h.mount, type, sizeof(type), &conn) == 1 &&
                             !strcmp(type, "fuse.csifs") && conn == h.conn);
    int rc = h.conn && ours ? csifs_conn_abort(h.conn) : -ENOENT;
    if (rc < 0)
        csifs_log(LOG_WARNING, "cannot abort FUSE connection %u: %s", h.conn, strerror(-rc));
    for (int k = 0; k < LOCK_WAIT_MS / 10; k++) {
        if (store_lock_holder(state, &h) != 1)
            return 0;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    snprintf(err, errlen, "%s: state dir still locked by pid %ld (%s) after aborting its "
             "connection", state, h.pid, s ? "a zombie" : "dead");
    return -EBUSY;
}

int csifs_state_wait(const char *state, char *err, size_t errlen)
{
    struct store_holder h;
    int64_t end = csifs_mono_ms() + TAKEOVER_WAIT_MS;
    while (store_lock_holder(state, &h) == 1) {
        if (csifs_mono_ms() > end) {
            snprintf(err, errlen, "%s: state dir still locked by pid %ld", state, h.pid);
            return -EBUSY;
        }
        struct timespec ts = { 0, 2 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}
