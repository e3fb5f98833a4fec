/* Group commit (issue 14) and the full-store reserve (DESIGN 7), against a
 * real `build/csifs` process with the test-only options
 * -o debug_commit_delay_ms=N (every commit held N ms) and
 * -o debug_fail_commit=FILE (the next commit fails while FILE exists). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/testutil.h"

static struct tf t;
static bool tmpfs_mounted;

static void teardown(void)
{
    if (tmpfs_mounted) {
        tf_kill(&t, false);
        umount2(t.state, MNT_DETACH);     /* our own tmpfs, by its own path */
        tmpfs_mounted = false;
    }
    tf_stop(&t);
}

TestSuite(commit, .fini = teardown, .timeout = 240);

#define P(rel) tf_path(&t, rel)

enum op { OP_MKDIR, OP_RMDIR, OP_WRITE, OP_SYMLINK };

/* A child process that waits delay_ms, then does op on path; its exit
 * status is 0 or the errno. */
static pid_t start_op(enum op op, const char *path, const char *arg, int delay_ms)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s", path);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid)
        return pid;
    tu_sleep_ms(delay_ms);
    int rc = 0, fd;
    switch (op) {
    case OP_MKDIR: rc = mkdir(p, 0755); break;
    case OP_RMDIR: rc = rmdir(p); break;
    case OP_SYMLINK: rc = symlink(arg, p); break;
    case OP_WRITE:
        fd = open(p, O_WRONLY | O_TRUNC);
        rc = fd < 0 ? -1 : write(fd, arg, strlen(arg)) == (ssize_t)strlen(arg) ? 0 : -1;
        if (fd >= 0 && close(fd) < 0)
            rc = -1;
        break;
    }
    _exit(rc == 0 ? 0 : errno);
}

static int wait_op(pid_t pid)
{
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static int count_events(void)
{
    return tf_sh(&t, "exit $(timeout 1 cat events | wc -l)");
}

static void spawn(const char *tag, const char *extra)
{
    struct tf_opts o = { .tag = tag, .extra_opts = extra };
    cr_assert_eq(tf_spawn(&t, &o), 0);
}

/* Restart csifs on the same state with new options. */
static void respawn(const char *tag, const char *extra)
{
    tf_kill(&t, false);
    spawn(tag, extra);
}

/* (Validation against what is queued is tested through the registry API in
 * tests/unit/pending.c: through the mount, the kernel serialises the
 * operations of one directory before they reach csifs.) */

/* A failed commit fails every caller of its batch (and those queued behind
 * it) with EIO; memory, tree, store and events are as before. */
Test(commit, failed_commit_fails_its_batch_and_changes_nothing)
{
    char trigger[4096], extra[4200];
    spawn("gc-fail", "debug_commit_delay_ms=300");
    snprintf(trigger, sizeof(trigger), "%s/fail-next-commit", t.dir);
    snprintf(extra, sizeof(extra), "debug_commit_delay_ms=1000,debug_fail_commit=%s", trigger);
    respawn("gc-fail", extra);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/old csi-node/p2 csi-node/p3/old && "
                           "echo /m > csi-node/p/old/mount_point"), 0);
    int events = count_events();
    cr_assert_gt(events, 0);
    FILE *f = fopen(trigger, "w");
    cr_assert(f);
    fclose(f);
    pid_t pids[5];
    /* different directories: the kernel lets them reach csifs together */
    pids[0] = start_op(OP_MKDIR, P("csi-node/p/a"), NULL, 0);
    pids[1] = start_op(OP_MKDIR, P("csi-node/p2/b"), NULL, 100);
    pids[2] = start_op(OP_WRITE, P("csi-node/p/old/mount_point"), "/n\n", 100);
    pids[3] = start_op(OP_MKDIR, P("csi-node/r"), NULL, 150);
    pids[4] = start_op(OP_RMDIR, P("csi-node/p3/old"), NULL, 150);
    for (int k = 0; k < 5; k++) {
        int rc = wait_op(pids[k]);
        cr_assert_eq(rc, EIO, "op %d: %s", k, strerror(rc));
    }
    cr_assert_eq(access(trigger, F_OK), -1, "the trigger was used");
    const char *same = "test \"$(ls -U csi-node | tr '\\n' ' ')\" = 'p3 p2 p ' && "
                       "test \"$(ls -U csi-node/p | tr '\\n' ' ')\" = '%sold ' && "
                       "test -z \"$(ls csi-node/p2)\" && test -d csi-node/p3/old && "
                       "test \"$(cat csi-node/p/old/mount_point)\" = /m";
    cr_assert_eq(tf_sh(&t, same, ""), 0);
    cr_assert_eq(count_events(), events, "no event of the failed batch");
    /* the next commit works, and a restart shows the same */
    cr_assert_eq(mkdir(P("csi-node/p/c"), 0755), 0);
    respawn("gc-fail", NULL);
    cr_assert_eq(tf_sh(&t, same, "c "), 0);
}

/* Readers never wait for a commit: with each held 2 s and 8 writers
 * queued, cat and ls -lR answer at once. */
Test(commit, readers_do_not_wait_for_commits)
{
    spawn("gc-read", NULL);
    cr_assert_eq(tf_sh(&t, "for k in 0 1 2 3 4 5 6 7; do mkdir -p csi-node/p/a$k; done && "
                           "ln -s /run/x.sock csi-node/p/a0/socket"), 0);
    respawn("gc-read", "debug_commit_delay_ms=2000");
    pid_t pids[8];
    char rel[64];
    for (int k = 0; k < 8; k++) {
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/mount_point", k);
        pids[k] = start_op(OP_WRITE, P(rel), "/mnt/x\n", 0);
    }
    tu_sleep_ms(300);                 /* one commit held, the others queued */
    for (int k = 0; k < 3; k++) {
        int64_t t0 = tu_now_ms();
        cr_assert_eq(tf_sh(&t, "cat csi-node/p/a0/health csi-node/p/a1/reason >/dev/null && "
                               "ls -lR . >/dev/null"), 0);
        int64_t dt = tu_now_ms() - t0;
        cr_assert_lt(dt, tu_ms(500), "reads took %lld ms behind held commits", (long long)dt);
    }
    for (int k = 0; k < 8; k++)
        cr_assert_eq(wait_op(pids[k]), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(cat csi-node/p/a7/mount_point)\" = /mnt/x"), 0);
}

/* A lone mutation is committed by the FUSE thread that read it, once it let
 * the loop go (a reader's request wakes the second FUSE thread:
 * fs/serve.c): a SIGTERM while that commit is held ends the loop, the
 * commit is answered, csifs exits 0, and the change is there after a
 * restart. Meanwhile readers are served. */
Test(commit, sigterm_while_the_fuse_thread_commits_answers_the_commit)
{
    spawn("gc-term", NULL);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p csi-node/q/b"), 0);
    respawn("gc-term", "debug_commit_delay_ms=1500");
    pid_t op = start_op(OP_MKDIR, P("csi-node/p/a"), NULL, 0);
    tu_sleep_ms(300);                 /* its commit held */
    int64_t t0 = tu_now_ms();
    /* not csi-node/p: the kernel holds it for the mkdir */
    cr_assert_eq(tf_sh(&t, "ls -lR csi-node/q >/dev/null && cat csi-node/q/b/health >/dev/null"),
                 0);
    cr_assert_lt(tu_now_ms() - t0, tu_ms(500), "a reader waited for the held commit");
    int st, waited = 0;
    cr_assert_eq(waitpid(op, &st, WNOHANG), 0, "the mkdir was answered before its commit");
    cr_assert_eq(kill(t.pid, SIGTERM), 0);
    int64_t end = tu_now_ms() + tu_ms(10000);
    while ((waited = waitpid(t.pid, &st, WNOHANG)) == 0 && tu_now_ms() < end)
        tu_sleep_ms(5);
    cr_assert_eq(waited, t.pid, "csifs still runs 10 s after SIGTERM");
    t.pid = 0;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "csifs ended with status %#x", st);
    cr_assert_eq(wait_op(op), 0, "the mkdir whose commit the SIGTERM found failed");
    spawn("gc-term", NULL);
    cr_assert_eq(tf_sh(&t, "test -d csi-node/p/a"), 0, "the answered mkdir is lost");
}

/* Whether nr is the number of an epoll_wait system call. */
static bool is_epoll_wait(long nr)
{
#ifdef SYS_epoll_wait
    if (nr == SYS_epoll_wait)
        return true;
#endif
    return nr == SYS_epoll_pwait;
}

/* The loop thread ("csifs" or "csifs-fuse") of csifs asleep in
 * epoll_wait, with its voluntary switches; 0 when none. */
static pid_t epoll_sleeper(unsigned long *switches)
{
    char dir[64], path[600], comm[32];
    snprintf(dir, sizeof(dir), "/proc/%d/task", t.pid);
    DIR *d = opendir(dir);
    pid_t found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/comm", dir, e->d_name);
        FILE *f = fopen(path, "re");
        bool loop = f && fgets(comm, sizeof(comm), f) &&
                    (!strcmp(comm, "csifs\n") || !strcmp(comm, "csifs-fuse\n"));
        if (f)
            fclose(f);
        long nr = -1;
        snprintf(path, sizeof(path), "%s/%s/syscall", dir, e->d_name);
        if (loop && (f = fopen(path, "re"))) {
            if (fscanf(f, "%ld", &nr) != 1)
                nr = -1;
            fclose(f);
        }
        if (!is_epoll_wait(nr))
            continue;
        char v[32] = "0";
        snprintf(path, sizeof(path), "%s/%s/status", dir, e->d_name);
        (void)tu_proc_field(path, "voluntary_ctxt_switches", v, sizeof(v));
        *switches = strtoul(v, NULL, 10);
        found = (pid_t)atoi(e->d_name);
    }
    if (d)
        closedir(d);
    return found;
}

/* A lone writer's commits, led by the FUSE thread that read each (the loop
 * let go, fs/serve.c), wake the loop's other thread only for a request that
 * arrives during a commit: through a serial loop of mkdir, ln -s and rmdir
 * it sleeps on in epoll_wait (a chunk of cycles in which it woke, or took
 * the loop, counts as woken). */
Test(commit, a_lone_writer_wakes_no_second_reader)
{
    spawn("gc-lone", NULL);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/first && rmdir csi-node/p/first"), 0);
    unsigned long before = 0, after = 0;
    pid_t tid = 0;
    for (int64_t end = tu_now_ms() + tu_ms(5000); !tid && tu_now_ms() < end; tu_sleep_ms(20))
        tid = epoll_sleeper(&before);
    cr_assert_neq(tid, 0, "no loop thread sleeps in epoll_wait after a commit");
    enum { CHUNKS = 10, CYCLES = 20 };
    int woken = 0;
    for (int c = 0; c < CHUNKS; c++) {
        cr_assert_eq(tf_sh(&t, "i=0; while [ $i -lt %d ]; do mkdir csi-node/p/a$i && "
                               "ln -s /run/x.sock csi-node/p/a$i/socket && "
                               "rmdir csi-node/p/a$i || exit 1; i=$((i + 1)); done", CYCLES), 0);
        pid_t now = epoll_sleeper(&after);
        woken += now != tid || after != before;
        tid = now;
        before = after;
    }
    fprintf(stderr, "a_lone_writer_wakes_no_second_reader: woken in %d of %d chunks\n", woken,
            CHUNKS);
    cr_assert_lt(woken, CHUNKS / 2, "the second reader woke in %d of %d chunks of %d cycles",
                 woken, CHUNKS, CYCLES);
}

static bool exists(void *path)
{
    return access(path, F_OK) == 0;
}

/* DESIGN 7: a request is answered only after the commit that holds it.
 * With -o debug_stall_reply=FILE the commit thread stops after a commit,
 * before answering, once FILE exists: csifs is SIGKILLed there, the caller
 * gets no success, and a restart on the same state shows the change. */
Test(commit, kill_between_commit_and_reply_keeps_the_change)
{
    char marker[4096], extra[4200];
    spawn("gc-stall", NULL);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p"), 0);
    snprintf(marker, sizeof(marker), "%s/committed", t.dir);
    snprintf(extra, sizeof(extra), "debug_stall_reply=%s", marker);
    respawn("gc-stall", extra);
    pid_t pid = start_op(OP_MKDIR, P("csi-node/p/a"), NULL, 0);
    cr_assert(tu_wait_for(exists, marker, 10000), "no commit stalled before its reply");
    /* committed, unanswered: the caller still waits */
    int st;
    cr_assert_eq(waitpid(pid, &st, WNOHANG), 0, "mkdir answered before the stall");
    tf_kill(&t, true);
    int rc = wait_op(pid);
    cr_assert_neq(rc, 0, "mkdir succeeded without its answer");
    unlink(marker);
    spawn("gc-stall", NULL);
    cr_assert_eq(tf_sh(&t, "test -d csi-node/p/a && test \"$(ls csi-node/p)\" = a"), 0,
                 "the committed mkdir is lost");
}

/* The store's commits so far, from the metrics file. */
static long store_commits(void)
{
    const char *m = tf_cat(&t, "metrics");
    const char *at = m ? strstr(m, "\ncsifs_store_commits_total ") : NULL;
    cr_assert(at, "no csifs_store_commits_total in metrics");
    return strtol(at + strlen("\ncsifs_store_commits_total "), NULL, 10);
}

/* Concurrent commits share one: the FUSE thread queues every mkdir it reads
 * while a commit is held (no thread per request, fs/ops_write.c). With each
 * commit held, 32 mkdirs in 32 directories take at most 3 commits. */
Test(commit, burst_beyond_eight_writers_shares_commits)
{
    enum { N = 32 };
    spawn("gc-burst", NULL);
    cr_assert_eq(tf_sh(&t, "k=0; while [ $k -lt %d ]; do mkdir csi-node/b$k || exit 1; "
                           "k=$((k+1)); done", N), 0);
    char extra[64], rel[64];
    snprintf(extra, sizeof(extra), "debug_commit_delay_ms=%lld", (long long)tu_ms(1000));
    respawn("gc-burst", extra);
    long before = store_commits();
    pid_t pids[N];
    for (int k = 0; k < N; k++) {
        snprintf(rel, sizeof(rel), "csi-node/b%d/a", k);
        pids[k] = start_op(OP_MKDIR, P(rel), NULL, 0);
    }
    for (int k = 0; k < N; k++)
        cr_assert_eq(wait_op(pids[k]), 0, "mkdir %d", k);
    long commits = store_commits() - before;
    cr_assert_geq(commits, 1);
    cr_assert_leq(commits, 3, "%d mkdirs took %ld commits", N, commits);
    cr_assert_eq(tf_sh(&t, "test $(ls -d csi-node/b*/a | wc -l) -eq %d", N), 0);
}

/* Issue 13 test 4 and DESIGN 7: the state on a 2 MiB tmpfs filled until
 * ENOSPC by instances with 3 KB attributes, then the disk filled to the
 * last block: every removal (truncate, socket unlink, rmdir) commits, before
 * and after a restart, also when batched with refused additions. */
Test(commit, full_store_keeps_room_for_removals)
{
    char cmd[8192];
    spawn("gc-full", NULL);
    tf_kill(&t, false);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s' && mount -t tmpfs -o size=2m tmpfs '%s'",
             t.state, t.state, t.state);
    cr_assert_eq(system(cmd), 0);
    tmpfs_mounted = true;
    spawn("gc-full", NULL);
    cr_assert_eq(tf_sh(&t, "mkdir csi-node/p csi-node/q"), 0);
    char big[3002];
    memset(big, 'm', sizeof(big));
    big[0] = '/';
    big[3000] = '\n';
    big[3001] = '\0';
    int n = 0, rc = 0;
    char rel[128];
    for (; n < 1000; n++) {
        snprintf(rel, sizeof(rel), "csi-node/p/a%d", n);
        if (mkdir(P(rel), 0755) < 0) {
            rc = errno;
            break;
        }
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/mount_point", n);
        rc = wait_op(start_op(OP_WRITE, P(rel), big, 0));
        snprintf(rel, sizeof(rel), "csi-node/p/a%d/socket", n);
        if (rc == 0)
            rc = wait_op(start_op(OP_SYMLINK, P(rel), "/run/csi-test/some.sock", 0));
        if (rc) {
            n++;                         /* this one exists, partly filled */
            break;
        }
    }
    cr_assert_eq(rc, ENOSPC, "filling the store: %s after %d instances", strerror(rc), n);
    cr_assert_gt(n, 10);
    /* now the disk itself, to the last block */
    snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of='%s/filler' bs=4k 2>/dev/null; "
                               "dd if=/dev/zero of='%s/filler2' bs=512 2>/dev/null; true",
             t.state, t.state);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(mkdir(P("csi-node/p/new"), 0755), -1);
    cr_assert_eq(errno, ENOSPC);

    /* restart on the full disk, commits held: an rmdir with additions
     * queued behind it (validated before its pages are freed) */
    respawn("gc-full", "debug_commit_delay_ms=1000");
    pid_t del = start_op(OP_RMDIR, P("csi-node/p/a0"), NULL, 0);
    pid_t add1 = start_op(OP_MKDIR, P("csi-node/q/new"), NULL, 100);
    pid_t add2 = start_op(OP_MKDIR, P("csi-node/r"), NULL, 100);
    int rd = wait_op(del), r1 = wait_op(add1), r2 = wait_op(add2);
    cr_assert_eq(rd, 0, "rmdir batched with additions: %s", strerror(rd));
    cr_assert_eq(r1, ENOSPC, "%s", strerror(r1));
    cr_assert_eq(r2, ENOSPC, "%s", strerror(r2));

    /* a third removed field by field */
    respawn("gc-full", NULL);
    int k = 1;
    for (; k < n / 3; k++)
        cr_assert_eq(tf_sh(&t, "d=csi-node/p/a%d; truncate -s0 $d/mount_point && "
                               "test ! -s $d/mount_point && rm -f $d/socket && rmdir $d", k), 0,
                     "removing a%d of %d on a full store", k, n);
    respawn("gc-full", NULL);
    for (; k < n; k++) {
        snprintf(rel, sizeof(rel), "csi-node/p/a%d", k);
        cr_assert_eq(rmdir(P(rel)), 0, "rmdir a%d of %d after a restart: %s", k, n,
                     strerror(errno));
    }
    respawn("gc-full", NULL);
    cr_assert_eq(tf_sh(&t, "test -z \"$(ls csi-node/p)\" && test -z \"$(ls csi-node/q)\""), 0,
                 "every removal survived the restart");
    snprintf(cmd, sizeof(cmd), "rm -f '%s/filler' '%s/filler2'", t.state, t.state);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(tf_sh(&t, "mkdir csi-node/p/again && echo /x > csi-node/p/again/mount_point"), 0);
}
