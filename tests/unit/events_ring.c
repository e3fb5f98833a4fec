/* The events ring's byte buffer (registry/events.c): wrap-around, growth
 * with long lines keeping exactly cap lines, readers overtaken mid-line,
 * reads split anywhere, spans pinned by ev_read_iov (alone and against a
 * writer thread). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/events.h"

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

/* RING_LINES appends to a fresh ring, line k's value len_of(k) bytes, the
 * replay checked after each. */
static void append_checking(size_t (*len_of)(int k))
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, RING_CAP, 1), 0);
    struct ev_cursor f;
    ev_cursor_init(r, &f);
    for (int k = 0; k < RING_LINES; k++) {
        append_len(r, &f, len_of(k));
        check_retained(r);
    }
    forget_seen();
    ev_ring_free(r);
}

static size_t short_len(int k)
{
    return (size_t)(k * 7 % 40);
}

/* Short lines wrap the byte buffer (1 KiB for 8 lines) many times over. */
Test(events_ring, byte_ring_wraps_around)
{
    append_checking(short_len);
}

static size_t growing_len(int k)
{
    return k < 40 ? (size_t)k * 10 : k < 60 ? 2500 : (size_t)(k * 613 % 2100);
}

/* Lines of every length up to the cut, long ones in a row: the buffer grows
 * and the ring still keeps exactly RING_CAP lines, none dropped for bytes. */
Test(events_ring, byte_ring_grows_keeping_cap_lines)
{
    append_checking(growing_len);
}

/* A reader in the middle of a line when the ring overtakes it: that line
 * is cut ("...\n"), then "lost N" (N counting it), then the oldest line. */
Test(events_ring, reader_overtaken_mid_line)
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
    size_t n = ev_read_iov(r, c, cap, iov, &niov, &pin);
    cr_assert_eq(ev_iov_copy(out, iov, niov), n);
    ev_read_done(r, &pin);
    return n;
}

/* A replay (a "lost N" first, lines wrapping the byte buffer) read in two
 * reads split at every byte, and in reads of every size up to 64 bytes,
 * by ev_read and by ev_read_iov, gives the same bytes as one big read. */
Test(events_ring, reads_split_anywhere_give_the_same_bytes)
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
Test(events_ring, pinned_spans_outlive_wraps_and_growth)
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
        size_t len1 = ev_read_iov(r, &c1, sizeof(snap1), v1, &n1, &p1), k;
        cr_assert(len1 > 0 && ev_iov_copy(snap1, v1, n1) == len1);
        for (int j = 0; j < 3 * RING_CAP; j++)   /* over p1's bytes: a new buffer */
            append_len(r, &f, 40);
        ev_cursor_init(r, &c2);
        size_t len2 = ev_read_iov(r, &c2, sizeof(snap2), v2, &n2, &p2);
        ev_iov_copy(snap2, v2, n2);
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

/* ---- a reader of pinned spans against a writer appending at full speed ---- */

#define RACE_EVENTS 20000

static size_t race_len(uint64_t seq)
{
    return (size_t)(seq * 37 % 1900);    /* none cut for length: "..." is an overtaking */
}

static void *race_writer(void *arg)
{
    struct ev_ring *r = arg;
    static char val[2200];
    for (uint64_t k = 0; k < RACE_EVENTS; k++) {
        size_t len = race_len(k + 1);
        memset(val, 'v', len);
        val[len] = '\0';
        struct ev_kv kv[] = { { "target", val }, { 0, 0 } };
        int64_t seq = ev_append(r, "socket", "csi-node/p/a", kv, NULL);
        if (seq != (int64_t)k + 1)
            return (void *)1;
        ev_publish(r, (uint64_t)seq, (uint64_t)seq + 1);
    }
    return NULL;
}

/* Check one line read; *seq: the seq of the line last started, *whole:
 * whether it was read whole (a line cut by an overtaking ends in "..."). */
static void race_line(char *l, uint64_t *seq, bool *whole)
{
    unsigned long long s, lost;
    if (sscanf(l, "lost %llu", &lost) == 1) {
        *seq = *seq + (*whole ? 1 : 0) + lost - 1;   /* the line before the next */
        *whole = true;
        return;
    }
    size_t n = strlen(l);
    *whole = !(n >= 3 && !strcmp(l + n - 3, "..."));
    if (!*whole) {                      /* cut anywhere, even in its seq */
        char want[24];
        snprintf(want, sizeof(want), "%llu ", (unsigned long long)*seq + 1);
        size_t k = strspn(l, "0123456789 ");
        cr_assert(k < n && !strncmp(l, want, k < strlen(want) ? k : strlen(want)),
                  "cut line '%.80s' after %llu", l, (unsigned long long)*seq);
        ++*seq;
        return;
    }
    cr_assert_eq(sscanf(l, "%llu ", &s), 1, "'%.80s'", l);
    cr_assert_eq(s, *seq + 1, "seq %llu after %llu", s, (unsigned long long)*seq);
    *seq = s;
    {
        const char *v = strstr(l, " target=");
        cr_assert(v, "'%.80s'", l);
        cr_assert_eq(strlen(v + 8), race_len(s), "line %llu: value of %zu bytes", s,
                     strlen(v + 8));
    }
}

/* Every line comes whole and in order, or cut and followed by `lost N`
 * that accounts for the seqs skipped; pins held across the writer's
 * overwrites and growth keep their bytes; the writer never waits. */
Test(events_ring, pinned_reader_races_a_writer)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, 64, 1), 0);
    struct ev_cursor c;
    ev_cursor_init(r, &c);
    pthread_t w;
    cr_assert_eq(pthread_create(&w, NULL, race_writer, r), 0);
    static char acc[1 << 16];
    size_t have = 0, step = 1;
    uint64_t seq = 0;
    bool whole = true;
    while (seq < RACE_EVENTS) {
        struct iovec iov[EV_READ_IOV];
        struct ev_pin pin;
        int niov;
        step = step % 5000 + 97;
        size_t n = ev_read_iov(r, &c, step < sizeof(acc) - have ? step : sizeof(acc) - have,
                               iov, &niov, &pin);
        if (n == 0) {
            ev_wait(r, &c, 100);
            continue;
        }
        sched_yield();                           /* let the writer run over the pin */
        have += ev_iov_copy(acc + have, iov, niov);
        ev_read_done(r, &pin);
        char *l = acc, *nl;
        while ((nl = memchr(l, '\n', have - (size_t)(l - acc)))) {
            *nl = '\0';
            race_line(l, &seq, &whole);
            l = nl + 1;
        }
        have -= (size_t)(l - acc);
        memmove(acc, l, have);
    }
    void *rc;
    pthread_join(w, &rc);
    cr_assert_null(rc, "the writer saw a seq out of order");
    cr_assert_eq(seq, RACE_EVENTS);
    ev_ring_free(r);
}
