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
    reg_lookup_plugin(reg, REG_NODE, p, &pn);
    reg_lookup_instance(reg, pn.seq, a, &in);
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

/* ---- the byte ring: wrap-around, growth, overtaken readers, split reads ---- */

#define RING_CAP 8
#define RING_LINES 200

/* Every line appended so far, as a follower read it right after its append. */
static char *seen[RING_LINES];
static size_t nseen;

/* Append an event whose target value is len bytes of 'v' (0: no value),
 * publish it and record its line through the follower cursor f. */
static void append_len(struct ev_ring *r, struct ev_cursor *f, size_t len)
{
    static char val[3000];
    memset(val, 'v', len);
    val[len] = '\0';
    struct ev_kv kv[] = { { "target", val }, { 0, 0 } };
    int64_t seq = ev_append(r, "socket", "csi-node/p/a", len ? kv : NULL, NULL);
    cr_assert_gt(seq, 0);
    ev_publish(r, (uint64_t)seq, (uint64_t)seq + 1);
    char buf[4096];
    size_t n = ev_read(r, f, buf, sizeof(buf));
    cr_assert(n > 0 && n <= 2047 && buf[n - 1] == '\n' && !memchr(buf, '\n', n - 1),
              "line %zu: %zu bytes", nseen, n);
    cr_assert_lt(nseen, RING_LINES);
    seen[nseen] = strndup(buf, n);
    cr_assert_eq(strtoull(buf, NULL, 10), (unsigned long long)seq);
    nseen++;
}

static void forget_seen(void)
{
    for (size_t k = 0; k < nseen; k++)
        free(seen[k]);
    nseen = 0;
}

/* What a cursor reads until caught up, in reads of at most step bytes. */
static size_t read_steps(struct ev_ring *r, struct ev_cursor *c, char *out, size_t cap,
                         size_t step)
{
    size_t n = 0, k;
    while (n < cap && (k = ev_read(r, c, out + n, step < cap - n ? step : cap - n)) > 0)
        n += k;
    return n;
}

/* A new reader replays exactly the last min(nseen, RING_CAP) lines, as written. */
static void check_retained(struct ev_ring *r)
{
    static char want[RING_CAP * 2048], got[RING_CAP * 2048 + 1];
    size_t w = 0;
    for (size_t k = nseen > RING_CAP ? nseen - RING_CAP : 0; k < nseen; k++) {
        memcpy(want + w, seen[k], strlen(seen[k]));
        w += strlen(seen[k]);
    }
    struct ev_cursor c;
    ev_cursor_init(r, &c);
    size_t n = read_steps(r, &c, got, sizeof(got), sizeof(got));
    cr_assert_eq(n, w, "after %zu lines: %zu bytes replayed, not %zu", nseen, n, w);
    cr_assert(!memcmp(got, want, w), "after %zu lines: the replay differs", nseen);
}

/* Short lines wrap the byte buffer (1 KiB for 8 lines) many times over. */
Test(events, byte_ring_wraps_around)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, RING_CAP, 1), 0);
    struct ev_cursor f;
    ev_cursor_init(r, &f);
    for (int k = 0; k < RING_LINES; k++) {
        append_len(r, &f, (size_t)(k * 7 % 40));
        check_retained(r);
    }
    forget_seen();
    ev_ring_free(r);
}

/* Lines of every length up to the cut, long ones in a row: the buffer grows
 * and the ring still keeps exactly RING_CAP lines, none dropped for bytes. */
Test(events, byte_ring_grows_keeping_cap_lines)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, RING_CAP, 1), 0);
    struct ev_cursor f;
    ev_cursor_init(r, &f);
    for (int k = 0; k < RING_LINES; k++) {
        size_t len = k < 40 ? (size_t)k * 10 : k < 60 ? 2500 : (size_t)(k * 613 % 2100);
        append_len(r, &f, len);
        check_retained(r);
    }
    forget_seen();
    ev_ring_free(r);
}

/* A reader in the middle of a line when the ring overtakes it: that line
 * is cut ("...\n"), then "lost N" (N counting it), then the oldest line. */
Test(events, reader_overtaken_mid_line)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, 4, 1), 0);
    struct ev_cursor f, c;
    ev_cursor_init(r, &f);
    ev_cursor_init(r, &c);
    for (int k = 0; k < 4; k++)
        append_len(r, &f, 30);
    char head[10], buf[4096];
    cr_assert_eq(ev_read(r, &c, head, sizeof(head)), sizeof(head));
    cr_assert(!memcmp(head, seen[0], sizeof(head)));
    for (int k = 0; k < 5; k++)          /* lines 1..5 leave the ring */
        append_len(r, &f, 30);
    size_t n = read_steps(r, &c, buf, sizeof(buf) - 1, sizeof(buf));
    buf[n] = '\0';
    char want[4096];
    int w = snprintf(want, sizeof(want), "...\nlost 5\n%s%s%s%s", seen[5], seen[6], seen[7],
                     seen[8]);
    cr_assert_str_eq(buf, want);
    cr_assert_eq(n, (size_t)w);
    /* overtaken again while in the middle of its "lost N" line: the rest
     * of it, then a second "lost N" for the lines since */
    struct ev_cursor c2;
    ev_cursor_init(r, &c2);
    c2.next = 1;                         /* as a reader that read nothing yet */
    cr_assert_eq(ev_read(r, &c2, head, 3), 3);
    cr_assert(!memcmp(head, "los", 3));
    for (int k = 0; k < 6; k++)
        append_len(r, &f, 30);
    n = read_steps(r, &c2, buf, sizeof(buf) - 1, 7);
    buf[n] = '\0';
    snprintf(want, sizeof(want), "t 5\nlost 6\n%s%s%s%s", seen[11], seen[12], seen[13],
             seen[14]);
    cr_assert_str_eq(buf, want);
    forget_seen();
    ev_ring_free(r);
}

/* ev_read_iov's bytes, copied out; the pin released. */
static size_t read_iov_copy(struct ev_ring *r, struct ev_cursor *c, char *out, size_t cap)
{
    struct iovec iov[EV_READ_IOV];
    struct ev_pin pin;
    int niov;
    size_t n = ev_read_iov(r, c, cap, iov, &niov, &pin), k = 0;
    for (int i = 0; i < niov; i++) {
        memcpy(out + k, iov[i].iov_base, iov[i].iov_len);
        k += iov[i].iov_len;
    }
    cr_assert_eq(k, n);
    ev_read_done(r, &pin);
    return n;
}

/* A replay (a "lost N" first, lines wrapping the byte buffer) read in two
 * reads split at every byte, and in reads of every size up to 64 bytes,
 * by ev_read and by ev_read_iov, gives the same bytes as one big read. */
Test(events, reads_split_anywhere_give_the_same_bytes)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, RING_CAP, 1), 0);
    struct ev_cursor f, start;
    ev_cursor_init(r, &f);
    ev_cursor_init(r, &start);
    for (int k = 0; k < 37; k++)
        append_len(r, &f, (size_t)(k * 11 % 90));
    static char whole[RING_CAP * 2048], got[RING_CAP * 2048];
    struct ev_cursor c = start;
    size_t len = read_steps(r, &c, whole, sizeof(whole), sizeof(whole));
    cr_assert(len > 100 && !strncmp(whole, "lost 29\n", 8), "%.*s", (int)len, whole);
    for (size_t k = 1; k < len; k++) {
        c = start;
        size_t a = ev_read(r, &c, got, k);
        cr_assert_eq(a, k);
        size_t b = read_steps(r, &c, got + a, sizeof(got) - a, sizeof(got));
        cr_assert_eq(a + b, len, "split at %zu", k);
        cr_assert(!memcmp(got, whole, len), "split at %zu", k);
    }
    for (size_t step = 1; step <= 64; step++) {
        c = start;
        cr_assert_eq(read_steps(r, &c, got, sizeof(got), step), len, "step %zu", step);
        cr_assert(!memcmp(got, whole, len), "step %zu", step);
        c = start;
        size_t n = 0, k;
        while ((k = read_iov_copy(r, &c, got + n, step)) > 0)
            n += k;
        cr_assert_eq(n, len, "iov step %zu", step);
        cr_assert(!memcmp(got, whole, len), "iov step %zu", step);
    }
    for (size_t k = 1; k < len; k++) {
        c = start;
        size_t a = read_iov_copy(r, &c, got, k);
        size_t b = read_iov_copy(r, &c, got + a, sizeof(got) - a);
        cr_assert_eq(a + b, len, "iov split at %zu", k);
        cr_assert(!memcmp(got, whole, len), "iov split at %zu", k);
    }
    forget_seen();
    ev_ring_free(r);
}

/* The bytes ev_read_iov hands out stay as they were while pinned, though
 * appends wrap over them and grow the buffer (twice, two pins held on two
 * buffers, released in either order); appending never waits for them. */
Test(events, pinned_spans_outlive_wraps_and_growth)
{
    for (int order = 0; order < 2; order++) {
        struct ev_ring *r;
        cr_assert_eq(ev_ring_new(&r, RING_CAP, 1), 0);
        struct ev_cursor f, c1, c2;
        ev_cursor_init(r, &f);
        ev_cursor_init(r, &c1);
        for (int k = 0; k < RING_CAP; k++)
            append_len(r, &f, 40);
        struct iovec v1[EV_READ_IOV], v2[EV_READ_IOV];
        struct ev_pin p1, p2;
        int n1, n2;
        static char snap1[4096], snap2[RING_CAP * 2048];
        size_t len1 = ev_read_iov(r, &c1, sizeof(snap1), v1, &n1, &p1), k = 0;
        for (int i = 0; i < n1; i++, k += v1[i - 1].iov_len)
            memcpy(snap1 + k, v1[i].iov_base, v1[i].iov_len);
        cr_assert(len1 > 0 && k == len1);
        for (int j = 0; j < 3 * RING_CAP; j++)   /* over p1's bytes: a new buffer */
            append_len(r, &f, 40);
        ev_cursor_init(r, &c2);
        size_t len2 = ev_read_iov(r, &c2, sizeof(snap2), v2, &n2, &p2);
        k = 0;
        for (int i = 0; i < n2; i++, k += v2[i - 1].iov_len)
            memcpy(snap2 + k, v2[i].iov_base, v2[i].iov_len);
        for (int j = 0; j < 3 * RING_CAP; j++)   /* long lines: the buffer grows */
            append_len(r, &f, 1500);
        check_retained(r);
        for (int pass = 0; pass < 2; pass++) {    /* the one left too, after a release */
            k = 0;
            for (int i = 0; i < n1 && (pass == 0 || order); i++, k += v1[i - 1].iov_len)
                cr_assert(!memcmp(snap1 + k, v1[i].iov_base, v1[i].iov_len), "pin 1 changed");
            k = 0;
            for (int i = 0; i < n2 && (pass == 0 || !order); i++, k += v2[i - 1].iov_len)
                cr_assert(!memcmp(snap2 + k, v2[i].iov_base, v2[i].iov_len), "pin 2 changed");
            cr_assert(pass || k == len2);
            ev_read_done(r, (order ^ pass) ? &p2 : &p1);
        }
        ev_read_done(r, &p1);                     /* twice: nothing */
        check_retained(r);
        forget_seen();
        ev_ring_free(r);
    }
}
