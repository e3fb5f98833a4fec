/* Upgrades in place under load (issue 26, DESIGN 13): 50 SIGUSR2
 * re-executions of csifs under the test fd store with the crash test's
 * load and checks (tests/crash/takeover.c, UPGRADE=1): after each, the same
 * pid, READY=1 at the holder, and no user of the mount noticed anything.
 * A system suite: `make test` runs it, `make test-asan` does not. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "tests/lib/testutil.h"

#define UPGRADES 50

TestSuite(upgrade, .timeout = 600);

Test(upgrade, fifty_sigusr2_under_load_go_unnoticed)
{
    char cmd[4200], line[4096], want[64];
    snprintf(cmd, sizeof(cmd), "UPGRADE=1 TAKEOVER= BUILD='%s' '%s/csifs-crash-test' %d 2>&1",
             tu_build_dir(), tu_build_dir(), UPGRADES);
    snprintf(want, sizeof(want), "crash rounds: %d passed, 0 failed\n", UPGRADES);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    bool passed = false;
    while (fgets(line, sizeof(line), p)) {
        fputs(line, stderr);             /* every round and every reason, in the log */
        passed |= !strcmp(line, want);
    }
    int st = pclose(p);
    cr_assert(passed && st == 0, "not every upgrade went unnoticed (the reasons above)");
}

/* ---- the order of an upgrade (cmd/upgrade.h), made to happen ---- */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/takeover_fix.h"

#define DELAY_MS 1500             /* every commit (debug_commit_delay_ms) */

static void setup(void)
{
    cr_assert_eq(tx_setup(), 0);
}

TestSuite(upgrade_order, .init = setup, .fini = tx_teardown, .timeout = 90);

/* A child that opens path now and reads it once a byte comes on *go: the
 * bytes it read (or none) come back on *out. */
static pid_t reader(const char *path, int *go, int *out)
{
    int g[2], o[2];
    cr_assert_eq(pipe(g), 0);
    cr_assert_eq(pipe(o), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char c, buf[256];
        int fd = open(path, O_RDONLY);
        if (fd < 0 || read(g[0], &c, 1) != 1)
            _exit(1);
        ssize_t n = read(fd, buf, sizeof(buf));
        (void)!write(o[1], buf, n > 0 ? (size_t)n : 0);
        _exit(n > 0 ? 0 : 1);
    }
    close(g[0]);
    close(o[1]);
    tu_note_pid(pid);
    tx_keep_pid(pid);
    *go = g[1];
    *out = o[0];
    return pid;
}

/* A child making one call: its pid (exit 0 or the call's errno). */
static pid_t call_bg(int (*fn)(const char *a, const char *b), const char *a, const char *b)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        _exit(fn(a, b) == 0 ? 0 : errno);
    tu_note_pid(pid);
    tx_keep_pid(pid);
    return pid;
}

static int do_symlink(const char *target, const char *path)
{
    return symlink(target, path);
}

static int do_mkdir(const char *path, const char *unused)
{
    (void)unused;
    return mkdir(path, 0755);
}

/* The call of call_bg's child pid ends, and succeeds. */
static void call_ok(pid_t pid, const char *what)
{
    int st = 0;
    pid_t got = 0;
    for (int64_t end = tu_now_ms() + tu_ms(4 * DELAY_MS + 5000); !got && tu_now_ms() < end;)
        if (!(got = waitpid(pid, &st, WNOHANG)))
            tu_sleep_ms(5);
    cr_assert_eq(got, pid, "%s never answered", what);
    tx_forget_pid(pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: %s", what,
              strerror(WIFEXITED(st) ? WEXITSTATUS(st) : EINTR));
}

/* SIGUSR2 while a socket change's commit is under way and a READ of the
 * instance's `health` (its page locked by the kernel) comes after the
 * signal: that commit's invalidation of `health` waits for the page. With
 * the loop stopped first, nobody answered the READ: the commit thread
 * never returned and the upgrade hung. The loop now serves on until the
 * registry is idle: the READ is answered, the upgrade completes, and a
 * mkdir that came after the signal is held and answered by the new image. */
Test(upgrade_order, sigusr2_while_a_commit_waits_on_a_page_a_read_holds)
{
    snprintf(tx_opts, sizeof(tx_opts), "heartbeat=100ms,debug_commit_delay_ms=%d", DELAY_MS);
    pid_t p = tx_start(&tx_hd, tx_mnt, tx_state);
    cr_assert(hd_wait_ready(&tx_hd, 1, 10000), "no READY=1");
    cr_assert_eq(tx_sh("mkdir -p csi-node/c/a1"), 0);
    char health[4200], sock[4200], target[4200], a2[4200];
    snprintf(health, sizeof(health), "%s/csi-node/c/a1/health", tx_mnt);
    snprintf(sock, sizeof(sock), "%s/csi-node/c/a1/socket", tx_mnt);
    snprintf(target, sizeof(target), "%s/a1.sock", tx_dir);
    snprintf(a2, sizeof(a2), "%s/csi-node/c/a2", tx_mnt);
    int go, out;
    pid_t rd = reader(health, &go, &out);
    tu_sleep_ms(200);                /* open: health is looked up, its page not read */
    pid_t ln = call_bg(do_symlink, target, sock);
    tu_sleep_ms(200);                /* queued: its commit waits DELAY_MS */
    cr_assert_eq(kill(p, SIGUSR2), 0);
    tu_sleep_ms(200);
    cr_assert_eq(write(go, "x", 1), 1);   /* the READ: after the signal, before the commit */
    pid_t mk = call_bg(do_mkdir, a2, NULL);
    struct pollfd pf = { .fd = out, .events = POLLIN };
    cr_assert_eq(poll(&pf, 1, (int)tu_ms(DELAY_MS + 5000)), 1, "the READ was never answered");
    char got[256] = "";
    cr_assert_gt(read(out, got, sizeof(got) - 1), 0, "the READ read nothing");
    cr_assert(hd_wait_ready(&tx_hd, 2, 4 * DELAY_MS + 10000), "the upgrade never completed");
    cr_assert_eq(waitpid(p, NULL, WNOHANG), 0, "the same process runs");
    call_ok(ln, "the symlink queued before the signal");
    call_ok(mk, "the mkdir held for the new image");
    cr_assert(tx_log_has("held for the new image: 1$"), "the mkdir was not held");
    cr_assert(tx_log_has("took over"), "no takeover by the new image");
    cr_assert_eq(tx_sh("test \"$(readlink csi-node/c/a1/socket)\" = '%s' && test -d csi-node/c/a2",
                       target), 0);
    close(go);
    close(out);
    int st;
    cr_assert_eq(waitpid(rd, &st, 0), rd);
    tx_forget_pid(rd);
    tx_kill_reap(p, SIGTERM);
    cr_assert(!tx_is_mount_root(tx_mnt), "SIGTERM after the upgrade unmounts");
}
