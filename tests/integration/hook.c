/* The task hook, scripts/csi-plugin-hook, run through sh against a real csifs
 * process and real csi-test-plugin processes: prestart, wait, wait-plugin,
 * poststop, rolling updates, monolith rollback, mount propagation, and the
 * script's static checks. Run from the top of the tree (like every test). */
#include "tests/integration/hook_fixture.h"

static void stop_watcher(void);

static void teardown(void)
{
    stop_watcher();
    hook_teardown();
}

TestSuite(hook, .init = hook_setup, .fini = teardown, .timeout = 180);

/* Test 1 for one type: prestart, plugin, wait, poststop twice. */
static void lifecycle(const char *type, const char *const *rels, const char *const *plugin_dirs)
{
    struct hk h;
    char want[700], dir[600];
    start_fs(type, FS_OPTS);
    cr_assert_eq(hook(&h, "prestart --type %s --plugin lp --alloc a1 --mount-point /var/lib/lp "
                          "--container-mount-point /csi-data", type), 0, "%s", h.err);
    snprintf(dir, sizeof(dir), "%s/a1", sockroot);
    snprintf(want, sizeof(want), "%s/csi.sock", dir);
    const char *sock = endpoint_path(h.out);
    cr_assert_str_eq(sock, want);
    struct stat st;
    cr_assert_eq(stat(dir, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(st.st_mode & 07777, 0700, "socket dir mode %o", st.st_mode & 07777);
    for (int i = 0; rels[i]; i++) {
        char r[512];
        snprintf(r, sizeof(r), "%s/mount_point", rels[i]);
        cr_assert_str_eq(tf_cat(&t, r), "/var/lib/lp");
        snprintf(r, sizeof(r), "%s/container_mount_point", rels[i]);
        cr_assert_str_eq(tf_cat(&t, r), "/csi-data");
    }

    struct tp_proc p;
    cr_assert_eq(tp_start(&p, "--socket", want, "--type", type, NULL), 0);
    cr_assert_eq(hook(&h, "wait --type %s --plugin lp --alloc a1 --timeout 20s", type), 0, "%s",
                 h.err);
    for (int i = 0; rels[i]; i++)
        assert_registration(rels[i], want, "healthy");

    cr_assert_eq(tp_stop(&p), 0);
    cr_assert_eq(hook(&h, "poststop --type %s --plugin lp --alloc a1", type), 0, "%s", h.err);
    for (int i = 0; rels[i]; i++)
        cr_assert(!exists(tf_path(&t, rels[i])), "%s still registered", rels[i]);
    for (int i = 0; plugin_dirs[i]; i++)
        cr_assert(exists(tf_path(&t, plugin_dirs[i])), "poststop removed %s", plugin_dirs[i]);
    cr_assert(!exists(dir), "socket dir %s left behind", dir);
    cr_assert_eq(hook(&h, "poststop --type %s --plugin lp --alloc a1", type), 0,
                 "second poststop: %s", h.err);
}

Test(hook, lifecycle_node)
{
    lifecycle("node", (const char *[]){ "csi-node/lp/a1", NULL },
              (const char *[]){ "csi-node/lp", NULL });
}

Test(hook, lifecycle_controller)
{
    lifecycle("controller", (const char *[]){ "csi-controller/lp/a1", NULL },
              (const char *[]){ "csi-controller/lp", NULL });
}

Test(hook, lifecycle_monolith)
{
    lifecycle("monolith", (const char *[]){ "csi-controller/lp/a1", "csi-node/lp/a1", NULL },
              (const char *[]){ "csi-controller/lp", "csi-node/lp", NULL });
}

/* Reads current in a loop: what it saw. */
static struct watcher {
    char path[600];
    atomic_bool stop;
    long reads, missing, other, back_to_a, saw_a, saw_b;
    pthread_t th;
    bool running;
} watcher;

static void *watch_current(void *arg)
{
    struct watcher *w = arg;
    bool b_seen = false;
    while (!atomic_load(&w->stop)) {
        char buf[256];
        ssize_t n = readlink(w->path, buf, sizeof(buf) - 1);
        w->reads++;
        if (n < 0) {
            w->missing++;
            continue;
        }
        buf[n] = '\0';
        if (strcmp(buf, "A") == 0) {
            w->saw_a++;
            w->back_to_a += b_seen;
        } else if (strcmp(buf, "B") == 0) {
            w->saw_b++;
            b_seen = true;
        } else {
            w->other++;
        }
    }
    return NULL;
}

static void stop_watcher(void)
{
    if (!watcher.running)
        return;
    atomic_store(&watcher.stop, true);
    pthread_join(watcher.th, NULL);
    watcher.running = false;
}

static void start_instance(struct tp_proc *p, const char *alloc)
{
    struct hk h;
    cr_assert_eq(hook(&h, "prestart --type node --plugin ru --alloc %s", alloc), 0, "%s", h.err);
    cr_assert_eq(tp_start(p, "--socket", endpoint_path(h.out), "--type", "node", NULL), 0);
    cr_assert_eq(hook(&h, "wait --type node --plugin ru --alloc %s --timeout 20s", alloc), 0,
                 "%s", h.err);
}

Test(hook, rolling_update_never_loses_current)
{
    start_fs("rolling", FS_OPTS);
    struct tp_proc a, b;
    start_instance(&a, "A");
    cr_assert_str_eq(tf_readlink(&t, "csi-node/ru/current"), "A");

    snprintf(watcher.path, sizeof(watcher.path), "%s", tf_path(&t, "csi-node/ru/current"));
    cr_assert_eq(pthread_create(&watcher.th, NULL, watch_current, &watcher), 0);
    watcher.running = true;

    start_instance(&b, "B");
    cr_expect_str_eq(tf_readlink(&t, "csi-node/ru/current"), "B", "current after wait B");
    struct hk h;
    int rc = hook(&h, "poststop --type node --plugin ru --alloc A");
    cr_expect_str_eq(tf_readlink(&t, "csi-node/ru/current"), "B", "current after poststop A");
    tp_stop(&a);

    stop_watcher();
    cr_assert_eq(rc, 0, "%s", h.err);
    cr_assert(watcher.saw_a > 0 && watcher.saw_b > 0, "reads %ld: A %ld, B %ld", watcher.reads,
              watcher.saw_a, watcher.saw_b);
    cr_assert_eq(watcher.missing, 0, "current was missing %ld times out of %ld", watcher.missing,
                 watcher.reads);
    cr_assert_eq(watcher.other, 0);
    cr_assert_eq(watcher.back_to_a, 0, "current went back to A after B");
    cr_assert_str_eq(tf_readlink(&t, "csi-node/ru/current"), "B");
    cr_assert(!exists(tf_path(&t, "csi-node/ru/A")));
}

Test(hook, monolith_rolls_back_controller_when_node_fails)
{
    /* one instance per plugin: the node registration of a second one is ENOSPC */
    start_fs("rollback", FS_OPTS ",max_instances=1");
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/mp/other"), 0);
    struct hk h;
    cr_assert_eq(hook(&h, "prestart --type monolith --plugin mp --alloc A"), 1);
    cr_assert(strstr(h.err, "cannot register csi-node/mp/A: No space left on device"), "%s",
              h.err);
    cr_assert_str_eq(h.out, "");
    cr_assert(!exists(tf_path(&t, "csi-controller/mp/A")), "controller registration kept");
    cr_assert(exists(tf_path(&t, "csi-controller/mp")), "the plugin dir stays");
    cr_assert(exists(tf_path(&t, "csi-node/mp/other")));
    cr_assert(!exists(tf_path(&t, "csi-node/mp/A")));
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/A", sockroot);
    cr_assert(!exists(dir), "socket dir left behind");
    cr_assert_eq(tf_sh(&t, "timeout 1 cat events > ../ev.txt; "
                           "grep -q ' registered csi-controller/mp/A$' ../ev.txt && "
                           "grep -q ' deregistered csi-controller/mp/A$' ../ev.txt"), 0);

    /* a registration that was there before prestart is not rolled back */
    cr_assert_eq(tf_sh(&t, "mkdir csi-controller/mp/B"), 0);
    cr_assert_eq(hook(&h, "prestart --type monolith --plugin mp --alloc B"), 1);
    cr_assert(exists(tf_path(&t, "csi-controller/mp/B")));
    cr_assert(!exists(tf_path(&t, "csi-node/mp/B")));
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The time (epoch ms) of the first event line holding what; -1 if none. */
static int64_t event_time(const char *what)
{
    static char buf[1 << 20];
    int fd = open(tf_path(&t, "events"), O_RDONLY | O_NONBLOCK);
    cr_assert_geq(fd, 0);
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(buf) - 1 && (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = '\0';
    char *hit = strstr(buf, what);
    if (!hit)
        return -1;
    while (hit > buf && hit[-1] != '\n')
        hit--;
    struct tm tm = { 0 };
    int ms;
    char *rest = strptime(strchr(hit, ' ') + 1, "%Y-%m-%dT%H:%M:%S", &tm);
    cr_assert(rest && sscanf(rest, ".%3dZ", &ms) == 1, "event line: %.80s", hit);
    return (int64_t)timegm(&tm) * 1000 + ms;
}

Test(hook, wait_reports_the_reason_and_follows_readiness)
{
    start_fs("wait", FS_OPTS);
    struct hk h;
    struct tp_proc never, later;

    /* never ready: non-zero after the timeout, with the instance's reason */
    cr_assert_eq(hook(&h, "prestart --type node --plugin wp --alloc n1"), 0, "%s", h.err);
    cr_assert_eq(tp_start(&never, "--socket", endpoint_path(h.out), "--type", "node",
                          "--not-ready", NULL), 0);
    int64_t t0 = tu_now_ms();
    cr_assert_eq(hook(&h, "wait --type node --plugin wp --alloc n1 --timeout 2s"), 4);
    int64_t took = tu_now_ms() - t0;
    cr_assert_geq(took, 2000, "gave up after %lld ms", (long long)took);
    cr_assert(strstr(h.err, "csi-node/wp/n1 is not healthy after 2s (health unknown): not ready"),
              "%s", h.err);

    /* ready after 1.5 s: wait, started first, returns within a second of the
     * instance becoming ready (its health event) */
    cr_assert_eq(hook(&h, "prestart --type node --plugin wp --alloc r1"), 0, "%s", h.err);
    struct hk w;
    hook_spawn(&w, "wait --type node --plugin wp --alloc r1 --timeout 30s");
    int64_t started = wall_ms();
    cr_assert_eq(tp_start(&later, "--socket", endpoint_path(h.out), "--type", "node",
                          "--not-ready-for", "1500", NULL), 0);
    cr_assert_eq(hook_reap(&w, 30000), 0, "%s", w.err);
    int64_t returned = wall_ms();
    const char *health = tf_cat(&t, "csi-node/wp/r1/health");
    cr_assert(health && strcmp(health, "healthy") == 0, "health after wait: %s",
              health ? health : strerror(errno));
    int64_t healthy = event_time(" health csi-node/wp/r1 state=healthy ready=1");
    cr_assert_gt(healthy, 0, "no healthy event");
    cr_assert_geq(returned - started, 1500, "returned before the plugin was ready");
    cr_assert_leq(returned - healthy, tu_ms(1000),
                  "returned %lld ms after the instance became ready",
                  (long long)(returned - healthy));
}

/* How many processes run `timeout SECS cat` (the hook's events reader). */
static int readers(const char *secs)
{
    char want[64];
    int wlen = snprintf(want, sizeof(want), "timeout%c%s%ccat%c", 0, secs, 0, 0);
    int n = 0;
    DIR *d = opendir("/proc");
    cr_assert(d);
    for (struct dirent *e; (e = readdir(d));) {
        char path[300], buf[256];
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof(buf));
        close(fd);
        n += len == wlen && memcmp(buf, want, (size_t)wlen) == 0;
    }
    closedir(d);
    return n;
}

static bool reader_987_runs(void *arg)
{
    (void)arg;
    return readers("987") == 1;
}

Test(hook, wait_leaves_no_reader_behind)
{
    start_fs("reader", FS_OPTS);
    struct hk h, w;
    cr_assert_eq(hook(&h, "prestart --type node --plugin lr --alloc a1"), 0, "%s", h.err);
    /* killed while following events */
    hook_spawn(&w, "wait --type node --plugin lr --alloc a1 --timeout 987s");
    cr_assert(tu_wait_for(reader_987_runs, NULL, 10000), "no events reader");
    kill(w.pid, SIGTERM);
    cr_assert_eq(hook_reap(&w, 10000), 143);
    cr_assert_eq(readers("987"), 0, "the reader outlived a killed hook");
    /* returning healthy */
    hook_spawn(&w, "wait --type node --plugin lr --alloc a1 --timeout 986s");
    struct tp_proc p;
    cr_assert_eq(tp_start(&p, "--socket", endpoint_path(h.out), "--type", "node", NULL), 0);
    cr_assert_eq(hook_reap(&w, 30000), 0, "%s", w.err);
    cr_assert_eq(readers("986"), 0, "the reader outlived the hook");
}

Test(hook, wait_plugin_blocks_until_current_is_healthy)
{
    start_fs("waitplugin", FS_OPTS);
    struct hk h, w;
    cr_assert_eq(hook(&h, "wait-plugin --type node --plugin nothere --timeout 1s"), 4);
    cr_assert(strstr(h.err, "csi-node/nothere has no healthy current instance after 1s: "
                            "plugin not registered"), "%s", h.err);

    hook_spawn(&w, "wait-plugin --type node --plugin wpp --timeout 30s");
    cr_assert_eq(hook(&h, "prestart --type node --plugin wpp --alloc a1"), 0, "%s", h.err);
    cr_assert(!reaped(&w, 200), "wait-plugin returned with no healthy instance: %d", w.status);
    struct tp_proc p;
    cr_assert_eq(tp_start(&p, "--socket", endpoint_path(h.out), "--type", "node", "--name",
                          "wpp.example", NULL), 0);
    cr_assert_eq(hook_reap(&w, 30000), 0, "%s", w.err);
    char want[600];
    snprintf(want, sizeof(want), "%s/csi-node/wpp/current/socket\n", t.mnt);
    cr_assert_str_eq(w.out, want);

    /* a client dials the printed path */
    want[strcspn(want, "\n")] = '\0';
    struct csi_client *c;
    struct csi_chan *ch;
    struct csi_result res = { 0 };
    cr_assert_eq(csi_client_new(&c), 0);
    cr_assert_eq(csi_chan_open(c, want, &ch), 0);
    cr_assert_eq(csi_call_sync(ch, CSI_GET_PLUGIN_INFO, (int)tu_ms(5000), &res), 0);
    bool ok = res.ok && res.name && strcmp(res.name, "wpp.example") == 0;
    char why[256];
    snprintf(why, sizeof(why), "%s", res.reason ? res.reason : "");
    csi_result_clear(&res);
    csi_chan_close(ch);
    csi_client_free(c);
    cr_assert(ok, "GetPluginInfo through %s: %s", want, why);
}

/* Bind SRC onto DST with the hook in a private mount namespace (all its
 * mounts vanish with it), then mount a tmpfs under SRC and one under DST.
 * Prints "<SRC mount seen in DST> <DST mount seen in SRC> <DST propagation>
 * <DST writable>", or "refused <DST mounted?>" when the hook refuses. */
static const char prop_script[] =
    "set -eu\n"
    "hook=$1 d=$2 mode=$3 kind=$4 ro=$5\n"
    "mkdir -p \"$d/src\" \"$d/dst\"\n"
    "if [ \"$kind\" = tmpfs ]; then mount -t tmpfs src \"$d/src\"; fi\n"
    "mkdir \"$d/src/a\" \"$d/src/b\"\n"
    "if ! sh \"$hook\" mount --propagation \"$mode\" $ro \"$d/src\" \"$d/dst\"; then\n"
    "    if mountpoint -q \"$d/dst\"; then echo refused mounted; else echo refused unmounted; fi\n"
    "    exit 0\n"
    "fi\n"
    "mount -t tmpfs a \"$d/src/a\"\n"
    "mount -t tmpfs b \"$d/dst/b\"\n"
    "s=no t=no w=ro\n"
    "if mountpoint -q \"$d/dst/a\"; then s=yes; fi\n"
    "if mountpoint -q \"$d/src/b\"; then t=yes; fi\n"
    "if touch \"$d/dst/probe\" 2>/dev/null; then w=rw; fi\n"
    "echo \"$s $t $(findmnt -n -o PROPAGATION \"$d/dst\") $w\"\n";

static char prop_out[4096];   /* everything the last check printed */

/* The last line the check printed. */
static const char *propagation(const char *mode, const char *kind, bool ro)
{
    char *out = prop_out;
    char script[600], dir[600], outp[700], cmd[4096];
    snprintf(script, sizeof(script), "%s/prop.sh", work);
    snprintf(dir, sizeof(dir), "%s/%s-%s-%s", work, mode, kind, ro ? "ro" : "rw");
    snprintf(outp, sizeof(outp), "%s.out", dir);
    FILE *f = fopen(script, "w");
    cr_assert(f);
    fputs(prop_script, f);
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof(cmd),
             "timeout 60 unshare -m --propagation private sh '%s' %s '%s' %s %s '%s' >'%s' 2>&1",
             script, HOOK, dir, mode, kind, ro ? "--read-only" : "", outp);
    int st = system(cmd);
    slurp(outp, out, sizeof(prop_out));
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s %s: %s", mode, kind, out);
    static char last[256];
    size_t n = strlen(out);
    while (n > 0 && out[n - 1] == '\n')
        n--;
    size_t b = n;
    while (b > 0 && out[b - 1] != '\n')
        b--;
    snprintf(last, sizeof(last), "%.*s", (int)(n - b), out + b);
    return last;
}

Test(hook, mount_propagation_modes)
{
    cr_assert_str_eq(propagation("private", "tmpfs", false), "no no private rw");
    cr_assert_str_eq(propagation("host-to-task", "tmpfs", false), "yes no private,slave rw");
    cr_assert_str_eq(propagation("bidirectional", "tmpfs", false), "yes yes shared rw");
    /* SRC not a mount point: the hook binds it onto itself to share it */
    cr_assert_str_eq(propagation("host-to-task", "dir", false), "yes no private,slave rw");
    cr_assert_str_eq(propagation("private", "tmpfs", true), "no no private ro");
    cr_assert_str_eq(propagation("host-to-task", "tmpfs", true), "yes no private,slave ro");
    cr_assert_str_eq(propagation("bidirectional", "tmpfs", true), "refused unmounted");
    cr_assert(strstr(prop_out, "--read-only with --propagation bidirectional is refused"), "%s",
              prop_out);
}

Test(hook, static_checks_accept_the_script)
{
    cr_assert_eq(system("dash -n " HOOK), 0, "dash -n");
    cr_assert_eq(system("shellcheck -s sh " HOOK), 0, "shellcheck -s sh");
    struct hk h;
    cr_assert_eq(hook(&h, "--help"), 0);
    const char *subs[] = { "prestart", "mount --propagation", "wait ", "wait-plugin", "poststop",
                           "run INSTANCE", "unmount DST", "--env-file", "--unmount DST",
                           "CSI_PLUGIN_TYPE", "NOMAD_ALLOC_ID" };
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        cr_assert(strstr(h.out, subs[i]), "--help lacks %s", subs[i]);
}


Test(hook, refusals_say_why)
{
    /* no csifs at CSIFS_MOUNT */
    assert_fails(3, "csifs is not mounted at /nonexistent-csifs-mount (set CSIFS_MOUNT): "
                    "No such file or directory",
                 "prestart --type node --plugin p --alloc a");
    start_fs("refuse", FS_OPTS);
    /* bad arguments: nothing done */
    assert_fails(2, "unknown subcommand", "register --type node");
    assert_fails(2, "--type must be one of", "prestart --type nodes --plugin p --alloc a");
    assert_fails(2, "--type must be one of", "wait-plugin --type monolith --plugin p");
    assert_fails(2, "bad or missing --alloc 'current'",
                 "prestart --type node --plugin p --alloc current");
    assert_fails(2, "bad or missing --alloc '../x'",
                 "poststop --type node --plugin p --alloc ../x");
    assert_fails(2, "bad or missing --alloc ''", "wait --type node --plugin p");
    assert_fails(2, "unknown option --socket-dir",
                 "wait --type node --plugin p --alloc a --socket-dir /x");
    assert_fails(2, "needs a value", "prestart --type node --plugin p --alloc");
    assert_fails(2, "bad --timeout '0'", "wait --type node --plugin p --alloc a --timeout 0");
    assert_fails(2, "bad --timeout '5h'", "wait --type node --plugin p --alloc a --timeout 5h");
    assert_fails(2, "needs SRC and DST", "mount --propagation private /tmp");
    assert_fails(2, "--propagation must be", "mount --propagation shared /tmp /mnt");
    cr_assert(!exists(tf_path(&t, "csi-node/p")), "a refused call registered something");
    /* a socket path too long to dial: refused before anything is made */
    char longdir[600];
    snprintf(longdir, sizeof(longdir), "%s/%0100d", work, 0);
    char args[1024];
    snprintf(args, sizeof(args), "prestart --type node --plugin p --alloc a --socket-dir %s",
             longdir);
    assert_fails(2, "a unix socket path may be at most 107 bytes", args);
    cr_assert(!exists(tf_path(&t, "csi-node/p")));
    cr_assert(!exists(longdir));
    assert_fails(1, "wait: csi-node/p/a is not registered: No such file or directory",
                 "wait --type node --plugin p --alloc a --timeout 1s");
    /* a dead daemon's mount */
    tf_kill(&t, true);
    assert_fails(3, "Transport endpoint is not connected",
                 "poststop --type node --plugin p --alloc a");
}
