/* Event formatting and escaping (registry/events.c): an event made of
 * fuzzed values and reason is appended, read back through a cursor and
 * parsed as DESIGN section 4 writes it; each value and the reason must
 * come back as they went in, on one line, and seq must increase.
 * Input: up to four NUL-separated strings: value 1, value 2, reason, path
 * (default csi-node/p/a). The line must hold no control byte but its
 * final newline. Also ev_escape/ev_unescape round trips on the first string.
 * Odd seqs are read through ev_read_iov, even ones through ev_read. */
#include "tests/fuzz/fuzz.h"
#include "registry/events.h"

#define LINE 4096

static struct ev_ring *ring;
static uint64_t last_seq;

/* Cut the field at *p up to the next space and unescape it. */
static char *field(char **p)
{
    char *v = *p, *sp = strchr(v, ' ');
    if (sp)
        *sp = '\0';
    *p = sp ? sp + 1 : v + strlen(v);
    ev_unescape(v);
    return v;
}

/* No byte below 0x20 nor 0x7f in s[0..n). */
static int has_control(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 1;
    return 0;
}

/* Cut the value of key=<escaped> at *p (up to the next space) and unescape. */
static char *value(char **p, const char *key)
{
    size_t k = strlen(key);
    if (strncmp(*p, key, k) || (*p)[k] != '=')
        fuzz_fail("expected %s= at '%.40s'", key, *p);
    char *v = *p + k + 1, *sp = strchr(v, ' ');
    if (sp)
        *sp = '\0';
    *p = sp ? sp + 1 : v + strlen(v);
    ev_unescape(v);
    return v;
}

static void check_escape(const char *s)
{
    static char esc[4 * 2048 + 8];
    for (int space = 0; space < 2; space++) {
        size_t n = ev_escape(s, esc, sizeof(esc), space);
        if (n != strlen(esc))
            fuzz_fail("ev_escape length %zu, string %zu", n, strlen(esc));
        if (has_control(esc, n) || (space && strchr(esc, ' ')))
            fuzz_fail("ev_escape left a separator in '%s'", esc);
        if (strlen(s) <= 2048 && strcmp((ev_unescape(esc), esc), s))
            fuzz_fail("ev_unescape(ev_escape(s)) != s");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ring && ev_ring_new(&ring, 4, 1) < 0)
        fuzz_fail("ev_ring_new");
    char *v[4] = { "", "", NULL, "csi-node/p/a" };
    int n = fuzz_split(data, size, v, 4);
    char *block = n ? v[0] : NULL;
    check_escape(v[0]);
    struct ev_kv kv[] = { { "target", v[0] }, { "name", n > 1 ? v[1] : "" }, { NULL, NULL } };
    const char *reason = n > 2 ? v[2] : NULL;
    struct ev_cursor c;
    ev_cursor_init(ring, &c);
    c.next = ev_next_seq(ring);
    int64_t seq = ev_append(ring, "attr", v[3], kv, reason);
    if (seq <= 0 || (uint64_t)seq <= last_seq)
        fuzz_fail("seq %lld after %llu", (long long)seq, (unsigned long long)last_seq);
    last_seq = (uint64_t)seq;
    ev_publish(ring, (uint64_t)seq, (uint64_t)seq + 1);   /* readable from now */
    static char line[LINE];
    size_t len = 0, k;
    if (seq % 2) {                  /* odd seqs: through the zero-copy read */
        struct iovec iov[EV_READ_IOV];
        struct ev_pin pin;
        int niov;
        while ((k = ev_read_iov(ring, &c, sizeof(line) - 1 - len, iov, &niov, &pin)) > 0) {
            len += ev_iov_copy(line + len, iov, niov);
            ev_read_done(ring, &pin);
        }
    } else {
        while ((k = ev_read(ring, &c, line + len, sizeof(line) - 1 - len)) > 0)
            len += k;
    }
    line[len] = '\0';
    if (len == 0 || line[len - 1] != '\n' || has_control(line, len - 1))
        fuzz_fail("not one line: '%s'", line);
    line[len - 1] = '\0';
    unsigned long long s;
    int off = 0;
    if (sscanf(line, "%llu %*s attr%n", &s, &off) != 1 || !off || line[off++] != ' ' ||
        s != (uint64_t)seq)
        fuzz_fail("bad head or seq: '%s'", line);
    if (len >= 4 && strcmp(line + len - 4, "...") == 0)
        goto out;                   /* cut: a long line ends in "..." */
    char *p = line + off;
    const char *path = field(&p);
    if (strcmp(path, v[3]))
        fuzz_fail("path changed on the way: '%s'", path);
    const char *got0 = value(&p, "target"), *got1 = value(&p, "name");
    if (strcmp(got0, v[0]) || strcmp(got1, n > 1 ? v[1] : ""))
        fuzz_fail("values changed on the way: '%s' '%s'", got0, got1);
    if (reason) {
        if (strncmp(p, "reason=", 7))
            fuzz_fail("no reason= at '%.40s'", p);
        p += 7;
        ev_unescape(p);
        if (strcmp(p, reason))
            fuzz_fail("reason changed on the way: '%s'", p);
    } else if (*p) {
        fuzz_fail("trailing '%s'", p);
    }
out:
    free(block);
    return 0;
}
