/* gRPC channels under the open-file limit (issue 24): instances that share
 * a socket share one channel, so 400 instances on 4 sockets all turn
 * healthy under `prlimit --nofile=256:256`; past the limit with distinct
 * sockets, the reasons say "connect: Too many open files" and the log has
 * one warning. One csifs process, one test plugin serving N sockets. */
#include "tests/integration/prober_util.h"

#include <unistd.h>

PU_SUITE(channels, "chan", 180)

static char logf[512];

/* csifs with its open-file limit set to 256 (soft and hard) and a log file;
 * one plugin serving sock.0 .. sock.<nsock-1>; n instances csi-node/p/a<k>
 * on sock.<k % nsock>. */
static void setup_run(int nsock, int n)
{
    char opts[1024], ns[16];
    snprintf(logf, sizeof(logf), "%s/csifs-chan-%d.log", P_tmpdir, (int)getpid());
    unlink(logf);
    snprintf(opts, sizeof(opts), "heartbeat=30s,health_timeout=20s,log_file=%s", logf);
    spawn(opts);
    cr_assert_eq(tf_sh(&t, "prlimit --pid %d --nofile=256:256", (int)t.pid), 0);
    struct tp_proc pl;
    snprintf(ns, sizeof(ns), "%d", nsock);
    cr_assert_eq(tp_start(&pl, "--socket", pu_sock("sock"), "--sockets", ns, "--type", "node",
                          (const char *)NULL), 0);
    cr_assert_eq(tf_sh(&t, "mkdir csi-node/p && k=0; while [ $k -lt %d ]; do "
                           "mkdir csi-node/p/a$k && ln -s '%s.'$((k %% %d)) csi-node/p/a$k/socket "
                           "|| exit 1; k=$((k + 1)); done", n, pu_sock("sock"), nsock), 0);
}

static int count_health(const char *health)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "cat '%s'/csi-node/p/a*/health | grep -c '^%s$'", t.mnt, health);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f && fscanf(f, "%d", &n) != 1)
        n = -1;
    if (f)
        pclose(f);
    return n;
}

static bool all_healthy(void *arg)
{
    return count_health("healthy") == *(int *)arg;
}

Test(channels, four_hundred_instances_on_four_sockets_all_turn_healthy_under_256_fds)
{
    int n = 400;
    setup_run(4, n);
    cr_assert(tu_wait_for(all_healthy, &n, 30000), "%d of %d healthy", count_health("healthy"),
              n);
    cr_assert_neq(tf_sh(&t, "grep -q 'Too many open files' '%s'", logf), 0);
    unlink(logf);
}

#define WARNING "warning the open-file limit (256) is reached: instances past it read " \
                "\"connect: Too many open files\""

/* Two instances' reasons say EMFILE (each was warned about, if at all,
 * before its reason was written) and the log has the warning. */
static bool emfile_twice_warned(void *arg)
{
    (void)arg;
    return tf_sh(&t, "test \"$(grep -l 'connect: Too many open files' csi-node/p/a*/reason | "
                     "wc -l)\" -ge 2 && grep -qF '%s' '%s'", WARNING, logf) == 0;
}

Test(channels, past_the_limit_the_reasons_say_emfile_and_one_warning_is_logged)
{
    setup_run(200, 200);             /* 200 connections, two fds each */
    cr_assert(tu_wait_for(emfile_twice_warned, NULL, 30000),
              "no two reasons say Too many open files, or no warning");
    cr_assert_gt(count_health("healthy"), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(grep -cF '%s' '%s')\" = 1", WARNING, logf), 0,
                 "not exactly one warning");
    unlink(logf);
}
