/* The csifs daemon: restart, SIGKILL, refusals, permissions, bad stores. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <lmdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/testutil.h"

static struct tf t;

static void teardown(void)
{
    tf_stop(&t);
}

TestSuite(daemon, .fini = teardown, .timeout = 120);

#define P(rel) tf_path(&t, rel)

static void make_ready(enum reg_type type, const char *p, const char *a)
{
    static const struct reg_fingerprint fp = { "csi.example", "1.0", "node-7", 0, "", "" };
    struct reg_node pn, in;
    cr_assert_eq(reg_plugin_lookup(t.reg, type, p, &pn), 0);
    cr_assert_eq(reg_instance_lookup(t.reg, pn.seq, a, &in), 0);
    struct reg_probe pr = { .gen = in.gen, .outcome = REG_PROBE_OK, .fp = &fp };
    cr_assert_eq(reg_probe_result(t.reg, in.seq, &pr), 0);
}

/* Run csifs with args to completion; its stderr into err. */
static int run_csifs(char *err, size_t cap, const char *opts, const char *mnt)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "timeout 20 %s/csifs -f -o '%s' '%s' 2>&1", tu_build_dir(),
             opts, mnt);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    size_t n = fread(err, 1, cap - 1, f);
    err[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool is_mounted(const char *mnt)
{
    struct stat st;
    return stat(mnt, &st) == 0 && st.st_ino == 1;
}

Test(daemon, restart_keeps_tree_order_current_and_times)
{
    struct tf_opts o = { .tag = "restart" };
    cr_assert_eq(tf_start(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0 csi-node/p/a1 csi-node/p/a2 csi-controller/p/c0 && "
                           "ln -s /run/a0.sock csi-node/p/a0/socket && "
                           "ln -s /run/a1.sock csi-node/p/a1/socket && "
                           "ln -s /run/a2.sock csi-node/p/a2/socket && "
                           "echo /var/lib/p > csi-node/p/a1/mount_point"), 0);
    make_ready(REG_NODE, "p", "a0");
    make_ready(REG_NODE, "p", "a1");
    cr_assert_eq(tf_sh(&t, "{ ls -U csi-node/p; cat csi-node/p/*/registered; "
                           "stat -c '%%n %%Y' csi-node/p/a*; readlink csi-node/p/current; "
                           "cat csi-node/p/a1/mount_point csi-node/p/a1/nodeid; "
                           "cat csi-node/p/*/ready; } > ../before.txt"), 0);
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/current"), "a1");
    tf_halt(&t);
    cr_assert(!is_mounted(t.mnt));
    /* the daemon, as a process, on the same state */
    cr_assert_eq(tf_spawn(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "{ ls -U csi-node/p; cat csi-node/p/*/registered; "
                           "stat -c '%%n %%Y' csi-node/p/a*; readlink csi-node/p/current; "
                           "cat csi-node/p/a1/mount_point csi-node/p/a1/nodeid; "
                           "cat csi-node/p/*/ready; } > ../after.txt && "
                           "diff ../before.txt ../after.txt"), 0);
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/a1/health"), "unknown");
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/a1/reason"), "restored, not yet re-probed");
    cr_assert_str_eq(tf_cat(&t, "csi-controller/p/c0/reason"), "no socket set");
    /* re-registration of a restored instance changes nothing */
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0 && test \"$(ls -U csi-node/p | tr '\\n' ' ')\" "
                           "= 'current a2 a1 a0 '"), 0);
}

Test(daemon, sigkill_then_restart_on_the_same_mount)
{
    struct tf_opts o = { .tag = "kill9" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    char cmd[64];
    for (int k = 0; k < 20; k++) {
        snprintf(cmd, sizeof(cmd), "mkdir -p csi-node/p/a%02d", k);
        cr_assert_eq(tf_sh(&t, "%s", cmd), 0);
    }
    tf_kill(&t, true);
    struct statfs sfs;
    cr_assert_eq(statfs(t.mnt, &sfs), -1);
    /* ECONNABORTED: asked while its notification helper (fs/helper.c),
     * which dies of its parent's death, still held the connection */
    cr_assert(errno == ENOTCONN || errno == ECONNABORTED, "a dead daemon leaves a stale "
              "mount: %s", strerror(errno));
    cr_assert_eq(tf_spawn(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(ls csi-node/p | wc -l)\" = 20 && "
                           "test \"$(ls -U csi-node/p | head -1)\" = a19"), 0);
}

Test(daemon, second_csifs_refused)
{
    struct tf_opts o = { .tag = "twice" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    char err[4096], opts[512], other[512];
    /* same state dir, another mount point */
    snprintf(other, sizeof(other), "%s/mnt2", t.dir);
    mkdir(other, 0755);
    snprintf(opts, sizeof(opts), "state=%s", t.state);
    cr_assert_neq(run_csifs(err, sizeof(err), opts, other), 0);
    char pid[32];
    snprintf(pid, sizeof(pid), "pid %d", (int)t.pid);
    cr_assert(strstr(err, "in use by") && strstr(err, pid), "%s", err);
    cr_assert(!is_mounted(other));
    /* same mount point, another state dir */
    snprintf(opts, sizeof(opts), "state=%s/state2", t.dir);
    cr_assert_neq(run_csifs(err, sizeof(err), opts, t.mnt), 0);
    cr_assert(strstr(err, "live csifs"), "%s", err);
    cr_assert_eq(tf_sh(&t, "ls csi-node"), 0, "the first one still serves");
}

/* Run fn as uid 65534 (with extra group gid if given) in a child; its exit status. */
static int as_nobody(gid_t gid, int (*fn)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        gid_t groups[1] = { gid };
        if (setgroups(gid ? 1 : 0, groups) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
            _exit(100);
        _exit(fn());
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 200;
}

static char *mnt_for_child;

static int try_reads(void)
{
    char path[4096], buf[256];
    snprintf(path, sizeof(path), "%s/csi-node/p/a/health", mnt_for_child);
    int fd = open(path, O_RDONLY);
    if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
        return 1;
    close(fd);
    snprintf(path, sizeof(path), "%s/csi-node/p/a/socket", mnt_for_child);
    if (readlink(path, buf, sizeof(buf)) <= 0)
        return 2;
    snprintf(path, sizeof(path), "%s/events", mnt_for_child);
    fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
        return 3;
    close(fd);
    return 0;
}

static int expect_eacces(int rc)
{
    return rc < 0 && errno == EACCES ? 0 : 1;
}

static int try_writes(void)
{
    char p[6][4096];
    const char *rel[] = { "csi-node/p/new", "csi-node/p/a", "csi-node/p/a/socket",
                          "csi-node/p/a/mount_point", "csi-node/q", "csi-node/p/a/CuX" };
    for (int k = 0; k < 6; k++)
        snprintf(p[k], sizeof(p[k]), "%s/%s", mnt_for_child, rel[k]);
    int bad = expect_eacces(mkdir(p[0], 0755)) + expect_eacces(rmdir(p[1])) +
              expect_eacces(unlink(p[2])) + expect_eacces(open(p[3], O_WRONLY)) +
              expect_eacces(mkdir(p[4], 0755)) + expect_eacces(symlink("/x", p[5]));
    return bad;
}

static int try_register(void)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/csi-node/p/b", mnt_for_child);
    if (mkdir(path, 0755) < 0)
        return 1;
    snprintf(path, sizeof(path), "%s/csi-node/p/b/mount_point", mnt_for_child);
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, "/m\n", 3) != 3)
        return 2;
    close(fd);
    return 0;
}

Test(daemon, permissions)
{
    struct tf_opts o = { .tag = "perm" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a && ln -s /run/a.sock csi-node/p/a/socket"), 0);
    mnt_for_child = t.mnt;
    cr_assert_eq(as_nobody(0, try_reads), 0, "every read works for others");
    cr_assert_eq(as_nobody(0, try_writes), 0, "every write is refused with EACCES");
    cr_assert_eq(tf_sh(&t, "test \"$(ls csi-node/p | tr '\\n' ' ')\" = 'a '"), 0);
    tf_kill(&t, false);
    /* with a registrar group, a member may register */
    o.extra_opts = "registrar_gid=4242";
    cr_assert_eq(tf_spawn(&t, &o), 0);
    struct stat st;
    cr_assert_eq(stat(P("csi-node/p"), &st), 0);
    cr_assert_eq(st.st_gid, 4242, "gid %u mode %o", (unsigned)st.st_gid, st.st_mode);
    cr_assert_eq(st.st_mode & 07777, 0775);
    cr_assert_eq(as_nobody(4242, try_register), 0);
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/b/mount_point"), "/m");
    cr_assert_eq(as_nobody(0, try_writes), 0, "not a member: still refused");
}

static void set_version(const char *state, const char *v)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    cr_assert_eq(mdb_env_create(&env), 0);
    cr_assert_eq(mdb_env_set_mapsize(env, 1ul << 30), 0);
    cr_assert_eq(mdb_env_open(env, state, 0, 0600), 0);
    cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
    cr_assert_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    MDB_val k = { 7, "version" }, d = { strlen(v), (void *)v };
    cr_assert_eq(mdb_put(txn, dbi, &k, &d, 0), 0);
    cr_assert_eq(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

Test(daemon, bad_store_refused_before_mounting)
{
    struct tf_opts o = { .tag = "badstore" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a"), 0);
    tf_kill(&t, false);
    char err[4096], opts[512], data[600];
    snprintf(opts, sizeof(opts), "state=%s", t.state);
    snprintf(data, sizeof(data), "%s/data.mdb", t.state);
    set_version(t.state, "9");
    cr_assert_eq(tf_sh(&t, "cd .. && sha256sum state/data.mdb > sum.txt"), 0);
    cr_assert_neq(run_csifs(err, sizeof(err), opts, t.mnt), 0);
    cr_assert(strstr(err, "data.mdb") && strstr(err, "version"), "%s", err);
    cr_assert(!is_mounted(t.mnt), "nothing mounted");
    cr_assert_eq(tf_sh(&t, "cd .. && sha256sum -c --quiet sum.txt"), 0, "data.mdb untouched");
    /* a truncated data.mdb */
    set_version(t.state, "2");
    cr_assert_eq(truncate(data, 4096 * 2 + 100), 0);
    cr_assert_neq(run_csifs(err, sizeof(err), opts, t.mnt), 0);
    cr_assert(strstr(err, "data.mdb"), "%s", err);
    cr_assert(!is_mounted(t.mnt), "nothing mounted");
}

Test(daemon, command_line)
{
    char out[4096];
    FILE *f = popen("build/csifs --help", "r");
    cr_assert(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    cr_assert_eq(pclose(f), 0);
    cr_assert(strstr(out, "usage: ") && strstr(out, "registrar_gid="), "%s", out);
    f = popen("build/csifs --version", "r");
    n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    cr_assert_eq(pclose(f), 0);
    cr_assert(!strncmp(out, "csifs ", 6), "%s", out);
    char err[4096];
    cr_assert_eq(run_csifs(err, sizeof(err), "heartbeat=5x", "/nonexistent"), 2);
    cr_assert(strstr(err, "bad duration heartbeat=5x"), "%s", err);
    cr_assert_eq(run_csifs(err, sizeof(err), "registrar_gid=no-such-group", "/nonexistent"), 2);
    cr_assert(strstr(err, "no such group"), "%s", err);
    cr_assert_eq(run_csifs(err, sizeof(err), "events_ring=0", "/nonexistent"), 2);
}

Test(daemon, options_reach_the_registry)
{
    struct tf_opts o = { .tag = "opts", .extra_opts = "max_instances=2,events_ring=4" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    /* no sockets: nothing for the prober to add to the events */
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0 csi-node/p/a1 && "
                           "echo /m0 > csi-node/p/a0/mount_point && echo /m1 > csi-node/p/a1/mount_point"), 0);
    cr_assert_eq(mkdir(P("csi-node/p/a2"), 0755), -1);
    cr_assert_eq(errno, ENOSPC);
    cr_assert_eq(tf_sh(&t, "test \"$(ls csi-node/p | wc -l)\" = 2"), 0);
    /* 5 events so far, a ring of 4: a fresh reader replays only the last 4 */
    cr_assert_eq(tf_sh(&t, "timeout 1 cat events > ../ev.txt; test \"$(wc -l < ../ev.txt)\" = 4 && "
                           "head -1 ../ev.txt | grep -q '^2 .* registered csi-node/p/a0$' && "
                           "tail -1 ../ev.txt | grep -q '^5 .* attr csi-node/p/a1 name=mount_point$'"), 0);
}

static void unmount_state(void)
{
    if (t.state) {
        tf_kill(&t, false);
        umount2(t.state, MNT_DETACH);
    }
    tf_stop(&t);
}

/* A full store reaches the caller as ENOSPC, and the tree stays as it was. */
Test(daemon, store_full, .fini = unmount_state)
{
    char cmd[1024], logf[256], lopt[300];
    /* the log tells a full store (warning) from max_instances (info,
     * tests/integration/oplog) in its own words */
    snprintf(logf, sizeof(logf), "%s/csifs-full-%d.log", P_tmpdir, (int)getpid());
    unlink(logf);
    snprintf(lopt, sizeof(lopt), "log_file=%s", logf);
    struct tf_opts o = { .tag = "full", .extra_opts = lopt };
    /* the state dir on its own small tmpfs */
    cr_assert_eq(tf_spawn(&t, &o), 0);
    tf_kill(&t, false);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s' && mount -t tmpfs -o size=2m tmpfs '%s'",
             t.state, t.state, t.state);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(tf_spawn(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0"), 0);
    /* fill the disk */
    snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of='%s/filler' bs=4k 2>/dev/null; sync", t.state);
    cr_assert_neq(system(cmd), -1);
    int ok = 0, nospc = 0;
    char name[64];
    for (int k = 1; k <= 200 && !nospc; k++) {   /* some pages may still be free */
        snprintf(name, sizeof(name), "csi-node/p/a%d", k);
        if (mkdir(P(name), 0755) == 0)
            ok++;
        else
            nospc = errno == ENOSPC ? k : -errno;
    }
    cr_assert_gt(nospc, 0, "mkdir on a full disk: %s", strerror(nospc < 0 ? -nospc : 0));
    snprintf(name, sizeof(name), "csi-node/p/a%d", nospc);
    struct stat st;
    cr_assert_eq(stat(P(name), &st), -1, "the refused mkdir left nothing");
    cr_assert_eq(tf_sh(&t, "cat csi-node/p/a0/health >/dev/null"), 0, "reads keep working");
    cr_assert_eq(tf_sh(&t, "grep -Eq ' warning refused: mkdir %s by uid [0-9]+ pid [0-9]+ "
                           "\\([^)]*\\): the state store is full \\(disk or map\\)$' '%s'",
                       name, logf), 0, "no warning for the full store in %s", logf);
    unlink(logf);
    /* space returns */
    snprintf(cmd, sizeof(cmd), "rm -f '%s/filler'", t.state);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(mkdir(P(name), 0755), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(ls csi-node/p | wc -l)\" = %d", ok + 2), 0);
}

/* Every thread says what it is (top -H, ps -L): csifs and csifs-<what>,
 * the FUSE loop's second thread among them once a mkdir committed. */
Test(daemon, threads_are_named)
{
    struct tf_opts o = { .tag = "names" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a && ln -s /run/nothing.sock csi-node/p/a/socket"),
                 0);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "cat /proc/%d/task/*/comm | sort | uniq -c | "
                               "tee /dev/stderr | grep -v -E ' csifs(-[a-z]+)?$' | grep -c . ; true",
             (int)t.pid);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    int unnamed = -1;
    cr_assert_eq(fscanf(f, "%d", &unnamed), 1);
    pclose(f);
    cr_assert_eq(unnamed, 0, "threads without a csifs name (above)");
    snprintf(cmd, sizeof(cmd), "grep -qx csifs-fuse /proc/%d/task/*/comm && "
                               "grep -qx csifs-prober /proc/%d/task/*/comm && "
                               "test \"$(grep -lx csifs /proc/%d/task/*/comm | wc -l)\" = 1",
             (int)t.pid, (int)t.pid, (int)t.pid);
    cr_assert_eq(system(cmd), 0, "the loop's second thread, the prober, one main thread");
}
