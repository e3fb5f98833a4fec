#include "registry/events.h"
#include "base/counters.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#define EV_LINE_MAX 2048  /* longer lines are cut, ending in "...\n" */

/* The retained lines' bytes, one after the other: byte position p (counted
 * from the ring's start, never reused) lives at buf[p % size]. Line seq
 * (first <= seq < next) spans [start(seq), end[seq % cap]), start(first) =
 * tail and start(seq) = end of seq - 1 otherwise; head = start(next). buf
 * is replaced by one twice as large (or more) when the retained lines and a
 * new one do not fit, and by a copy of the same size when the new one would
 * overwrite bytes that an ev_read_iov still pins (the old one is freed at
 * its last ev_read_done): lines leave only by count. */
struct ev_ring {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t cap;
    uint64_t first;      /* seq of the oldest retained line */
    uint64_t next;       /* seq of the next line */
    uint64_t pub;        /* lines below it are published (readable) */
    long watchers;       /* ev_watch */
    uint64_t *end;       /* end[seq % cap]: byte position past line seq */
    uint64_t tail, head; /* byte positions of line first and of line next */
    char *buf;
    size_t size;
    struct ev_pin *pins;       /* ev_read_iov's spans in use (in buf or retired) */
    struct retired *retired;   /* buffers left by make_room while pinned */
};

struct retired {
    char *buf;
    struct retired *next;
};

#define EV_BUF_START 65536   /* bytes; or cap * 128 when that is less */

int ev_ring_new(struct ev_ring **out, size_t cap, uint64_t first_seq)
{
    if (cap == 0 || first_seq == 0 || cap > SIZE_MAX / sizeof(uint64_t) / EV_LINE_MAX)
        return -EINVAL;
    struct ev_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    r->cap = cap;
    r->first = r->next = r->pub = first_seq;
    r->size = cap < EV_BUF_START / 128 ? cap * 128 : EV_BUF_START;
    r->end = calloc(cap, sizeof(*r->end));
    r->buf = malloc(r->size);
    if (!r->end || !r->buf) {
        ev_ring_free(r);
        return -ENOMEM;
    }
    *out = r;
    return 0;
}

void ev_ring_free(struct ev_ring *r)
{
    if (!r)
        return;
    free(r->end);
    free(r->buf);
    while (r->retired) {            /* only if a pin was never released */
        struct retired *o = r->retired;
        r->retired = o->next;
        free(o->buf);
        free(o);
    }
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* Copy n bytes to byte position p of a ring buffer of size bytes (in at
 * most two pieces). */
static void bytes_put(char *buf, size_t size, uint64_t p, const char *src, size_t n)
{
    size_t at = (size_t)(p % size), k = n < size - at ? n : size - at;
    memcpy(buf + at, src, k);
    memcpy(buf, src + k, n - k);
}

/* Byte position of line seq, first <= seq <= next. */
static uint64_t line_start(const struct ev_ring *r, uint64_t seq)
{
    return seq == r->first ? r->tail : r->end[(seq - 1) % r->cap];
}

static bool pinned(const struct ev_ring *r, const char *buf)
{
    for (const struct ev_pin *p = r->pins; p; p = p->next)
        if (p->buf == buf)
            return true;
    return false;
}

/* Make room for n more bytes at head, keeping [tail, head) and every pinned
 * byte of buf. When they do not fit, a new buffer: doubled as often as the
 * retained lines and the new one need (pins never make it larger: the one
 * they pin is retired, not overwritten, and freed at their last release).
 * -ENOMEM changes nothing. */
static int make_room(struct ev_ring *r, uint64_t tail, size_t n)
{
    uint64_t low = tail;
    for (const struct ev_pin *p = r->pins; p; p = p->next)
        if (p->buf == r->buf && p->from < low)
            low = p->from;
    if ((size_t)(r->head - low) + n <= r->size)
        return 0;
    size_t keep = (size_t)(r->head - tail) + n, size = r->size;
    while (size < keep)
        size *= 2;
    bool keep_old = pinned(r, r->buf);
    char *nb = malloc(size);
    struct retired *old = keep_old ? malloc(sizeof(*old)) : NULL;
    if (!nb || (keep_old && !old)) {
        free(nb);
        return -ENOMEM;
    }
    for (uint64_t p = tail; p < r->head;) {
        size_t at = (size_t)(p % r->size);
        size_t k = r->head - p < r->size - at ? (size_t)(r->head - p) : r->size - at;
        bytes_put(nb, size, p, r->buf + at, k);
        p += k;
    }
    if (old) {
        *old = (struct retired){ .buf = r->buf, .next = r->retired };
        r->retired = old;
    } else {
        free(r->buf);
    }
    r->buf = nb;
    r->size = size;
    return 0;
}

/* The escape of byte c ("" when it stands for itself) into e[5]. */
static const char *esc_of(unsigned char c, int space, char e[5])
{
    static const char *const named[] = { ['\\'] = "\\\\", ['\t'] = "\\t", ['\n'] = "\\n" };
    if (c < sizeof(named) / sizeof(named[0]) && named[c])
        return named[c];
    if (c < 0x20 || c == 0x7f || (c == ' ' && space)) {
        snprintf(e, 5, "\\x%02x", c);
        return e;
    }
    return "";
}

size_t ev_escape(const char *s, char *out, size_t cap, int space)
{
    size_t n = 0;
    if (cap == 0)
        return 0;
    for (; s && *s; s++) {
        char tmp[5];
        const char *e = esc_of((unsigned char)*s, space, tmp);
        size_t k = *e ? strlen(e) : 1;
        if (n + k >= cap)
            break;
        if (*e)
            memcpy(out + n, e, k);
        else
            out[n] = *s;
        n += k;
    }
    out[n] = '\0';
    return n;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

size_t ev_unescape(char *s)
{
    char *w = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\' || !p[1]) {
            *w++ = *p;
            continue;
        }
        p++;
        int hi = *p == 'x' ? hexval(p[1]) : -1, lo = hi >= 0 ? hexval(p[2]) : -1;
        if (*p == 't')
            *w++ = '\t';
        else if (*p == 'n')
            *w++ = '\n';
        else if (lo >= 0 && (hi | lo)) {   /* \xNN, never NUL */
            *w++ = (char)(hi << 4 | lo);
            p += 2;
        } else
            *w++ = *p;
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* Append src to buf (cap) at *n; returns 0, or -1 when it did not fit. */
static int put(char *buf, size_t cap, size_t *n, const char *src)
{
    size_t k = strlen(src);
    if (*n + k >= cap)
        return -1;
    memcpy(buf + *n, src, k + 1);
    *n += k;
    return 0;
}

/* put sep, then s escaped (space: ' ' too); 0, or -1 when it did not fit. */
static int put_esc(char *buf, size_t cap, size_t *n, const char *sep, const char *s, int space)
{
    char esc[EV_LINE_MAX];     /* an escape cut to fit it cannot fit the line either */
    ev_escape(s, esc, sizeof(esc), space);
    return put(buf, cap, n, sep) || put(buf, cap, n, esc);
}

static size_t format_line(char *buf, size_t cap, uint64_t seq, const char *kind,
                          const char *path, const struct ev_kv *kv, const char *reason)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n0 = snprintf(buf, cap, "%llu %04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ",
                      (unsigned long long)seq, tm.tm_year + 1900, tm.tm_mon + 1,
                      tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                      ts.tv_nsec / 1000000);
    size_t n = (size_t)n0, room = cap - 1;  /* keeps a byte for the newline */
    int cut = put_esc(buf, room, &n, "", kind, 1) || put_esc(buf, room, &n, " ", path, 1);
    for (; !cut && kv && kv->value; kv++)
        cut = put_esc(buf, room, &n, " ", kv->key, 1) || put_esc(buf, room, &n, "=", kv->value, 1);
    if (!cut && reason)
        cut = put_esc(buf, room, &n, " reason=", reason, 0);
    if (cut) {              /* the line ends where the piece that did not fit began */
        if (n > cap - 5)
            n = cap - 5;
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n++] = '\n';
    buf[n] = '\0';
    return n;
}

int64_t ev_append(struct ev_ring *r, const char *kind, const char *path,
                  const struct ev_kv *kv, const char *reason)
{
    char buf[EV_LINE_MAX];
    pthread_mutex_lock(&r->mu);
    uint64_t seq = r->next;
    size_t n = format_line(buf, sizeof(buf), seq, kind, path, kv, reason);
    bool full = r->next - r->first == r->cap;       /* then line first leaves */
    uint64_t tail = full ? r->end[r->first % r->cap] : r->tail;
    if (make_room(r, tail, n) < 0) {
        pthread_mutex_unlock(&r->mu);
        return -ENOMEM;
    }
    bytes_put(r->buf, r->size, r->head, buf, n);
    if (full) {
        r->first++;
        r->tail = tail;
    }
    r->head += n;
    r->end[seq % r->cap] = r->head;
    r->next = seq + 1;
    cnt_add(&cnt.events, 1);
    pthread_mutex_unlock(&r->mu);
    return (int64_t)seq;
}

int ev_publish(struct ev_ring *r, uint64_t from, uint64_t to)
{
    if (from >= to)
        return 0;
    pthread_mutex_lock(&r->mu);
    while (r->pub < from)
        pthread_cond_wait(&r->cv, &r->mu);
    if (to > r->pub)
        r->pub = to;
    int w = r->watchers > 0 ? (int)r->watchers : 0;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return w;
}

void ev_watch(struct ev_ring *r, int delta)
{
    pthread_mutex_lock(&r->mu);
    r->watchers += delta;
    pthread_mutex_unlock(&r->mu);
}

uint64_t ev_published(struct ev_ring *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t s = r->pub;
    pthread_mutex_unlock(&r->mu);
    return s;
}

uint64_t ev_next_seq(struct ev_ring *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t s = r->next;
    pthread_mutex_unlock(&r->mu);
    return s;
}

void ev_cursor_init(struct ev_ring *r, struct ev_cursor *c)
{
    pthread_mutex_lock(&r->mu);
    c->next = r->first;
    c->off = 0;
    c->pend[0] = '\0';
    pthread_mutex_unlock(&r->mu);
}

/* Lines below it are retained and published. */
static uint64_t lost_below(const struct ev_ring *r)
{
    return r->first < r->pub ? r->first : r->pub;
}

static int ready_locked(const struct ev_ring *r, const struct ev_cursor *c)
{
    return c->pend[0] || c->next < r->pub;
}

/* Point c at byte position p, a published byte at or past c's line (or
 * the end of the published lines): lines start at increasing positions. */
static void cursor_seek(const struct ev_ring *r, struct ev_cursor *c, uint64_t p)
{
    uint64_t lo = c->next, hi = r->pub;      /* start(lo) <= p <= start(hi) */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        if (line_start(r, mid) <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    c->next = lo;
    c->off = (size_t)(p - line_start(r, lo));
}

/* With r->mu held: what c reads next, up to cap bytes, as spans (pieces of
 * `lost N` lines copied to pend, EV_PEND_MAX bytes at most, then one or two
 * spans of buf, the first at byte position *from); c moves past them.
 * Returns the bytes, spans in sp[*nsp]. */
#define EV_PEND_MAX 64   /* a rest of c->pend and a new one */
static size_t gather(struct ev_ring *r, struct ev_cursor *c, size_t cap, char *pend,
                     struct iovec sp[EV_READ_IOV], int *nsp, uint64_t *from)
{
    size_t n = 0;
    *nsp = 0;
    for (;;) {
        uint64_t lo = lost_below(r);
        if (!c->pend[0] && c->next < lo) {  /* overtaken: mid-line, that line is cut */
            snprintf(c->pend, sizeof(c->pend), "%slost %llu\n", c->off ? "...\n" : "",
                     (unsigned long long)(lo - c->next));
            cnt_add(&cnt.events_lost, lo - c->next);
            c->next = lo;
            c->off = 0;
        }
        if (!c->pend[0])
            break;
        size_t len = strlen(c->pend), k = len - c->off < cap - n ? len - c->off : cap - n;
        memcpy(pend + n, c->pend + c->off, k);
        n += k;
        c->off += k;
        if (c->off < len)
            break;                          /* cap reached */
        c->off = 0;
        c->pend[0] = '\0';
    }
    if (n)
        sp[(*nsp)++] = (struct iovec){ .iov_base = pend, .iov_len = n };
    if (!c->pend[0] && c->next < r->pub && n < cap) {  /* one or two spans of buf */
        uint64_t p = line_start(r, c->next) + c->off, to = line_start(r, r->pub);
        size_t k = to - p < cap - n ? (size_t)(to - p) : cap - n;
        size_t at = (size_t)(p % r->size), k1 = k < r->size - at ? k : r->size - at;
        sp[(*nsp)++] = (struct iovec){ .iov_base = r->buf + at, .iov_len = k1 };
        if (k > k1)
            sp[(*nsp)++] = (struct iovec){ .iov_base = r->buf, .iov_len = k - k1 };
        *from = p;
        n += k;
        cursor_seek(r, c, p + k);
    }
    return n;
}

size_t ev_read(struct ev_ring *r, struct ev_cursor *c, char *buf, size_t cap)
{
    char pend[EV_PEND_MAX];
    struct iovec sp[EV_READ_IOV];
    int nsp;
    uint64_t from;
    pthread_mutex_lock(&r->mu);
    size_t n = gather(r, c, cap, pend, sp, &nsp, &from);
    ev_iov_copy(buf, sp, nsp);
    pthread_mutex_unlock(&r->mu);
    return n;
}

size_t ev_iov_copy(char *dst, const struct iovec *iov, int niov)
{
    size_t k = 0;
    for (int i = 0; i < niov; k += iov[i++].iov_len)
        memcpy(dst + k, iov[i].iov_base, iov[i].iov_len);
    return k;
}

size_t ev_read_iov(struct ev_ring *r, struct ev_cursor *c, size_t cap,
                   struct iovec iov[EV_READ_IOV], int *niov, struct ev_pin *pin)
{
    _Static_assert(sizeof(pin->pend) >= EV_PEND_MAX, "ev_pin.pend");
    uint64_t from = UINT64_MAX;
    pthread_mutex_lock(&r->mu);
    size_t n = gather(r, c, cap, pin->pend, iov, niov, &from);
    pin->buf = NULL;
    if (from != UINT64_MAX) {           /* spans of buf: pinned until ev_read_done */
        pin->buf = r->buf;
        pin->from = from;
        pin->next = r->pins;
        r->pins = pin;
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

void ev_read_done(struct ev_ring *r, struct ev_pin *pin)
{
    if (!pin->buf)
        return;
    pthread_mutex_lock(&r->mu);
    for (struct ev_pin **pp = &r->pins; *pp; pp = &(*pp)->next)
        if (*pp == pin) {
            *pp = pin->next;
            break;
        }
    bool last = !pinned(r, pin->buf);   /* then a retired buffer goes */
    for (struct retired **pp = &r->retired; last && *pp; pp = &(*pp)->next)
        if ((*pp)->buf == pin->buf) {
            struct retired *o = *pp;
            *pp = o->next;
            free(o->buf);
            free(o);
            break;
        }
    pthread_mutex_unlock(&r->mu);
    pin->buf = NULL;
}

int ev_ready(struct ev_ring *r, const struct ev_cursor *c)
{
    pthread_mutex_lock(&r->mu);
    int ok = ready_locked(r, c);
    pthread_mutex_unlock(&r->mu);
    return ok;
}

int ev_wait(struct ev_ring *r, const struct ev_cursor *c, int timeout_ms)
{
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    if (timeout_ms >= 0) {
        end.tv_sec += timeout_ms / 1000;
        end.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
        if (end.tv_nsec >= 1000000000) {
            end.tv_sec++;
            end.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    while (!ready_locked(r, c) && rc == 0)
        rc = timeout_ms < 0 ? pthread_cond_wait(&r->cv, &r->mu)
                            : pthread_cond_timedwait(&r->cv, &r->mu, &end);
    int ok = ready_locked(r, c);
    pthread_mutex_unlock(&r->mu);
    return ok;
}
