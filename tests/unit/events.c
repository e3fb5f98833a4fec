/* The events ring and the events each registry operation appends. */
#include <criterion/criterion.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"

static struct reg *reg;
static struct ev_cursor cur;
static char lines[64][2100];
static int nlines;

static void setup(void)
{
    struct reg_opts o = { .events_ring = 64, .health_timeout_ms = 1000 };
    cr_assert_eq(reg_open(&reg, &o), 0);
    ev_cursor_init(reg_events(reg), &cur);
}

static void teardown(void)
{
    reg_close(reg);
}

TestSuite(events, .init = setup, .fini = teardown);

/* Read every new line; strip "<seq> <time> " after checking its grammar. */
static void drain(void)
{
    static char buf[1 << 16];
    static uint64_t last_seq;
    regex_t re;
    cr_assert_eq(regcomp(&re, "^([0-9]+) [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:"
                         "[0-9]{2}\\.[0-9]{3}Z ([a-z]+ .*)$", REG_EXTENDED), 0);
    size_t n = ev_read(reg_events(reg), &cur, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    nlines = 0;
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        regmatch_t m[3];
        cr_assert_eq(regexec(&re, l, 3, m, 0), 0, "bad line '%s'", l);
        uint64_t seq = strtoull(l + m[1].rm_so, NULL, 10);
        cr_assert_gt(seq, last_seq, "seq %llu after %llu", (unsigned long long)seq,
                     (unsigned long long)last_seq);
        last_seq = seq;
        snprintf(lines[nlines++], sizeof(lines[0]), "%s", l + m[2].rm_so);
    }
    regfree(&re);
}

static uint64_t add(const char *p, const char *a)
{
    struct reg_node pn, in;
    int rc = reg_plugin_create(reg, REG_NODE, p);
    cr_assert(rc == 0 || rc == -EEXIST);
    cr_assert_eq(reg_instance_register(reg, REG_NODE, p, a), 0);
    reg_plugin_lookup(reg, REG_NODE, p, &pn);
    reg_instance_lookup(reg, pn.seq, a, &in);
    return in.seq;
}

static const struct reg_fingerprint fp = {
    .provider = "csi.example", .version = "1.2 beta", .nodeid = "n1",
    .topology = "", .capabilities = "",
};

static void ready(uint64_t i, const char *sock)
{
    struct reg_node n;
    cr_assert_eq(reg_socket_set(reg, i, sock), 0);
    reg_get(reg, i, &n);
    struct reg_probe p = { .gen = n.gen, .outcome = REG_PROBE_OK, .fp = &fp };
    cr_assert_eq(reg_probe_result(reg, i, &p), 0);
}

Test(events, each_operation)
{
    uint64_t a0 = add("p", "a0");
    drain();
    cr_assert_eq(nlines, 2);
    cr_assert_str_eq(lines[0], "registered csi-node/p");
    cr_assert_str_eq(lines[1], "registered csi-node/p/a0");

    ready(a0, "/run/a0.sock");
    drain();
    cr_assert_eq(nlines, 5);
    cr_assert_str_eq(lines[0], "socket csi-node/p/a0 target=/run/a0.sock");
    cr_assert_str_eq(lines[1], "health csi-node/p/a0 state=unknown ready=0 reason=not yet probed");
    cr_assert_str_eq(lines[2], "fingerprint csi-node/p/a0 provider=csi.example "
                               "version=1.2\\x20beta nodeid=n1");
    cr_assert_str_eq(lines[3], "health csi-node/p/a0 state=healthy ready=1 reason=ok");
    cr_assert_str_eq(lines[4], "current csi-node/p alloc=a0");

    uint64_t a1 = add("p", "a1");
    ready(a1, "/run/a1.sock");
    drain();
    cr_assert_str_eq(lines[nlines - 1], "current csi-node/p alloc=a1");

    cr_assert_eq(reg_attr_store(reg, a1, REG_A_MOUNT_POINT, "/mnt\n", 5), 0);
    drain();
    cr_assert_eq(nlines, 1);
    cr_assert_str_eq(lines[0], "attr csi-node/p/a1 name=mount_point");

    /* rmdir of the current: deregistered then current */
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "a1"), 0);
    drain();
    cr_assert_eq(nlines, 2);
    cr_assert_str_eq(lines[0], "deregistered csi-node/p/a1");
    cr_assert_str_eq(lines[1], "current csi-node/p alloc=a0");
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "a0"), 0);
    drain();
    cr_assert_str_eq(lines[1], "current csi-node/p alloc=none");

    cr_assert_eq(reg_plugin_remove(reg, REG_NODE, "p"), 0);
    drain();
    cr_assert_eq(nlines, 1);
    cr_assert_str_eq(lines[0], "deregistered csi-node/p");

    /* refused operations append nothing */
    cr_assert_eq(reg_plugin_remove(reg, REG_NODE, "p"), -ENOENT);
    cr_assert_eq(reg_plugin_create(reg, REG_NODE, "bad name"), -EINVAL);
    drain();
    cr_assert_eq(nlines, 0);
}

Test(events, socket_cleared_and_repeat_reason)
{
    uint64_t a = add("p", "a");
    cr_assert_eq(reg_socket_set(reg, a, "/s"), 0);
    struct reg_node n;
    reg_get(reg, a, &n);
    struct reg_probe p = { .gen = n.gen, .outcome = REG_PROBE_ERROR, .reason = "connect: x" };
    cr_assert_eq(reg_probe_result(reg, a, &p), 0);
    cr_assert_eq(reg_probe_result(reg, a, &p), 0); /* same state: no second event */
    cr_assert_eq(reg_socket_set(reg, a, NULL), 0);
    drain();
    cr_assert_eq(nlines, 7, "%d", nlines);
    cr_assert_str_eq(lines[4], "health csi-node/p/a state=unknown ready=0 reason=connect: x");
    cr_assert_str_eq(lines[5], "socket csi-node/p/a target=");
    cr_assert_str_eq(lines[6], "health csi-node/p/a state=unknown ready=0 reason=no socket set");
}

Test(events, reason_escaping_round_trips)
{
    uint64_t a = add("p", "a");
    cr_assert_eq(reg_socket_set(reg, a, "/s"), 0);
    const char *why = "INTERNAL: a b\tc\nd \\e";
    struct reg_node n;
    reg_get(reg, a, &n);
    struct reg_probe p = { .gen = n.gen, .outcome = REG_PROBE_ERROR, .reason = why };
    cr_assert_eq(reg_probe_result(reg, a, &p), 0);
    drain();
    char *r = strstr(lines[nlines - 1], " reason=");
    cr_assert(r);
    r += strlen(" reason=");
    cr_assert_str_eq(r, "INTERNAL: a b\\tc\\nd \\\\e");
    ev_unescape(r);
    cr_assert_str_eq(r, why);
}

Test(events, overtaken_reader_gets_lost)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, 4, 1), 0);
    struct ev_cursor c;
    ev_cursor_init(r, &c);
    for (int k = 0; k < 10; k++)
        cr_assert_eq(ev_append(r, "registered", "csi-node/p", NULL, NULL), k + 1);
    ev_publish(r, 1, 11);
    char buf[4096];
    size_t n = ev_read(r, &c, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    cr_assert(!strncmp(buf, "lost 6\n7 ", 9), "%s", buf);
    cr_assert(strstr(buf, "\n10 "), "%s", buf);
    cr_assert_eq(ev_read(r, &c, buf, sizeof(buf)), 0);
    cr_assert_eq(ev_ready(r, &c), 0);
    cr_assert_eq(ev_wait(r, &c, 10), 0);
    /* a reader with a tiny buffer reads the same bytes, split across calls */
    ev_append(r, "current", "csi-node/p", (struct ev_kv[]){ { "alloc", "a" }, { 0, 0 } }, NULL);
    ev_publish(r, 11, 12);
    char small[3], whole[256];
    size_t got = 0, k;
    while ((k = ev_read(r, &c, small, sizeof(small))) > 0) {
        memcpy(whole + got, small, k);
        got += k;
    }
    whole[got] = '\0';
    cr_assert(strstr(whole, "current csi-node/p alloc=a\n"), "%s", whole);
    ev_ring_free(r);
}

Test(events, ring_sizes)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, 0, 1), -EINVAL);
    cr_assert_eq(ev_ring_new(&r, 1, 1), 0);
    struct ev_cursor c;
    ev_cursor_init(r, &c);
    ev_append(r, "a", "x", NULL, NULL);
    ev_append(r, "b", "x", NULL, NULL);
    ev_publish(r, 1, 3);
    char buf[256];
    size_t n = ev_read(r, &c, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    cr_assert(!strncmp(buf, "lost 1\n2 ", 9), "%s", buf);
    ev_ring_free(r);
}

/* A ring of 4 lines and a cursor at its start. */
static struct ev_ring *ring4(struct ev_cursor *c)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, 4, 1), 0);
    ev_cursor_init(r, c);
    return r;
}

/* Whatever a caller hands the formatter, an event is one line: control
 * bytes in the path, key values and reason are escaped and come back. */
Test(events, control_bytes_stay_on_one_line)
{
    struct ev_cursor c;
    struct ev_ring *r = ring4(&c);
    const char *path = "csi-node/p\n2 x/a", *val = "/s\nk\r\x01\x7f\\", *why = "a\rb\nc";
    ev_append(r, "socket", path, (struct ev_kv[]){ { "target", val }, { 0, 0 } }, why);
    /* a value too long for the line is cut where it began, nothing after it */
    static char big[3000];
    memset(big, '\n', sizeof(big) - 1);
    ev_append(r, "socket", "csi-node/p/a", (struct ev_kv[]){ { "target", big }, { 0, 0 } }, NULL);
    ev_publish(r, 1, 3);
    char buf[8192];
    size_t n = ev_read(r, &c, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    cr_assert(nl);
    *nl = '\0';
    char *two = nl + 1;
    for (const char *p = buf; *p; p++)
        cr_assert((unsigned char)*p >= 0x20 && *p != 0x7f, "control byte in '%s'", buf);
    cr_assert(strstr(buf, " socket csi-node/p\\n2\\x20x/a target=/s\\nk\\x0d\\x01\\x7f\\\\ "
                          "reason=a\\x0db\\nc"), "%s", buf);
    char *v = strstr(buf, "target=") + strlen("target="), *sp = strchr(v, ' ');
    *sp = '\0';
    ev_unescape(v);
    cr_assert_str_eq(v, val);
    ev_unescape(sp + 1 + strlen("reason="));
    cr_assert_str_eq(sp + 1 + strlen("reason="), why);
    cr_assert_eq(strchr(two, '\n'), two + strlen(two) - 1, "%s", two);
    cr_assert(strstr(two, " socket csi-node/p/a target=...\n"), "%s", two);
    ev_ring_free(r);
}

/* Lines around the length limit: one line each, never over 2046 + newline. */
Test(events, long_lines_are_cut_in_bounds)
{
    struct ev_cursor c;
    struct ev_ring *r = ring4(&c);
    static char val[2100], buf[4096];
    for (size_t k = 1950; k < sizeof(val); k++) {
        memset(val, 'v', k);
        val[k] = '\0';
        struct ev_kv kv[] = { { "target", val }, { 0, 0 } };
        int64_t seq = ev_append(r, "socket", "csi-node/p/a", kv, NULL);
        cr_assert_gt(seq, 0);
        ev_publish(r, (uint64_t)seq, (uint64_t)seq + 1);
        size_t n = ev_read(r, &c, buf, sizeof(buf) - 1);
        buf[n] = '\0';
        cr_assert(n > 0 && n <= 2047 && buf[n - 1] == '\n' && !memchr(buf, '\n', n - 1),
                  "value %zu: line of %zu bytes", k, n);
        cr_assert(strstr(buf, val) || strstr(buf, " target=...\n"), "value %zu: %s", k, buf);
    }
    ev_ring_free(r);
}
