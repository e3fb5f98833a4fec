/* The prober against plugins that misbehave, and against a hook that
 * changes its mind fast (issue 13 items 2, 5, 6; DESIGN section 3): short
 * reasons of their own, sanitised plugin strings, refused fingerprints, no
 * connection left behind. A csifs process, real csi-test-plugin processes;
 * every bound is a liveness deadline scaled by tu_ms(). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/prober_util.h"

static struct tf t;

static void teardown(void)
{
    tp_kill_all();
    tf_stop(&t);
}

TestSuite(prober_faults, .fini = teardown, .timeout = 180);

#define OPTS "heartbeat=1s,probe_timeout=1s,health_timeout=3s"

static void spawn(const char *opts)
{
    pu_use(&t);
    pu_spawn("faults", opts);
}

/* ---- 13.2: fast socket changes leave no connection behind ---- */

struct fdcount {
    int fds;        /* open fds */
    int conns;      /* of them, connected unix sockets */
};

/* Whether the unix socket inode is connected (/proc/net/unix St 03). */
static bool unix_connected(unsigned long ino)
{
    FILE *f = fopen("/proc/net/unix", "r");
    cr_assert(f);
    char line[512];
    bool yes = false;
    while (!yes && fgets(line, sizeof(line), f)) {
        unsigned long inode;
        unsigned st;
        if (sscanf(line, "%*s %*s %*s %*s %*s %x %lu", &st, &inode) == 2 && inode == ino)
            yes = st == 3;
    }
    fclose(f);
    return yes;
}

static struct fdcount count_fds(pid_t pid)
{
    char dir[64], path[384], target[128];
    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(dir);
    cr_assert(d, "%s: %s", dir, strerror(errno));
    struct fdcount c = { 0 };
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        c.fds++;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        unsigned long ino;
        if (n > 0) {
            target[n] = '\0';
            if (sscanf(target, "socket:[%lu]", &ino) == 1 && unix_connected(ino))
                c.conns++;
        }
    }
    closedir(d);
    return c;
}

struct idle_wait {
    struct fdcount idle, now;
};

static bool back_to_idle(void *arg)
{
    struct idle_wait *w = arg;
    w->now = count_fds(t.pid);
    return w->now.fds <= w->idle.fds && w->now.conns <= w->idle.conns;
}

Test(prober_faults, fast_socket_flips_leave_no_connection_behind)
{
    spawn(OPTS);
    struct tp_proc pa, pb;
    PLUGIN(&pa, pu_sock("a.sock"), "--type", "node");
    PLUGIN(&pb, pu_sock("b.sock"), "--type", "node");
    /* gRPC up and one instance probed: the idle level of a working csifs */
    pu_reg("csi-node/keep/a", pu_sock("a.sock"));
    WAIT_CAT("csi-node/keep/a/health", "healthy", 2000);
    tu_sleep_ms(500);
    struct idle_wait w = { .idle = count_fds(t.pid) };
    pu_reg("csi-node/p/x", pu_sock("a.sock"));
    cr_assert_eq(tf_sh(&t, "i=0; while [ $i -lt 500 ]; do "
                           "ln -sfn '%s' csi-node/p/x/socket && ln -sfn '%s' csi-node/p/x/socket "
                           "|| exit 1; i=$((i+1)); done",
                       pu_sock("b.sock"), pu_sock("a.sock")), 0);
    cr_assert_eq(tf_sh(&t, "rmdir csi-node/p/x"), 0);
    cr_assert(tu_wait_for(back_to_idle, &w, 10000),
              "%d fds and %d unix connections, %d and %d when idle", w.now.fds, w.now.conns,
              w.idle.fds, w.idle.conns);
    is("csi-node/keep/a/health", "healthy");
}
