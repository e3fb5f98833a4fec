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
    cr_assert_eq(reg_plugin_lookup(t.reg, type, p, &pn), 0);
    cr_assert_eq(reg_instance_lookup(t.reg, pn.seq, a, &in), 0);
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
                           "provider ready reason registered stats version '"), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(ls csi-node/ebs/a0 | tr '\\n' ' ')\" = "
                           "'capabilities container_mount_point health history max_volumes "
                           "mount_point nodeid provider ready reason registered socket stats "
                           "topology version '"), 0);
    cr_assert_eq(tf_sh(&t, "test \"$(ls | tr '\\n' ' ')\" = 'csi-controller csi-node events metrics '"), 0);
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
    big[0] = '/';                    /* mount_point takes absolute paths */
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

/* pwrite of "/x" at off into path: -1 with errno on failure. */
static int pwrite_at(const char *path, off_t off)
{
    int fd = open(path, O_WRONLY);
    if (fd < 0)
        return -1;
    ssize_t n = pwrite(fd, "/x", 2, off);
    int e = errno;
    close(fd);
    errno = e;
    return n < 0 ? -1 : 0;
}

/* Everything a refused operation could have changed: the events appended
 * (every registry change appends one) and what `ls -lR` shows. */
static void snapshot(char *buf, size_t cap)
{
    cr_assert_eq(tf_sh(&t, "ls -lR --time-style=+%%s.%%N . > ../tree.txt"), 0);
    const char *tree = tf_cat(&t, "../tree.txt");
    cr_assert(tree);
    int n = snprintf(buf, cap, "%s", tree);
    snprintf(buf + n, cap - (size_t)n, "%s", events_now());
}

/* One row of the errno table: the call fails with want, and changes nothing. */
#define ROW(what, call, want)                                                           \
    do {                                                                                \
        int got_ = errno_of(call);                                                      \
        cr_expect_eq(got_, want, "%s: got %s, want %s", what, strerror(got_),           \
                     strerror(want));                                                   \
        snapshot(now, sizeof(now));                                                     \
        cr_assert_str_eq(now, before, "%s changed something", what);                    \
    } while (0)

Test(tree, errno_table)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a csi-controller/q && "
                           "ln -s /run/a.sock csi-node/p/a/socket"), 0);
    static char before[1 << 17], now[1 << 17];
    snapshot(before, sizeof(before));
    char n64[80] = "csi-node/";
    memset(n64 + strlen(n64), 'x', 64);
    char n255[300] = "csi-node/", n256[300] = "csi-node/p/", l256[300] = "csi-node/p/a/";
    memset(n255 + strlen(n255), 'x', 255);
    memset(n256 + strlen(n256), 'x', 256);
    memset(l256 + strlen(l256), 'x', 256);
    char longt[130] = "/";
    memset(longt + 1, 'y', 107);
    ROW("mkdir at the root", mkdir(P("newtype"), 0755), EPERM);
    ROW("mkdir bad charset", mkdir(P("csi-node/a:b"), 0755), EINVAL);
    ROW("mkdir 64 bytes", mkdir(P(n64), 0755), EINVAL);
    ROW("mkdir 255 bytes", mkdir(P(n255), 0755), EINVAL);
    ROW("mkdir 256 bytes", mkdir(P(n256), 0755), ENAMETOOLONG);
    ROW("lookup 256 bytes", access(P(l256), F_OK), ENAMETOOLONG);
    ROW("symlink named with 256 bytes", symlink("/x", P(l256)), ENAMETOOLONG);
    ROW("mkdir leading dot", mkdir(P("csi-node/.x"), 0755), EINVAL);
    ROW("mkdir current", mkdir(P("csi-node/p/current"), 0755), EINVAL);
    ROW("mkdir existing plugin", mkdir(P("csi-node/p"), 0755), EEXIST);
    ROW("mkdir existing instance", mkdir(P("csi-node/p/a"), 0755), EEXIST);
    ROW("mkdir in an instance", mkdir(P("csi-node/p/a/sub"), 0755), EPERM);
    ROW("mkdir bad name in an instance", mkdir(P("csi-node/p/a/.x"), 0755), EPERM);
    ROW("create a file", open(P("csi-node/p/a/newfile"), O_CREAT | O_WRONLY, 0644), EPERM);
    ROW("create at root", open(P("newfile"), O_CREAT | O_WRONLY, 0644), EPERM);
    ROW("mknod", mknod(P("csi-node/p/a/fifo"), S_IFIFO | 0644, 0), EPERM);
    ROW("link", link(P("csi-node/p/a/health"), P("csi-node/p/a/h2")), EPERM);
    ROW("rmdir a type", rmdir(P("csi-node")), EPERM);
    ROW("rmdir non-empty plugin", rmdir(P("csi-node/p")), ENOTEMPTY);
    ROW("rmdir missing", rmdir(P("csi-node/p/zz")), ENOENT);
    ROW("lookup missing", access(P("csi-node/zz"), F_OK), ENOENT);
    ROW("unlink missing", unlink(P("csi-node/p/a/zz")), ENOENT);
    ROW("unlink attribute", unlink(P("csi-node/p/a/health")), EPERM);
    ROW("unlink events", unlink(P("events")), EPERM);
    ROW("symlink in a plugin dir", symlink("/x", P("csi-node/p/link")), EPERM);
    ROW("symlink at root", symlink("/x", P("link")), EPERM);
    ROW("symlink relative target", symlink("rel.sock", P("csi-node/p/a/CuREL")), EINVAL);
    ROW("symlink target too long", symlink(longt, P("csi-node/p/a/CuLONG")), ENAMETOOLONG);
    ROW("symlink onto an attribute", symlink("/x", P("csi-node/p/a/health")), EEXIST);
    ROW("rename instance", rename(P("csi-node/p/a"), P("csi-node/p/b")), EPERM);
    ROW("rename plugin", rename(P("csi-node/p"), P("csi-node/p2")), EPERM);
    ROW("chmod", chmod(P("csi-node/p/a/health"), 0666), EPERM);
    ROW("chown", chown(P("csi-node/p/a"), 1, 1), EPERM);
    ROW("utimes", utimensat(AT_FDCWD, P("csi-node/p/a/mount_point"), NULL, 0), EPERM);
    ROW("open read-only attr for write", open(P("csi-node/p/a/ready"), O_RDWR), EACCES);
    ROW("truncate a read-only attr", truncate(P("csi-node/p/a/ready"), 0), EACCES);
    ROW("write past offset 0", pwrite_at(P("csi-node/p/a/mount_point"), 1), EINVAL);
    /* unlink of current, once there is one */
    make_ready("p", "a");
    snapshot(before, sizeof(before));
    ROW("unlink current", unlink(P("csi-node/p/current")), EPERM);
    ROW("rmdir current", rmdir(P("csi-node/p/current")), ENOTDIR);
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

/* A listing longer than one reply: the kernel asks again from the last
 * cookie (with READDIR after a first READDIRPLUS, from its cache or not),
 * and gets every entry once, newest first. Registry children's cookies go
 * down (seq order), so resuming goes by seq, not by "cookie <= offset". */
Test(tree, long_listings_are_complete)
{
    char name[80];
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/big"), 0);
    for (int k = 0; k < 400; k++) {
        snprintf(name, sizeof(name), "csi-node/big/a%03d-%s", k,
                 "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
        cr_assert_eq(mkdir(P(name), 0755), 0);
        snprintf(name, sizeof(name), "csi-node/q%03d-%s", k,
                 "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz");
        cr_assert_eq(mkdir(P(name), 0755), 0);
    }
    for (int pass = 0; pass < 2; pass++) {   /* uncached, then from the cache */
        cr_assert_eq(tf_sh(&t, "test $(ls -f csi-node/big | sort -u | wc -l) = 402"), 0,
                     "400 instances, . and .. (no current), once each (pass %d)", pass);
        cr_assert_eq(tf_sh(&t, "test \"$(ls -U csi-node/big | head -1)\" = a399-%s && "
                               "test \"$(ls -U csi-node/big | tail -1)\" = a000-%s",
                           "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz",
                           "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"), 0,
                     "newest first");
        cr_assert_eq(tf_sh(&t, "test $(ls -f csi-node | sort -u | wc -l) = 403"), 0,
                     "401 plugins, . and ..");
        cr_assert_eq(tf_sh(&t, "ls -l csi-node/big > /dev/null"), 0);
    }
    /* a change in the middle of the cached listing */
    cr_assert_eq(tf_sh(&t, "rmdir csi-node/big/a200-%s && test $(ls csi-node/big | wc -l) = 399",
                       "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz"), 0);
}

/* DESIGN 5: a control character in a socket target or a writable attribute
 * value, or a relative path in mount_point / container_mount_point, is
 * EINVAL and changes nothing (tree, values, events). */
Test(tree, control_characters_and_relative_paths_refused)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a && ln -s /run/a.sock csi-node/p/a/socket && "
                           "echo /m > csi-node/p/a/mount_point"), 0);
    static char before[1 << 16], now[1 << 16];
    snapshot(before, sizeof(before));
    static const char *const targets[] = { "/a\nb", "/a\x01", "/a\x1f", "/a\x7f", "/\x1b[31m" };
    size_t nt = sizeof(targets) / sizeof(targets[0]);
    for (size_t k = 0; k < nt; k++)    /* ln -sfn's pending link */
        ROW("pending link target", symlink(targets[k], P("csi-node/p/a/CuXXXXXX")), EINVAL);
    cr_assert_eq(unlink(P("csi-node/p/a/socket")), 0);
    snapshot(before, sizeof(before));
    for (size_t k = 0; k < nt; k++)
        ROW("socket target", symlink(targets[k], P("csi-node/p/a/socket")), EINVAL);
    cr_assert_eq(symlink("/run/a.sock", P("csi-node/p/a/socket")), 0);
    snapshot(before, sizeof(before));
    static const char *const values[] = { "/a\x01", "/a\rb", "/a\x7f", "rel/dir", "m", "./x" };
    static const char *const attrs[] = { "csi-node/p/a/mount_point",
                                         "csi-node/p/a/container_mount_point" };
    for (size_t k = 0; k < sizeof(values) / sizeof(values[0]); k++)
        for (int a = 0; a < 2; a++)
            ROW("attribute value",
                (errno = -write_at(P(attrs[a]), values[k], strlen(values[k]), 0, 0)) ? -1 : 0,
                EINVAL);
    /* a tab is no control character here, and an absolute path is fine */
    cr_assert_eq(write_at(P(attrs[1]), "/a\tb\n", 5, 0, 0), 0);
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/a/container_mount_point"), "/a\tb");
    cr_assert_str_eq(tf_cat(&t, "csi-node/p/a/mount_point"), "/m");
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/a/socket"), "/run/a.sock");
}
