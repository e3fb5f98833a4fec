/* csi-plugin-hook run (the one-process shape of a sidecar or a systemd
 * service), its takeover after kill -9, the environment defaults, the
 * environment file, and the checks prestart makes before changing anything.
 * Real csifs, real csi-test-plugin started by the hook. */
#include "tests/integration/hook_fixture.h"

TestSuite(hook_run, .init = hook_setup, .fini = hook_teardown, .timeout = 180);

/* The COMMAND of the run hooks: `sh plugin.sh exec|wrap PIDFILE ARGS...`
 * serves $CSI_SOCKET with csi-test-plugin ARGS and writes its PID to
 * PIDFILE, its stdin's target to PIDFILE.stdin and $CSI_ENDPOINT to
 * PIDFILE.env. exec: the plugin is the hook's child. wrap: a shell in
 * between which, on SIGTERM (SIGINT), passes SIGTERM on, notes "term"
 * ("int") in PIDFILE.term and exits 7 (8) once the plugin is gone. */
static const char plugin_script[] =
    "mode=$1 pidfile=$2\n"
    "shift 2\n"
    "readlink /proc/$$/fd/0 >\"$pidfile.stdin\"\n"
    "printf '%s\\n' \"$CSI_ENDPOINT\" >\"$pidfile.env\"\n"
    "if [ \"$mode\" = exec ]; then\n"
    "    echo $$ >\"$pidfile\"\n"
    "    exec build/csi-test-plugin --socket \"$CSI_SOCKET\" --type node \"$@\"\n"
    "fi\n"
    "build/csi-test-plugin --socket \"$CSI_SOCKET\" --type node \"$@\" &\n"
    "p=$!\n"
    "echo $p >\"$pidfile\"\n"
    "trap 'kill -TERM $p; wait $p; echo term >\"$pidfile.term\"; exit 7' TERM\n"
    "trap 'kill -TERM $p; wait $p; echo int >\"$pidfile.term\"; exit 8' INT\n"
    "wait $p\n";

static char pidfile[600];

/* Start `run` of csi-node/<plugin>/<alloc> with plugin.sh MODE (args: more
 * plugin options), stdin from <work>/stdin.txt. */
static void run_spawn(struct hk *h, const char *plugin, const char *alloc, const char *mode,
                      const char *timeout, const char *args)
{
    static int n;
    char script[600], in[600];
    snprintf(script, sizeof(script), "%s/plugin.sh", work);
    snprintf(in, sizeof(in), "%s/stdin.txt", work);
    snprintf(pidfile, sizeof(pidfile), "%s/plugin-%d.pid", work, n++);
    FILE *f = fopen(script, "w");
    cr_assert(f);
    fputs(plugin_script, f);
    cr_assert_eq(fclose(f), 0);
    f = fopen(in, "w");
    cr_assert(f);
    cr_assert_eq(fclose(f), 0);
    hook_spawn(h, "run --type node --plugin %s --alloc %s --timeout %s -- sh '%s' %s '%s' %s <'%s'",
               plugin, alloc, timeout, script, mode, pidfile, args, in);
}

/* The hook's run said the instance is healthy. */
static bool said_healthy(void *arg)
{
    struct hk *h = arg;
    slurp(h->errp, h->err, sizeof(h->err));
    return strstr(h->err, " healthy\n") != NULL;
}

struct health_want {
    const char *rel, *health;
};

static bool health_is(void *arg)
{
    struct health_want *w = arg;
    char r[512];
    snprintf(r, sizeof(r), "%s/health", w->rel);
    const char *v = tf_cat(&t, r);
    return v && strcmp(v, w->health) == 0;
}

static void wait_healthy(const char *rel)
{
    struct health_want w = { rel, "healthy" };
    cr_assert(tu_wait_for(health_is, &w, 20000), "%s never healthy", rel);
}

static bool file_has_pid(void *arg)
{
    (void)arg;
    FILE *f = fopen(pidfile, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return pid > 0;
}

/* The PID the plugin wrapper wrote (tracked for teardown). */
static pid_t plugin_pid(void)
{
    cr_assert(tu_wait_for(file_has_pid, NULL, 10000), "no pid in %s", pidfile);
    FILE *f = fopen(pidfile, "r");
    int pid = 0;
    cr_assert(f && fscanf(f, "%d", &pid) == 1);
    fclose(f);
    track_plugin(pid);
    return pid;
}

static bool gone(void *arg)
{
    pid_t pid = *(pid_t *)arg;
    return !is_test_plugin(pid);
}

static void assert_gone(pid_t pid, const char *why)
{
    cr_assert(tu_wait_for(gone, &pid, 10000), "plugin %d still runs: %s", (int)pid, why);
}

static const char *side(const char *suffix)
{
    static char buf[8192];
    char path[700];
    snprintf(path, sizeof(path), "%s.%s", pidfile, suffix);
    slurp(path, buf, sizeof(buf));
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

/* Test 1, SIGTERM: healthy, current, then the hook's SIGTERM reaches the
 * plugin, the instance is deregistered, the hook exits with its status. */
Test(hook_run, sigterm_reaches_the_plugin_and_deregisters)
{
    start_fs("run-term", FS_OPTS);
    struct hk h;
    run_spawn(&h, "rp", "a1", "wrap", "20s", "");
    cr_assert(tu_wait_for(said_healthy, &h, 20000), "not healthy: %s", h.err);
    wait_healthy("csi-node/rp/a1");
    cr_assert_str_eq(tf_readlink(&t, "csi-node/rp/current"), "a1");
    pid_t pid = plugin_pid();
    char want[700];
    snprintf(want, sizeof(want), "%s/a1/csi.sock", sockroot);
    cr_assert_str_eq(tf_readlink(&t, "csi-node/rp/a1/socket"), want);
    char env[800];
    snprintf(env, sizeof(env), "unix://%s", want);
    cr_assert_str_eq(side("env"), env, "CSI_ENDPOINT in the plugin's environment");
    char in[600];
    snprintf(in, sizeof(in), "%s/stdin.txt", work);
    cr_assert_str_eq(side("stdin"), in, "the plugin's stdin is the hook's");

    cr_assert_eq(kill(h.pid, SIGTERM), 0);
    cr_assert_eq(hook_reap(&h, 20000), 7, "%s", h.err);
    cr_assert_str_eq(side("term"), "term", "the plugin did not get SIGTERM");
    assert_gone(pid, "after the hook's SIGTERM");
    cr_assert(!exists(tf_path(&t, "csi-node/rp/a1")), "still registered");
    cr_assert(!exists(tf_path(&t, "csi-node/rp/current")));
    cr_assert(exists(tf_path(&t, "csi-node/rp")), "the plugin dir goes only by rmdir");
    snprintf(want, sizeof(want), "%s/a1", sockroot);
    cr_assert(!exists(want), "socket dir left behind");
}

/* SIGINT (a terminal's ^C) is passed on too: an asynchronous command of sh
 * would ignore it, the hook gives COMMAND its default action back. */
Test(hook_run, sigint_reaches_the_plugin)
{
    start_fs("run-int", FS_OPTS);
    struct hk h;
    run_spawn(&h, "ri", "a1", "wrap", "20s", "");
    cr_assert(tu_wait_for(said_healthy, &h, 20000), "not healthy: %s", h.err);
    pid_t pid = plugin_pid();
    cr_assert_eq(kill(h.pid, SIGINT), 0);
    cr_assert_eq(hook_reap(&h, 20000), 8, "%s", h.err);
    cr_assert_str_eq(side("term"), "int", "the plugin did not get SIGINT");
    assert_gone(pid, "after the hook's SIGINT");
    cr_assert(!exists(tf_path(&t, "csi-node/ri/a1")), "still registered");
}

/* Test 1, the plugin exits by itself (status 3 on its 8th Probe: the
 * heartbeats of some 6 s after it was healthy): deregistered, the hook exits
 * 3. */
Test(hook_run, plugin_exit_status_is_the_hooks)
{
    start_fs("run-exit", FS_OPTS);
    struct hk h;
    run_spawn(&h, "rx", "a1", "exec", "20s", "--exit-on-call 8 --only Probe");
    pid_t pid = plugin_pid();
    cr_assert_eq(hook_reap(&h, 30000), 3, "%s", h.err);
    cr_assert(strstr(h.err, "run: csi-node/rx/a1 healthy"), "not healthy first: %s", h.err);
    assert_gone(pid, "exited by itself");
    cr_assert(!exists(tf_path(&t, "csi-node/rx/a1")), "still registered");
}

/* Not healthy within --timeout: the plugin gets SIGTERM, poststop, exit 4. */
Test(hook_run, not_healthy_in_time_is_exit_4)
{
    start_fs("run-timeout", FS_OPTS);
    struct hk h;
    int64_t t0 = tu_now_ms();
    run_spawn(&h, "rt", "a1", "wrap", "2s", "--not-ready");
    pid_t pid = plugin_pid();
    cr_assert_eq(hook_reap(&h, 30000), 4, "%s", h.err);
    cr_assert_geq(tu_now_ms() - t0, 2000, "gave up before the timeout");
    cr_assert(strstr(h.err, "run: csi-node/rt/a1 is not healthy after 2s (health unknown): "
                            "not ready"), "%s", h.err);
    cr_assert_str_eq(side("term"), "term", "the plugin did not get SIGTERM");
    assert_gone(pid, "after the timeout");
    cr_assert(!exists(tf_path(&t, "csi-node/rt/a1")), "still registered");
}

/* The names under csi-node/<plugin>, space-separated, sorted by readdir. */
static const char *instances(const char *plugin)
{
    static char buf[1024];
    buf[0] = '\0';
    DIR *d = opendir(tf_path(&t, plugin));
    cr_assert(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        size_t len = strlen(buf);
        snprintf(buf + len, sizeof(buf) - len, "%s%s", len ? " " : "", e->d_name);
    }
    closedir(d);
    return buf;
}

/* Test 2: kill -9 of the hook takes the plugin with it (pdeathsig); kill -9
 * of the hook and the plugin leaves the registration, and the next run of
 * the instance takes it over: healthy again, one instance, no EEXIST. */
Test(hook_run, kill_9_then_run_again_takes_over)
{
    start_fs("run-kill", FS_OPTS);
    struct hk h;
    run_spawn(&h, "kp", "a1", "exec", "20s", "");
    wait_healthy("csi-node/kp/a1");
    pid_t pid = plugin_pid();
    cr_assert_eq(kill(h.pid, SIGKILL), 0);
    cr_assert_eq(hook_reap(&h, 10000), 128 + SIGKILL);
    assert_gone(pid, "its hook was killed: no SIGTERM by pdeathsig");

    for (int round = 0; round < 2; round++) {
        run_spawn(&h, "kp", "a1", "exec", "20s", "");
        pid = plugin_pid();
        cr_assert(tu_wait_for(said_healthy, &h, 20000), "round %d: not healthy again: %s: %s",
                  round, tf_cat(&t, "csi-node/kp/a1/reason"), h.err);
        wait_healthy("csi-node/kp/a1");
        const char *names = instances("csi-node/kp");
        cr_assert_str_eq(names, "current a1", "round %d: %s", round, names);
        cr_assert_str_eq(tf_readlink(&t, "csi-node/kp/current"), "a1");
        if (round == 0) {       /* the hook and its plugin, both by SIGKILL */
            cr_assert_eq(kill(h.pid, SIGKILL), 0);
            kill(pid, SIGKILL);
            cr_assert_eq(hook_reap(&h, 10000), 128 + SIGKILL);
            assert_gone(pid, "SIGKILL");
            cr_assert(exists(tf_path(&t, "csi-node/kp/a1")), "a killed hook deregistered");
        }
    }
    cr_assert_eq(kill(h.pid, SIGTERM), 0);
    int rc = hook_reap(&h, 20000);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, h.err);
    cr_assert(!strstr(h.err, "File exists"), "%s", h.err);
    cr_assert(!exists(tf_path(&t, "csi-node/kp/a1")));
}

/* Test 4: CSI_PLUGIN_TYPE, CSI_PLUGIN_NAME and NOMAD_ALLOC_ID name the
 * instance when the flags are absent; CSI_PLUGIN_ALLOC beats NOMAD_ALLOC_ID;
 * flags beat both. */
Test(hook_run, environment_defaults_name_the_instance)
{
    start_fs("run-env", FS_OPTS);
    struct hk h;
    setenv("CSI_PLUGIN_TYPE", "node", 1);
    setenv("CSI_PLUGIN_NAME", "ev", 1);
    setenv("NOMAD_ALLOC_ID", "n1", 1);
    cr_assert_eq(hook(&h, "prestart"), 0, "%s", h.err);
    char want[700];
    snprintf(want, sizeof(want), "%s/n1/csi.sock", sockroot);
    cr_assert_str_eq(endpoint_path(h.out), want);
    cr_assert_str_eq(tf_readlink(&t, "csi-node/ev/n1/socket"), want);
    cr_assert_str_eq(instances("csi-node/ev"), "n1");

    setenv("CSI_PLUGIN_ALLOC", "c1", 1);
    cr_assert_eq(hook(&h, "prestart"), 0, "%s", h.err);
    cr_assert_eq(hook(&h, "prestart --type monolith --alloc f1"), 0, "%s", h.err);
    cr_assert(exists(tf_path(&t, "csi-controller/ev/f1")), "--type beats CSI_PLUGIN_TYPE");
    cr_assert_str_eq(instances("csi-node/ev"), "f1 c1 n1");

    cr_assert_eq(hook(&h, "poststop"), 0, "%s", h.err);
    cr_assert_str_eq(instances("csi-node/ev"), "f1 n1");
    unsetenv("CSI_PLUGIN_ALLOC");
    cr_assert_eq(hook(&h, "poststop"), 0, "%s", h.err);
    cr_assert_eq(hook(&h, "poststop --type monolith --alloc f1"), 0, "%s", h.err);
    cr_assert_str_eq(instances("csi-node/ev"), "");
    cr_assert(!exists(tf_path(&t, "csi-controller/ev/f1")));
    snprintf(want, sizeof(want), "%s/n1", sockroot);
    cr_assert(!exists(want), "poststop by defaults left the socket dir");
}

/* prestart --env-file: CSI_ENDPOINT and CSI_SOCKET, systemd syntax. */
Test(hook_run, prestart_writes_an_environment_file)
{
    start_fs("run-envfile", FS_OPTS);
    struct hk h;
    char file[600], buf[1024], want[1400];
    snprintf(file, sizeof(file), "%s/csi.env", work);
    cr_assert_eq(hook(&h, "prestart --type node --plugin ef --alloc a1 --env-file %s", file), 0,
                 "%s", h.err);
    slurp(file, buf, sizeof(buf));
    snprintf(want, sizeof(want), "CSI_ENDPOINT=unix://%s/a1/csi.sock\nCSI_SOCKET=%s/a1/csi.sock\n",
             sockroot, sockroot);
    cr_assert_str_eq(buf, want);
    cr_assert_eq(hook(&h, "prestart --type node --plugin ef --alloc a2 --task-socket-dir '/csi "
                          "dir/' --env-file %s", file), 0, "%s", h.err);
    slurp(file, buf, sizeof(buf));
    cr_assert_str_eq(buf, "CSI_ENDPOINT=\"unix:///csi dir/csi.sock\"\n"
                          "CSI_SOCKET=\"/csi dir/csi.sock\"\n");
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "set -a; . '%s'; [ \"$CSI_SOCKET\" = '/csi dir/csi.sock' ]", file);
    cr_assert_eq(system(cmd), 0, "sh cannot read it");
}

/* Test 5: a socket path over 107 bytes and relative mount points are bad
 * arguments: exit 2, the limit named, nothing made. */
Test(hook_run, checks_come_before_any_change)
{
    start_fs("run-checks", FS_OPTS);
    /* <root>/a/csi.sock of 108 bytes: the root is 108 - 11 bytes */
    char root[200];
    int len = snprintf(root, sizeof(root), "%s/", work);
    memset(root + len, 'r', 97 - (size_t)len);
    root[97] = '\0';
    setenv("CSIFS_SOCKET_ROOT", root, 1);
    struct hk h;
    cr_assert_eq(hook(&h, "prestart --type node --plugin lp --alloc a"), 2, "%s", h.err);
    char sock[300];
    snprintf(sock, sizeof(sock), "socket path %s/a/csi.sock is 108 bytes; a unix socket path may "
                                 "be at most 107 bytes", root);
    cr_assert(strstr(h.err, sock), "%s", h.err);
    cr_assert(!exists(root), "prestart made %s", root);
    cr_assert(!exists(tf_path(&t, "csi-node/lp")), "prestart registered");
    cr_assert_eq(hook(&h, "run --type node --plugin lp --alloc a -- true"), 2, "%s", h.err);
    cr_assert(strstr(h.err, "at most 107 bytes"), "%s", h.err);
    cr_assert(!exists(root));
    cr_assert(!exists(tf_path(&t, "csi-node/lp")));
    /* 107 bytes is fine */
    root[96] = '\0';
    setenv("CSIFS_SOCKET_ROOT", root, 1);
    cr_assert_eq(hook(&h, "prestart --type node --plugin lp --alloc b"), 0, "%s", h.err);
    cr_assert_eq(hook(&h, "poststop --type node --plugin lp --alloc b"), 0, "%s", h.err);
    setenv("CSIFS_SOCKET_ROOT", sockroot, 1);

    assert_fails(2, "--mount-point must be an absolute path, not 'rel/dir'",
                 "prestart --type node --plugin lp --alloc c --mount-point rel/dir");
    assert_fails(2, "--container-mount-point must be an absolute path, not 'csi'",
                 "prestart --type node --plugin lp --alloc c --mount-point /ok "
                 "--container-mount-point csi");
    assert_fails(2, "--task-socket-dir must be an absolute path",
                 "prestart --type node --plugin lp --alloc c --task-socket-dir csi");
    assert_fails(2, "COMMAND is required after --", "run --type node --plugin lp --alloc c");
    assert_fails(2, "command not found: /no/such/plugin",
                 "run --type node --plugin lp --alloc c -- /no/such/plugin");
    assert_fails(2, "unknown option --unmount", "prestart --type node --plugin lp --alloc c "
                                                "--unmount /x");
    cr_assert(!exists(tf_path(&t, "csi-node/lp/c")), "a refused call registered");
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/c", sockroot);
    cr_assert(!exists(dir), "a refused call made the socket dir");
}

/* Test 5, csifs's side (the registry's change): a relative mount_point is
 * EINVAL, nothing changed, nothing evented. */
Test(hook_run, csifs_refuses_a_relative_mount_point)
{
    start_fs("run-relative", FS_OPTS);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/rm/a1 && echo /abs/dir > csi-node/rm/a1/mount_point"),
                 0);
    cr_assert_eq(tf_sh(&t, "timeout 1 cat events > ../ev-before.txt; "
                           /* coreutils echo: dash's own says only "I/O error" */
                           "! env echo rel/dir 2>../err.txt > csi-node/rm/a1/mount_point && "
                           "grep -q 'Invalid argument' ../err.txt && "
                           "! env echo csi 2>../err.txt > csi-node/rm/a1/container_mount_point && "
                           "grep -q 'Invalid argument' ../err.txt && "
                           "timeout 1 cat events > ../ev-after.txt; "
                           "cmp -s ../ev-before.txt ../ev-after.txt"), 0,
                 "a relative mount point was accepted, or evented");
    cr_assert_str_eq(tf_cat(&t, "csi-node/rm/a1/mount_point"), "/abs/dir");
    cr_assert_str_eq(tf_cat(&t, "csi-node/rm/a1/container_mount_point"), "");
}
