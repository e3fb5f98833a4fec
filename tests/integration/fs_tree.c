/* The tree over a real mount: nodes, ordering, writes and the errno table.
 * csifs runs in this process (a thread serves the mount) so that a test can
 * make an instance ready through the registry before the prober exists. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/testutil.h"

static struct tf t;

static void setup(void)
{
    struct tf_opts o = { .tag = "tree", .pending_ttl_ms = 1000 };
    cr_assert_eq(tf_start(&t, &o), 0);
}

static void teardown(void)
{
    tf_stop(&t);
}

TestSuite(tree, .init = setup, .fini = teardown, .timeout = 60);

#define P(rel) tf_path(&t, rel)

static uint64_t inst_seq(enum reg_type type, const char *p, const char *a)
{
    struct reg_node pn, in;
    cr_assert_eq(reg_lookup_plugin(t.reg, type, p, &pn), 0);
    cr_assert_eq(reg_lookup_instance(t.reg, pn.seq, a, &in), 0);
    return in.seq;
}

static void make_ready(const char *p, const char *a)
{
    static const struct reg_fingerprint fp = { "csi.example", "1.0", "node-7", 3,
                                               "zone=z1\n", "node:STAGE_UNSTAGE_VOLUME\n" };
    uint64_t s = inst_seq(REG_NODE, p, a);
    struct reg_node n;
    reg_get(t.reg, s, &n);
    struct reg_probe pr = { .gen = n.gen, .outcome = REG_PROBE_OK, .fp = &fp };
    cr_assert_eq(reg_probe_result(t.reg, s, &pr), 0);
}

/* The events appended so far, as one string. */
static const char *events_now(void)
{
    static char buf[1 << 16];
    struct ev_cursor c;
    ev_cursor_init(reg_events(t.reg), &c);
    size_t n = ev_read(reg_events(t.reg), &c, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    return buf;
}

static int errno_of(int rc)
{
    return rc < 0 ? errno : 0;
}

Test(tree, register_and_browse)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/ebs/a0 && ln -s /run/a0.sock csi-node/ebs/a0/socket"), 0);
    struct stat st;
    cr_assert_eq(lstat(P("csi-node/ebs/a0"), &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(st.st_mode & 07777, 0755);
    cr_assert_eq(st.st_uid, 0);
    cr_assert_eq(lstat(P("csi-node/ebs/a0/socket"), &st), 0);
    cr_assert(S_ISLNK(st.st_mode));
    cr_assert_eq(st.st_size, strlen("/run/a0.sock"));
    cr_assert_str_eq(tf_readlink(&t, "csi-node/ebs/a0/socket"), "/run/a0.sock");
    cr_assert_str_eq(tf_cat(&t, "csi-node/ebs/a0/health"), "unknown");
    cr_assert_str_eq(tf_cat(&t, "csi-node/ebs/a0/reason"), "not yet probed");
    cr_assert_str_eq(tf_cat(&t, "csi-node/ebs/a0/ready"), "0");
    cr_assert_str_eq(tf_cat(&t, "csi-node/ebs/a0/nodeid"), "");
    cr_assert_str_eq(tf_cat(&t, "csi-node/ebs/a0/history"), "");
    cr_assert_eq(lstat(P("csi-node/ebs/a0/health"), &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0444);
    cr_assert_eq(st.st_size, strlen("unknown\n"));
    cr_assert_eq(lstat(P("csi-node/ebs/a0/mount_point"), &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0644);
    cr_assert_eq(st.st_size, 0);
    cr_assert_eq(lstat(P("csi-node/ebs/current"), &st), -1);
    cr_assert_eq(errno, ENOENT);
    /* csi-controller instances have no node-only files */
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-controller/ebs/c0"), 0);
    cr_assert_eq(lstat(P("csi-controller/ebs/c0/nodeid"), &st), -1);
    cr_assert_eq(tf_sh(&t, "test \"$(ls csi-controller/ebs/c0 | tr '\\n' ' ')\" = "
                           "'capabilities container_mount_point health history mount_point "
                           "provider ready reason registered version '"), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(ls csi-node/ebs/a0 | tr '\\n' ' ')\" = "
                           "'capabilities container_mount_point health history max_volumes "
                           "mount_point nodeid provider ready reason registered socket topology "
                           "version '"), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(ls | tr '\\n' ' ')\" = 'csi-controller csi-node events '"), 0);
}

Test(tree, mkdir_p_idempotent_and_order)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0 && mkdir -p csi-node/p/a1 && mkdir -p csi-node/p/a2"), 0);
    const char *before = events_now();
    size_t nbefore = strlen(before);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0"), 0);
    cr_assert_eq(mkdir(P("csi-node/p/a1"), 0755), -1);
    cr_assert_eq(errno, EEXIST);
    cr_assert_eq(mkdir(P("csi-node/p"), 0755), -1);
    cr_assert_eq(errno, EEXIST);
    cr_assert_eq(strlen(events_now()), nbefore, "no event for EEXIST");
    cr_assert_eq(tf_sh(&t, "test \"$(ls -U csi-node/p | tr '\\n' ' ')\" = 'a2 a1 a0 '"), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(ls -t csi-node/p | tr '\\n' ' ')\" = 'a2 a1 a0 '"), 0);
    struct stat a0, a2;
    cr_assert_eq(stat(P("csi-node/p/a0"), &a0), 0);
    cr_assert_eq(stat(P("csi-node/p/a2"), &a2), 0);
    cr_assert(a2.st_mtim.tv_sec > a0.st_mtim.tv_sec ||
              (a2.st_mtim.tv_sec == a0.st_mtim.tv_sec && a2.st_mtim.tv_nsec > a0.st_mtim.tv_nsec));
    cr_assert_eq(stat(P("csi-node/p"), &a0), 0);
    cr_assert_eq(a0.st_nlink, 5);
}

Test(tree, ln_sfn_replaces_socket)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a && ln -sfn /run/one.sock csi-node/p/a/socket"), 0);
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/a/socket"), "/run/one.sock");
    size_t nbefore = strlen(events_now());
    cr_assert_eq(tf_sh(&t, "ln -sfn /run/two.sock csi-node/p/a/socket"), 0);
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/a/socket"), "/run/two.sock");
    const char *after = events_now() + nbefore;
    cr_assert(strstr(after, "socket csi-node/p/a target=/run/two.sock\n"), "%s", after);
    int sockets = 0;
    for (const char *s = after; (s = strstr(s, " socket ")); s++)
        sockets++;
    cr_assert_eq(sockets, 1, "%s", after);
    /* no stray entry left */
    cr_assert_eq(tf_sh(&t, "test \"$(ls -A csi-node/p/a | grep -c Cu)\" = 0"), 0);
    /* a pending link is not listed, and vanishes after its ttl (1 s here) */
    cr_assert_eq(symlink("/run/x.sock", P("csi-node/p/a/CuPEND01")), 0);
    struct stat st;
    cr_assert_eq(lstat(P("csi-node/p/a/CuPEND01"), &st), 0);
    cr_assert_eq(tf_sh(&t, "ls -A csi-node/p/a | grep -q CuPEND01"), 1);
    cr_assert(strstr(events_now() + nbefore, "x.sock") == NULL);
    tu_sleep_ms(1100);
    cr_assert_eq(lstat(P("csi-node/p/a/CuPEND01"), &st), -1);
    cr_assert_eq(errno, ENOENT);
    /* rename of anything else is EPERM */
    cr_assert_eq(symlink("/run/y.sock", P("csi-node/p/a/CuPEND02")), 0);
    cr_assert_eq(errno_of(rename(P("csi-node/p/a/CuPEND02"), P("csi-node/p/a/other"))), EPERM);
    cr_assert_eq(errno_of(rename(P("csi-node/p/a/health"), P("csi-node/p/a/socket"))), EPERM);
    cr_assert_eq(errno_of(rename(P("csi-node/p/a"), P("csi-node/p/b"))), EPERM);
    cr_assert_eq(errno_of(rename(P("csi-node/p/a/socket"), P("csi-node/p/a/sock2"))), EPERM);
    cr_assert_eq(errno_of(unlink(P("csi-node/p/a/CuPEND02"))), 0);
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/a/socket"), "/run/two.sock");
    /* unlink clears */
    cr_assert_eq(unlink(P("csi-node/p/a/socket")), 0);
    cr_assert_eq(lstat(P("csi-node/p/a/socket"), &st), -1);
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/a/reason"), "no socket set");
}

static int write_at(const char *path, const char *buf, size_t len, off_t off, int flags)
{
    int fd = open(path, O_WRONLY | flags);
    if (fd < 0)
        return -errno;
    ssize_t n = pwrite(fd, buf, len, off);
    int e = n < 0 ? -errno : 0;
    close(fd);
    return e;
}

Test(tree, writable_attributes)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a"), 0);
    size_t nbefore = strlen(events_now());
    cr_assert_eq(tf_sh(&t, "echo /x > csi-node/p/a/mount_point"), 0);
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/a/mount_point"), "/x");
    const char *after = events_now() + nbefore;
    int attrs = 0;
    for (const char *s = after; (s = strstr(s, " attr ")); s++)
        attrs++;
    cr_assert_eq(attrs, 1, "one change: %s", after);
    struct stat st;
    cr_assert_eq(stat(P("csi-node/p/a/mount_point"), &st), 0);
    cr_assert_eq(st.st_size, 3);
    const char *mp = P("csi-node/p/a/mount_point");
    char big[4098];
    memset(big, 'a', sizeof(big));
    cr_assert_eq(write_at(mp, big, 4097, 0, 0), -EINVAL);
    cr_assert_eq(write_at(mp, "/a\0b", 4, 0, 0), -EINVAL);
    cr_assert_eq(write_at(mp, "/a\nb\n", 5, 0, 0), -EINVAL);
    cr_assert_eq(write_at(mp, "/y", 2, 1, 0), -EINVAL);
    cr_assert_eq(write_at(mp, "/y", 2, 0, O_APPEND), -EINVAL);
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/a/mount_point"), "/x");
    cr_assert_eq(write_at(mp, big, 4096, 0, O_TRUNC), 0);
    cr_assert_eq(stat(mp, &st), 0);
    cr_assert_eq(st.st_size, 4097);
    cr_assert_eq(truncate(mp, 0), 0);
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/a/mount_point"), "");
    cr_assert_eq(tf_sh(&t, "echo /c > csi-node/p/a/container_mount_point"), 0);
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/a/container_mount_point"), "/c");
    /* read-only attributes refuse writing opens, even for root */
    cr_assert_eq(write_at(P("csi-node/p/a/health"), "healthy", 7, 0, 0), -EACCES);
    cr_assert_eq(errno_of(truncate(P("csi-node/p/a/health"), 0)), EACCES);
    cr_assert_eq(errno_of(open(P("events"), O_WRONLY)), EACCES);
}

Test(tree, current_follows_readiness)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0 csi-node/p/a1 && "
                           "ln -s /run/a0.sock csi-node/p/a0/socket && "
                           "ln -s /run/a1.sock csi-node/p/a1/socket"), 0);
    make_ready("p", "a0");
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/current"), "a0");
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/current/nodeid"), "node-7");
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/current/topology"), "zone=z1");
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/current/max_volumes"), "3");
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/current/socket"), "/run/a0.sock");
    make_ready("p", "a1");
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/current"), "a1");
    /* rmdir of the current: another process sees the fallback at once */
    cr_assert_eq(rmdir(P("csi-node/p/a1")), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(readlink csi-node/p/current)\" = a0"), 0);
    cr_assert_eq(rmdir(P("csi-node/p/a0")), 0);
    cr_assert_eq(tf_sh(&t, "! readlink csi-node/p/current"), 0);
    cr_assert_eq(rmdir(P("csi-node/p")), 0);
    cr_assert_eq(tf_sh(&t, "test ! -e csi-node/p"), 0);
}

struct errno_row {
    const char *what;
    int expect;
};

static void check_unchanged(const char *snapshot)
{
    cr_assert_str_eq(events_now(), snapshot, "a refused operation changed something");
}

Test(tree, errno_table)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a csi-controller/q && "
                           "ln -s /run/a.sock csi-node/p/a/socket"), 0);
    char snap[1 << 16];
    snprintf(snap, sizeof(snap), "%s", events_now());
    char n64[80] = "csi-node/";
    memset(n64 + strlen(n64), 'x', 64);
    char longt[130] = "/";
    memset(longt + 1, 'y', 107);
    struct errno_row rows[] = {
        { "mkdir at the root", errno_of(mkdir(P("newtype"), 0755)) },
        { "mkdir bad charset", errno_of(mkdir(P("csi-node/a:b"), 0755)) },
        { "mkdir 64 bytes", errno_of(mkdir(P(n64), 0755)) },
        { "mkdir leading dot", errno_of(mkdir(P("csi-node/.x"), 0755)) },
        { "mkdir current", errno_of(mkdir(P("csi-node/p/current"), 0755)) },
        { "mkdir existing plugin", errno_of(mkdir(P("csi-node/p"), 0755)) },
        { "mkdir existing instance", errno_of(mkdir(P("csi-node/p/a"), 0755)) },
        { "mkdir in an instance", errno_of(mkdir(P("csi-node/p/a/sub"), 0755)) },
        { "mkdir bad name in an instance", errno_of(mkdir(P("csi-node/p/a/.x"), 0755)) },
        { "create a file", errno_of(open(P("csi-node/p/a/newfile"), O_CREAT | O_WRONLY, 0644)) },
        { "create at root", errno_of(open(P("newfile"), O_CREAT | O_WRONLY, 0644)) },
        { "mknod", errno_of(mknod(P("csi-node/p/a/fifo"), S_IFIFO | 0644, 0)) },
        { "link", errno_of(link(P("csi-node/p/a/health"), P("csi-node/p/a/h2"))) },
        { "rmdir a type", errno_of(rmdir(P("csi-node"))) },
        { "rmdir non-empty plugin", errno_of(rmdir(P("csi-node/p"))) },
        { "rmdir missing", errno_of(rmdir(P("csi-node/p/zz"))) },
        { "lookup missing", errno_of(access(P("csi-node/zz"), F_OK)) },
        { "unlink missing", errno_of(unlink(P("csi-node/p/a/zz"))) },
        { "unlink attribute", errno_of(unlink(P("csi-node/p/a/health"))) },
        { "unlink current", 0 },
        { "unlink events", errno_of(unlink(P("events"))) },
        { "symlink in a plugin dir", errno_of(symlink("/x", P("csi-node/p/link"))) },
        { "symlink at root", errno_of(symlink("/x", P("link"))) },
        { "symlink relative target", errno_of(symlink("rel.sock", P("csi-node/p/a/CuREL")))},
        { "symlink target too long", errno_of(symlink(longt, P("csi-node/p/a/CuLONG"))) },
        { "symlink onto an attribute", errno_of(symlink("/x", P("csi-node/p/a/health"))) },
        { "rename instance", errno_of(rename(P("csi-node/p/a"), P("csi-node/p/b"))) },
        { "rename plugin", errno_of(rename(P("csi-node/p"), P("csi-node/p2"))) },
        { "chmod", errno_of(chmod(P("csi-node/p/a/health"), 0666)) },
        { "chown", errno_of(chown(P("csi-node/p/a"), 1, 1)) },
        { "utimes", errno_of(utimensat(AT_FDCWD, P("csi-node/p/a/mount_point"), NULL, 0)) },
        { "open read-only attr for write", errno_of(open(P("csi-node/p/a/ready"), O_RDWR)) },
    };
    int expect[] = { EPERM, EINVAL, EINVAL, EINVAL, EINVAL, EEXIST, EEXIST, EPERM, EPERM,
                     EPERM, EPERM, EPERM, EPERM, EPERM, ENOTEMPTY, ENOENT, ENOENT, ENOENT,
                     EPERM, 0, EPERM, EPERM, EPERM, EINVAL, ENAMETOOLONG, EEXIST, EPERM,
                     EPERM, EPERM, EPERM, EPERM, EACCES };
    cr_assert_eq(sizeof(rows) / sizeof(rows[0]), sizeof(expect) / sizeof(expect[0]));
    for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++)
        cr_expect_eq(rows[k].what ? rows[k].expect : 0, expect[k], "%s: got %s, want %s",
                     rows[k].what, strerror(rows[k].expect), strerror(expect[k]));
    check_unchanged(snap);
    /* unlink of current, once there is one */
    make_ready("p", "a");
    snprintf(snap, sizeof(snap), "%s", events_now());
    cr_assert_eq(errno_of(unlink(P("csi-node/p/current"))), EPERM);
    cr_assert_eq(errno_of(rmdir(P("csi-node/p/current"))), ENOTDIR);
    check_unchanged(snap);
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/current"), "a");
}

static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(tree, ls_lR_large)
{
    char cmd[256];
    for (int p = 0; p < 100; p++) {
        snprintf(cmd, sizeof(cmd), "cd csi-node && mkdir p%03d && cd p%03d && "
                 "mkdir a0 a1 a2 a3 a4 a5 a6 a7 a8 a9", p, p);
        cr_assert_eq(tf_sh(&t, "%s", cmd), 0);
    }
    cr_assert_eq(count_entries(P("csi-node")), 100);
    cr_assert_eq(count_entries(P("csi-node/p042")), 10);
    /* every instance dir, every file with its honest size */
    cr_assert_eq(tf_sh(&t, "test \"$(ls -lR csi-node | grep -c '^d')\" = 1100"), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(ls -lR csi-node | grep -c ' health$')\" = 1000"), 0);
    cr_assert_eq(tf_sh(&t, "ls -lR csi-node | awk '/ health$/ && $5 != 8 {bad=1} END {exit bad}'"), 0);
    cr_assert_eq(tf_sh(&t, "ls -lR csi-node | awk '/ ready$/ && $5 != 2 {bad=1} END {exit bad}'"), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(cat csi-node/p099/a9/health)\" = unknown"), 0);
}
