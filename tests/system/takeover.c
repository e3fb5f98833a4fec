/* Restart without unmount (DESIGN 13) with the test fd store
 * (tests/lib/holder.h): csifs keeps its FUSE connection and state there, a
 * SIGKILLed csifs's successor takes them over, and the processes using the
 * mount see no error and no stale view. The fixture: takeover_fix.h. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/plugin_proc.h"
#include "tests/lib/takeover_fix.h"
#include "tests/lib/testutil.h"

static void setup(void)
{
    cr_assert_eq(tx_setup(), 0);
}

TestSuite(takeover, .init = setup, .fini = tx_teardown, .timeout = 60);

static bool current_is_a1(void *arg)
{
    (void)arg;
    return tx_sh("test \"$(readlink csi-node/c/current)\" = a1") == 0;
}

static bool current_is_a2(void *arg)
{
    (void)arg;
    return tx_sh("test \"$(readlink csi-node/c/current)\" = a2") == 0;
}

static bool file_has(void *arg)
{
    const char **a = arg;
    char cmd[8400];
    snprintf(cmd, sizeof(cmd), "grep -q '%s' '%s'", a[1], a[0]);
    return system(cmd) == 0;
}

/* A shell whose cwd is the plugin dir: prints `readlink current` for
 * every line on its stdin. */
struct cwdproc {
    pid_t pid;
    int in, out;
};

static void cwd_start(struct cwdproc *c, const char *plugin_dir)
{
    int i[2], o[2];
    cr_assert_eq(pipe(i), 0);
    cr_assert_eq(pipe(o), 0);
    c->pid = fork();
    cr_assert_geq(c->pid, 0);
    if (c->pid == 0) {
        dup2(i[0], 0);
        dup2(o[1], 1);
        close(i[1]);
        close(o[0]);
        execl("/bin/sh", "sh", "-c", "cd \"$0\" || exit 1; "
              "while read x; do readlink current || echo ERR; done", plugin_dir, (char *)NULL);
        _exit(127);
    }
    close(i[0]);
    close(o[1]);
    c->in = i[1];
    c->out = o[0];
    tu_note_pid(c->pid);
}

static const char *cwd_ask(struct cwdproc *c)
{
    static char line[256];
    if (write(c->in, "x\n", 2) != 2)
        return NULL;
    size_t n = 0;
    while (n < sizeof(line) - 1 && read(c->out, line + n, 1) == 1 && line[n] != '\n')
        n++;
    line[n] = '\0';
    return line;
}

/* A child process that polls path for POLLPRI: exits 0 when woken. */
static pid_t poller(const char *path)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    int fd = open(path, O_RDONLY);
    char buf[64];
    if (fd < 0 || read(fd, buf, sizeof(buf)) < 0)
        _exit(2);
    struct pollfd p = { .fd = fd, .events = POLLPRI };
    _exit(poll(&p, 1, 60000) == 1 ? 0 : 1);
}

static bool exited0(void *arg)
{
    pid_t pid = *(pid_t *)arg;
    int st;
    return waitpid(pid, &st, WNOHANG) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

Test(takeover, sigkill_successor_takes_over_the_mount)
{
    char s1[4200], s2[4200], evf[4200], health[4200], pdir[4200];
    snprintf(s1, sizeof(s1), "%s/a1.sock", tx_dir);
    snprintf(s2, sizeof(s2), "%s/a2.sock", tx_dir);
    snprintf(evf, sizeof(evf), "%s/events.out", tx_dir);
    snprintf(health, sizeof(health), "%s/csi-node/c/a1/health", tx_mnt);
    snprintf(pdir, sizeof(pdir), "%s/csi-node/c", tx_mnt);
    pid_t p1 = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert_gt(p1, 0);
    cr_assert(hd_wait_ready(&tx_hd, 1, 10000), "no READY=1");
    cr_assert_geq(hd_fd(&tx_hd, "fuse"), 0, "the FUSE fd was not stored");
    cr_assert_geq(hd_fd(&tx_hd, "state"), 0, "the state memfd was not stored");
    struct tp_proc a1, a2;
    cr_assert_eq(tp_start(&a1, "--socket", s1, "--type", "node", NULL), 0);
    cr_assert_eq(tx_sh("mkdir -p csi-node/c/a1 && ln -s '%s' csi-node/c/a1/socket", s1), 0);
    cr_assert(tu_wait_for(current_is_a1, NULL, 10000), "current never a1");
    struct stat before;
    cr_assert_eq(stat(tx_mnt, &before), 0);
    /* the users of the mount: a cwd inside, a blocked events reader, a poller */
    struct cwdproc c;
    cwd_start(&c, pdir);
    cr_assert_str_eq(cwd_ask(&c), "a1");
    char evpath[4200];
    snprintf(evpath, sizeof(evpath), "%s/events", tx_mnt);
    pid_t cat = fork();
    cr_assert_geq(cat, 0);
    if (cat == 0) {
        int fd = open(evf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        execl("/bin/cat", "cat", evpath, (char *)NULL);
        _exit(127);
    }
    tu_note_pid(cat);
    tx_keep_pid(cat);
    pid_t pp = poller(health);
    cr_assert_gt(pp, 0);
    tu_note_pid(pp);
    tx_keep_pid(pp);
    tu_sleep_ms(200);                /* the reader and the poller wait in csifs */

    tx_kill_reap(p1, SIGKILL);
    pid_t p2 = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert_gt(p2, 0);
    cr_assert(hd_wait_ready(&tx_hd, 2, 10000), "the successor sent no READY=1");
    struct stat after;
    cr_assert_eq(stat(tx_mnt, &after), 0, "the mount answers after the takeover");
    cr_assert_eq(before.st_dev, after.st_dev, "the same connection, not a fresh mount");

    /* the repro of issue 26: a2 registered, a1 removed */
    cr_assert_eq(tp_start(&a2, "--socket", s2, "--type", "node", NULL), 0);
    cr_assert_eq(tx_sh("mkdir csi-node/c/a2 && ln -s '%s' csi-node/c/a2/socket", s2), 0);
    cr_assert(tu_wait_for(current_is_a2, NULL, 10000), "current never a2");
    tp_kill(&a1);                    /* a1's health changes: the poller wakes */
    cr_assert(tu_wait_for(exited0, &pp, 20000), "the poll waiter was never woken");
    tx_forget_pid(pp);
    cr_assert_eq(tx_sh("rmdir csi-node/c/a1"), 0);
    const char *seen = cwd_ask(&c);
    cr_assert_str_eq(seen, "a2", "the cwd process sees the new current, not %s", seen);
    const char *want[] = { evf, "^restarted$" };
    cr_assert(tu_wait_for(file_has, (void *)want, 10000), "the events reader got no restarted");
    const char *want2[] = { evf, "rmdir\\|a1" };
    cr_assert(tu_wait_for(file_has, (void *)want2, 10000), "no live event after restarted");
    close(c.in);
    close(c.out);
    kill(c.pid, SIGKILL);
    waitpid(c.pid, NULL, 0);
    tp_kill(&a2);
    tx_kill_reap(cat, SIGKILL);
    tx_kill_reap(p2, SIGTERM);
    cr_assert(!tx_is_mount_root(tx_mnt), "SIGTERM after a takeover unmounts");
    cr_assert_eq(hd_nfds(&tx_hd), 0, "SIGTERM leaves nothing in the fd store");
}

/* The mount's unique id (Linux 6.8; connection and plain mount ids are
 * reused at once): a new mount gets a new one. */
#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x4000u
#endif
static uint64_t mnt_id(const char *m)
{
    struct statx sx;
    return statx(AT_FDCWD, m, 0, STATX_MNT_ID_UNIQUE, &sx) == 0 ? sx.stx_mnt_id : 0;
}

Test(takeover, aborted_connection_fd_falls_back_to_a_fresh_mount)
{
    pid_t p1 = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert(hd_wait_ready(&tx_hd, 1, 10000), "no READY=1");
    struct stat before, after;
    cr_assert_eq(stat(tx_mnt, &before), 0);
    uint64_t id0 = mnt_id(tx_mnt);
    cr_assert_neq(id0, 0);
    tx_kill_reap(p1, SIGKILL);
    char path[96];
    snprintf(path, sizeof(path), "/sys/fs/fuse/connections/%u/abort", minor(before.st_dev));
    int fd = open(path, O_WRONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, "1", 1), 1);
    close(fd);
    pid_t p2 = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert(hd_wait_ready(&tx_hd, 2, 10000), "no READY=1 from the fresh mount");
    cr_assert_eq(stat(tx_mnt, &after), 0);
    cr_assert_eq(after.st_ino, 1);
    cr_assert_neq(id0, mnt_id(tx_mnt), "a fresh mount");
    cr_assert(tx_log_has("was aborted: mounting afresh"), "no log line for the fallback");
    cr_assert_geq(hd_fd(&tx_hd, "fuse"), 0, "the fresh connection is kept");
    tx_kill_reap(p2, SIGTERM);
    cr_assert(!tx_is_mount_root(tx_mnt));
    cr_assert_eq(hd_nfds(&tx_hd), 0);
}

Test(takeover, fd_of_another_mount_point_falls_back_to_a_fresh_mount)
{
    char mnt2[4200], state2[4200];
    snprintf(mnt2, sizeof(mnt2), "%s2", tx_mnt);
    snprintf(state2, sizeof(state2), "%s2", tx_state);
    cr_assert_eq(mkdir(mnt2, 0755), 0);
    pid_t p1 = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert(hd_wait_ready(&tx_hd, 1, 10000), "no READY=1");
    hd_put(&tx_hd2, "fuse", hd_fd(&tx_hd, "fuse"));       /* the first mount's, handed to another */
    hd_put(&tx_hd2, "state", hd_fd(&tx_hd, "state"));
    pid_t p2 = tx_start(&tx_hd2, mnt2, state2);
    cr_assert(hd_wait_ready(&tx_hd2, 1, 10000), "no READY=1 from the second mount");
    struct stat a, b;
    cr_assert_eq(stat(tx_mnt, &a), 0);
    cr_assert_eq(stat(mnt2, &b), 0);
    cr_assert_eq(b.st_ino, 1);
    cr_assert_neq(a.st_dev, b.st_dev, "the second mount point got its own connection");
    cr_assert(tx_log_has("is not the one mounted there.*mounting afresh\\|nothing is mounted there.*mounting afresh"),
              "no log line for the fallback");
    cr_assert_eq(tx_sh("ls csi-node >/dev/null"), 0, "the first mount still serves");
    tx_kill_reap(p2, SIGTERM);
    tx_kill_reap(p1, SIGTERM);
    cr_assert(!tx_is_mount_root(mnt2));
    cr_assert(!tx_is_mount_root(tx_mnt));
}

static pid_t statloop_pid;

/* A child stat()ing a file in a loop: exits 1 at the first error. */
static pid_t statloop(const char *path)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    struct stat st;
    for (;;)
        if (stat(path, &st) < 0)
            _exit(1);
}

/* The children of pid's main thread, as /proc lists them (zombies too). */
static const char *children(pid_t pid)
{
    static char buf[256];
    char path[96];
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    if (fd >= 0)
        close(fd);
    return buf;
}

/* The comm of pid is csifs-notify (fs/helper.c). */
static bool is_helper(long pid)
{
    char path[64], comm[32] = "";
    snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
    FILE *f = fopen(path, "r");
    if (f && !fgets(comm, sizeof(comm), f))
        comm[0] = '\0';
    if (f)
        fclose(f);
    return !strcmp(comm, "csifs-notify\n");
}

/* csifs has one child: its notification helper. */
static bool one_helper(void *arg)
{
    const char *c = children(*(pid_t *)arg), *sp = strchr(c, ' ');
    return sp && !strchr(sp + 1, ' ') && is_helper(strtol(c, NULL, 10));
}

Test(takeover, sigusr2_reexecs_with_the_same_pid)
{
    pid_t p = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert(hd_wait_ready(&tx_hd, 1, 10000), "no READY=1");
    cr_assert_eq(tx_sh("mkdir -p csi-node/c/a1"), 0);
    char f[4200];
    snprintf(f, sizeof(f), "%s/csi-node/c/a1/registered", tx_mnt);
    statloop_pid = statloop(f);
    cr_assert_gt(statloop_pid, 0);
    tu_note_pid(statloop_pid);
    tx_keep_pid(statloop_pid);
    for (unsigned k = 1; k <= 3; k++) {
        cr_assert_eq(kill(p, SIGUSR2), 0);
        cr_assert(hd_wait_ready(&tx_hd, k + 1, 10000), "no READY=1 after SIGUSR2 %u", k);
        cr_assert_eq(waitpid(p, NULL, WNOHANG), 0, "the same process runs");
        cr_assert_eq(tx_sh("test -d csi-node/c/a1 && mkdir csi-node/c/a%u", k + 1), 0);
    }
    cr_assert_geq(tx_hd.reloading, 3, "RELOADING=1 before each");
    cr_assert_eq(waitpid(statloop_pid, NULL, WNOHANG), 0, "a stat failed across an upgrade");
    cr_assert(tx_log_has("upgrade: executing csifs again"));
    cr_assert(tu_wait_for(one_helper, &p, 5000), "the old images' helpers are not reaped: %s",
              children(p));
    tx_kill_reap(statloop_pid, SIGKILL);
    tx_kill_reap(p, SIGTERM);
    cr_assert(!tx_is_mount_root(tx_mnt), "SIGTERM after an upgrade unmounts");
    cr_assert_eq(hd_nfds(&tx_hd), 0, "and leaves nothing in the fd store");
}


static bool helper_stuck(void *arg)
{
    long h = tu_child_of(*(pid_t *)arg);
    return h > 0 && is_helper(h) && tu_thread_in_d(h, "fuse_reverse_inval_entry");
}

/* gone, or a zombie (reparented: reaped by whoever adopted it) */
static bool dead(void *arg)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", *(long *)arg);
    FILE *f = fopen(path, "r");
    bool alive = f && fgets(buf, sizeof(buf), f) && strrchr(buf, ')') &&
                 strrchr(buf, ')')[2] != 'Z';
    if (f)
        fclose(f);
    return !alive;
}

/* A notification blocked on a directory lock on purpose: the held mkdir's
 * caller keeps csi-node's lock (debug_hold=mkdir) and the inval_entry of
 * csi-node/x waits for it in the helper (debug_hold_inval). The SIGKILLed
 * csifs is reaped at once all the same; the successor takes over, answers
 * the resent mkdir, and the old helper's write returns: it dies. */
Test(takeover, a_kill_with_a_notification_stuck_on_a_lock_is_reaped_at_once)
{
    snprintf(tx_opts, sizeof(tx_opts), "heartbeat=100ms,debug_hold=mkdir,debug_hold_inval");
    pid_t p1 = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert(hd_wait_ready(&tx_hd, 1, 10000), "no READY=1");
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t mk = fork();
    cr_assert_geq(mk, 0);
    if (mk == 0) {
        int e = mkdir(tu_path(tx_mnt, "csi-node/x"), 0755) == 0 ? 0 : errno;
        (void)!write(p[1], &e, sizeof(e));
        _exit(0);
    }
    close(p[1]);
    tu_note_pid(mk);
    tx_keep_pid(mk);
    cr_assert(tu_wait_for(helper_stuck, &p1, 5000), "the helper is not stuck on the lock");
    long helper = tu_child_of(p1);
    int64_t t0 = tu_now_ms();
    cr_assert_eq(kill(p1, SIGKILL), 0);
    cr_assert(hd_reap(p1, 1000), "the killed csifs was not reaped: its helper holds it");
    int64_t took = tu_now_ms() - t0;
    tx_forget_pid(p1);
    cr_assert(tu_thread_in_d(helper, "fuse_reverse_inval_entry"), "the helper is still stuck");
    snprintf(tx_opts, sizeof(tx_opts), "heartbeat=100ms");
    pid_t p2 = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert(hd_wait_ready(&tx_hd, 2, 10000), "the successor sent no READY=1");
    struct pollfd pf = { .fd = p[0], .events = POLLIN };
    cr_assert_eq(poll(&pf, 1, (int)tu_ms(5000)), 1, "the held mkdir still waits");
    int e = -1;
    cr_assert_eq(read(p[0], &e, sizeof(e)), (ssize_t)sizeof(e));
    cr_assert_eq(e, 0, "the resent mkdir: %s", strerror(e));
    close(p[0]);
    cr_assert(tu_wait_for(dead, &helper, 5000), "the old helper never died");
    cr_assert(tu_wait_for(one_helper, &p2, 5000), "the successor has no helper of its own");
    cr_assert_eq(tx_sh("test -d csi-node/x && rmdir csi-node/x && ! test -e csi-node/x"), 0);
    tx_kill_reap(p2, SIGTERM);
    cr_assert(!tx_is_mount_root(tx_mnt), "SIGTERM unmounts");
    cr_assert_eq(hd_nfds(&tx_hd), 0, "and leaves nothing in the fd store");
    cr_log_info("reaped %lld ms after SIGKILL", (long long)took);
}

static bool exists(void *arg)
{
    return access(arg, F_OK) == 0;
}

struct waited {
    pid_t pid;
    int status;
};

static bool child_done(void *arg)
{
    struct waited *w = arg;
    return waitpid(w->pid, &w->status, WNOHANG) == w->pid;
}

/* A request cut by a crash (DESIGN 13): csifs started with
 * debug_stall_reply (and debug_stall_op=op unless NULL); the shell command
 * prep (unless NULL) in the mount; then a child's call(arg), which exits 0
 * or its errno: csifs stops before answering its request, is SIGKILLed,
 * and its successor takes the mount over and gets the request again
 * (RESEND). The call must succeed, with a line of the successor's log
 * matching logged. Returns the successor's pid. */
static pid_t cut_and_resent(const char *op, const char *prep, int (*call)(void *), void *arg,
                            const char *logged)
{
    char marker[4200];
    snprintf(marker, sizeof(marker), "%s/stalled", tx_dir);
    char plain[sizeof(tx_opts)];
    snprintf(plain, sizeof(plain), "%s", tx_opts);
    cr_assert_lt(snprintf(tx_opts, sizeof(tx_opts), "%s,debug_stall_reply=%s%s%s", plain, marker,
                          op ? ",debug_stall_op=" : "", op ? op : ""),
                 (int)sizeof(tx_opts));
    pid_t p1 = tx_start(&tx_hd, tx_mnt, tx_state);
    snprintf(tx_opts, sizeof(tx_opts), "%s", plain);
    cr_assert(hd_wait_ready(&tx_hd, 1, 10000), "no READY=1");
    if (prep)
        cr_assert_eq(tx_sh("%s", prep), 0, "%s", prep);
    struct waited w = { .pid = fork() };
    cr_assert_geq(w.pid, 0);
    if (w.pid == 0)
        _exit(call(arg));
    tu_note_pid(w.pid);
    cr_assert(tu_wait_for(exists, marker, 10000), "the request never reached its answer");
    cr_assert(!child_done(&w), "the request was answered before the crash");
    tx_kill_reap(p1, SIGKILL);
    pid_t p2 = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert(hd_wait_ready(&tx_hd, 2, 10000), "the successor sent no READY=1");
    cr_assert(tu_wait_for(child_done, &w, 10000), "the resent request was never answered");
    cr_assert(WIFEXITED(w.status), "the caller died");
    cr_assert_eq(WEXITSTATUS(w.status), 0, "the resent %s failed: %s", op ? op : "request",
                 strerror(WEXITSTATUS(w.status)));
    cr_assert(tx_log_has(logged), "no log line %s", logged);
    return p2;
}

static int do_mkdir(void *path)
{
    return mkdir(path, 0755) == 0 ? 0 : errno;
}

/* Exactly once (DESIGN 13): csifs dies after the commit of a mkdir and
 * before its answer (debug_stall_reply); the successor gets the mkdir again
 * (RESEND) and answers it from the ring of committed requests: success,
 * never EEXIST. */
Test(takeover, resent_mkdir_committed_before_the_crash_succeeds)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/csi-node/ebs", tx_mnt);
    /* answered from the ring, not run again */
    pid_t p2 = cut_and_resent(NULL, NULL, do_mkdir, path, "answered as recorded");
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(tx_sh("mkdir csi-node/ebs 2>/dev/null"), 1, "a new mkdir still gets EEXIST");
    tx_kill_reap(p2, SIGTERM);
    cr_assert(!tx_is_mount_root(tx_mnt));
}

/* ln -sfn's steps on a pending link (DESIGN 5), each cut by a crash: the
 * link CuTMP01 -> <tx_dir>/a1.sock in csi-node/c/a1. */
#define TX_MKDIR "mkdir -p csi-node/c/a1"
static char link_path[4200], sock_path[4200], link_target[4200], link_made[4400];

static void link_paths(void)
{
    snprintf(link_path, sizeof(link_path), "%s/csi-node/c/a1/CuTMP01", tx_mnt);
    snprintf(sock_path, sizeof(sock_path), "%s/csi-node/c/a1/socket", tx_mnt);
    snprintf(link_target, sizeof(link_target), "%s/a1.sock", tx_dir);
    snprintf(link_made, sizeof(link_made), TX_MKDIR " && ln -s '%s' csi-node/c/a1/CuTMP01",
             link_target);
}

static int do_symlink(void *path)
{
    return symlink(link_target, path) == 0 ? 0 : errno;
}

static int do_unlink(void *path)
{
    return unlink(path) == 0 ? 0 : errno;
}

static int do_rename(void *path)
{
    return rename(path, sock_path) == 0 ? 0 : errno;
}

/* readlink(path), or its error's text. */
static const char *link_of(const char *path)
{
    static char got[4200];
    ssize_t n = readlink(path, got, sizeof(got) - 1);
    if (n < 0)
        return strerror(errno);
    got[n] = '\0';
    return got;
}

/* The symlink of a pending link commits nothing (the ring cannot answer
 * it): csifs dies after making the link and before its answer; the resent
 * symlink finds the link the memfd kept and succeeds (a new symlink still
 * gets EEXIST), and ln -sfn's rename then succeeds. */
Test(takeover, resent_symlink_of_a_pending_link_succeeds)
{
    link_paths();
    pid_t p2 = cut_and_resent("symlink", TX_MKDIR, do_symlink, link_path,
                              "its pending link was made before the takeover");
    cr_assert_str_eq(link_of(link_path), link_target);
    cr_assert_eq(do_symlink(link_path), EEXIST, "a new symlink still gets EEXIST");
    cr_assert_eq(do_rename(link_path), 0);
    cr_assert_str_eq(link_of(sock_path), link_target);
    tx_kill_reap(p2, SIGTERM);
}

/* The unlink of a pending link commits nothing: csifs dies after removing
 * the link and before its answer; the resent unlink succeeds (a new one
 * still gets ENOENT). */
Test(takeover, resent_unlink_of_a_pending_link_succeeds)
{
    link_paths();
    pid_t p2 = cut_and_resent("unlink", link_made, do_unlink, link_path,
                              "its pending link was removed before the takeover");
    cr_assert_eq(do_unlink(link_path), ENOENT, "a new unlink still gets ENOENT");
    cr_assert_eq(do_unlink(sock_path), ENOENT, "no socket was set");
    tx_kill_reap(p2, SIGTERM);
}

/* ln -sfn's rename onto `socket` commits: csifs dies after the commit and
 * before its answer; the ring answers the resent rename (success, not
 * ENOENT) and the pending link goes. */
Test(takeover, resent_rename_of_a_pending_link_succeeds)
{
    link_paths();
    /* answered from the ring, not run again */
    pid_t p2 = cut_and_resent("rename", link_made, do_rename, link_path, "answered as recorded");
    cr_assert_str_eq(link_of(sock_path), link_target);
    cr_assert_eq(do_unlink(link_path), ENOENT, "the pending link went with the rename");
    tx_kill_reap(p2, SIGTERM);
}
