/* The in-memory registry: ordering, current, health table, names. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/model.h"
#include "registry/registry.h"
#include "tests/lib/testutil.h"

static struct reg *reg;

static void setup(void)
{
    struct reg_opts o = { .events_ring = 4096, .health_timeout_ms = 200 };
    cr_assert_eq(reg_open(&reg, &o), 0);
}

static void teardown(void)
{
    reg_close(reg);
    reg = NULL;
}

TestSuite(registry, .init = setup, .fini = teardown);

static uint64_t inst(enum reg_type t, const char *p, const char *a)
{
    struct reg_node pn, in;
    if (reg_plugin_lookup(reg, t, p, &pn) < 0 || reg_instance_lookup(reg, pn.seq, a, &in) < 0)
        return 0;
    return in.seq;
}

static uint64_t add(enum reg_type t, const char *p, const char *a)
{
    int rc = reg_plugin_create(reg, t, p);
    cr_assert(rc == 0 || rc == -EEXIST, "plugin %s: %d", p, rc);
    cr_assert_eq(reg_instance_register(reg, t, p, a), 0, "register %s/%s", p, a);
    return inst(t, p, a);
}

static const struct reg_fingerprint fp_node = {
    .provider = "p.example", .version = "1.0", .nodeid = "node-1", .max_volumes = 7,
    .topology = "zone=z1\n", .capabilities = "node:STAGE_UNSTAGE_VOLUME\n",
};

static int probe(uint64_t i, enum reg_outcome out, const char *reason, bool with_fp)
{
    struct reg_node n;
    cr_assert_eq(reg_get(reg, i, &n), 0);
    struct reg_probe p = { .gen = n.gen, .outcome = out, .reason = reason,
                           .latency_us = 71, .fp = with_fp ? &fp_node : NULL };
    return reg_probe_result(reg, i, &p);
}

static void make_ready(uint64_t i)
{
    char sock[64];
    snprintf(sock, sizeof(sock), "/run/plugin-%llu.sock", (unsigned long long)i);
    cr_assert_eq(reg_socket_set(reg, i, sock), 0);
    cr_assert_eq(probe(i, REG_PROBE_OK, NULL, true), 0);
}

static char *attr(uint64_t i, enum reg_attr a)
{
    static char buf[8192];
    ssize_t n = reg_attr_show(reg, i, a, buf, sizeof(buf));
    cr_assert_geq(n, 0, "attr %d: %zd", a, n);
    if (n > 0)
        buf[n - 1] = '\0';   /* drop the newline */
    return buf;
}

static char *current(enum reg_type t, const char *p)
{
    static char buf[128];
    struct reg_node pn;
    cr_assert_eq(reg_plugin_lookup(reg, t, p, &pn), 0);
    if (reg_current_get(reg, pn.seq, buf, sizeof(buf)) < 0)
        return "none";
    return buf;
}

/* An instance keeps values for the writable attributes only (model.h). */
Test(registry, writable_attributes_have_slots)
{
    for (int a = 0; a < REG_NATTRS; a++)
        if (reg_attrs[a].flags & REG_AF_WRITABLE)
            cr_assert(INST_ATTR(a) >= 0 && INST_ATTR(a) < INST_NATTRS, "%s has no slot",
                      reg_attrs[a].name);
}

Test(registry, type_isolation)
{
    uint64_t c = add(REG_CONTROLLER, "ebs", "a0");
    uint64_t n = add(REG_NODE, "ebs", "a0");
    cr_assert_neq(c, n);
    make_ready(c);
    make_ready(n);
    cr_assert_eq(reg_instance_deregister(reg, REG_CONTROLLER, "ebs", "a0"), 0);
    cr_assert_eq(inst(REG_CONTROLLER, "ebs", "a0"), 0);
    cr_assert_eq(inst(REG_NODE, "ebs", "a0"), n);
    cr_assert_str_eq(current(REG_CONTROLLER, "ebs"), "none");
    cr_assert_str_eq(current(REG_NODE, "ebs"), "a0");
    cr_assert_str_eq(attr(n, REG_A_HEALTH), "healthy");
}

Test(registry, interleaved)
{
    uint64_t a0 = add(REG_NODE, "p", "a0");
    uint64_t a1 = add(REG_NODE, "p", "a1");
    make_ready(a0);
    make_ready(a1);
    cr_assert_str_eq(current(REG_NODE, "p"), "a1");
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "a0"), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "a1");
}

static int count_events(void)
{
    struct ev_cursor c;
    char buf[1 << 16];
    ev_cursor_init(reg_events(reg), &c);
    size_t n = ev_read(reg_events(reg), &c, buf, sizeof(buf));
    int lines = 0;
    for (size_t k = 0; k < n; k++)
        lines += buf[k] == '\n';
    return lines;
}

Test(registry, deregister_current_falls_back)
{
    uint64_t a0 = add(REG_NODE, "p", "a0");
    uint64_t a1 = add(REG_NODE, "p", "a1");
    make_ready(a0);
    make_ready(a1);
    cr_assert_str_eq(current(REG_NODE, "p"), "a1");
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "a1"), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "a0");
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "a0"), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "none");
    int before = count_events();
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "nope"), -ENOENT);
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "a0"), -ENOENT);
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "other", "a0"), -ENOENT);
    cr_assert_eq(count_events(), before);
}

Test(registry, readiness_gate)
{
    uint64_t a = add(REG_NODE, "p", "a");
    make_ready(a);
    uint64_t b = add(REG_NODE, "p", "b");
    cr_assert_eq(reg_socket_set(reg, b, "/run/b.sock"), 0);
    cr_assert_eq(probe(b, REG_PROBE_NOT_READY, NULL, false), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "a");
    cr_assert_str_eq(attr(b, REG_A_READY), "0");
    cr_assert_eq(probe(b, REG_PROBE_OK, NULL, true), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "b");
    /* failed probe, socket change, clear: b is not healthy, a is: current
     * goes to a, back to b once b is healthy again (DESIGN 2) */
    cr_assert_eq(probe(b, REG_PROBE_ERROR, "UNAVAILABLE: Socket closed", false), 0);
    cr_assert_str_eq(attr(b, REG_A_HEALTH), "unhealthy");
    cr_assert_str_eq(current(REG_NODE, "p"), "a");
    cr_assert_eq(probe(b, REG_PROBE_OK, NULL, true), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "b");
    cr_assert_eq(reg_socket_set(reg, b, "/run/b2.sock"), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "a");
    cr_assert_eq(probe(b, REG_PROBE_OK, NULL, true), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "b");
    cr_assert_eq(reg_socket_set(reg, b, NULL), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "a");
    cr_assert_str_eq(attr(b, REG_A_READY), "1");
}

/* The lines of the events ring that contain `what`. */
static int count_lines_with(const char *what)
{
    struct ev_cursor c;
    static char buf[1 << 16];
    ev_cursor_init(reg_events(reg), &c);
    size_t n = ev_read(reg_events(reg), &c, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    int lines = 0;
    for (char *l = buf, *e; *l; l = e + 1) {
        e = strchr(l, '\n');
        *e = '\0';
        lines += strstr(l, what) != NULL;
    }
    return lines;
}

/* DESIGN 2: with no ready instance healthy, current stays where it is. */
Test(registry, current_stays_when_none_is_healthy)
{
    uint64_t a = add(REG_NODE, "p", "a");
    make_ready(a);
    cr_assert_eq(probe(a, REG_PROBE_ERROR, "connect: Connection refused", false), 0);
    cr_assert_str_eq(attr(a, REG_A_HEALTH), "unhealthy");
    cr_assert_str_eq(current(REG_NODE, "p"), "a");
    uint64_t b = add(REG_NODE, "p", "b");
    make_ready(b);
    cr_assert_str_eq(current(REG_NODE, "p"), "b");
    cr_assert_eq(probe(b, REG_PROBE_ERROR, "connect: Connection refused", false), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "b");   /* a is unhealthy too */
    /* rmdir of the current one: the newest healthy, else the newest ready */
    uint64_t c = add(REG_NODE, "p", "c");
    make_ready(c);
    cr_assert_eq(probe(c, REG_PROBE_ERROR, "connect: Connection refused", false), 0);
    cr_assert_eq(probe(a, REG_PROBE_OK, NULL, true), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "a");
    cr_assert_eq(probe(a, REG_PROBE_ERROR, "connect: Connection refused", false), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "a");
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "a"), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "c");
    cr_assert_eq(probe(b, REG_PROBE_OK, NULL, true), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "b");
    cr_assert_eq(probe(c, REG_PROBE_OK, NULL, true), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "c");
    cr_assert_eq(probe(c, REG_PROBE_ERROR, "connect: Connection refused", false), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "b");
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "b"), 0);
    cr_assert_str_eq(current(REG_NODE, "p"), "c");   /* none healthy: newest ready */
}

/* Every move is one `current` event, and only a move makes one. */
Test(registry, each_move_is_one_current_event)
{
    uint64_t a = add(REG_NODE, "p", "a"), b = add(REG_NODE, "p", "b");
    make_ready(a);
    make_ready(b);
    cr_assert_eq(count_lines_with(" current csi-node/p "), 2);   /* a, then b */
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(probe(b, REG_PROBE_ERROR, "connect: Connection refused", false), 0);
        cr_assert_eq(probe(b, REG_PROBE_ERROR, "connect: Connection refused", false), 0);
        cr_assert_str_eq(current(REG_NODE, "p"), "a");
        cr_assert_eq(probe(a, REG_PROBE_OK, NULL, true), 0);
        cr_assert_eq(probe(b, REG_PROBE_OK, NULL, true), 0);
        cr_assert_eq(probe(b, REG_PROBE_OK, NULL, true), 0);
        cr_assert_str_eq(current(REG_NODE, "p"), "b");
    }
    cr_assert_eq(count_lines_with(" current csi-node/p alloc=a"), 4);
    cr_assert_eq(count_lines_with(" current csi-node/p alloc=b"), 4);
}

static void expect(uint64_t i, const char *health, const char *reason, const char *ready)
{
    cr_assert_str_eq(attr(i, REG_A_HEALTH), health);
    cr_assert_str_eq(attr(i, REG_A_REASON), reason);
    cr_assert_str_eq(attr(i, REG_A_READY), ready);
}

Test(registry, health_table)
{
    uint64_t i = add(REG_NODE, "p", "a");
    expect(i, "unknown", "no socket set", "0");
    /* no socket: probe results are stale */
    struct reg_probe stale = { .gen = 0, .outcome = REG_PROBE_OK, .fp = &fp_node };
    cr_assert_eq(reg_probe_result(reg, i, &stale), -ESTALE);
    cr_assert_eq(reg_socket_set(reg, i, "/run/a.sock"), 0);
    expect(i, "unknown", "not yet probed", "0");
    cr_assert_eq(probe(i, REG_PROBE_ERROR, "connect: Connection refused", false), 0);
    expect(i, "unknown", "connect: Connection refused", "0");
    cr_assert_eq(probe(i, REG_PROBE_NOT_READY, NULL, false), 0);
    expect(i, "unknown", "not ready", "0");
    /* OK without a fingerprint is not a way to healthy */
    cr_assert_eq(probe(i, REG_PROBE_OK, NULL, false), -EINVAL);
    expect(i, "unknown", "not ready", "0");
    /* a csi-node fingerprint with an empty node id fails */
    struct reg_fingerprint bad = fp_node;
    bad.nodeid = "";
    struct reg_node n;
    reg_get(reg, i, &n);
    struct reg_probe pb = { .gen = n.gen, .outcome = REG_PROBE_OK, .fp = &bad };
    cr_assert_eq(reg_probe_result(reg, i, &pb), 0);
    expect(i, "unknown", "fingerprint: empty node_id", "0");
    /* health_timeout (200 ms here) passes with no ready answer */
    tu_sleep_ms(250);
    cr_assert_eq(probe(i, REG_PROBE_NOT_READY, NULL, false), 0);
    expect(i, "unhealthy", "did not become healthy within 200ms: not ready", "0");
    /* ready answer and fingerprint */
    cr_assert_eq(probe(i, REG_PROBE_OK, NULL, true), 0);
    expect(i, "healthy", "ok", "1");
    cr_assert_str_eq(attr(i, REG_A_NODEID), "node-1");
    cr_assert_str_eq(attr(i, REG_A_PROVIDER), "p.example");
    cr_assert_str_eq(attr(i, REG_A_MAX_VOLUMES), "7");
    /* heartbeat: OK without a fingerprint keeps healthy */
    cr_assert_eq(probe(i, REG_PROBE_OK, NULL, false), 0);
    expect(i, "healthy", "ok", "1");
    /* any failure after that */
    cr_assert_eq(probe(i, REG_PROBE_ERROR, "DEADLINE_EXCEEDED: probe timed out after 5s", false), 0);
    expect(i, "unhealthy", "DEADLINE_EXCEEDED: probe timed out after 5s", "1");
    cr_assert_eq(probe(i, REG_PROBE_NOT_READY, NULL, false), 0);
    expect(i, "unhealthy", "not ready", "1");
    cr_assert_eq(probe(i, REG_PROBE_OK, NULL, true), 0);
    expect(i, "healthy", "ok", "1");
    /* socket changed: unknown, fingerprint cleared, ready kept */
    cr_assert_eq(reg_socket_set(reg, i, "/run/other.sock"), 0);
    expect(i, "unknown", "not yet probed", "1");
    cr_assert_str_eq(attr(i, REG_A_NODEID), "");
    cr_assert_str_eq(attr(i, REG_A_MAX_VOLUMES), "");
    cr_assert_str_eq(attr(i, REG_A_CAPABILITIES), "");
    /* a result for the old socket is stale */
    struct reg_probe old = { .gen = n.gen, .outcome = REG_PROBE_OK, .fp = &fp_node };
    cr_assert_eq(reg_probe_result(reg, i, &old), -ESTALE);
    expect(i, "unknown", "not yet probed", "1");
    /* socket cleared */
    cr_assert_eq(reg_socket_set(reg, i, ""), 0);
    expect(i, "unknown", "no socket set", "1");
    /* history: one line per applied probe, oldest first */
    char *h = attr(i, REG_A_HISTORY);
    cr_assert(strstr(h, " 0.071ms error: connect: Connection refused\n"), "%s", h);
    cr_assert(strstr(h, "ms ok\n") && !strstr(h, "ok ok"), "%s", h);
}

Test(registry, history_keeps_last_16)
{
    uint64_t i = add(REG_CONTROLLER, "p", "a");
    cr_assert_eq(reg_socket_set(reg, i, "/run/a.sock"), 0);
    char why[32];
    for (int k = 0; k < 20; k++) {
        snprintf(why, sizeof(why), "e%d", k);
        cr_assert_eq(probe(i, REG_PROBE_ERROR, why, false), 0);
    }
    char *h = attr(i, REG_A_HISTORY);
    int lines = 1;
    for (char *c = h; *c; c++)
        lines += *c == '\n';
    cr_assert_eq(lines, 16, "%s", h);
    cr_assert(strstr(h, "error: e4\n") == h + strcspn(h, "\n") - strlen("error: e4") &&
              strstr(h, "error: e19"), "%s", h);
}

Test(registry, attributes)
{
    uint64_t i = add(REG_CONTROLLER, "p", "a");
    cr_assert_eq(reg_attr_store(reg, i, REG_A_MOUNT_POINT, "/x\n", 3), 0);
    cr_assert_str_eq(attr(i, REG_A_MOUNT_POINT), "/x");
    char big[REG_VALUE_MAX + 2];
    memset(big, 'a', sizeof(big));
    big[0] = '/';                    /* an absolute path (DESIGN 5) */
    cr_assert_eq(reg_attr_store(reg, i, REG_A_MOUNT_POINT, big, REG_VALUE_MAX + 1), -EINVAL);
    cr_assert_eq(reg_attr_store(reg, i, REG_A_MOUNT_POINT, "/a\nb", 4), -EINVAL);
    cr_assert_eq(reg_attr_store(reg, i, REG_A_MOUNT_POINT, "/a\0b", 4), -EINVAL);
    cr_assert_eq(reg_attr_store(reg, i, REG_A_HEALTH, "healthy", 7), -EACCES);
    cr_assert_str_eq(attr(i, REG_A_MOUNT_POINT), "/x");
    cr_assert_eq(reg_attr_store(reg, i, REG_A_MOUNT_POINT, big, REG_VALUE_MAX), 0);
    cr_assert_eq(reg_attr_store(reg, i, REG_A_MOUNT_POINT, "", 0), 0);
    cr_assert_str_eq(attr(i, REG_A_MOUNT_POINT), "");
    /* node-only attributes do not exist under csi-controller */
    char buf[16];
    cr_assert_eq(reg_attr_show(reg, i, REG_A_NODEID, buf, sizeof(buf)), -ENOENT);
    cr_assert_eq(reg_attr_lookup(REG_CONTROLLER, "nodeid"), -ENOENT);
    cr_assert_eq(reg_attr_lookup(REG_NODE, "nodeid"), REG_A_NODEID);
    /* registered: YYYY-MM-DDTHH:MM:SSZ */
    char *r = attr(i, REG_A_REGISTERED);
    cr_assert_eq(strlen(r), 20, "%s", r);
    cr_assert(r[4] == '-' && r[10] == 'T' && r[19] == 'Z', "%s", r);
}

Test(registry, sockets)
{
    uint64_t i = add(REG_NODE, "p", "a");
    char long_target[REG_SOCKET_MAX + 2];
    memset(long_target, 'x', sizeof(long_target));
    long_target[0] = '/';
    long_target[REG_SOCKET_MAX + 1] = '\0';
    cr_assert_eq(reg_socket_set(reg, i, "relative.sock"), -EINVAL);
    cr_assert_eq(reg_socket_set(reg, i, long_target), -ENAMETOOLONG);
    long_target[REG_SOCKET_MAX] = '\0';
    cr_assert_eq(reg_socket_set(reg, i, long_target), 0);
    char buf[256];
    cr_assert_eq(reg_socket_get(reg, i, buf, sizeof(buf)), REG_SOCKET_MAX);
    cr_assert_eq(reg_socket_set(reg, i + 1000, "/x"), -ENOENT);
}

Test(registry, order_and_reregister)
{
    add(REG_NODE, "p", "a0");
    add(REG_NODE, "p", "a1");
    add(REG_NODE, "p", "a2");
    int before = count_events();
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", "a0"), -EEXIST);
    cr_assert_eq(reg_plugin_create(reg, REG_NODE, "p"), -EEXIST);
    cr_assert_eq(count_events(), before);
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "nope", "a0"), -ENOENT);
    struct reg_node pn;
    cr_assert_eq(reg_plugin_lookup(reg, REG_NODE, "p", &pn), 0);
    cr_assert_eq(pn.count, 3);
    cr_assert_eq(reg_plugin_remove(reg, REG_NODE, "p"), -ENOTEMPTY);
    cr_assert_eq(reg_plugin_remove(reg, REG_CONTROLLER, "p"), -ENOENT);
}

struct names {
    char buf[512];
    size_t len;
};

static int collect(const struct reg_node *n, void *arg)
{
    struct names *s = arg;
    s->len += (size_t)snprintf(s->buf + s->len, sizeof(s->buf) - s->len, "%s ",
                               n->kind == REG_K_PLUGIN ? n->plugin : n->alloc);
    return 0;
}

static int stop_after_one(const struct reg_node *n, void *arg)
{
    *(uint64_t *)arg = n->seq;
    return 1;
}

Test(registry, list_newest_first_with_resume)
{
    add(REG_NODE, "p", "a0");
    add(REG_NODE, "p", "a1");
    add(REG_NODE, "p", "a2");
    add(REG_NODE, "q", "b");
    struct reg_node pn;
    reg_plugin_lookup(reg, REG_NODE, "p", &pn);
    struct names s = { 0 };
    cr_assert_eq(reg_list(reg, REG_NODE, pn.seq, 0, collect, &s), 0);
    cr_assert_str_eq(s.buf, "a2 a1 a0 ");
    uint64_t first = 0;
    reg_list(reg, REG_NODE, pn.seq, 0, stop_after_one, &first);
    /* the entry we resume after disappears: resume still works */
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "a2"), 0);
    memset(&s, 0, sizeof(s));
    cr_assert_eq(reg_list(reg, REG_NODE, pn.seq, first, collect, &s), 0);
    cr_assert_str_eq(s.buf, "a1 a0 ");
    memset(&s, 0, sizeof(s));
    cr_assert_eq(reg_list(reg, REG_NODE, 0, 0, collect, &s), 0);
    cr_assert_str_eq(s.buf, "q p ");
    memset(&s, 0, sizeof(s));
    cr_assert_eq(reg_list(reg, REG_CONTROLLER, 0, 0, collect, &s), 0);
    cr_assert_str_eq(s.buf, "");
}

Test(registry, max_instances)
{
    teardown();
    struct reg_opts o = { .max_instances = 3 };
    cr_assert_eq(reg_open(&reg, &o), 0);
    add(REG_NODE, "p", "a0");
    add(REG_NODE, "p", "a1");
    add(REG_NODE, "p", "a2");
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", "a3"), -ENOSPC);
    cr_assert_eq(inst(REG_NODE, "p", "a3"), 0);
}

Test(registry, bad_names)
{
    char n63[64], n64[65];
    memset(n63, 'a', 63);
    n63[63] = '\0';
    memset(n64, 'b', 64);
    n64[64] = '\0';
    const char *bad[] = { "", n64, "current", ".hidden", "..", ".", "a/b", "a b",
                          "a\tb", "a\nb", "a:b", "a@b", "a*b", "é", "a\\b", "a~b", NULL };
    cr_assert_eq(reg_plugin_create(reg, REG_NODE, "p"), 0);
    int before = count_events();
    for (int k = 0; bad[k]; k++) {
        cr_assert_eq(reg_plugin_create(reg, REG_NODE, bad[k]), -EINVAL, "plugin '%s'", bad[k]);
        cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", bad[k]), -EINVAL,
                     "alloc '%s'", bad[k]);
    }
    /* 255 bytes break the rule (EINVAL); 256 are too long for any name */
    char n255[256], n256[257];
    memset(n255, 'c', 255);
    n255[255] = '\0';
    memset(n256, 'c', 256);
    n256[256] = '\0';
    cr_assert_eq(reg_name_check(n255), -EINVAL);
    cr_assert_eq(reg_plugin_create(reg, REG_NODE, n256), -ENAMETOOLONG);
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", n256), -ENAMETOOLONG);
    /* every character outside [A-Za-z0-9._-] */
    for (int c = 1; c < 256; c++) {
        char name[4] = { 'x', (char)c, 'y', 0 };
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        cr_assert_eq(reg_name_check(name), ok ? 0 : -EINVAL, "char %d", c);
        if (!ok)
            cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", name), -EINVAL);
    }
    cr_assert_eq(count_events(), before);
    struct reg_node pn;
    reg_plugin_lookup(reg, REG_NODE, "p", &pn);
    cr_assert_eq(pn.count, 0);
    cr_assert_eq(reg_plugin_create(reg, REG_NODE, n63), 0);
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", n63), 0);
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", "a-b_c.9"), 0);
}

/* DESIGN 3: history records each probe's own outcome and reason, not the
 * instance's summary (after health_timeout, or for a failed fingerprint). */
Test(registry, history_names_each_probe_own_cause)
{
    uint64_t i = add(REG_NODE, "p", "a");
    cr_assert_eq(reg_socket_set(reg, i, "/run/a.sock"), 0);
    tu_sleep_ms(250);                /* past health_timeout (200 ms) */
    cr_assert_eq(probe(i, REG_PROBE_ERROR, "Probe timed out after 1s", false), 0);
    cr_assert_eq(probe(i, REG_PROBE_ERROR, "protocol: not HTTP/2", false), 0);
    cr_assert_eq(probe(i, REG_PROBE_NOT_READY, NULL, false), 0);
    struct reg_fingerprint bad = fp_node;
    bad.nodeid = "";
    struct reg_node n;
    cr_assert_eq(reg_get(reg, i, &n), 0);
    struct reg_probe pb = { .gen = n.gen, .outcome = REG_PROBE_OK, .fp = &bad };
    cr_assert_eq(reg_probe_result(reg, i, &pb), 0);
    cr_assert_str_eq(attr(i, REG_A_REASON),
                     "did not become healthy within 200ms: fingerprint: empty node_id");
    char *h = attr(i, REG_A_HISTORY);
    cr_assert(strstr(h, "ms error: Probe timed out after 1s\n"), "%s", h);
    cr_assert(strstr(h, "ms error: protocol: not HTTP/2\n"), "%s", h);
    cr_assert(strstr(h, "ms not_ready: not ready\n"), "%s", h);
    cr_assert(strstr(h, "ms error: fingerprint: empty node_id"), "%s", h);
    cr_assert(!strstr(h, "did not become healthy"), "%s", h);
    cr_assert(!strstr(h, " ok "), "%s", h);
}

/* DESIGN 5: control characters and relative paths (registry side). */
Test(registry, values_with_control_characters_refused)
{
    uint64_t i = add(REG_NODE, "p", "a");
    cr_assert_eq(reg_socket_set(reg, i, "/run/a\x01.sock"), -EINVAL);
    cr_assert_eq(reg_socket_set(reg, i, "/run/a\x7f"), -EINVAL);
    cr_assert_eq(reg_socket_set(reg, i, "/run/a\tb"), 0);
    cr_assert_eq(reg_attr_store(reg, i, REG_A_MOUNT_POINT, "/x\x1b", 3), -EINVAL);
    cr_assert_eq(reg_attr_store(reg, i, REG_A_CONTAINER_MOUNT_POINT, "rel/dir", 7), -EINVAL);
    cr_assert_eq(reg_attr_store(reg, i, REG_A_MOUNT_POINT, "x\n", 2), -EINVAL);
    cr_assert_str_eq(attr(i, REG_A_MOUNT_POINT), "");
    cr_assert_eq(reg_value_check("/a\tb", 4), 0);
    cr_assert_eq(reg_value_check("/a\rb", 4), -EINVAL);
}
