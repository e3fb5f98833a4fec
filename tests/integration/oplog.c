/* The log an operator reads (issue 24; DESIGN section 9): levels, the
 * caller of each mutation, the change's own state, the start-up summary,
 * refusals with their cause, -o log_file= stamped with time and level. A
 * csifs process, real plugins; bounds are liveness deadlines. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/prober_util.h"

PU_SUITE(oplog, "oplog", 120)

static char logf[512];

/* Spawn csifs with -o opts and log_file= csifs.log in the test's temp dir
 * (logf; removed with the dir by the suite's .fini, whatever the outcome):
 * the whole -o, for a restart. */
static const char *spawn_logged(const char *opts)
{
    static char all[1024];
    pu_use(&t);
    if (!t.dir)
        cr_assert_not_null(t.dir = tu_tmpdir("oplog"));
    snprintf(logf, sizeof(logf), "%s/csifs.log", t.dir);
    snprintf(all, sizeof(all), "%s%slog_file=%s", opts, *opts ? "," : "", logf);
    spawn(all);
    return all;
}

/* The log holds a line matching the extended regex re: a liveness bound. */
struct lw {
    const char *re;
};
static bool log_has(void *arg)
{
    const struct lw *w = arg;
    return tf_sh(&t, "grep -Eq -- '%s' '%s'", w->re, logf) == 0;
}
#define LOG_HAS(re)                                                                 \
    do {                                                                            \
        struct lw w_ = { re };                                                      \
        cr_assert(tu_wait_for(log_has, &w_, 3000), "no log line /%s/", re);         \
    } while (0)

#define TS "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "
/* A refusal is logged after its answer, and its caller's comm read then:
 * a caller already gone has none. */
#define COMM(c) "( \\(" c "\\))?"

Test(oplog, levels_callers_states_summary_and_refusals)
{
    const char *opts = spawn_logged("heartbeat=30s,probe_timeout=1s,health_timeout=3s,"
                                    "log_level=debug,max_instances=1");
    LOG_HAS(TS "info restored 0 plugins, 0 instances from .* in [0-9]+ ms$");
    struct tp_proc pa;
    PLUGIN(&pa, pu_sock("a.sock"), "--type", "node", "--node-id", "na");
    pu_reg("csi-node/p/a", pu_sock("a.sock"));
    WAIT_CAT("csi-node/p/a/health", "healthy", 3000);
    /* registrations and socket: info, with the caller (uid, pid, comm) */
    LOG_HAS(TS "info registered csi-node/p/a by uid [0-9]+ pid [0-9]+ \\(mkdir\\)$");
    LOG_HAS(TS "info csi-node/p/a: socket .*/a.sock by uid [0-9]+ pid [0-9]+ \\(ln\\)$");
    /* the change's own state, not the state at logging time */
    LOG_HAS(TS "info csi-node/p/a: health unknown \\(not yet probed\\) ready 0$");
    LOG_HAS(TS "notice csi-node/p/a: health healthy \\(ok\\) ready 1$");
    LOG_HAS(TS "notice csi-node/p: current a$");
    LOG_HAS(TS "debug csi-node/p/a: probe ok in [0-9.]+ ms \\(ok\\)$");
    cr_assert_geq(tp_kill(&pa), 0);
    LOG_HAS(TS "warning csi-node/p/a: health unhealthy \\(connect: Connection refused\\) "
               "ready 1$");
    /* refusals with their cause: max_instances in its own words, at info */
    cr_assert_neq(tf_sh(&t, "mkdir csi-node/p/b 2>/dev/null"), 0);
    LOG_HAS(TS "info refused: mkdir csi-node/p/b by uid [0-9]+ pid [0-9]+" COMM("mkdir") ": "
               "max_instances \\(1\\) reached for this plugin$");
    /* ln -sfn refused: logged as the socket, not under ln's temporary name */
    cr_assert_neq(tf_sh(&t, "ln -sfn relative/x.sock csi-node/p/a/socket 2>/dev/null"), 0);
    LOG_HAS(TS "info refused: socket csi-node/p/a -> relative/x.sock by uid [0-9]+ pid "
               "[0-9]+" COMM("ln") ": socket target must be an absolute path$");
    cr_assert_neq(tf_sh(&t, "grep -q 'Cu[A-Za-z0-9]\\{6\\}' '%s'", logf), 0,
                  "ln's temporary name in the log");
    /* rmdir: the caller of the deregistration */
    cr_assert_eq(tf_sh(&t, "rmdir csi-node/p/a"), 0);
    LOG_HAS(TS "info deregistered csi-node/p/a by uid [0-9]+ pid [0-9]+ \\(rmdir\\)$");
    LOG_HAS(TS "notice csi-node/p: current \\(none\\) by uid [0-9]+ pid [0-9]+ \\(rmdir\\)$");
    /* a restart summarizes what it restored */
    tf_halt(&t);
    pu_spawn("oplog", opts);
    LOG_HAS(TS "info restored 1 plugins, 0 instances from .* in [0-9]+ ms$");
}

/* A caller that execs keeps its pid and takes the new program's name: each
 * change is logged with the name the caller had when it made it. */
Test(oplog, a_caller_that_execs_is_logged_by_its_new_name)
{
    spawn_logged("");
    char pidf[600], re[256], pid[32] = "";
    snprintf(pidf, sizeof(pidf), "%s/perl.pid", t.dir);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/q && perl -e '$| = 1; open(my $f, \">\", "
                           "\"%s\") or exit 2; print $f $$; close($f); mkdir(\"csi-node/q/x\") "
                           "or exit 1; exec(\"rmdir\", \"csi-node/q/x\") or exit 3'", pidf), 0);
    FILE *f = fopen(pidf, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(pid, sizeof(pid), f));
    fclose(f);
    snprintf(re, sizeof(re), TS "info registered csi-node/q/x by uid [0-9]+ pid %s \\(perl\\)$",
             pid);
    LOG_HAS(re);
    snprintf(re, sizeof(re), TS "info deregistered csi-node/q/x by uid [0-9]+ pid %s "
             "\\(rmdir\\)$", pid);
    LOG_HAS(re);
}

/* A change's line is written after its answer, what it shows read before:
 * a batch of more registrations than a thread queues (15 mkdirs in as
 * many plugins behind a held commit) logs each once, with its caller's
 * name though every caller has ended by then, in commit order. */
Test(oplog, a_batch_logs_every_caller_by_name_in_order)
{
    spawn_logged("debug_commit_delay_ms=300");
    cr_assert_eq(tf_sh(&t, "for i in $(seq 0 15); do mkdir -p csi-node/b$i || exit 1; done; "
                           "for i in $(seq 0 15); do mkdir csi-node/b$i/x & done; wait"), 0);
    for (int i = 0; i < 16; i++) {
        char re[160];
        snprintf(re, sizeof(re), TS "info registered csi-node/b%d/x by uid [0-9]+ pid [0-9]+ "
                 "\\(mkdir\\)$", i);
        LOG_HAS(re);
    }
    cr_assert_eq(tf_sh(&t, "e=$(timeout 1 cat events | grep -o 'csi-node/b[0-9]*/x'); "
                           "l=$(grep -o 'registered csi-node/b[0-9]*/x' '%s' | cut -d' ' -f2) && "
                           "[ $(echo \"$e\" | wc -l) -eq 16 ] && [ \"$e\" = \"$l\" ]", logf),
                 0, "the log's lines not once each in commit order");
}

/* Twelve callers at once, each a process of its own name, more than the
 * comm files csifs keeps open (fs/oplog.c): every line names its own
 * caller, and once csifs is idle again it holds one such file at most. */
Test(oplog, parallel_callers_each_by_name_and_their_files_given_back)
{
    spawn_logged("");
    char script[600];
    snprintf(script, sizeof(script), "%s/w.pl", t.dir);
    FILE *f = fopen(script, "w");
    cr_assert_not_null(f);
    fputs("$0 = $ARGV[0];\n"                 /* perl sets the comm (prctl) */
          "for my $i (0..9) {\n"
          "    my $d = \"csi-node/p/$ARGV[0]-$i\";\n"
          "    mkdir($d) or exit 1;\n"
          "    rmdir($d) or exit 2;\n"
          "}\n", f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p && pids= && for k in $(seq 0 11); do "
                           "perl '%s' w$k & pids=\"$pids $!\"; done; "
                           "for p in $pids; do wait $p || exit 1; done", script), 0);
    for (int k = 0; k < 12; k++) {
        char re[200];
        snprintf(re, sizeof(re), TS "info deregistered csi-node/p/w%d-9 by uid [0-9]+ pid "
                 "[0-9]+ \\(w%d\\)$", k, k);
        LOG_HAS(re);
        cr_assert_eq(tf_sh(&t, "[ $(grep -Ec 'registered csi-node/p/w%d-[0-9] by uid [0-9]+ pid "
                               "[0-9]+ \\(w%d\\)$' '%s') -eq 20 ] && "
                               "[ $(grep -c 'csi-node/p/w%d-' '%s') -eq 20 ]",
                           k, k, logf, k, logf), 0, "w%d's 20 lines, each naming it", k);
    }
    cr_assert_eq(tf_sh(&t, "i=0; while [ $(ls -l /proc/%d/fd | grep -c '/comm$') -gt 1 ]; do "
                           "i=$((i + 1)); [ $i -lt %d ] || exit 1; sleep 0.1; done",
                       (int)t.pid, (int)(tu_ms(10000) / 100)), 0, "idle, csifs still holds more than one comm file");
}

Test(oplog, log_level_warning_keeps_only_warnings)
{
    spawn_logged("heartbeat=30s,probe_timeout=1s,log_level=warning");
    struct tp_proc pa;
    PLUGIN(&pa, pu_sock("a.sock"), "--type", "node", "--node-id", "na");
    pu_reg("csi-node/p/a", pu_sock("a.sock"));
    WAIT_CAT("csi-node/p/a/health", "healthy", 3000);
    cr_assert_geq(tp_kill(&pa), 0);
    LOG_HAS(TS "warning csi-node/p/a: health unhealthy ");
    cr_assert_neq(tf_sh(&t, "grep -Ev '^[^ ]+ (warning|err) ' '%s'", logf), 0,
                  "lines below warning at log_level=warning");
}

/* A refused name or socket target holding a newline is logged escaped as
 * the events stream escapes it: it cannot forge a line. */
Test(oplog, control_characters_in_refused_names_and_targets_are_escaped)
{
    spawn_logged("");
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a"), 0);
    cr_assert_neq(tf_sh(&t, "mkdir \"csi-node/p/x$(printf '\\nforged')\" 2>/dev/null"), 0);
    cr_assert_neq(tf_sh(&t, "ln -sfn \"/x$(printf '\\nforged\\tline')\" csi-node/p/a/socket "
                            "2>/dev/null"), 0);
    LOG_HAS(TS "info refused: mkdir csi-node/p/x\\\\nforged by uid [0-9]+ pid [0-9]+"
               COMM("mkdir") ": name must be 1-63 of ");
    LOG_HAS(TS "info refused: socket csi-node/p/a -> /x\\\\nforged\\\\tline by uid [0-9]+ pid "
               "[0-9]+" COMM("ln") ": control characters are not allowed$");
    cr_assert_neq(tf_sh(&t, "grep -q '^forged' '%s'", logf), 0, "a forged line in the log");
}
