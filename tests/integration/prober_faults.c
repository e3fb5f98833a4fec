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

PU_SUITE(prober_faults, "faults", 180)

#define OPTS "heartbeat=1s,probe_timeout=1s,health_timeout=3s"

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

/* ---- 13.5: each probe names its own cause, never a path ---- */

/* Every line of inst's history is "<time> <latency>ms error: <reason>"
 * or "... not_ready: <reason>" (at least n lines). */
static void history_says(const char *inst, const char *reason, int n)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "%s/history", inst);
    char *h = pu_cat(rel);
    cr_assert(h, "%s: %s", rel, strerror(errno));
    int lines = 0;
    size_t rl = strlen(reason);
    for (char *l = h, *nl; *l; l = nl ? nl + 1 : l + strlen(l), lines++) {
        nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        bool err = len > rl + 10 && !strncmp(l + len - rl - 10, "ms error: ", 10);
        bool nr = len > rl + 14 && !strncmp(l + len - rl - 14, "ms not_ready: ", 14);
        cr_assert((err || nr) && !strncmp(l + len - rl, reason, rl),
                  "%s: line %.*s does not end with \"ms error: %s\"", rel, (int)len, l, reason);
        cr_assert_null(strstr(l, t.dir), "%s names a path: %s", rel, l);
    }
    cr_assert_geq(lines, n, "%s: %d lines", rel, lines);
    free(h);
}

Test(prober_faults, history_of_each_bad_plugin_names_its_own_cause)
{
    /* past health_timeout: the summary reason is the timeout, each
     * history line still its probe's own cause */
    spawn("heartbeat=1s,probe_timeout=1s,health_timeout=2s");
    struct tp_proc hang, garbage, lazy;
    PLUGIN(&hang, pu_sock("hang.sock"), "--type", "node", "--hang");
    PLUGIN(&garbage, pu_sock("garbage.sock"), "--garbage");
    PLUGIN(&lazy, pu_sock("lazy.sock"), "--type", "node", "--not-ready");
    pu_reg("csi-node/hang/a", pu_sock("hang.sock"));
    pu_reg("csi-node/garbage/a", pu_sock("garbage.sock"));
    pu_reg("csi-node/lazy/a", pu_sock("lazy.sock"));
    pu_reg("csi-node/gone/a", pu_sock("gone.sock"));
    static const char *const insts[] = { "hang", "garbage", "lazy", "gone" };
    /* the stable part, then the last failure's cause (issue 24) */
    static const char *const causes[] = { "Probe timed out after 1s", "protocol: not HTTP/2",
                                          "not ready", "connect: No such file or directory" };
    for (int k = 0; k < 4; k++) {
        char rel[64], want[128];
        snprintf(rel, sizeof(rel), "csi-node/%s/a/reason", insts[k]);
        snprintf(want, sizeof(want), "did not become healthy within 2s: %s", causes[k]);
        WAIT_CAT(rel, want, 2000 + 2000);
    }
    history_says("csi-node/hang/a", "Probe timed out after 1s", 2);
    history_says("csi-node/garbage/a", "protocol: not HTTP/2", 2);
    history_says("csi-node/lazy/a", "not ready", 2);
    history_says("csi-node/gone/a", "connect: No such file or directory", 2);
    /* no reason in the events names a path either (the socket events do) */
    cr_assert_neq(tf_sh(&t, "timeout 1 cat events | grep -v ' socket ' | grep -qF '%s'", t.dir),
                  0, "an event reason names the temp dir");
}

/* ---- 13.6: what a plugin sends is shown safely, or refused ---- */

Test(prober_faults, control_characters_and_invalid_utf8_show_as_question_marks)
{
    spawn(OPTS);
    struct tp_proc pu;
    PLUGIN(&pu, pu_sock("u.sock"), "--type", "node", "--name", "bad\001name\377",
           "--vendor-version", "1.0\303", "--node-id", "id\177\342\202", "--topology",
           "zone=z\377\t");
    pu_reg("csi-node/u/a", pu_sock("u.sock"));
    WAIT_CAT("csi-node/u/a/health", "healthy", 2000);
    is("csi-node/u/a/provider", "bad?name?");
    is("csi-node/u/a/version", "1.0?");
    is("csi-node/u/a/nodeid", "id???");
    is("csi-node/u/a/topology", "zone=z??");
    pu_has_event("fingerprint csi-node/u/a provider=bad?name? version=1.0? nodeid=id???");
    /* nothing else of it reached the events */
    cr_assert_neq(tf_sh(&t, "timeout 1 cat events | LC_ALL=C grep -q '[^ -~]'"), 0,
                  "a byte outside printable ASCII in the events");
}

struct refusal {
    const char *flag, *arg, *flag2, *arg2, *reason;
};

Test(prober_faults, fingerprints_no_file_can_show_are_refused)
{
    spawn("heartbeat=1s,probe_timeout=2s,health_timeout=30s");
    static const struct refusal r[] = {
        { "--node-id-size", "1048576", NULL, NULL, "protocol: reply over 64 KiB" },
        { "--node-id-size", "300", NULL, NULL, "fingerprint: node_id over 256 bytes" },
        { "--topology-sep", ":", "--topology", "zo=ne:z1", "fingerprint: bad topology key" },
        { "--topology", "zone=z 1", NULL, NULL, "fingerprint: bad topology key" },
    };
    struct tp_proc pp[4];
    for (int k = 0; k < 4; k++) {
        char name[32], inst[64];
        snprintf(name, sizeof(name), "r%d.sock", k);
        const char *argv[] = { "--socket", pu_sock(name), "--type", "node", r[k].flag,
                               r[k].arg, r[k].flag2, r[k].arg2, NULL };
        cr_assert_eq(tp_startv(&pp[k], argv), 0, "tp_start %s", r[k].flag);
        snprintf(inst, sizeof(inst), "csi-node/r%d/a", k);
        pu_reg(inst, pu_sock(name));
    }
    for (int k = 0; k < 4; k++) {
        char rel[64];
        snprintf(rel, sizeof(rel), "csi-node/r%d/a/reason", k);
        WAIT_CAT(rel, r[k].reason, 3000);
        snprintf(rel, sizeof(rel), "csi-node/r%d/a/health", k);
        is(rel, "unknown");
        snprintf(rel, sizeof(rel), "csi-node/r%d/a/nodeid", k);
        is(rel, "");
    }
}
