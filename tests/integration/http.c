/* -o http= (DESIGN 14) on a real csifs process, with curl and promtool. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/httpget.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

static struct tf t;
static int port;
static char body[1 << 16];

static void teardown(void)
{
    tp_kill_all();
    tf_stop(&t);
}

TestSuite(http, .fini = teardown, .timeout = 240);

static void spawn(const char *more)
{
    char opts[1024];
    port = th_free_port();
    cr_assert_gt(port, 0);
    snprintf(opts, sizeof(opts), "http=%d%s", port, more);
    struct tf_opts o = { .tag = "http", .extra_opts = opts };
    cr_assert_eq(tf_spawn(&t, &o), 0, "tf_spawn");
}

static int get(const char *path)
{
    return th_get(port, path, body, sizeof(body));
}

static bool healthy(void *arg)
{
    const char *h = tf_cat(&t, arg);
    return h && !strcmp(h, "healthy");
}

static bool unhealthy(void *arg)
{
    const char *h = tf_cat(&t, arg);
    return h && !strcmp(h, "unhealthy");
}

static bool waiting(void *arg)
{
    (void)arg;
    const char *v = tf_cat(&t, "csi-node/p/kubelet");
    return v && !strcmp(v, "waiting");
}

/* /metrics: promtool accepts it, and it holds the metrics file's families
 * (with kubelet_dir=, csifs_kubelet_registered of a plugin the kubelet has
 * not registered yet). */
Test(http, metrics_is_the_metrics_file)
{
    char more[700], sock[600];
    t.dir = tu_tmpdir("http");
    snprintf(more, sizeof(more), ",kubelet_dir=%s/reg", t.dir);
    snprintf(sock, sizeof(sock), "%s/a.sock", t.dir);
    spawn(more);
    struct tp_proc p1;
    cr_assert_eq(tp_start(&p1, "--socket", sock, "--type", "node", "--name", "drv.test",
                          (const char *)NULL), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a csi-controller/c/y && "
                           "ln -s %s csi-node/p/a/socket", sock), 0);
    cr_assert(tu_wait_for(waiting, NULL, 10000), "%s", tf_cat(&t, "csi-node/p/kubelet"));
    cr_assert_eq(get("/metrics"), 200, "%s", body);
    cr_assert(strstr(body, "csifs_build_info{version="), "%s", body);
    char args[256];
    snprintf(args, sizeof(args), "http://127.0.0.1:%d/metrics -o /dev/stdout", port);
    cr_assert_eq(tf_sh(&t, "curl -s http://127.0.0.1:%d/metrics > ../h.prom && "
                           "promtool check metrics < ../h.prom", port), 0,
                 "promtool check metrics refused /metrics");
    /* the same families, in the same order, as the file */
    cr_assert_eq(tf_sh(&t, "grep '^# TYPE' ../h.prom > ../h.types && "
                           "grep '^# TYPE' metrics > ../f.types && cmp ../h.types ../f.types"), 0);
    cr_assert_eq(tf_sh(&t, "grep -q 'csifs_instances{type=\"csi-node\",plugin=\"p\"' ../h.prom"),
                 0);
    cr_assert_eq(tf_sh(&t, "grep -qx 'csifs_kubelet_registered{type=\"csi-node\",plugin=\"p\","
                           "provider=\"drv.test\"} 0' ../h.prom"), 0);
    (void)args;
}

/* /healthz/<type>/<plugin>: 200 healthy, 503 with the reason, 404 unknown. */
Test(http, plugin_health_200_503_404)
{
    spawn(",heartbeat=1s,probe_timeout=1s,health_timeout=2s");
    struct tp_proc pa;
    char sa[256];
    snprintf(sa, sizeof(sa), "%s/a.sock", t.dir);
    cr_assert_eq(tp_start(&pa, "--socket", sa, "--type", "node", (const char *)NULL), 0);
    cr_assert_eq(tf_sh(&t, "mkdir -p csi-node/p/a csi-node/none/z && "
                           "ln -s %s csi-node/p/a/socket", sa), 0);
    cr_assert(tu_wait_for(healthy, "csi-node/p/a/health", 5000), "a healthy");
    cr_assert_eq(get("/healthz/csi-node/p"), 200, "%s", body);
    cr_assert(strstr(body, "healthy"), "%s", body);
    cr_assert_eq(get("/healthz/csi-node/none"), 503, "%s", body);
    cr_assert(strstr(body, "no current"), "%s", body);
    cr_assert_eq(get("/healthz/csi-node/nosuch"), 404, "%s", body);
    cr_assert_eq(get("/healthz/csi-controller/p"), 404, "%s", body);
    cr_assert_eq(get("/healthz/nosuchtype/p"), 404, "%s", body);
    /* the plugin stops: current stays, unhealthy: 503 with the reason */
    tp_kill(&pa);
    cr_assert(tu_wait_for(unhealthy, "csi-node/p/a/health", 10000), "a unhealthy");
    cr_assert_str_eq(tf_readlink(&t, "csi-node/p/current"), "a");
    char reason[512];
    snprintf(reason, sizeof(reason), "%s", tf_cat(&t, "csi-node/p/a/reason"));
    cr_assert(*reason);
    cr_assert_eq(get("/healthz/csi-node/p"), 503, "%s", body);
    cr_assert(strstr(body, reason), "503 without the reason %s: %s", reason, body);
}

/* Other paths 404, other methods 405, HEAD as GET without a body, a long
 * URL 414, ".." 400; /healthz 200 on an idle mount. */
Test(http, refusals)
{
    spawn("");
    cr_assert_eq(get("/healthz"), 200, "%s", body);
    cr_assert_str_eq(body, "ok\n");
    static const char *const paths[] = { "/", "/metricsx", "/healthzx", "/csi-node",
                                         "/metrics/", "/healthz/csi-node" };
    for (size_t k = 0; k < sizeof(paths) / sizeof(paths[0]); k++)
        cr_assert_eq(get(paths[k]), 404, "%s: %s", paths[k], body);
    static const char *const methods[] = { "POST", "PUT", "DELETE", "PATCH", "OPTIONS" };
    char args[16384];
    for (size_t k = 0; k < sizeof(methods) / sizeof(methods[0]); k++) {
        snprintf(args, sizeof(args), "-X %s http://127.0.0.1:%d/metrics", methods[k], port);
        cr_assert_eq(th_curl(args, body, sizeof(body)), 405, "%s: %s", methods[k], body);
    }
    snprintf(args, sizeof(args), "-I http://127.0.0.1:%d/metrics", port);
    cr_assert_eq(th_curl(args, body, sizeof(body)), 200);
    cr_assert(strstr(body, "Content-Length:") && !strstr(body, "csifs_build_info"), "%s", body);
    static const char *const dots[] = { "/healthz/..", "/healthz/../metrics",
                                        "/healthz/csi-node/../../metrics", "/%2e%2e/metrics" };
    for (size_t k = 0; k < sizeof(dots) / sizeof(dots[0]); k++) {
        snprintf(args, sizeof(args), "--path-as-is 'http://127.0.0.1:%d%s'", port, dots[k]);
        cr_assert_eq(th_curl(args, body, sizeof(body)), 400, "%s: %s", dots[k], body);
    }
    char url[10001];
    memset(url, 'a', sizeof(url) - 1);
    url[0] = '/';
    url[sizeof(url) - 1] = '\0';
    int code = get(url);
    cr_assert(code == 414 || code == 431, "a 10,000-byte URL: %d", code);
    cr_assert_eq(get("/healthz"), 200, "still serving");
}

/* Loopback unless an address is given: the listening socket is 127.0.0.1. */
Test(http, loopback_by_default)
{
    spawn("");
    cr_assert_eq(tf_sh(&t, "grep -qi ' 0100007F:%04X 00000000:0000 0A ' /proc/net/tcp", port), 0,
                 "no listener on 127.0.0.1:%d", port);
    cr_assert_neq(tf_sh(&t, "grep -qi ' 00000000:%04X 00000000:0000 0A ' /proc/net/tcp", port), 0,
                  "listening on every address");
    tf_stop(&t);
    spawn("");
    tf_stop(&t);
    port = th_free_port();
    char opts[64];
    snprintf(opts, sizeof(opts), "http=0.0.0.0:%d", port);
    struct tf_opts o = { .tag = "http", .extra_opts = opts };
    cr_assert_eq(tf_spawn(&t, &o), 0);
    cr_assert_eq(tf_sh(&t, "grep -qi ' 00000000:%04X 00000000:0000 0A ' /proc/net/tcp", port), 0,
                 "0.0.0.0 given: not on every address");
}

/* A bad http= exits 2, a port in use 1, both before anything is mounted. */
Test(http, bad_address_and_port_in_use)
{
    char *dir = tu_tmpdir("http-bad");
    tu_note("dir", dir);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t l = sizeof(a);
    cr_assert(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(s, 1) == 0);
    cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &l), 0);
    struct { const char *val; int rc; const char *says; } rows[] = {
        { "nope", 2, "bad http=nope" },
        { "127.0.0.1:99999", 2, "bad http=" },
        { "", 2, "bad http=" },
        { NULL, 1, "cannot listen: Address already in use" },
    };
    for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
        char val[64], cmd[1024];
        if (rows[k].val)
            snprintf(val, sizeof(val), "%s", rows[k].val);
        else
            snprintf(val, sizeof(val), "%d", ntohs(a.sin_port));
        snprintf(cmd, sizeof(cmd), "%s/csifs -f -o state=%s/s,http=%s %s/m 2>%s/err; "
                 "echo $? > %s/rc", tu_build_dir(), dir, val, dir, dir, dir);
        cr_assert_eq(system(cmd), 0);
        char p[512], got[1024] = "";
        snprintf(p, sizeof(p), "%s/rc", dir);
        FILE *f = fopen(p, "r");
        int rc = -1;
        cr_assert(f && fscanf(f, "%d", &rc) == 1);
        fclose(f);
        snprintf(p, sizeof(p), "%s/err", dir);
        f = fopen(p, "r");
        cr_assert(f);
        size_t n = fread(got, 1, sizeof(got) - 1, f);
        got[n] = '\0';
        fclose(f);
        cr_assert_eq(rc, rows[k].rc, "http=%s: exit %d: %s", val, rc, got);
        cr_assert(strstr(got, rows[k].says), "http=%s: %s", val, got);
        snprintf(cmd, sizeof(cmd), "grep -q ' %s/m ' /proc/self/mountinfo", dir);
        cr_assert_neq(system(cmd), 0, "mounted after a refusal");
    }
    close(s);
    tu_rmrf(dir);
    free(dir);
}

static bool healthz_is(void *arg)
{
    return th_get(port, "/healthz", body, sizeof(body)) == *(int *)arg;
}

/* A held FUSE handler (debug_hold=mkdir): /metrics still answers, /healthz
 * turns 503 after 2 s without a finished request, and 200 once the FUSE
 * thread finishes one again. */
Test(http, healthz_503_while_a_handler_is_held)
{
    spawn(",debug_hold=mkdir");
    cr_assert_eq(get("/healthz"), 200, "%s", body);
    cr_assert_eq(tf_sh(&t, "mkdir csi-node/held & echo $! > ../held.pid"), 0);
    const char *pid = tf_cat(&t, "../held.pid");
    cr_assert(pid);
    tu_note_pid((pid_t)atoi(pid));
    int want = 503;
    cr_assert(tu_wait_for(healthz_is, &want, 10000), "/healthz never 503: %s", body);
    cr_assert(strstr(body, "none finished"), "%s", body);
    cr_assert_eq(get("/metrics"), 200, "/metrics while the mkdir is held");
    /* the FUSE thread serves another request (the mkdir stays held) */
    want = 200;
    bool back = false;
    for (int64_t end = tu_now_ms() + tu_ms(10000); !back && tu_now_ms() < end;) {
        cr_assert_eq(tf_sh(&t, "cat metrics > /dev/null"), 0);
        back = healthz_is(&want);
    }
    cr_assert(back, "/healthz stays %s", body);
    cr_assert_eq(tf_sh(&t, "kill -0 %s", pid), 0, "the mkdir is still held");
    tf_kill(&t, true);               /* the held request is never freed (testopt.h) */
}
