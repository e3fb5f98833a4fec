/* `current` follows health (issue 24; DESIGN section 2): the newest ready
 * instance that is healthy; with none healthy it stays; a restart alone
 * never moves it; each move is one `current` event. A csifs process, real
 * csi-test-plugin processes, the real hook; every bound is a liveness
 * deadline scaled by tu_ms() (CSIFS_TEST_SLACK). */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/prober_util.h"

PU_SUITE(current_health, "curh", 120)

/* Death detection is what moves current: the heartbeat is left long. */
#define OPTS "heartbeat=30s,probe_timeout=1s,health_timeout=3s"

static char hook[PATH_MAX];

/* csi-node/p/<alloc> healthy on a node plugin of its own at <alloc>.sock. */
static void healthy(struct tp_proc *pp, const char *alloc)
{
    char inst[64], sock[16], rel[80];
    snprintf(inst, sizeof(inst), "csi-node/p/%s", alloc);
    snprintf(sock, sizeof(sock), "%s.sock", alloc);
    snprintf(rel, sizeof(rel), "%s/health", inst);
    PLUGIN(pp, pu_sock(sock), "--type", "node", "--node-id", alloc);
    pu_reg(inst, pu_sock(sock));
    WAIT_CAT(rel, "healthy", 3000);
}

/* o1 then o2, both healthy: current is o2, after two `current` events. */
static void two_healthy(struct tp_proc *p1, struct tp_proc *p2)
{
    cr_assert(getcwd(hook, sizeof(hook) - 32));
    strcat(hook, "/scripts/csi-plugin-hook");
    healthy(p1, "o1");
    link_is("csi-node/p/current", "o1");
    healthy(p2, "o2");
    WAIT_LINK("csi-node/p/current", "o2", 1000);
    cr_assert_eq(pu_count_events("current csi-node/p "), 2);
}

/* The hook's wait-plugin succeeds at once and prints a socket that leads
 * to want's plugin. */
static void wait_plugin_reaches(const char *want)
{
    char sock[16];
    snprintf(sock, sizeof(sock), "%s.sock", want);
    int rc = tf_sh(&t, "out=$(CSIFS_MOUNT=\"$MNT\" '%s' wait-plugin --type node --plugin p "
                       "--timeout 5s) && [ \"$out\" = \"$MNT/csi-node/p/current/socket\" ] && "
                       "[ \"$(readlink -f \"$out\")\" = '%s' ]", hook, pu_sock(sock));
    cr_assert_eq(rc, 0, "wait-plugin while %s is current: exit %d", want, rc);
}

Test(current_health, sigkilled_current_fails_over_to_the_older_healthy_one)
{
    spawn(OPTS);
    struct tp_proc p1, p2;
    two_healthy(&p1, &p2);
    cr_assert_geq(tp_kill(&p2), 0);
    /* a killed plugin reads unhealthy within 1 s (DESIGN 3): current with it */
    WAIT_LINK("csi-node/p/current", "o1", 1000);
    is("csi-node/p/o2/health", "unhealthy");
    is("csi-node/p/o2/ready", "1");
    cr_assert_eq(pu_count_events("current csi-node/p alloc=o1"), 2, "one event per move");
    cr_assert_eq(pu_count_events("current csi-node/p "), 3);
    wait_plugin_reaches("o1");
    /* o2 back: current back */
    struct tp_proc p2b;
    PLUGIN(&p2b, pu_sock("o2.sock"), "--type", "node", "--node-id", "o2");
    WAIT_LINK("csi-node/p/current", "o2", 6000);
    cr_assert_eq(pu_count_events("current csi-node/p "), 4);
    wait_plugin_reaches("o2");
}

Test(current_health, sigstopped_current_moves_after_probe_timeout_and_back)
{
    spawn("heartbeat=1s,probe_timeout=1s,health_timeout=3s");
    struct tp_proc p1, p2;
    two_healthy(&p1, &p2);
    cr_assert_eq(kill(p2.pid, SIGSTOP), 0);
    /* the next heartbeat's Probe times out: heartbeat + probe_timeout */
    WAIT_LINK("csi-node/p/current", "o1", 2000 + 1000);
    is("csi-node/p/o2/health", "unhealthy");
    cr_assert_eq(pu_count_events("current csi-node/p "), 3);
    wait_plugin_reaches("o1");
    cr_assert_eq(kill(p2.pid, SIGCONT), 0);
    /* back once o2 answers again: within the unhealthy backoff (<= 5 s) */
    WAIT_CAT("csi-node/p/o2/health", "healthy", 7000);
    WAIT_LINK("csi-node/p/current", "o2", 200);
    cr_assert_eq(pu_count_events("current csi-node/p "), 4, "one event per move");
}

Test(current_health, a_lone_instance_going_unhealthy_keeps_current)
{
    spawn(OPTS);
    struct tp_proc p1;
    healthy(&p1, "o1");
    cr_assert_geq(tp_kill(&p1), 0);
    WAIT_CAT("csi-node/p/o1/health", "unhealthy", 1000);
    link_is("csi-node/p/current", "o1");
    cr_assert_eq(pu_count_events("current csi-node/p "), 1);
}

/* The events-file line number (1-based) of the first line after `after`
 * holding text, or 0. */
static int line_of(const char *text, int after)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && timeout 1 cat events | awk 'NR > %d && index($0, \"%s\") { print NR; "
             "exit }'", t.mnt, after, text);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    int n = 0;
    if (fscanf(f, "%d", &n) != 1)
        n = 0;
    pclose(f);
    return n;
}

Test(current_health, restart_with_the_newest_plugin_dead_moves_only_after_its_first_probe)
{
    spawn(OPTS);
    struct tp_proc p1, p2;
    two_healthy(&p1, &p2);
    tf_halt(&t);
    cr_assert_geq(tp_kill(&p2), 0);
    pu_spawn("curh", OPTS);
    WAIT_LINK("csi-node/p/current", "o1", 6000);   /* restored ones probed within 5 s */
    is("csi-node/p/o2/health", "unhealthy");       /* restored ready: unhealthy at once */
    /* the ring holds this run's events only: o2's first probe, then the move */
    int probed = line_of("health csi-node/p/o2 state=unhealthy", 0);
    int moved = line_of("current csi-node/p alloc=o1", 0);
    cr_assert_gt(probed, 0);
    cr_assert_gt(moved, probed, "current moved (line %d) before o2's first probe (line %d)",
                 moved, probed);
    cr_assert_eq(pu_count_events("current csi-node/p "), 1, "one move");
    wait_plugin_reaches("o1");
    /* and this restart, with o1 current, does not move it back to o2 */
    tf_halt(&t);
    pu_spawn("curh", OPTS);
    WAIT_CAT("csi-node/p/o1/health", "healthy", 6000);
    WAIT_CAT("csi-node/p/o2/health", "unhealthy", 6000);
    link_is("csi-node/p/current", "o1");
    cr_assert_eq(pu_count_events("current csi-node/p "), 0, "a restart alone moves nothing");
}
