/* csifs as an operator starts it (issue 12): without -f, under mount(8),
 * under systemd (sd_notify), its logs, signals, refusals that create
 * nothing. Every bound is a liveness deadline scaled by tu_ms(). */
#include <dirent.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "tests/integration/daemon_fixture.h"

TestSuite(daemon_mode, .init = setup, .fini = teardown, .timeout = 120);

Test(daemon_mode, returns_once_serving_the_restored_registry_and_stops_on_sigterm)
{
    struct tf_opts o = { .tag = "dmode" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0 csi-node/p/a1 csi-controller/q/c"), 0);
    tf_kill(&t, false);
    cr_assert(!is_mount(t.mnt));
    char out[4096];
    cr_assert_eq(start_daemon(out, sizeof(out), t.state, "", t.mnt), 0, "%s", out);
    /* the very first listing after the command returned */
    cr_assert_eq(sh(out, sizeof(out), "ls -U '%s/csi-node/p' | tr '\\n' ' '", t.mnt), 0);
    cr_assert_str_eq(out, "a1 a0 ");
    cr_assert_eq(sh(out, sizeof(out), "ls '%s/csi-controller'", t.mnt), 0);
    cr_assert_str_eq(out, "q\n");
    stop_daemon(t.state, t.mnt);
}

Test(daemon_mode, refusals_mount_and_create_nothing)
{
    refused(1, "/nonexistent/x/y", "", D("m1"), "its parent directory /nonexistent/x does not exist");
    cr_assert_eq(mkdir(D("ro"), 0755), 0);
    cr_assert_eq(mount("tmpfs", D("ro"), "tmpfs", MS_RDONLY, "size=1m"), 0);
    refused(1, D("ro/state"), "", D("m2"), "Read-only file system");
    cr_assert_eq(umount2(D("ro"), MNT_DETACH), 0);
    cr_assert_eq(sh(NULL, 0, "touch file"), 0);
    refused(1, D("state"), "", D("file"), "not a directory");
    refused(2, D("state"), "no_such_option", D("m3"), "unknown option");
    struct tf_opts o = { .tag = "dlive" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    refused(1, D("state"), "", t.mnt, "a live csifs is mounted there");
    /* the live one still serves */
    cr_assert_eq(tf_sh(&t, "ls csi-node"), 0);
}

Test(daemon_mode, relative_state_and_mount_point_resolve_against_the_cwd)
{
    char out[4096];
    int rc = sh(out, sizeof(out), "mkdir sub && cd sub && timeout 30 '%s' -o state=rs rm", bin());
    long pid = lock_pid(D("sub/rs"));
    daemons[ndaemons] = (pid_t)pid;  /* cleaned up whatever the status */
    mounts[ndaemons++] = strdup(D("sub/rm"));
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert_gt(pid, 0, "no lock file in sub/rs");
    cr_assert(exists(D("sub/rs/data.mdb")));
    cr_assert(is_mount(D("sub/rm")));
    cr_assert(!exists("/rs") && !exists("/rm"));
    cr_assert_eq(sh(out, sizeof(out), "mkdir sub/rm/csi-node/p && ls sub/rm/csi-node"), 0, "%s", out);
    stop_daemon(D("sub/rs"), D("sub/rm"));
}

/* A plugin's only ready instance removed by rmdir: its `current` goes from
 * the very next listing (the daemon's notifier drops it from the kernel). */
Test(daemon_mode, rmdir_of_the_only_ready_instance_drops_current_at_once)
{
    char out[4096], sock[200];
    snprintf(sock, sizeof(sock), "%s/a.sock", dir);
    struct tp_proc pa;
    cr_assert_eq(tp_start(&pa, "--socket", sock, "--type", "node", (const char *)NULL), 0);
    cr_assert_eq(mkdir(D("mnt"), 0755), 0);
    cr_assert_eq(start_daemon(out, sizeof(out), D("state"), "heartbeat=1s", D("mnt")), 0, "%s", out);
    cr_assert_eq(sh(out, sizeof(out), "mkdir -p mnt/csi-node/p/a && ln -s '%s' mnt/csi-node/p/a/socket",
                    sock), 0, "%s", out);
    int64_t end = tu_now_ms() + tu_ms(5000);
    while (sh(out, sizeof(out), "readlink mnt/csi-node/p/current") != 0 && tu_now_ms() < end)
        tu_sleep_ms(20);
    cr_assert_str_eq(out, "a\n");
    cr_assert_eq(sh(out, sizeof(out), "ls mnt/csi-node/p | tr '\\n' ' '"), 0);
    cr_assert_str_eq(out, "a current ");
    cr_assert_eq(sh(out, sizeof(out), "rmdir mnt/csi-node/p/a && ls mnt/csi-node/p | tr '\\n' ' '"), 0,
                 "%s", out);
    cr_assert_str_eq(out, "");
    char path[4200], buf[64];
    snprintf(path, sizeof(path), "%s/mnt/csi-node/p/current", dir);
    cr_assert_eq(readlink(path, buf, sizeof(buf)), -1);
    cr_assert_eq(errno, ENOENT);
    stop_daemon(D("state"), D("mnt"));
}

Test(daemon_mode, mount8_and_mount_fuse3_start_it_and_umount_stops_it)
{
    char out[4096];
    cr_assert_eq(mkdir(D("mnt"), 0755), 0);
    int rc = sh(out, sizeof(out), "mount -t fuse '%s#csifs' '%s' -o 'state=%s'", bin(), D("mnt"),
                D("state"));
    long pid = lock_pid(D("state"));
    daemons[ndaemons] = (pid_t)pid;
    mounts[ndaemons++] = strdup(D("mnt"));
    cr_assert_eq(rc, 0, "mount: %s", out);
    cr_assert(is_mount(D("mnt")));
    cr_assert_eq(sh(out, sizeof(out), "mkdir mnt/csi-node/p && ls mnt/csi-node"), 0, "%s", out);
    cr_assert_eq(sh(out, sizeof(out), "umount mnt"), 0, "%s", out);
    cr_assert(tu_wait_for(gone_cond, &pid, 2000), "csifs still running after umount");
    /* mount.fuse3 with the fstab type, csifs found on PATH */
    char bindir[4096];
    snprintf(bindir, sizeof(bindir), "%s", bin());
    *strrchr(bindir, '/') = '\0';
    rc = sh(out, sizeof(out), "PATH='%s':$PATH mount.fuse3 csifs '%s' -t fuse.csifs "
            "-o 'state=%s,_netdev,nofail,x-systemd.requires=foo,comment=x'", bindir, D("mnt"),
            D("state"));
    pid = lock_pid(D("state"));
    daemons[ndaemons] = (pid_t)pid;
    mounts[ndaemons++] = strdup(D("mnt"));
    cr_assert_eq(rc, 0, "mount.fuse3: %s", out);
    cr_assert_eq(sh(out, sizeof(out), "ls mnt/csi-node"), 0, "%s", out);
    cr_assert_str_eq(out, "p\n", "the registry of the first mount");
    cr_assert_eq(sh(out, sizeof(out), "umount mnt"), 0, "%s", out);
    cr_assert(tu_wait_for(gone_cond, &pid, 2000), "csifs still running after umount");
}

/* Receive one datagram within ms; "" on timeout. */
static const char *recv_notify(int fd, int64_t ms)
{
    static char buf[512];
    struct pollfd p = { .fd = fd, .events = POLLIN };
    buf[0] = '\0';
    /* the fd store's messages (FDSTORE=1, FDSTOREREMOVE=1: DESIGN 13) skipped */
    while (poll(&p, 1, (int)tu_ms(ms)) == 1) {
        ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        if (strncmp(buf, "FDSTORE", 7))
            break;
        buf[0] = '\0';
    }
    return buf;
}

/* csifs -f with extra options, stderr into <dir>/log, env NAME=VALUE
 * (optional). Its pid; reaped in stop_fg. */
static pid_t start_fg(const char *opts, const char *mnt, const char *env)
{
    char o[4096];
    snprintf(o, sizeof(o), "state=%s%s%s", D("state"), *opts ? "," : "", opts);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        FILE *f = freopen(D("log"), "a", stderr);
        (void)f;
        if (env)
            putenv((char *)env);
        execl(bin(), "csifs", "-f", "-o", o, mnt, (char *)NULL);
        _exit(127);
    }
    daemons[ndaemons] = pid;
    mounts[ndaemons++] = strdup(mnt);
    return pid;
}

static bool serving(void *arg)
{
    struct statfs sfs;
    return statfs((const char *)arg, &sfs) == 0 && sfs.f_type == 0x65735546;
}

/* SIGTERM, reaped within 2 s with exit 0, unmounted. */
static void stop_fg(pid_t pid, const char *mnt)
{
    cr_assert_eq(kill(pid, SIGTERM), 0);
    int st = 0;
    pid_t r = 0;
    int64_t end = tu_now_ms() + tu_ms(2000);
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && tu_now_ms() < end)
        tu_sleep_ms(5);
    cr_assert(r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "csifs -f: not reaped "
              "2 s after SIGTERM, or status %#x", st);
    cr_assert(!is_mount(mnt));
}

Test(daemon_mode, sd_notify_ready_once_serving_and_stopping_on_sigterm)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof(a.sun_path), "%s/notify", dir);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(mkdir(D("mnt"), 0755), 0);
    static char env[200];
    snprintf(env, sizeof(env), "NOTIFY_SOCKET=%s", a.sun_path);
    pid_t pid = start_fg("", D("mnt"), env);
    cr_assert_str_eq(recv_notify(fd, 10000), "READY=1");
    /* READY=1 means serving: the tree answers at once */
    char out[4096];
    cr_assert_eq(sh(out, sizeof(out), "ls mnt | tr '\\n' ' '"), 0);
    cr_assert_str_eq(out, "csi-controller csi-node events metrics ");
    stop_fg(pid, D("mnt"));
    cr_assert_str_eq(recv_notify(fd, 2000), "STOPPING=1");
    close(fd);
}

/* A thread of pid other than its main one (the FUSE loop's) that does not
 * block SIGTERM; 0 if none. */
static pid_t other_thread(pid_t pid)
{
    char path[128], blk[32];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    cr_assert(d);
    pid_t found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid <= 0 || tid == pid)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
        if (tu_proc_field(path, "SigBlk", blk, sizeof(blk)) &&
            !(strtoull(blk, NULL, 16) & (1ull << (SIGTERM - 1))))
            found = tid;
    }
    closedir(d);
    return found;
}

/* A SIGTERM that runs on another thread while the FUSE thread sleeps in
 * poll(2) ends the loop at once: nothing touches the mount meanwhile (a
 * request would wake the loop and hide a stop that waits for one). */
Test(daemon_mode, sigterm_run_by_another_thread_stops_an_idle_csifs)
{
    cr_assert_eq(mkdir(D("mnt"), 0755), 0);
    for (int round = 0; round < 3; round++) {
        pid_t pid = start_fg("", D("mnt"), NULL);
        cr_assert(tu_wait_for(serving, (void *)D("mnt"), 10000));
        tu_sleep_ms(100);            /* past the loop's spin: asleep */
        pid_t tid = other_thread(pid);
        cr_assert_gt(tid, 0, "csifs has no other thread that takes SIGTERM");
        cr_assert_eq(syscall(SYS_tgkill, pid, tid, SIGTERM), 0);
        int st = 0;
        pid_t r = 0;
        int64_t end = tu_now_ms() + tu_ms(2000);
        while ((r = waitpid(pid, &st, WNOHANG)) == 0 && tu_now_ms() < end)
            tu_sleep_ms(5);
        cr_assert(r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "round %d: csifs -f status %#x 2 s after SIGTERM on thread %d", round, st,
                  (int)tid);
        cr_assert(!is_mount(D("mnt")));
    }
}

static int count_lines(const char *needle)
{
    char out[4096];
    sh(out, sizeof(out), "grep -cF -- '%s' log", needle);
    return atoi(out);
}

Test(daemon_mode, logs_refusals_with_their_reason_and_health_changes)
{
    char out[4096], sock[200];
    snprintf(sock, sizeof(sock), "%s/a.sock", dir);
    struct tp_proc pa;
    cr_assert_eq(tp_start(&pa, "--socket", sock, "--type", "node", (const char *)NULL), 0);
    cr_assert_eq(mkdir(D("mnt"), 0755), 0);
    pid_t pid = start_fg("heartbeat=1s", D("mnt"), NULL);
    cr_assert(tu_wait_for(serving, (void *)D("mnt"), 10000));
    cr_assert_neq(sh(out, sizeof(out), "mkdir 'mnt/csi-node/Bad!'"), 0);
    cr_assert(strstr(out, "Invalid argument"), "%s", out);
    cr_assert_eq(sh(out, sizeof(out), "mkdir -p mnt/csi-node/p/a && ln -s '%s' mnt/csi-node/p/a/socket",
                    sock), 0, "%s", out);
    int64_t end = tu_now_ms() + tu_ms(5000);
    while (count_lines("csi-node/p/a: health healthy") == 0 && tu_now_ms() < end)
        tu_sleep_ms(20);
    tu_sleep_ms(1500);               /* a heartbeat later: no second line */
    stop_fg(pid, D("mnt"));
    cr_assert_eq(count_lines("refused: mkdir csi-node/Bad! by uid "), 1);
    cr_assert_eq(count_lines("(mkdir): name must be 1-63 of [A-Za-z0-9._-]"), 1);
    cr_assert_eq(count_lines("Bad!"), 1);
    cr_assert_eq(count_lines("csi-node/p/a: health healthy"), 1);
    cr_assert_eq(count_lines("registered csi-node/p/a"), 1);
    cr_assert_eq(count_lines("csi-node/p/a: socket "), 1);
    cr_assert_eq(count_lines("serving "), 1);
    cr_assert_eq(count_lines("stopped"), 1);
    /* at level warning: none of those */
    cr_assert_eq(sh(NULL, 0, "rm log"), 0);
    pid = start_fg("log_level=warning", D("mnt"), NULL);
    cr_assert(tu_wait_for(serving, (void *)D("mnt"), 10000));
    cr_assert_neq(sh(out, sizeof(out), "mkdir 'mnt/csi-node/Bad!' || mkdir mnt/csi-node/q"), 1);
    stop_fg(pid, D("mnt"));
    /* in the foreground without journald each line is "<time> <level> ..." */
    cr_assert_eq(count_lines(" info "), 0);
    cr_assert_eq(count_lines(" notice "), 0);
    cr_assert_eq(count_lines(" debug "), 0);
}

Test(daemon_mode, a_mount_point_with_a_space_is_not_stacked_on)
{
    char out[4096];
    cr_assert_eq(mkdir(D("mnt space"), 0755), 0);
    cr_assert_eq(start_daemon(out, sizeof(out), D("state"), "", D("mnt space")), 0, "%s", out);
    int rc = start_daemon(out, sizeof(out), D("state2"), "", D("mnt space"));
    cr_assert_eq(rc, 1, "%s", out);
    cr_assert(strstr(out, "a live csifs is mounted there"), "%s", out);
    cr_assert_eq(sh(out, sizeof(out), "grep -c '/mnt\\\\040space ' /proc/self/mountinfo"), 0);
    cr_assert_str_eq(out, "1\n");
    cr_assert(!exists(D("state2")));
    stop_daemon(D("state"), D("mnt space"));
}

Test(daemon_mode, sighup_is_ignored_in_both_modes)
{
    char out[4096];
    cr_assert_eq(mkdir(D("mnt"), 0755), 0);
    cr_assert_eq(start_daemon(out, sizeof(out), D("state"), "", D("mnt")), 0, "%s", out);
    long pid = lock_pid(D("state"));
    cr_assert_eq(kill((pid_t)pid, SIGHUP), 0);
    tu_sleep_ms(1000);
    cr_assert(!gone(pid));
    cr_assert_eq(sh(out, sizeof(out), "mkdir mnt/csi-node/p && ls mnt/csi-node"), 0, "%s", out);
    stop_daemon(D("state"), D("mnt"));
    pid_t fg = start_fg("", D("mnt"), NULL);
    cr_assert(tu_wait_for(serving, (void *)D("mnt"), 10000));
    cr_assert_eq(kill(fg, SIGHUP), 0);
    tu_sleep_ms(1000);
    cr_assert_eq(waitpid(fg, NULL, WNOHANG), 0, "csifs -f exited on SIGHUP");
    cr_assert_eq(sh(out, sizeof(out), "ls mnt/csi-node"), 0, "%s", out);
    cr_assert_str_eq(out, "p\n");
    stop_fg(fg, D("mnt"));
}

/* ---- a wedged connection (issue 13): the real one, made on purpose ---- */

struct wedge { long pid; };

/* The notifier thread of csifs (shared) or its notification helper
 * (fs/helper.c) in the kernel on the directory's lock. */
static bool notifier_stuck(void *arg)
{
    long pid = ((struct wedge *)arg)->pid, child = tu_child_of(pid);
    return tu_thread_in_d(pid, "fuse_reverse_inval_entry") ||
           (child > 0 && tu_thread_in_d(child, "fuse_reverse_inval_entry"));
}

/* csifs (a test build: -o debug_*) with a held mkdir (its caller keeps csi-node's lock) and the
 * notifier stuck on that lock invalidating csi-node/x; then SIGKILL.
 * shared: the notifier writes through the process's own /dev/fuse (the old
 * way, debug_notifier_shared_fd): the wedge. Else the notification helper
 * (fs/helper.c) is the one stuck: no wedge. Then a restart on the same state and mount point serves within 5 s,
 * the held mkdir gets ECONNABORTED and the old mount ENOTCONN. */
static void kill_with_the_notifier_stuck(bool shared)
{
    char out[4096], o[4200];
    cr_assert_eq(mkdir(D("mnt"), 0755), 0);
    snprintf(o, sizeof(o), "debug_hold=mkdir,debug_hold_inval%s,state=%s",
             shared ? ",debug_notifier_shared_fd" : "", D("state"));
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        FILE *f = freopen(D("log"), "a", stderr);
        (void)f;
        execl(bin(), "csifs", "-f", "-o", o, D("mnt"), (char *)NULL);
        _exit(127);
    }
    daemons[ndaemons] = pid;
    mounts[ndaemons++] = strdup(D("mnt"));
    cr_assert(tu_wait_for(serving, (void *)D("mnt"), 10000));
    int old = open(D("mnt/csi-node"), O_RDONLY | O_DIRECTORY);
    cr_assert_geq(old, 0);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t mk = fork();
    if (mk == 0) {
        int e = mkdir(D("mnt/csi-node/x"), 0755) == 0 ? 0 : errno;
        (void)!write(p[1], &e, sizeof(e));
        _exit(0);
    }
    close(p[1]);
    struct wedge w = { pid };
    cr_assert(tu_wait_for(notifier_stuck, &w, 5000), "no thread in fuse_reverse_inval_entry");
    cr_assert_eq(kill(pid, SIGKILL), 0);
    if (shared) {
        tu_sleep_ms(tu_ms(500));
        /* the wedge: a zombie with a thread stuck in the kernel, not reapable */
        cr_assert(gone(pid), "not even a zombie");
        cr_assert(tu_thread_in_d(pid, NULL), "no thread left in D state: no wedge");
        cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0);
        /* another state dir knows nothing of that connection: refused, no
         * hang (the old mount is probed only by a child, with a deadline) */
        int64_t t0 = tu_now_ms();
        cr_assert_eq(start_daemon(out, sizeof(out), D("other"), "", D("mnt")), 1, "%s", out);
        cr_assert(strstr(out, "does not answer"), "%s", out);
        cr_assert_lt(tu_now_ms() - t0, tu_ms(5000));
    } else {
        /* no wedge: the process exits for good */
        int64_t end = tu_now_ms() + tu_ms(2000);
        pid_t r;
        while ((r = waitpid(pid, NULL, WNOHANG)) == 0 && tu_now_ms() < end)
            tu_sleep_ms(5);
        cr_assert_eq(r, pid, "the killed csifs did not exit: wedged");
    }
    cr_assert_eq(sh(out, sizeof(out), "grep -c 'mount=' state/csifs.lock"), 0, "%s", out);
    int64_t t0 = tu_now_ms();
    int rc = start_daemon(out, sizeof(out), D("state"), "", D("mnt"));
    int64_t took = tu_now_ms() - t0;
    cr_assert_eq(rc, 0, "%s", out);
    cr_assert_lt(took, tu_ms(5000), "restart took %lld ms", (long long)took);
    cr_assert_eq(sh(out, sizeof(out), "ls mnt | tr '\\n' ' '"), 0);
    cr_assert_str_eq(out, "csi-controller csi-node events metrics ");
    struct pollfd pf = { .fd = p[0], .events = POLLIN };
    cr_assert_eq(poll(&pf, 1, (int)tu_ms(5000)), 1, "the held mkdir still waits");
    int e = -1;
    cr_assert_eq(read(p[0], &e, sizeof(e)), (ssize_t)sizeof(e));
    cr_assert_eq(e, ECONNABORTED, "held mkdir: %s", strerror(e));
    struct stat st;
    cr_assert_eq(fstatat(old, "x", &st, 0), -1);
    cr_assert_eq(errno, ENOTCONN, "old mount: %s", strerror(errno));
    close(old);
    close(p[0]);
    waitpid(mk, NULL, 0);
    if (shared)
        cr_assert_eq(waitpid(pid, NULL, 0), pid);   /* the zombie is free to go */
    stop_daemon(D("state"), D("mnt"));
}

Test(daemon_mode, a_wedged_connection_of_a_killed_csifs_is_recovered_at_restart)
{
    kill_with_the_notifier_stuck(true);
}

Test(daemon_mode, the_notifier_stuck_in_the_kernel_does_not_wedge_a_killed_csifs)
{
    kill_with_the_notifier_stuck(false);
}
