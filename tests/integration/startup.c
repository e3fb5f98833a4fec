/* Start-up refusals and recovery (issue 24): each bad input gets its exit
 * status and a sentence in csifs's own words, at warning, and creates
 * nothing; a live csifs in the way is named by pid; a wedge whose FUSE fd
 * another process holds (the lock free) is recovered at the next start.
 * Bounds are liveness deadlines scaled by tu_ms(). */
#include <dirent.h>
#include <sys/syscall.h>

#include "cmd/options.h"
#include "registry/store.h"
#include "tests/integration/daemon_fixture.h"

TestSuite(startup, .init = setup, .fini = teardown, .timeout = 120);

#define TS "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z "

/* csifs -f -o opts m, run in <dir>/cwd (which stays empty): exit status
 * want, msg in its output, never libfuse's "fuse:" prefix. */
static void bad_option(const char *opts, const char *msg)
{
    char out[4096];
    int rc = sh(out, sizeof(out), "cd cwd && timeout 30 '%s' -f -o '%s' m", bin(), opts);
    cr_assert_eq(rc, 2, "-o %s: exit %d: %s", opts, rc, out);
    cr_assert(strstr(out, msg), "-o %s: want '%s' in: %s", opts, msg, out);
    cr_assert(!strstr(out, "fuse:"), "-o %s: %s", opts, out);
    cr_assert_eq(sh(out, sizeof(out), "ls -A cwd"), 0);
    cr_assert_str_eq(out, "", "-o %s created something", opts);
}

Test(startup, bad_input_exits_with_its_status_in_our_words_and_creates_nothing)
{
    cr_assert_eq(mkdir(D("cwd"), 0755), 0);
    /* empty state= once meant the cwd: data.mdb wherever csifs started */
    bad_option("state=", "empty state=");
    bad_option("state", "option state needs a value (state=...)");
    bad_option("heartbeat", "option heartbeat needs a value");
    bad_option("nosync=1", "option nosync takes no value");
    bad_option("heartbeat=1d", "bad duration heartbeat=1d (want N, Nms, Ns, Nm or Nh)");
    bad_option("probe_timeout=0h", "bad duration probe_timeout=0h");
    bad_option("max_instances=0", "bad max_instances=0");
    /* a state dir whose parent is missing: a sentence naming it, exit 1,
     * a refused start logged at warning (stderr stamped in the foreground,
     * and the log file) */
    char out[4096];
    int rc = sh(out, sizeof(out), "timeout 30 '%s' -f -o 'state=%s,log_file=%s' m1", bin(),
                D("none/x/state"), D("start.log"));
    cr_assert_eq(rc, 1, "%s", out);
    cr_assert_eq(sh(NULL, 0, "printf '%%s' '%s' | grep -Eq '^" TS "warning state=%s: its parent "
                    "directory %s does not exist \\(csifs creates the state directory, not its "
                    "parents\\)$'", out, D("none/x/state"), D("none/x")), 0, "%s", out);
    cr_assert_eq(sh(out, sizeof(out), "grep -Ec '^" TS "warning state=.*its parent directory' "
                    "start.log"), 0, "%s", out);
    cr_assert(!exists(D("none")) && !exists(D("m1")));
    refused(1, D("none/x/state"), "", D("m2"), "its parent directory");
}

Test(startup, durations_take_hours_and_a_live_csifs_in_the_way_is_named_by_pid)
{
    int64_t ms = 0;
    cr_assert_eq(csifs_duration_parse("2h", &ms), 0);
    cr_assert_eq(ms, 2 * 3600 * 1000);
    struct tf_opts o = { .tag = "slive", .extra_opts = "heartbeat=1h,health_timeout=1h" };
    cr_assert_eq(tf_spawn(&t, &o), 0, "heartbeat=1h refused");
    char msg[128];
    snprintf(msg, sizeof(msg), "a live csifs is mounted there (pid %d)", (int)t.pid);
    refused(1, D("state2"), "", t.mnt, msg);
    cr_assert_eq(tf_sh(&t, "mkdir csi-node/p && ls csi-node"), 0, "the live one still serves");
}

/* A helper that holds every /dev/fuse fd of pid (taken with pidfd_getfd, as
 * a forked child inherits them) until killed; remembered for teardown. */
static pid_t hold_fuse_fds(pid_t pid, const char *mnt)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t h = fork();
    cr_assert_geq(h, 0);
    if (h == 0) {
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0), n = 0;
        char path[300], link[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        DIR *d = pfd >= 0 ? opendir(path) : NULL;
        struct dirent *e;
        while (d && (e = readdir(d))) {
            snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)pid, e->d_name);
            ssize_t k = readlink(path, link, sizeof(link) - 1);
            link[k > 0 ? k : 0] = '\0';
            if (!strcmp(link, "/dev/fuse") &&
                syscall(SYS_pidfd_getfd, pfd, atoi(e->d_name), 0) >= 0)
                n++;
        }
        (void)!write(p[1], &n, sizeof(n));
        for (;;)
            pause();
    }
    tu_note_pid(h);
    daemons[ndaemons] = h;
    mounts[ndaemons++] = strdup(mnt);
    close(p[1]);
    int n = 0;
    cr_assert_eq(read(p[0], &n, sizeof(n)), (ssize_t)sizeof(n));
    close(p[0]);
    cr_assert_gt(n, 0, "the helper holds no /dev/fuse fd of pid %d", (int)pid);
    return h;
}

Test(startup, a_wedge_whose_fuse_fd_another_process_holds_is_recovered_at_the_next_start)
{
    struct tf_opts o = { .tag = "swedge" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a"), 0);
    pid_t h = hold_fuse_fds(t.pid, t.mnt);
    tf_kill(&t, true);               /* csifs gone for good, its lock free */
    struct store_holder sh_;
    cr_assert_eq(store_lock_holder(t.state, &sh_), 0, "the lock is still held");
    char type[64];
    unsigned conn = 0;
    cr_assert_eq(csifs_mount_find(t.mnt, type, sizeof(type), &conn), 1, "no mount left");
    cr_assert_eq(sh_.conn, conn, "the lock file names another connection");
    cr_assert_eq(csifs_conn_holder(conn), h, "the helper does not hold the connection");
    /* another state dir's start knows nothing of it: refused, no abort */
    refused(1, D("other"), "", t.mnt, "does not answer");
    char out[4096], want[128];
    int64_t t0 = tu_now_ms();
    int rc = start_daemon(out, sizeof(out), t.state, "", t.mnt);
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert_lt(tu_now_ms() - t0, tu_ms(10000));
    snprintf(want, sizeof(want), "is held by pid %d and does not answer: aborting it", (int)h);
    cr_assert(strstr(out, want), "%s", out);
    cr_assert_eq(tf_sh(&t, "ls csi-node/p"), 0, "the restored registry does not serve");
    cr_assert_eq(sh(out, sizeof(out), "grep -c ' %s ' /proc/self/mountinfo", t.mnt), 0);
    cr_assert_str_eq(out, "1\n", "stacked mounts");
    stop_daemon(t.state, t.mnt);
}
