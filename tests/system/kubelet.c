/* -o kubelet_dir= (DESIGN 14) against tests/tools/fake-kubelet, which does
 * what the kubelet's plugin watcher and CSI handler do. A system suite
 * (make test only): it starts a fake kubelet and plugins per test. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/holder.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

static struct tf t;
static char regdir[512];

/* The fake kubelet: its stdin, stdout and everything it printed. */
static struct {
    pid_t pid;
    int in, out;
    char log[1 << 16];
    size_t len;
} fk = { .pid = 0, .in = -1, .out = -1 };

static void fk_stop(void)
{
    if (fk.pid > 0) {
        kill(fk.pid, SIGKILL);
        waitpid(fk.pid, NULL, 0);
        fk.pid = 0;
    }
    if (fk.in >= 0)
        close(fk.in);
    if (fk.out >= 0)
        close(fk.out);
    fk.in = fk.out = -1;
}

static struct holder hd;             /* the fd store, for the takeover test */
static bool have_hd;

static void teardown(void)
{
    fk_stop();
    tp_kill_all();
    tf_stop(&t);
    if (have_hd)
        hd_stop(&hd);
    have_hd = false;
}

TestSuite(kubelet, .fini = teardown, .timeout = 240);

static void fk_start(const char *error)
{
    int in[2], out[2];
    cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    char bin[512];
    snprintf(bin, sizeof(bin), "%s/tools/fake-kubelet", tu_build_dir());
    fk.pid = fork();
    cr_assert_geq(fk.pid, 0);
    if (fk.pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        if (error)
            execl(bin, bin, regdir, "--error", error, (char *)NULL);
        else
            execl(bin, bin, regdir, (char *)NULL);
        _exit(127);
    }
    tu_note_pid(fk.pid);
    close(in[0]);
    close(out[1]);
    fk.in = in[1];
    fk.out = out[0];
    fk.len = 0;
    fk.log[0] = '\0';
}

/* Read what the fake kubelet printed until the log from byte from on holds
 * want, within tu_ms(ms). */
static bool fk_saw_from(size_t from, const char *want, int64_t ms)
{
    int64_t end = tu_now_ms() + tu_ms(ms);
    while (!strstr(fk.log + from, want)) {
        int64_t left = end - tu_now_ms();
        struct pollfd p = { .fd = fk.out, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return false;
        ssize_t n = read(fk.out, fk.log + fk.len, sizeof(fk.log) - 1 - fk.len);
        if (n <= 0)
            return false;
        fk.len += (size_t)n;
        fk.log[fk.len] = '\0';
    }
    return true;
}

static bool fk_saw(const char *want, int64_t ms)
{
    return fk_saw_from(0, want, ms);
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

#define OPTS "heartbeat=1s,probe_timeout=1s,kubelet_dir=%s"

static void spawn(void)
{
    struct tf_opts o = { .tag = "kubelet" };
    if (!t.dir) {
        t.dir = tu_tmpdir("kubelet");
        tu_note("dir", t.dir);
    }
    snprintf(regdir, sizeof(regdir), "%s/reg", t.dir);
    char opts[700];
    snprintf(opts, sizeof(opts), OPTS, regdir);
    o.extra_opts = opts;
    cr_assert_eq(tf_spawn(&t, &o), 0);
}

/* The dirs and the test fd store (tests/lib/holder.h), once. */
static void hd_setup(void)
{
    if (t.dir)
        return;
    t.dir = tu_tmpdir("kubelet");
    cr_assert(asprintf(&t.mnt, "%s/mnt", t.dir) > 0 && asprintf(&t.state, "%s/state",
                                                                  t.dir) > 0);
    cr_assert_eq(mkdir(t.mnt, 0755), 0);
    tu_note("mnt", t.mnt);
    cr_assert_eq(hd_start(&hd), 0);
    have_hd = true;
    snprintf(regdir, sizeof(regdir), "%s/reg", t.dir);
}

/* csifs under the test fd store, its log in <dir>/csifs.log; until its
 * READY=1, the nth. */
static void hd_spawn_ready(unsigned nth)
{
    static char log[600];
    hd_setup();
    snprintf(log, sizeof(log), "%s/csifs.log", t.dir);
    char opts[1400], bin[512];
    snprintf(opts, sizeof(opts), "state=%s," OPTS, t.state, regdir);
    snprintf(bin, sizeof(bin), "%s/csifs", tu_build_dir());
    char *argv[] = { bin, "-f", "-o", opts, t.mnt, NULL };
    hd.log = log;
    t.pid = hd_spawn(&hd, argv);
    cr_assert_gt(t.pid, 0);
    cr_assert(hd_wait_ready(&hd, nth, 10000), "no READY=1 (%u)", nth);
}

static void plugin_start(struct tp_proc *p, const char *sock, const char *name, const char *node)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", t.dir, sock);
    cr_assert_eq(tp_start(p, "--socket", path, "--type", "node", "--name", name, "--node-id",
                          node, (const char *)NULL), 0);
}

/* mkdir and socket link, as csi-plugin-hook register does. */
static void reg(const char *plugin_alloc, const char *sock)
{
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/%s && ln -s %s/%s csi-node/%s/socket",
                       plugin_alloc, t.dir, sock, plugin_alloc), 0);
}

/* csi-plugin-hook prestart of csi-node/<plugin>/<alloc>: its socket is
 * <dir>/sk/<alloc>/csi.sock; then the plugin on it. */
static void hook_plugin(struct tp_proc *p, const char *plugin, const char *alloc,
                        const char *name, const char *node)
{
    char cwd[512];                   /* tests run from the source tree */
    cr_assert(getcwd(cwd, sizeof(cwd)));
    cr_assert_eq(tf_sh(&t, "CSIFS_MOUNT=$MNT CSIFS_SOCKET_ROOT=%s/sk sh %s/scripts/csi-plugin-hook "
                       "prestart --type node --plugin %s --alloc %s >/dev/null", t.dir, cwd,
                       plugin, alloc), 0);
    char sock[64];
    snprintf(sock, sizeof(sock), "sk/%s/csi.sock", alloc);
    plugin_start(p, sock, name, node);
}

struct want {
    const char *rel, *val;
};
static bool reads(void *arg)
{
    const struct want *w = arg;
    const char *v = tf_cat(&t, w->rel);
    return v && !strcmp(v, w->val);
}
#define WAIT_FILE(rel_, val_, ms) do { \
        struct want w_ = { rel_, val_ }; \
        cr_assert(tu_wait_for(reads, &w_, ms), "%s: %s, not %s", rel_, tf_cat(&t, rel_), val_); \
    } while (0)

/* The events file's lines so far. */
static char *events(void)
{
    static char b[1 << 16];
    int fd = open(tf_path(&t, "events"), O_RDONLY | O_NONBLOCK);
    cr_assert_geq(fd, 0);
    size_t len = 0;
    ssize_t n;
    while ((n = read(fd, b + len, sizeof(b) - 1 - len)) > 0)
        len += (size_t)n;
    close(fd);
    b[len] = '\0';
    return b;
}

static int dir_entries(void)
{
    DIR *d = opendir(regdir);
    cr_assert(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
    closedir(d);
    return n;
}

/* Registered under the provider with the endpoint; a rolling update leaves
 * the socket alone and NodeGetInfo reaches the new instance; rmdir of the
 * last instance deregisters. */
Test(kubelet, register_roll_deregister)
{
    spawn();
    fk_start(NULL);
    cr_assert(fk_saw("WATCHING", 5000));
    struct tp_proc p1, p2;
    hook_plugin(&p1, "p", "a1", "drv.test", "node-1");
    cr_assert(fk_saw("REGISTERED drv.test\n", 10000), "%s", fk.log);
    char line[1024];
    snprintf(line, sizeof(line), "GETINFO drv.test-reg.sock type=CSIPlugin name=drv.test "
             "endpoint=%s/csi-node/p/current/socket versions=1.0.0\n", t.mnt);
    cr_assert(strstr(fk.log, line), "%s", fk.log);
    cr_assert(strstr(fk.log, "NODEGETINFO drv.test node_id=node-1\n"), "%s", fk.log);
    WAIT_FILE("csi-node/p/kubelet", "registered", 5000);
    cr_assert_eq(tf_sh(&t, "grep -qx 'csifs_kubelet_registered{type=\"csi-node\",plugin=\"p\","
                           "provider=\"drv.test\"} 1' metrics"), 0);
    cr_assert(strstr(events(), " kubelet csi-node/p state=waiting"), "%s", events());
    cr_assert(strstr(events(), " kubelet csi-node/p state=registered"), "%s", events());
    char sock[700];
    snprintf(sock, sizeof(sock), "%s/drv.test-reg.sock", regdir);
    struct stat st1, st2;
    cr_assert_eq(stat(sock, &st1), 0);
    cr_assert(S_ISSOCK(st1.st_mode));
    /* rolling update: a2 becomes current */
    hook_plugin(&p2, "p", "a2", "drv.test", "node-2");
    cr_assert(tu_wait_for(reads, &(struct want){ "csi-node/p/current/nodeid", "node-2" }, 10000));
    cr_assert(dprintf(fk.in, "nodeinfo drv.test\n") > 0);
    cr_assert(fk_saw("NODEGETINFO drv.test node_id=node-2\n", 10000), "%s", fk.log);
    cr_assert_eq(stat(sock, &st2), 0);
    cr_assert_eq(st1.st_ino, st2.st_ino, "the registration socket was made again");
    cr_assert_eq(count(fk.log, "GETINFO drv.test-reg.sock"), 1, "%s", fk.log);
    cr_assert_eq(count(fk.log, "DEREGISTERED"), 0, "%s", fk.log);
    cr_assert_null(strstr(fk.log, " ."), "a dot-name reached the kubelet: %s", fk.log);
    /* the last instance goes: deregistered */
    cr_assert_eq(tf_sh(&t, "rmdir csi-node/p/a1 csi-node/p/a2"), 0);
    cr_assert(fk_saw("DEREGISTERED drv.test\n", 10000), "%s", fk.log);
    cr_assert_eq(dir_entries(), 0);
    WAIT_FILE("csi-node/p/kubelet", "unregistered", 5000);
}

/* Two plugin dirs with one provider: the first keeps it. */
Test(kubelet, provider_conflict)
{
    spawn();
    struct tp_proc p1, p2;
    plugin_start(&p1, "a.sock", "drv.test", "n");
    reg("p/a", "a.sock");
    WAIT_FILE("csi-node/p/kubelet", "waiting", 10000);
    plugin_start(&p2, "b.sock", "drv.test", "n");
    reg("q/b", "b.sock");
    WAIT_FILE("csi-node/q/kubelet", "conflict: drv.test is registered by csi-node/p", 10000);
    cr_assert(strstr(events(), " kubelet csi-node/q state=conflict reason=drv.test is "
                               "registered by csi-node/p"), "%s", events());
    cr_assert_eq(dir_entries(), 1);
    /* p goes: q takes the provider */
    cr_assert_eq(tf_sh(&t, "rmdir csi-node/p/a"), 0);
    WAIT_FILE("csi-node/q/kubelet", "waiting", 10000);
    cr_assert_eq(dir_entries(), 1);
}

/* The kubelet's refusal shows in `kubelet` and `events`. */
Test(kubelet, the_kubelets_error)
{
    spawn();
    fk_start("driver name drv.test already registered at version 1.0.0");
    struct tp_proc p1;
    plugin_start(&p1, "a.sock", "drv.test", "n");
    reg("p/a", "a.sock");
    cr_assert(fk_saw("NOTIFY drv.test registered=0\n", 10000), "%s", fk.log);
    WAIT_FILE("csi-node/p/kubelet",
              "error: driver name drv.test already registered at version 1.0.0", 5000);
    cr_assert(strstr(events(), " kubelet csi-node/p state=error reason=driver name drv.test "
                               "already registered at version 1.0.0"), "%s", events());
}

/* A restart without takeover: the socket goes (deregistered) and comes back
 * (registered again). */
Test(kubelet, restart_registers_again)
{
    spawn();
    fk_start(NULL);
    struct tp_proc p1;
    plugin_start(&p1, "a.sock", "drv.test", "n");
    reg("p/a", "a.sock");
    cr_assert(fk_saw("REGISTERED drv.test\n", 10000), "%s", fk.log);
    cr_assert_eq(kill(t.pid, SIGTERM), 0);   /* a clean stop, exit 0 */
    int st = 0;
    cr_assert_eq(waitpid(t.pid, &st, 0), t.pid);
    t.pid = 0;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "csifs ended with status %#x", st);
    cr_assert(fk_saw("DEREGISTERED drv.test\n", 10000), "%s", fk.log);
    spawn();
    cr_assert(tu_wait_for(reads, &(struct want){ "csi-node/p/kubelet", "registered" }, 15000),
              "%s", fk.log);
    cr_assert_eq(count(fk.log, "REGISTERED drv.test\n"), 2, "%s", fk.log);
}

/* Provider names that are no file name, or too long a path: refused, said
 * why, and nothing leaves (or enters) DIR. */
Test(kubelet, unusable_provider_names)
{
    spawn();
    static const struct { const char *name, *says; } rows[] = {
        { "a/b", "error: provider name not usable as a file name" },
        { "../../etc/x", "error: provider name not usable as a file name" },
        { ".hidden", "error: provider name not usable as a file name" },
        { "a-very-long-driver-name.example.com.with.many.labels.to.pass.the.limit."
          "of.a.unix.socket.path.x", "error: socket path over 107 bytes" },
    };
    struct tp_proc p[4];
    for (int k = 0; k < 4; k++) {
        char sock[32], pa[32], plug[16];
        snprintf(sock, sizeof(sock), "s%d.sock", k);
        snprintf(plug, sizeof(plug), "p%d", k);
        snprintf(pa, sizeof(pa), "%s/a", plug);
        plugin_start(&p[k], sock, rows[k].name, "n");
        reg(pa, sock);
        char rel[64];
        snprintf(rel, sizeof(rel), "csi-node/%s/kubelet", plug);
        WAIT_FILE(rel, rows[k].says, 10000);
    }
    cr_assert_eq(dir_entries(), 0);
    /* no instance may hide behind the file */
    cr_assert_neq(tf_sh(&t, "mkdir csi-node/p0/kubelet 2>/dev/null"), 0);
    cr_assert_eq(tf_sh(&t, "test -f csi-node/p0/kubelet"), 0);
    cr_assert_eq(tf_sh(&t, "test ! -e %s/../etc && test ! -e %s/.hidden-reg.sock", regdir,
                       regdir), 0);
}

/* A socket another process serves (a node-driver-registrar left in the
 * pod) is never taken over: refused, said why, the other's socket intact. */
Test(kubelet, a_live_socket_is_not_taken_over)
{
    spawn();
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    cr_assert_lt(strlen(regdir), sizeof(a.sun_path) - 20);
    memcpy(a.sun_path, regdir, strlen(regdir));
    strcat(a.sun_path, "/drv.test-reg.sock");
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s", strerror(errno));
    cr_assert_eq(listen(fd, 8), 0);
    struct stat st1, st2;
    cr_assert_eq(stat(a.sun_path, &st1), 0);
    struct tp_proc p1;
    plugin_start(&p1, "a.sock", "drv.test", "n");
    reg("p/a", "a.sock");
    char says[700];
    snprintf(says, sizeof(says), "error: %s is served by another process (a "
             "node-driver-registrar?)", a.sun_path);
    WAIT_FILE("csi-node/p/kubelet", says, 10000);
    cr_assert_eq(stat(a.sun_path, &st2), 0);
    cr_assert_eq(st1.st_ino, st2.st_ino);
    cr_assert_eq(dir_entries(), 1);
    close(fd);
}

struct logwant {
    const char *line;
    int n;
};
/* csifs.log holds line n times */
static bool log_has(void *arg)
{
    const struct logwant *w = arg;
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "test \"$(grep -cF -- '%s' %s/csifs.log)\" -ge %d", w->line,
             t.dir, w->n);
    return system(cmd) == 0;
}

/* The holder has read the fd store messages sent so far: it holds n fds
 * (the holder's thread reads them while we run). */
static bool hd_holds(void *arg)
{
    return hd_nfds(&hd) == *(int *)arg;
}

static bool hd_has_socket(void *arg)
{
    (void)arg;
    return hd_fd(&hd, "kubelet/drv.test") >= 0;
}

/* A fake kubelet, and drv.test on p/a registered with it, its socket in
 * the fd store. */
static void fd_store_registered(struct tp_proc *p)
{
    fk_start(NULL);
    plugin_start(p, "a.sock", "drv.test", "n");
    reg("p/a", "a.sock");
    cr_assert(fk_saw("REGISTERED drv.test\n", 10000), "%s", fk.log);
    cr_assert(tu_wait_for(hd_has_socket, NULL, 5000), "the socket is not in the fd store");
}

/* The registration socket, its inode, what GetInfo says on it now; the
 * kubelet's verdict kept (file, metric) with no event. */
static void same_socket(const char *sock, ino_t ino, const char *when)
{
    WAIT_FILE("csi-node/p/kubelet", "registered", 5000);
    cr_assert_eq(tf_sh(&t, "grep -qx 'csifs_kubelet_registered{type=\"csi-node\",plugin=\"p\","
                           "provider=\"drv.test\"} 1' metrics"), 0, "%s", when);
    cr_assert_eq(count(events(), " kubelet csi-node/p state="), 0, "%s: %s", when, events());
    struct stat st;
    cr_assert_eq(stat(sock, &st), 0, "%s: %s", when, strerror(errno));
    cr_assert_eq(st.st_ino, ino, "%s: the registration socket was made again", when);
    size_t before = fk.len - 1;     /* its last newline on */
    cr_assert(dprintf(fk.in, "getinfo drv.test-reg.sock\n") > 0);
    cr_assert(fk_saw_from(before, "\nINFO drv.test-reg.sock ", 10000), "%s: %s", when, fk.log);
    cr_assert(strstr(fk.log + before, "\nINFO drv.test-reg.sock name=drv.test\n"), "%s: %s",
              when, fk.log + before);
}

/* A SIGKILLed csifs's successor, and a SIGUSR2 upgrade, take the
 * registration socket over from the fd store: the same inode, GetInfo
 * answers on it, and the kubelet sees nothing (no deregistration, no
 * second GetInfo); its verdict is kept (`kubelet`, the metric), with no
 * `kubelet` event. A SIGTERM then removes it, from the store too. */
Test(kubelet, takeover_and_upgrade_keep_the_socket)
{
    hd_spawn_ready(1);
    struct tp_proc p1;
    fd_store_registered(&p1);
    char sock[700];
    snprintf(sock, sizeof(sock), "%s/drv.test-reg.sock", regdir);
    struct stat st;
    cr_assert_eq(stat(sock, &st), 0);
    char adopted[800];
    snprintf(adopted, sizeof(adopted), "kubelet: %s: taken over from the fd store", sock);

    cr_assert_eq(kill(t.pid, SIGKILL), 0);
    cr_assert(hd_reap(t.pid, 10000));
    hd_spawn_ready(2);
    cr_assert(tu_wait_for(log_has, &(struct logwant){ adopted, 1 }, 10000),
              "the successor did not adopt it");
    same_socket(sock, st.st_ino, "after a takeover");

    cr_assert_eq(kill(t.pid, SIGUSR2), 0);
    cr_assert(hd_wait_ready(&hd, 3, 10000), "no READY=1 after SIGUSR2");
    cr_assert(tu_wait_for(log_has, &(struct logwant){ adopted, 2 }, 10000),
              "the new image did not adopt it");
    same_socket(sock, st.st_ino, "after an upgrade");
    cr_assert_eq(tf_sh(&t, "test -d csi-node/p/a"), 0);
    cr_assert_eq(count(fk.log, "GETINFO drv.test-reg.sock"), 1, "%s", fk.log);
    cr_assert_eq(count(fk.log, "DEREGISTERED"), 0, "%s", fk.log);
    cr_assert(tu_wait_for(hd_holds, &(int){ 4 }, 5000), "%d fds stored, not fuse, state, "
              "the socket and the verdicts", hd_nfds(&hd));

    tf_kill(&t, false);              /* a real stop: the kubelet deregisters */
    cr_assert(fk_saw("DEREGISTERED drv.test\n", 10000), "%s", fk.log);
    cr_assert_eq(dir_entries(), 0);
    cr_assert(tu_wait_for(hd_holds, &(int){ 0 }, 5000), "SIGTERM leaves %d fds in the store",
              hd_nfds(&hd));
}

/* A unix socket listening, bound at path, then renamed to to (not NULL). */
static int listener(const char *path, const char *to)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    cr_assert_lt(strlen(path), sizeof(a.sun_path));
    memcpy(a.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0, "%s: %s", path, strerror(errno));
    cr_assert_eq(listen(fd, 8), 0);
    if (to)
        cr_assert_eq(rename(path, to), 0);
    return fd;
}

static bool gone_everywhere(void *arg)
{
    return access(arg, F_OK) < 0 && hd_fd(&hd, "kubelet/gone.test") < 0;
}

/* What the fd store hands back and no plugin wants is removed, from its
 * dir and from the store; a stored fd that is not the socket at its path
 * is dropped and the socket made again (a new inode: the kubelet registers
 * it again). */
Test(kubelet, stored_sockets_unwanted_or_not_there_are_removed_or_made_again)
{
    hd_setup();
    char sock[700], other[700], dot[700], gone[700], line[800];
    snprintf(sock, sizeof(sock), "%s/drv.test-reg.sock", regdir);
    snprintf(other, sizeof(other), "%s/elsewhere.sock", t.dir);
    snprintf(dot, sizeof(dot), "%s/.gone.test-reg.sock", regdir);
    snprintf(gone, sizeof(gone), "%s/gone.test-reg.sock", regdir);
    cr_assert_eq(mkdir(regdir, 0750), 0);
    int fd = listener(dot, gone);    /* as a predecessor left it */
    hd_put(&hd, "kubelet/gone.test", fd);
    close(fd);
    hd_spawn_ready(1);
    cr_assert(tu_wait_for(gone_everywhere, gone, 5000), "the unwanted socket stays");
    snprintf(line, sizeof(line), "kubelet: %s: no plugin has that provider now: removed", gone);
    cr_assert(tu_wait_for(log_has, &(struct logwant){ line, 1 }, 5000));

    struct tp_proc p1;
    fd_store_registered(&p1);
    struct stat st1, st2;
    cr_assert_eq(stat(sock, &st1), 0);
    cr_assert_eq(kill(t.pid, SIGKILL), 0);
    cr_assert(hd_reap(t.pid, 10000));
    fd = listener(other, NULL);      /* stored in the place of the real one */
    hd_put(&hd, "kubelet/drv.test", fd);
    close(fd);
    size_t before = fk.len;
    hd_spawn_ready(2);
    snprintf(line, sizeof(line), "kubelet: %s: the stored socket is not the one there", sock);
    cr_assert(tu_wait_for(log_has, &(struct logwant){ line, 1 }, 5000));
    cr_assert(fk_saw_from(before, "REGISTERED drv.test\n", 10000), "%s", fk.log);
    cr_assert_eq(stat(sock, &st2), 0);
    cr_assert_neq(st1.st_ino, st2.st_ino, "made again");
    WAIT_FILE("csi-node/p/kubelet", "registered", 5000);
    struct sockaddr_un a;
    socklen_t al = sizeof(a);
    memset(&a, 0, sizeof(a));
    cr_assert(tu_wait_for(hd_has_socket, NULL, 5000));
    cr_assert_eq(getsockname(hd_fd(&hd, "kubelet/drv.test"), (struct sockaddr *)&a, &al), 0);
    cr_assert(strstr(a.sun_path, "/.drv.test-reg.sock"), "the store holds %s", a.sun_path);
}
