/* Exact and fast views: caching never stale, the events stream, poll. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/testutil.h"

static struct tf t;

static void setup(void)
{
    struct tf_opts o = { .tag = "views", .memory = true };
    cr_assert_eq(tf_start(&t, &o), 0);
}

static void teardown(void)
{
    tf_stop(&t);
}

TestSuite(views, .init = setup, .fini = teardown, .timeout = 300);

#define P(rel) tf_path(&t, rel)

static uint64_t seq_of(const char *p, const char *a)
{
    struct reg_node pn, in;
    cr_assert_eq(reg_plugin_lookup(t.reg, REG_NODE, p, &pn), 0);
    cr_assert_eq(reg_instance_lookup(t.reg, pn.seq, a, &in), 0);
    return in.seq;
}

static int probe(uint64_t s, enum reg_outcome out, const char *why)
{
    static const struct reg_fingerprint fp = { "csi.example", "1", "n1", 0, "", "" };
    struct reg_node n;
    cr_assert_eq(reg_get(t.reg, s, &n), 0);
    struct reg_probe pr = { .gen = n.gen, .outcome = out, .reason = why, .fp = &fp };
    return reg_probe_result(t.reg, s, &pr);
}

/* ---- a checker process: reads what it is told, right when told ---- */

struct checker {
    pid_t pid;
    FILE *to, *from;
};

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir (not . and ..), sorted, space-separated, into buf. */
static ssize_t list_names(const char *dir, char *buf, size_t cap)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while (n < 256 && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof(names[0]), by_name);
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < n; k++) {
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", k ? " " : "", names[k]);
        free(names[k]);
        if (len >= cap)
            len = cap - 1;
    }
    return (ssize_t)len;
}

/* Lines "L path" (readlink), "D path" (the listing) or "C path"
 * (open/read/close); answers the value (or "-") on one line. */
static void checker_main(int in, int out)
{
    FILE *fin = fdopen(in, "r"), *fout = fdopen(out, "w");
    char line[4200], buf[4096];
    while (fgets(line, sizeof(line), fin)) {
        line[strcspn(line, "\n")] = '\0';
        ssize_t n = -1;
        if (line[0] == 'D') {
            n = list_names(line + 2, buf, sizeof(buf));
        } else if (line[0] == 'L') {
            n = readlink(line + 2, buf, sizeof(buf) - 1);
        } else {
            int fd = open(line + 2, O_RDONLY);
            if (fd >= 0) {
                n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
            }
            if (n > 0 && buf[n - 1] == '\n')
                n--;
        }
        if (n < 0)
            fprintf(fout, "-%s\n", strerror(errno));
        else
            fprintf(fout, "%.*s\n", (int)n, buf);
        fflush(fout);
    }
    _exit(0);
}

static void checker_start(struct checker *c)
{
    int a[2], b[2];
    cr_assert_eq(pipe(a), 0);
    cr_assert_eq(pipe(b), 0);
    c->pid = fork();
    cr_assert_geq(c->pid, 0);
    if (c->pid == 0) {
        close(a[1]);
        close(b[0]);
        /* exec-free child of a process serving FUSE: touches only syscalls */
        checker_main(a[0], b[1]);
    }
    close(a[0]);
    close(b[1]);
    c->to = fdopen(a[1], "w");
    c->from = fdopen(b[0], "r");
}

static const char *checker_ask(struct checker *c, char op, const char *path)
{
    static char ans[4200];
    fprintf(c->to, "%c %s\n", op, path);
    fflush(c->to);
    cr_assert(fgets(ans, sizeof(ans), c->from));
    ans[strcspn(ans, "\n")] = '\0';
    return ans;
}

static void checker_stop(struct checker *c)
{
    fclose(c->to);
    fclose(c->from);
    waitpid(c->pid, NULL, 0);
}

Test(views, never_stale_current)
{
    struct checker c;
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/base && ln -s /base.sock csi-node/p/base/socket"), 0);
    cr_assert_eq(probe(seq_of("p", "base"), REG_PROBE_OK, NULL), 0);
    checker_start(&c);
    char cur[4096];   /* P() returns a rotating buffer: keep a copy */
    snprintf(cur, sizeof(cur), "%s", P("csi-node/p/current"));
    char name[32], first[200] = "";
    int stale = 0;
    for (int k = 0; k < 10000; k++) {
        const char *want;
        if (k % 2 == 0) {
            /* a newer instance becomes ready */
            snprintf(name, sizeof(name), "csi-node/p/b%d", k);
            cr_assert_eq(mkdir(P(name), 0755), 0);
            snprintf(name, sizeof(name), "b%d", k);
            cr_assert_eq(reg_socket_set(t.reg, seq_of("p", name), "/b.sock"), 0);
            cr_assert_eq(probe(seq_of("p", name), REG_PROBE_OK, NULL), 0);
            want = name;
        } else {
            /* rmdir of the current */
            char dir[64];
            snprintf(dir, sizeof(dir), "csi-node/p/b%d", k - 1);
            cr_assert_eq(rmdir(P(dir)), 0);
            want = "base";
        }
        const char *got = checker_ask(&c, 'L', cur);
        if (strcmp(got, want) && !stale++)
            snprintf(first, sizeof(first), "round %d: got '%s', want '%s'", k, got, want);
    }
    checker_stop(&c);
    cr_assert_eq(stale, 0, "%d stale answers; first %s", stale, first);
}

/* Listings come from the kernel's cache (no opendir): exact after every
 * mkdir, rmdir and move of current, as seen by another process. */
Test(views, never_stale_listing)
{
    struct checker c;
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/base && ln -s /base.sock csi-node/p/base/socket"), 0);
    cr_assert_eq(probe(seq_of("p", "base"), REG_PROBE_OK, NULL), 0);
    checker_start(&c);
    char dir[4096], types[4096];
    snprintf(dir, sizeof(dir), "%s", P("csi-node/p"));
    snprintf(types, sizeof(types), "%s", P("csi-node"));
    char name[32], want[128], first[300] = "";
    int stale = 0;
    for (int k = 0; k < 10000; k++) {
        if (k % 2 == 0) {
            /* a newer instance, then it becomes ready: current moves */
            snprintf(name, sizeof(name), "csi-node/p/b%d", k);
            cr_assert_eq(mkdir(P(name), 0755), 0);
            snprintf(name, sizeof(name), "b%d", k);
            const char *mid = checker_ask(&c, 'D', dir);
            snprintf(want, sizeof(want), strcmp(name, "base") < 0 ? "%s base current"
                                                                 : "base %s current", name);
            if (strcmp(mid, want) && !stale++)
                snprintf(first, sizeof(first), "round %d after mkdir: '%s', want '%s'", k,
                         mid, want);
            cr_assert_eq(reg_socket_set(t.reg, seq_of("p", name), "/b.sock"), 0);
            cr_assert_eq(probe(seq_of("p", name), REG_PROBE_OK, NULL), 0);
        } else {
            snprintf(name, sizeof(name), "csi-node/p/b%d", k - 1);
            cr_assert_eq(rmdir(P(name)), 0);
            snprintf(want, sizeof(want), "base current");
        }
        const char *got = checker_ask(&c, 'D', dir);
        if (strcmp(got, want) && !stale++)
            snprintf(first, sizeof(first), "round %d: '%s', want '%s'", k, got, want);
        if (k % 100 == 0) {          /* a plugin dir comes and goes */
            snprintf(name, sizeof(name), "csi-node/q%d", k);
            cr_assert_eq(mkdir(P(name), 0755), 0);
            snprintf(want, sizeof(want), "p q%d", k);
            got = checker_ask(&c, 'D', types);
            if (strcmp(got, want) && !stale++)
                snprintf(first, sizeof(first), "round %d: '%s', want '%s'", k, got, want);
            cr_assert_eq(rmdir(P(name)), 0);
            got = checker_ask(&c, 'D', types);
            if (strcmp(got, "p") && !stale++)
                snprintf(first, sizeof(first), "round %d: '%s', want 'p'", k, got);
        }
    }
    checker_stop(&c);
    cr_assert_eq(stale, 0, "%d stale listings; first %s", stale, first);
    cr_assert_eq(fs_requests_of(t.fs, "opendir"), 1, "the first opendir only (ENOSYS)");
    cr_assert_eq(fs_requests_of(t.fs, "releasedir"), 0);
}

Test(views, never_stale_health)
{
    struct checker c;
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a && ln -s /a.sock csi-node/p/a/socket"), 0);
    uint64_t s = seq_of("p", "a");
    checker_start(&c);
    char h[4096], r[4096];
    snprintf(h, sizeof(h), "%s", P("csi-node/p/a/health"));
    snprintf(r, sizeof(r), "%s", P("csi-node/p/a/reason"));
    int stale = 0;
    char why[32];
    for (int k = 0; k < 10000; k++) {
        snprintf(why, sizeof(why), "boom %d", k);
        cr_assert_eq(probe(s, k % 2 ? REG_PROBE_ERROR : REG_PROBE_OK, why), 0);
        const char *want = k % 2 ? "unhealthy" : "healthy";
        stale += strcmp(checker_ask(&c, 'C', h), want) != 0;
        if (k % 2)
            stale += strcmp(checker_ask(&c, 'C', r), why) != 0;
    }
    checker_stop(&c);
    cr_assert_eq(stale, 0, "%d stale answers", stale);
}

/* ls -lR csi-node into ../lsK.txt, which must match ../ls1.txt: the
 * requests it cost the daemon, and of those, READDIRPLUS (*plus). */
static uint64_t ls_pass(int k, uint64_t *plus)
{
    uint64_t r = fs_requests(t.fs), p = fs_requests_of(t.fs, "readdirplus");
    uint64_t od = fs_requests_of(t.fs, "opendir"), rd = fs_requests_of(t.fs, "releasedir");
    if (k == 1)
        cr_assert_eq(tf_sh(&t, "ls -lR csi-node > ../ls1.txt"), 0);
    else
        cr_assert_eq(tf_sh(&t, "ls -lR csi-node > ../ls%d.txt && diff ../ls1.txt ../ls%d.txt",
                           k, k), 0, "pass %d differs from the first", k);
    /* opendir is ENOSYS (the first pass learns it): no OPENDIR, no RELEASEDIR */
    if (k > 1) {
        cr_assert_eq(fs_requests_of(t.fs, "opendir") - od, 0);
        cr_assert_eq(fs_requests_of(t.fs, "releasedir") - rd, 0);
    }
    *plus = fs_requests_of(t.fs, "readdirplus") - p;
    return fs_requests(t.fs) - r;
}

Test(views, second_ls_lR_is_served_by_the_kernel)
{
    char cmd[128];
    for (int p = 0; p < 50; p++) {
        snprintf(cmd, sizeof(cmd), "mkdir -p csi-node/p%02d && cd csi-node/p%02d && "
                 "mkdir a0 a1 a2 a3 a4 a5 a6 a7 a8 a9", p, p);
        cr_assert_eq(tf_sh(&t, "%s", cmd), 0);
    }
    uint64_t plus, missed, inv0 = fs_invalidations(t.fs, &missed);
    uint64_t queued0 = fs_invalidations_queued(t.fs);
    uint64_t first = ls_pass(1, &plus);
    cr_assert_gt(first, 0);
    /* 551 dirs and 6,500 files: the listings come from the kernel's cache,
     * so what may still reach the daemon is one stat per dir (a readdir
     * drops a dir's atime, and ls fstat()s the dir it opens); nothing per
     * file (+8: the shell's own cd into the mount and its root, per
     * command). Not counted: READDIRPLUS that refill a listing the kernel
     * dropped by itself (below). */
    uint64_t ga = fs_requests_of(t.fs, "getattr"), second = ls_pass(2, &plus);
    cr_log_info("second ls -lR: %llu requests, %llu getattr, %llu readdirplus (first %llu)",
                (unsigned long long)second,
                (unsigned long long)(fs_requests_of(t.fs, "getattr") - ga),
                (unsigned long long)plus, (unsigned long long)first);
    cr_assert_leq(second - plus, 551 + 8, "second ls -lR: %llu requests (%llu readdirplus)",
                  (unsigned long long)second, (unsigned long long)plus);
    /* and those refills are few (up to 7 dirs measured; 551 if the kernel
     * kept no listing) */
    cr_assert_leq(plus, 2 * 20, "second ls -lR: %llu readdirplus", (unsigned long long)plus);
    /* The second pass's GETATTRs were left by the first: an uncached
     * readdir drops the dir's atime (fuse_invalidate_atime) and ls -R
     * fstat()s each dir; a readdir from the cache does not, so a third
     * pass costs nothing (but the shell's own few). The kernel may drop a
     * cached listing's page by itself, though: memory reclaim, or on the
     * VMs we test on DAMON's pageout of cold physical regions, which can
     * hold pages a second old. Measured: in 7 of 80 runs a pass re-read
     * 1 to 9 dirs (2 READDIRPLUS each, and a GETATTR in the pass after),
     * each time with DAMON pageouts during the run (its scheme's
     * nr_applied grew) and no invalidation from csifs; in 1 of 100 more,
     * the fifth pass was the first clean one. So the third pass may be
     * tried four times, and csifs must have sent no invalidation. */
    uint64_t best = UINT64_MAX;
    for (int k = 3; k < 7 && best > 8; k++) {
        uint64_t n = ls_pass(k, &plus);
        cr_log_info("ls -lR pass %d: %llu requests (%llu readdirplus)", k,
                    (unsigned long long)n, (unsigned long long)plus);
        best = n < best ? n : best;
    }
    cr_assert_leq(best, 8, "third ls -lR: %llu requests at best in 4 passes",
                  (unsigned long long)best);
    cr_assert_eq(fs_invalidations(t.fs, &missed), inv0, "csifs invalidated while nothing changed");
    cr_assert_eq(fs_invalidations_queued(t.fs), queued0, "csifs queued invalidations while "
                 "nothing changed");
    /* and a change is seen at once */
    cr_assert_eq(tf_sh(&t, "mkdir csi-node/p07/new && ls csi-node/p07 | grep -qx new && "
                           "rmdir csi-node/p07/a3 && ! ls csi-node/p07 | grep -qx a3"), 0);
}

Test(views, cat_events_replays_then_follows)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0"), 0);
    /* cat in the background; meanwhile more events */
    cr_assert_eq(tf_sh(&t, "(timeout 2 cat events > ../ev.txt; echo $? > ../ev.rc) & "
                           "sleep 0.5; mkdir csi-node/p/a1; ln -s /x.sock csi-node/p/a1/socket; wait"),
                 0);
    const char *rc = tf_cat(&t, "../ev.rc");
    cr_assert_str_eq(rc, "124", "timeout ended cat");
    const char *ev = tf_cat(&t, "../ev.txt");
    cr_assert(ev);
    cr_assert_eq(tu_count_lines(ev), 4, "%s", ev);
    cr_assert_eq(tf_sh(&t, "grep -Eq '^1 [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{3}Z "
                           "registered csi-node/p$' ../ev.txt && "
                           "grep -Eq '^3 .* registered csi-node/p/a1$' ../ev.txt && "
                           "grep -Eq '^4 .* socket csi-node/p/a1 target=/x.sock$' ../ev.txt"), 0);
    /* the mount stays responsive */
    cr_assert_eq(tf_sh(&t, "ls csi-node/p >/dev/null && mkdir csi-node/p/a2"), 0);
}

Test(views, blocked_readers_cost_nothing)
{
    pid_t readers[20];
    for (int k = 0; k < 20; k++) {
        readers[k] = fork();
        if (readers[k] == 0) {
            int fd = open(P("events"), O_RDONLY);
            char buf[4096];
            while (fd >= 0 && read(fd, buf, sizeof(buf)) >= 0)
                ;
            _exit(0);
        }
    }
    tu_sleep_ms(200);
    int64_t start = tu_now_ms();
    cr_assert_eq(tf_sh(&t, "for i in 1 2 3 4 5 6 7 8 9 10; do mkdir -p csi-node/p/a$i; ls -l csi-node/p >/dev/null; done"), 0);
    int64_t took = tu_now_ms() - start;
    for (int k = 0; k < 20; k++)
        kill(readers[k], SIGTERM);
    int64_t end = tu_now_ms() + tu_ms(5000);
    for (int k = 0; k < 20; k++) {
        int st;
        while (waitpid(readers[k], &st, WNOHANG) == 0 && tu_now_ms() < end)
            tu_sleep_ms(5);
        cr_assert(waitpid(readers[k], &st, WNOHANG) != 0 || kill(readers[k], 0) < 0,
                  "reader %d did not exit on SIGTERM", k);
    }
    cr_assert_lt(took, tu_ms(5000), "the mount served others while 20 readers blocked");
}

Test(views, nonblocking_and_poll)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a0"), 0);
    int fd = open(P("events"), O_RDONLY | O_NONBLOCK);
    cr_assert_geq(fd, 0);
    char buf[8192];
    ssize_t n = read(fd, buf, sizeof(buf));
    cr_assert_gt(n, 0);
    cr_assert_eq(read(fd, buf, sizeof(buf)), -1);
    cr_assert_eq(errno, EAGAIN);
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    cr_assert_eq(poll(&pf, 1, 0), 0, "nothing new yet");
    pid_t pid = fork();
    if (pid == 0) {
        usleep(200000);
        _exit(mkdir(P("csi-node/p/a1"), 0755) == 0 ? 0 : 1);
    }
    int r = poll(&pf, 1, (int)tu_ms(5000));
    cr_assert_eq(r, 1, "poll woke on the mkdir");
    cr_assert(pf.revents & POLLIN);
    n = read(fd, buf, sizeof(buf) - 1);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    cr_assert(strstr(buf, "registered csi-node/p/a1\n"), "%s", buf);
    int st;
    waitpid(pid, &st, 0);
    close(fd);
}

Test(views, overtaken_reader_gets_lost)
{
    tf_stop(&t);
    struct tf_opts o = { .tag = "views", .extra_opts = "events_ring=16" };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    int fd = open(P("events"), O_RDONLY);
    cr_assert_geq(fd, 0);
    /* 10 x the ring while the reader does not read */
    int64_t start = tu_now_ms();
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p && cd csi-node/p && "
                           "for i in $(seq 1 160); do mkdir a$i; done"), 0);
    cr_assert_lt(tu_now_ms() - start, tu_ms(30000), "writers were not held up");
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    cr_assert(!strncmp(buf, "lost 145\n", 9), "%.200s", buf);
    cr_assert(strstr(buf, " registered csi-node/p/a160\n"), "%s", buf);
    cr_assert_eq(tu_count_lines(buf), 17, "lost + 16 retained: %s", buf);
    close(fd);
}

static int later_rc = -1;

static void *later_healthy(void *arg)
{
    static const struct reg_fingerprint fp = { "csi.example", "1", "n1", 0, "", "" };
    uint64_t s = *(uint64_t *)arg;
    struct reg_node n;
    tu_sleep_ms(200);
    later_rc = reg_get(t.reg, s, &n);
    struct reg_probe pr = { .gen = n.gen, .outcome = REG_PROBE_OK, .fp = &fp };
    if (later_rc == 0)
        later_rc = reg_probe_result(t.reg, s, &pr);
    return NULL;
}

Test(views, poll_on_health)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a && ln -s /a.sock csi-node/p/a/socket"), 0);
    uint64_t s = seq_of("p", "a");
    int fd = open(P("csi-node/p/a/health"), O_RDONLY);
    cr_assert_geq(fd, 0);
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf));
    cr_assert_eq(n, 8);
    cr_assert(!strncmp(buf, "unknown\n", 8));
    struct pollfd pf = { .fd = fd, .events = POLLPRI };
    cr_assert_eq(poll(&pf, 1, 0), 0, "no change yet");
    /* the registry changes health from another thread while we poll */
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, later_healthy, &s), 0);
    int r = poll(&pf, 1, (int)tu_ms(5000));
    pthread_join(th, NULL);
    cr_assert_eq(later_rc, 0);
    cr_assert_eq(r, 1);
    cr_assert(pf.revents & (POLLPRI | POLLERR), "revents %x", pf.revents);
    cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
    n = read(fd, buf, sizeof(buf));
    cr_assert_eq(n, 8);
    cr_assert(!strncmp(buf, "healthy\n", 8));
    pf.revents = 0;
    cr_assert_eq(poll(&pf, 1, 0), 0, "read again: no change pending");
    close(fd);
}

/* Invalidations go only to inodes the kernel looked up (lookup counts,
 * decremented by forget): a registration cycle whose files nobody read
 * sends none the kernel must refuse. */
Test(views, invalidations_only_for_known_inodes)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p"), 0);
    uint64_t missed0, sent0 = fs_invalidations(t.fs, &missed0);
    for (int k = 0; k < 100; k++)
        cr_assert_eq(tf_sh(&t, "mkdir csi-node/p/a%d && ln -s /x%d.sock csi-node/p/a%d/socket && "
                               "rmdir csi-node/p/a%d", k, k, k, k), 0);
    uint64_t missed1, sent1 = fs_invalidations(t.fs, &missed1);
    cr_log_info("100 cycles: %llu inode invalidations, %llu refused",
                (unsigned long long)(sent1 - sent0), (unsigned long long)(missed1 - missed0));
    cr_assert_gt(sent1 - sent0, 0, "the plugin dir, at least, is known");
    /* a forget may race a change: allow a handful, not ~17 per cycle */
    cr_assert_leq(missed1 - missed0, 10, "%llu of %llu refused",
                  (unsigned long long)(missed1 - missed0), (unsigned long long)(sent1 - sent0));
    /* and what the kernel read is still invalidated: health after a socket set */
    cr_assert_eq(tf_sh(&t, "mkdir csi-node/p/z && cat csi-node/p/z/health >/dev/null"), 0);
    uint64_t missed2, sent2 = fs_invalidations(t.fs, &missed2);
    cr_assert_eq(tf_sh(&t, "ln -s /z.sock csi-node/p/z/socket"), 0);
    uint64_t missed3, sent3 = fs_invalidations(t.fs, &missed3);
    cr_assert_geq(sent3 - sent2, 2, "z and z/health at least");
    cr_assert_eq(missed3, missed2);
}

/* The kernel drops the dentry of a name its own RMDIR or UNLINK removed
 * once it has the answer: csifs queues no entry invalidation for it (the
 * helper's would wait for the call to end and find nothing). A name that
 * goes with it (`current`) still gets one, and reads gone at once. */
Test(views, own_removals_queue_no_entry_invalidation)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p"), 0);
    uint64_t q0 = fs_invalidations_queued(t.fs);
    for (int k = 0; k < 20; k++)
        cr_assert_eq(tf_sh(&t, "mkdir csi-node/p/a%d && ln -s /x%d.sock csi-node/p/a%d/socket && "
                               "ls csi-node/p/a%d >/dev/null && rm csi-node/p/a%d/socket && "
                               "ls csi-node/p >/dev/null && rmdir csi-node/p/a%d && "
                               "! ls csi-node/p/a%d 2>/dev/null && "
                               "[ -z \"$(ls csi-node/p)\" ]", k, k, k, k, k, k, k), 0);
    cr_assert_eq(fs_invalidations_queued(t.fs), q0, "%llu queued for 40 own removals",
                 (unsigned long long)(fs_invalidations_queued(t.fs) - q0));
    cr_assert_eq(tf_sh(&t, "mkdir csi-node/p/h && ln -s /h.sock csi-node/p/h/socket"), 0);
    cr_assert_eq(probe(seq_of("p", "h"), REG_PROBE_OK, NULL), 0);
    cr_assert_eq(tf_sh(&t, "[ \"$(readlink csi-node/p/current)\" = h ]"), 0);
    uint64_t q1 = fs_invalidations_queued(t.fs);
    cr_assert_eq(tf_sh(&t, "rmdir csi-node/p/h"), 0);
    cr_assert_geq(fs_invalidations_queued(t.fs) - q1, 1, "current went with h");
    cr_assert_eq(tf_sh(&t, "! ls csi-node/p/current 2>/dev/null && [ -z \"$(ls csi-node/p)\" ]"), 0);
}
