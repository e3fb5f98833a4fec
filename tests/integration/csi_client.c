/* The csi client against real csi-test-plugin processes on unix sockets. */
#include "csi/client.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <grpc/status.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char *dir;
static struct csi_client *cli;

static void setup(void)
{
    dir = tu_tmpdir("csi");
    cr_assert(dir, "tu_tmpdir");
    cr_assert_eq(csi_client_new(&cli), 0);
}

static void teardown(void)
{
    tp_kill_all();
    csi_client_free(cli);
    tu_rmrf(dir);
    free(dir);
}

TestSuite(csi_client, .init = setup, .fini = teardown, .timeout = 120);

/* dir/name into buf (sizeof a sun_path). */
static const char *sock(char *buf, const char *name)
{
    int n = snprintf(buf, 108, "%s/%s", dir, name);
    cr_assert(n > 0 && n < 108, "socket path too long");
    return buf;
}

static struct csi_chan *chan(const char *path)
{
    struct csi_chan *ch = NULL;
    cr_assert_eq(csi_chan_open(cli, path, &ch), 0, "csi_chan_open %s", path);
    return ch;
}

/* One synchronous call; the caller clears res. */
static void call(struct csi_chan *ch, enum csi_method m, int timeout_ms, struct csi_result *res)
{
    cr_assert_eq(csi_call_sync(ch, m, timeout_ms, res), 0);
    cr_assert_eq(res->method, m);
}

/* A call expected to fail with exactly this reason. */
static void call_fails(struct csi_chan *ch, enum csi_method m, int timeout_ms, int status,
                       const char *reason)
{
    struct csi_result r;
    call(ch, m, timeout_ms, &r);
    cr_assert(!r.ok, "%s succeeded", csi_method_path(m));
    cr_assert_eq(r.status, status, "status %d, reason %s", r.status, r.reason);
    cr_assert_str_eq(r.reason, reason);
    csi_result_clear(&r);
}

/* A call expected to succeed (default deadline 5 s). */
static void call_ok(struct csi_chan *ch, enum csi_method m, struct csi_result *res)
{
    call(ch, m, 5000, res);
    cr_assert(res->ok, "%s: %s", csi_method_path(m), res->reason);
    cr_assert(res->status == GRPC_STATUS_OK && !res->reason);
}

static void caps_are(struct csi_chan *ch, enum csi_method m, const char *want)
{
    struct csi_result r;
    call_ok(ch, m, &r);
    cr_assert_str_eq(r.capabilities, want, "%s", csi_method_path(m));
    csi_result_clear(&r);
}

static void info_is(struct csi_chan *ch, const char *name, const char *version)
{
    struct csi_result r;
    call_ok(ch, CSI_GET_PLUGIN_INFO, &r);
    cr_assert_str_eq(r.name, name);
    cr_assert_str_eq(r.vendor_version, version);
    csi_result_clear(&r);
}

static void node_is(struct csi_chan *ch, const char *id, int64_t max, const char *topology)
{
    struct csi_result r;
    call_ok(ch, CSI_NODE_GET_INFO, &r);
    cr_assert_str_eq(r.node_id, id);
    cr_assert_eq(r.max_volumes, max);
    cr_assert_str_eq(r.topology, topology);
    csi_result_clear(&r);
}

static bool probe_ready(struct csi_chan *ch)
{
    struct csi_result r;
    call_ok(ch, CSI_PROBE, &r);
    bool ready = r.ready;
    csi_result_clear(&r);
    return ready;
}

static bool is_socket(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

#define START(p, ...) cr_assert_eq(tp_start(p, __VA_ARGS__, NULL), 0, "csi-test-plugin did not start")

/* Start a plugin on the socket dir/args[0] (into s) with the flags args[1..];
 * a channel to it. */
static struct csi_chan *start_chan(struct tp_proc *p, char *s, const char *const *args)
{
    const char *argv[64] = { "--socket", sock(s, args[0]) };
    int n = 2;
    for (; args[n - 1] && n < 63; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    cr_assert_eq(tp_startv(p, argv), 0, "csi-test-plugin did not start");
    return chan(s);
}
#define PLUGIN(p, s, ...) start_chan(p, s, (const char *[]){ __VA_ARGS__, NULL })

Test(csi_client, monolith_fingerprint_exact)
{
    char s[108];
    struct tp_proc p;
    struct csi_chan *ch = PLUGIN(&p, s, "m.sock", "--name", "io.example.csi", "--vendor-version",
          "2.3.4", "--node-id", "n7", "--max-volumes", "12", "--topology", "zone=b", "--topology",
          "rack=r1", "--topology", "zone=a", "--plugin-cap",
          "CONTROLLER_SERVICE,VOLUME_ACCESSIBILITY_CONSTRAINTS", "--expansion-cap", "ONLINE",
          "--plugin-cap", "CONTROLLER_SERVICE,99", "--node-cap",
          "STAGE_UNSTAGE_VOLUME,GET_VOLUME_STATS,STAGE_UNSTAGE_VOLUME,42", "--controller-cap",
          "CREATE_DELETE_VOLUME,17,CREATE_DELETE_VOLUME");
    info_is(ch, "io.example.csi", "2.3.4");
    caps_are(ch, CSI_GET_PLUGIN_CAPABILITIES,
             "plugin:CONTROLLER_SERVICE\nplugin:VOLUME_ACCESSIBILITY_CONSTRAINTS\n"
             "expansion:ONLINE\nplugin:99\n");
    node_is(ch, "n7", 12, "rack=r1\nzone=a\n");
    caps_are(ch, CSI_NODE_GET_CAPABILITIES, "node:STAGE_UNSTAGE_VOLUME\nnode:GET_VOLUME_STATS\nnode:42\n");
    caps_are(ch, CSI_CONTROLLER_GET_CAPABILITIES, "controller:CREATE_DELETE_VOLUME\ncontroller:17\n");
    struct csi_result r;
    call_ok(ch, CSI_PROBE, &r);
    cr_assert(r.ready && r.latency_us > 0);
    csi_result_clear(&r);
    csi_chan_close(ch);
}

Test(csi_client, node_plugin_serves_no_controller)
{
    char s[108];
    struct tp_proc p;
    struct csi_chan *ch = PLUGIN(&p, s, "n.sock", "--type", "node");
    info_is(ch, "csi-test-plugin", "1.0.0");
    caps_are(ch, CSI_GET_PLUGIN_CAPABILITIES, "");
    caps_are(ch, CSI_NODE_GET_CAPABILITIES, "node:STAGE_UNSTAGE_VOLUME\n");
    node_is(ch, "test-node", 0, "");
    call_fails(ch, CSI_CONTROLLER_GET_CAPABILITIES, 5000, GRPC_STATUS_UNIMPLEMENTED,
               "UNIMPLEMENTED: csi-test-plugin does not serve "
               "/csi.v1.Controller/ControllerGetCapabilities");
}

Test(csi_client, controller_plugin_serves_no_node)
{
    char s[108];
    struct tp_proc p;
    struct csi_chan *ch = PLUGIN(&p, s, "c.sock", "--type", "controller");
    caps_are(ch, CSI_CONTROLLER_GET_CAPABILITIES, "controller:CREATE_DELETE_VOLUME\n");
    caps_are(ch, CSI_GET_PLUGIN_CAPABILITIES, "plugin:CONTROLLER_SERVICE\n");
    call_fails(ch, CSI_NODE_GET_INFO, 5000, GRPC_STATUS_UNIMPLEMENTED,
               "UNIMPLEMENTED: csi-test-plugin does not serve /csi.v1.Node/NodeGetInfo");
    call_fails(ch, CSI_NODE_GET_CAPABILITIES, 5000, GRPC_STATUS_UNIMPLEMENTED,
               "UNIMPLEMENTED: csi-test-plugin does not serve /csi.v1.Node/NodeGetCapabilities");
}

/* ---- asynchronous calls: a slot per call ---- */

struct slot {
    atomic_bool done;
    int64_t done_ms;
    struct csi_result res;
    atomic_int *count;      /* optional: decremented when done */
};

static void on_done(void *arg, struct csi_result *res)
{
    struct slot *s = arg;
    s->res = *res;
    memset(res, 0, sizeof(*res));
    s->done_ms = tu_now_ms();
    if (s->count)
        atomic_fetch_sub(s->count, 1);
    atomic_store(&s->done, true);
}

static bool slot_done(void *arg)
{
    return atomic_load(&((struct slot *)arg)->done);
}

static bool count_reached(void *arg)
{
    return atomic_load((atomic_int *)arg) <= 0;
}

Test(csi_client, unregistered_method_is_unimplemented)
{
    char s[108];
    struct tp_proc p;
    struct csi_chan *ch = PLUGIN(&p, s, "u.sock");
    const char *paths[] = { "/csi.v1.Controller/CreateVolume", "/no.such.Service/Nope" };
    for (int i = 0; i < 2; i++) {
        struct slot sl = { 0 };
        cr_assert_eq(csi_call_path(ch, paths[i], 20000, on_done, &sl), 0);
        /* answered, not left to the 20 s deadline */
        cr_assert(tu_wait_for(slot_done, &sl, 3000), "no answer to %s", paths[i]);
        cr_assert_eq(sl.res.method, CSI_METHOD_COUNT);
        cr_assert_eq(sl.res.status, GRPC_STATUS_UNIMPLEMENTED);
        char want[200];
        snprintf(want, sizeof(want), "UNIMPLEMENTED: csi-test-plugin does not serve %s", paths[i]);
        cr_assert_str_eq(sl.res.reason, want);
        csi_result_clear(&sl.res);
    }
    /* and the plugin still answers */
    cr_assert(probe_ready(ch));
}

Test(csi_client, probe_ready_true_false_absent)
{
    char s1[108], s2[108], s3[108];
    struct tp_proc p1, p2, p3;
    START(&p1, "--socket", sock(s1, "t.sock"));
    START(&p2, "--socket", sock(s2, "f.sock"), "--not-ready");
    START(&p3, "--socket", sock(s3, "a.sock"), "--ready-absent");
    cr_assert(probe_ready(chan(s1)));
    cr_assert(!probe_ready(chan(s2)));
    cr_assert(probe_ready(chan(s3)), "ready absent must count as ready");
}

static bool becomes_ready(void *arg)
{
    return probe_ready(arg);
}

Test(csi_client, not_ready_for_a_while)
{
    char s[108];
    struct tp_proc p;
    int64_t t0 = tu_now_ms();
    struct csi_chan *ch = PLUGIN(&p, s, "w.sock", "--not-ready-for", "400");
    if (tu_now_ms() - t0 < 300)     /* checkable only while well inside the 400 ms */
        cr_assert(!probe_ready(ch));
    cr_assert(tu_wait_for(becomes_ready, ch, 5000), "never became ready");
    cr_assert_geq(tu_now_ms() - t0, 400, "ready before 400 ms");
}

Test(csi_client, hanging_plugin_ends_at_the_deadline)
{
    char s[108];
    struct tp_proc p;
    struct csi_chan *ch = PLUGIN(&p, s, "h.sock", "--hang");
    const struct { int ms; const char *reason; } cases[] = {
        { 300, "Probe timed out after 300ms" },
        { 1000, "Probe timed out after 1s" },
    };
    for (int i = 0; i < 2; i++) {
        int64_t t0 = tu_now_ms();
        call_fails(ch, CSI_PROBE, cases[i].ms, GRPC_STATUS_DEADLINE_EXCEEDED, cases[i].reason);
        int64_t took = tu_now_ms() - t0;
        cr_assert_geq(took, cases[i].ms - 5, "ended before the deadline: %lld ms", (long long)took);
        cr_assert_leq(took, cases[i].ms + tu_ms(1000), "ended long after the deadline");
    }
}

Test(csi_client, delayed_answer)
{
    char s[108];
    struct tp_proc p;
    struct csi_chan *ch = PLUGIN(&p, s, "d.sock", "--delay", "300", "--only", "GetPluginInfo");
    struct csi_result r;
    call_ok(ch, CSI_GET_PLUGIN_INFO, &r);
    cr_assert_str_eq(r.name, "csi-test-plugin");
    cr_assert_geq(r.latency_us, 300000);
    csi_result_clear(&r);
    call_fails(ch, CSI_GET_PLUGIN_INFO, 100, GRPC_STATUS_DEADLINE_EXCEEDED,
               "GetPluginInfo timed out after 100ms");
    call_ok(ch, CSI_PROBE, &r);         /* --only: Probe is not delayed */
    cr_assert_lt(r.latency_us, 300000);
    csi_result_clear(&r);
}

Test(csi_client, error_status_and_message)
{
    char s1[108], s2[108], s3[108];
    struct tp_proc p1, p2, p3;
    START(&p1, "--socket", sock(s1, "e1.sock"), "--error", "FAILED_PRECONDITION:plugin is sick");
    START(&p2, "--socket", sock(s2, "e2.sock"), "--error", "5", "--only", "NodeGetInfo");
    START(&p3, "--socket", sock(s3, "e3.sock"), "--error", "OK");
    call_fails(chan(s1), CSI_PROBE, 5000, GRPC_STATUS_FAILED_PRECONDITION,
               "FAILED_PRECONDITION: plugin is sick");
    struct csi_chan *ch2 = chan(s2);
    cr_assert(probe_ready(ch2));
    call_fails(ch2, CSI_NODE_GET_INFO, 5000, GRPC_STATUS_NOT_FOUND, "NOT_FOUND");
    /* status OK without a reply message */
    call_fails(chan(s3), CSI_PROBE, 5000, GRPC_STATUS_OK, "protocol: no reply message");
}

Test(csi_client, exit_on_call_leaves_a_stale_socket)
{
    char s[108];
    struct tp_proc p;
    struct csi_chan *ch = PLUGIN(&p, s, "x.sock", "--exit-on-call", "2");
    cr_assert(probe_ready(ch));
    /* the call it dies on: the connection drops, and the listener closes at
     * about the same moment, so either reason is right */
    struct csi_result r;
    call(ch, CSI_PROBE, 5000, &r);
    cr_assert_eq(r.status, GRPC_STATUS_UNAVAILABLE, "%s", r.reason);
    cr_assert(strcmp(r.reason, "connect: Connection refused") == 0 ||
              strcmp(r.reason, "UNAVAILABLE: connection closed") == 0, "%s", r.reason);
    csi_result_clear(&r);
    int st = tp_wait(&p, 5000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 3, "wait status %d", st);
    cr_assert(is_socket(s), "the socket file should be left behind");
    call_fails(ch, CSI_PROBE, 5000, GRPC_STATUS_UNAVAILABLE, "connect: Connection refused");
    /* the diagnosis the prober makes */
    cr_assert_eq(csi_dial_check(s, NULL), ECONNREFUSED);
}

Test(csi_client, stale_and_missing_sockets)
{
    char s[108], m[108];
    struct tp_proc p;
    START(&p, "--socket", sock(s, "s.sock"));
    int st = tp_kill(&p);
    cr_assert(st >= 0 && WIFSIGNALED(st), "wait status %d", st);
    cr_assert(is_socket(s));
    struct csi_result r;
    call(chan(s), CSI_PROBE, 5000, &r);
    cr_assert_eq(r.status, GRPC_STATUS_UNAVAILABLE);
    cr_assert_str_eq(r.reason, "connect: Connection refused");
    cr_assert_lt(r.latency_us, tu_ms(1000) * 1000, "a refused connect waited");
    csi_result_clear(&r);
    cr_assert_eq(csi_dial_check(s, NULL), ECONNREFUSED);
    call_fails(chan(sock(m, "missing.sock")), CSI_NODE_GET_INFO, 5000, GRPC_STATUS_UNAVAILABLE,
               "connect: No such file or directory");
    cr_assert_eq(csi_dial_check(m, NULL), ENOENT);
}

Test(csi_client, blackhole_and_garbage)
{
    char b[108], g[108];
    struct tp_proc pb, pg;
    START(&pb, "--socket", sock(b, "b.sock"), "--blackhole");
    START(&pg, "--socket", sock(g, "g.sock"), "--garbage");
    int64_t t0 = tu_now_ms();
    call_fails(chan(b), CSI_PROBE, 500, GRPC_STATUS_DEADLINE_EXCEEDED, "Probe timed out after 500ms");
    cr_assert_geq(tu_now_ms() - t0, 495);
    struct csi_result r;
    call(chan(g), CSI_PROBE, 5000, &r);
    cr_assert(!r.ok);
    /* the transport closes on the garbage: the call's stream is removed */
    cr_assert(r.status == GRPC_STATUS_UNKNOWN || r.status == GRPC_STATUS_UNAVAILABLE,
              "status %d: %s", r.status, r.reason);
    cr_assert_str_eq(r.reason, "protocol: not HTTP/2");
    cr_assert_lt(r.latency_us, 5000000, "garbage should fail before the deadline");
    csi_result_clear(&r);
}

/* 100 calls at once, half to healthy plugins and half to hanging ones: the
 * healthy ones complete promptly, the hanging ones at their deadline. */
Test(csi_client, hundred_concurrent_calls_healthy_and_hanging)
{
    enum { NPLUG = 10, PER = 10, HANG_MS = 3000 };
    struct tp_proc p[NPLUG];
    struct csi_chan *ch[NPLUG];
    static struct slot slots[NPLUG * PER];
    atomic_int healthy_left = NPLUG / 2 * PER, hanging_left = NPLUG / 2 * PER;
    for (int i = 0; i < NPLUG; i++) {
        char s[108], name[32];
        snprintf(name, sizeof(name), "p%d.sock", i);
        if (i % 2)
            START(&p[i], "--socket", sock(s, name), "--hang");
        else
            START(&p[i], "--socket", sock(s, name));
        ch[i] = chan(s);
    }
    int64_t t0 = tu_now_ms();
    for (int k = 0; k < NPLUG * PER; k++) {
        int i = k % NPLUG;
        slots[k].count = i % 2 ? &hanging_left : &healthy_left;
        cr_assert_eq(csi_call(ch[i], CSI_PROBE, HANG_MS, on_done, &slots[k]), 0);
    }
    cr_assert(tu_wait_for(count_reached, &healthy_left, 1000), "healthy calls were held up");
    cr_assert(tu_wait_for(count_reached, &hanging_left, HANG_MS + 2000), "hanging calls never ended");
    int64_t last_healthy = 0, first_hanging = INT64_MAX;
    for (int k = 0; k < NPLUG * PER; k++) {
        struct csi_result *r = &slots[k].res;
        if (k % NPLUG % 2) {
            cr_assert_str_eq(r->reason, "Probe timed out after 3s");
            cr_assert_geq(slots[k].done_ms - t0, HANG_MS - 5);
            first_hanging = slots[k].done_ms < first_hanging ? slots[k].done_ms : first_hanging;
        } else {
            cr_assert(r->ok && r->ready, "call %d: %s", k, r->reason);
            last_healthy = slots[k].done_ms > last_healthy ? slots[k].done_ms : last_healthy;
        }
        csi_result_clear(r);
    }
    cr_assert_lt(last_healthy, first_hanging, "a healthy call waited for a hanging one");
}

Test(csi_client, restarted_plugin_is_reached_by_the_next_call)
{
    char s[108];
    struct tp_proc p;
    struct csi_chan *ch = PLUGIN(&p, s, "r.sock", "--name", "first");
    cr_assert(probe_ready(ch));
    cr_assert(tp_kill(&p) >= 0);
    /* failures spread over a second and a half: gRPC's own backoff would
     * now wait seconds before dialling again */
    for (int i = 0; i < 6; i++) {
        /* the first may still go out on the old connection, as it breaks */
        struct csi_result r;
        call(ch, CSI_PROBE, 5000, &r);
        cr_assert_eq(r.status, GRPC_STATUS_UNAVAILABLE, "%s", r.reason);
        cr_assert(strcmp(r.reason, "connect: Connection refused") == 0 ||
                  (i == 0 && strcmp(r.reason, "UNAVAILABLE: connection closed") == 0), "%s",
                  r.reason);
        csi_result_clear(&r);
        tu_sleep_ms(250);
    }
    START(&p, "--socket", s, "--name", "second");
    info_is(ch, "second", "1.0.0");     /* the very next call */

    /* the same after a socket that did not exist yet, and after a hang */
    char m[108];
    struct csi_chan *late = chan(sock(m, "late.sock"));
    call_fails(late, CSI_PROBE, 5000, GRPC_STATUS_UNAVAILABLE,
               "connect: No such file or directory");
    struct tp_proc q;
    START(&q, "--socket", m, "--hang");
    call_fails(late, CSI_PROBE, 200, GRPC_STATUS_DEADLINE_EXCEEDED, "Probe timed out after 200ms");
    cr_assert(tp_kill(&q) >= 0);
    START(&q, "--socket", m);
    cr_assert(probe_ready(late));
}

Test(csi_client, hundred_sockets_from_one_process)
{
    enum { N = 100 };
    char base[108];
    struct tp_proc p;
    START(&p, "--socket", sock(base, "f.sock"), "--sockets", "100");
    static struct slot slots[N];
    struct csi_chan *ch[N];
    atomic_int left = N;
    for (int i = 0; i < N; i++) {
        char s[120];
        snprintf(s, sizeof(s), "%s.%d", base, i);
        ch[i] = chan(s);
        slots[i].count = &left;
        cr_assert_eq(csi_call(ch[i], CSI_PROBE, 5000, on_done, &slots[i]), 0);
    }
    cr_assert(tu_wait_for(count_reached, &left, 5000));
    for (int i = 0; i < N; i++) {
        cr_assert(slots[i].res.ok && slots[i].res.ready, "socket %d: %s", i, slots[i].res.reason);
        csi_result_clear(&slots[i].res);
        csi_chan_close(ch[i]);
    }
}

Test(csi_client, plugin_refuses_a_live_socket)
{
    char s[108], l[108];
    struct tp_proc a, b;
    START(&a, "--socket", sock(s, "live.sock"), "--name", "a");
    cr_assert_eq(tp_start(&b, "--socket", s, "--name", "b", NULL), -ECHILD);
    cr_assert(WIFEXITED(b.status) && WEXITSTATUS(b.status) == 1, "status %d", b.status);
    info_is(chan(s), "a", "1.0.0");

    /* a live listener that is not a csi-test-plugin (no lock file) */
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    strcpy(sa.sun_path, sock(l, "other.sock"));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 8), 0);
    cr_assert_eq(tp_start(&b, "--socket", l, "--blackhole", NULL), -ECHILD);
    cr_assert(is_socket(l));
    close(fd);
}

Test(csi_client, sigterm_shuts_down_cleanly)
{
    const char *modes[] = { "--hang", "--blackhole", "--garbage" };
    for (int i = 0; i < 3; i++) {
        char s[108], name[32];
        struct tp_proc p;
        snprintf(name, sizeof(name), "t%d.sock", i);
        START(&p, "--socket", sock(s, name), modes[i]);
        struct slot sl = { 0 };
        cr_assert_eq(csi_call(chan(s), CSI_PROBE, 30000, on_done, &sl), 0);
        tu_sleep_ms(50);        /* let the call reach the plugin */
        int64_t t0 = tu_now_ms();
        int st = tp_stop(&p);
        cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %d", modes[i], st);
        cr_assert_lt(tu_now_ms() - t0, tu_ms(3000));
        cr_assert(!is_socket(s), "%s: socket file left", modes[i]);
        cr_assert(tu_wait_for(slot_done, &sl, 5000), "%s: call still pending", modes[i]);
        cr_assert(!sl.res.ok);
        csi_result_clear(&sl.res);
    }
}

/* A callback's view of its own channel. */
struct nested {
    struct csi_chan *ch;
    atomic_bool done;
    int rc, status;
};

static void call_again(void *arg, struct csi_result *res)
{
    struct nested *n = arg;
    n->status = res->status;
    n->rc = csi_call(n->ch, CSI_PROBE, 1000, call_again, n);
    atomic_store(&n->done, true);
}

static void call_sync_inside(void *arg, struct csi_result *res)
{
    struct nested *n = arg;
    struct csi_result inner;
    (void)res;
    n->rc = csi_call_sync(n->ch, CSI_PROBE, 1000, &inner);  /* would wait for itself */
    atomic_store(&n->done, true);
}

static bool nested_done(void *arg)
{
    return atomic_load(&((struct nested *)arg)->done);
}

Test(csi_client, close_and_free_cancel_calls_in_flight)
{
    char s[108];
    struct tp_proc p;
    struct csi_chan *ch = PLUGIN(&p, s, "k.sock", "--hang");
    struct slot a = { 0 }, b = { 0 };
    struct nested n = { .ch = chan(s) };
    cr_assert_eq(csi_call(ch, CSI_PROBE, 30000, on_done, &a), 0);
    cr_assert_eq(csi_call(n.ch, CSI_PROBE, 30000, call_again, &n), 0);
    csi_chan_close(ch);
    csi_chan_close(n.ch);
    cr_assert(tu_wait_for(slot_done, &a, 2000), "close left the call running");
    cr_assert_eq(a.res.status, GRPC_STATUS_CANCELLED);
    cr_assert(strncmp(a.res.reason, "CANCELLED", 9) == 0, "%s", a.res.reason);
    csi_result_clear(&a.res);
    /* inside its callback the closed channel is still there, and refuses */
    cr_assert(tu_wait_for(nested_done, &n, 2000));
    cr_assert_eq(n.status, GRPC_STATUS_CANCELLED);
    cr_assert_eq(n.rc, -ESHUTDOWN);

    cr_assert_eq(csi_call(chan(s), CSI_PROBE, 30000, on_done, &b), 0);
    int64_t t0 = tu_now_ms();
    csi_client_free(cli);
    cli = NULL;
    cr_assert(atomic_load(&b.done), "free returned before the callback ran");
    cr_assert_lt(tu_now_ms() - t0, tu_ms(2000));
    cr_assert_eq(b.res.status, GRPC_STATUS_CANCELLED);
    csi_result_clear(&b.res);
}

Test(csi_client, bad_arguments)
{
    struct csi_chan *ch = NULL;
    char longp[109] = "/";          /* 107 bytes fit a sun_path, 108 do not */
    memset(longp + 1, 'a', 106);
    cr_assert_eq(csi_chan_open(cli, longp, &ch), 0);
    csi_chan_close(ch);
    longp[107] = 'a';
    cr_assert_eq(csi_chan_open(cli, longp, &ch), -ENAMETOOLONG);
    cr_assert_eq(csi_chan_open(cli, "relative.sock", &ch), -EINVAL);
    char s[108];
    struct tp_proc p;
    ch = PLUGIN(&p, s, "v.sock");
    cr_assert_str_eq(csi_chan_path(ch), s);
    struct slot sl = { 0 };
    cr_assert_eq(csi_call(ch, CSI_PROBE, 0, on_done, &sl), -EINVAL);
    cr_assert_eq(csi_call(ch, CSI_METHOD_COUNT, 1000, on_done, &sl), -EINVAL);
    cr_assert_eq(csi_call(ch, CSI_PROBE, 1000, NULL, &sl), -EINVAL);
    struct nested n = { .ch = ch };
    cr_assert_eq(csi_call(ch, CSI_PROBE, 1000, call_sync_inside, &n), 0);
    cr_assert(tu_wait_for(nested_done, &n, 2000));
    cr_assert_eq(n.rc, -EDEADLK);
}
