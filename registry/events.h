/* events: the memory ring behind <mnt>/events (DESIGN section 4).
 *
 * Each event is one line
 *   <seq> <YYYY-MM-DDTHH:MM:SS.mmmZ> <kind> <path> [key=value ...] [reason=<text>]\n
 * seq strictly increases. Every field (kind, path, keys, values, reason)
 * is escaped, so a line is one line whatever it is handed: `\`, tab and
 * newline as `\\`, `\t`, `\n`, other control bytes (0x01-0x1f, 0x7f) as
 * `\xNN` (two lowercase hex digits), and outside reason space as `\x20`.
 * Valid names and sanitised plugin strings contain none of these, so their
 * lines read as written. reason comes last and runs to the end of the line.
 * A line that would pass 2046 bytes (plus newline) is cut where the field
 * that did not fit began and ends in "...\n". The ring keeps the last `cap`
 * lines, whatever their lengths: their bytes lie one after the other in one
 * buffer, which doubles (and never shrinks) when they do not fit, so a read
 * copies one or two spans. A reader keeps its own cursor and never blocks a
 * writer. A reader overtaken by the ring reads one line `lost N` and carries
 * on with the oldest retained line; overtaken in the middle of a line, it
 * gets that line cut (ending in "...\n", as above), counted in N.
 *
 * Appending and publishing are two steps: an appended line gets its seq at
 * once but readers (ev_read, ev_ready, ev_wait, `lost N`) see it only once
 * ev_publish made it visible; lines are published in seq order. The
 * registry publishes a change's events after its subscribers ran (the
 * kernel's caches invalidated), so what an event names reads the new value.
 * The ring has its own mutex, the innermost lock of csifs.
 */
#ifndef CSIFS_EVENTS_H
#define CSIFS_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct ev_ring;

/* One key=value pair of an event; value NULL ends a list. */
struct ev_kv {
    const char *key, *value;
};

/* A ring of cap lines whose first event will carry seq first_seq (>= 1). */
int ev_ring_new(struct ev_ring **out, size_t cap, uint64_t first_seq);
void ev_ring_free(struct ev_ring *r);

/* Append an event stamped now; kv may be NULL, reason may be NULL.
 * Returns its seq (> 0) or a negative errno (-ENOMEM: nothing appended). */
int64_t ev_append(struct ev_ring *r, const char *kind, const char *path,
                  const struct ev_kv *kv, const char *reason);
/* The seq the next event will carry (appended lines count, published or not). */
uint64_t ev_next_seq(struct ev_ring *r);
/* Make the lines with seqs from..to-1 readable, once every line before
 * `from` is: waits for the publisher of earlier lines (call it with no lock
 * held). from == to returns at once. Wakes ev_wait. Returns the number of
 * watchers (ev_watch) then: 0 means no reader waits to be woken. */
int ev_publish(struct ev_ring *r, uint64_t from, uint64_t to);
/* A reader that will wait to be woken (a parked read, an armed poll) calls
 * ev_watch(r, +1) BEFORE its last ev_read/ev_ready look, and ev_watch(r, -1)
 * when it stops waiting; then a publish after that look sees it. */
void ev_watch(struct ev_ring *r, int delta);
/* The seq of the first line not yet published. */
uint64_t ev_published(struct ev_ring *r);

/* A reader's position. Start it with ev_cursor_init to replay what is
 * retained. Plain data: copy it, no cleanup. */
struct ev_cursor {
    uint64_t next;      /* seq of the next line to read */
    size_t off;         /* bytes of that line (or of pend) already read */
    char pend[32];      /* a pending `lost N` line, "" if none */
};
void ev_cursor_init(struct ev_ring *r, struct ev_cursor *c);
/* Copy up to cap bytes of the following lines; a line may be split across
 * calls. Returns bytes copied, 0 when caught up. */
size_t ev_read(struct ev_ring *r, struct ev_cursor *c, char *buf, size_t cap);
/* A zero-copy read: ev_read_iov hands out up to EV_READ_IOV iovecs (what is
 * left of `lost N` lines, in pend, then one or two spans of the ring's
 * buffer) instead of copying, and moves the cursor past them, as ev_read.
 * The spans stay valid until ev_read_done(r, pin), which must follow (no
 * lock needed between): an append that would overwrite them, or grow the
 * buffer, moves the ring to a new buffer and frees the old one at the last
 * ev_read_done, so a pin never blocks a writer. pin: the caller's storage,
 * untouched by others until ev_read_done. */
#define EV_READ_IOV 3
struct ev_pin {
    const char *buf;          /* the buffer pinned, NULL none */
    uint64_t from;            /* lowest byte position pinned in it */
    struct ev_pin *next;
    char pend[64];            /* the `lost N` bytes handed out */
};
size_t ev_read_iov(struct ev_ring *r, struct ev_cursor *c, size_t cap,
                   struct iovec iov[EV_READ_IOV], int *niov, struct ev_pin *pin);
void ev_read_done(struct ev_ring *r, struct ev_pin *pin);
/* Copy the niov spans one after the other into dst; returns the bytes. */
size_t ev_iov_copy(char *dst, const struct iovec *iov, int niov);
/* 1 if ev_read would return data now. */
int ev_ready(struct ev_ring *r, const struct ev_cursor *c);
/* Wait until ev_ready or timeout_ms passes (<0: for ever); 1 ready, 0 not. */
int ev_wait(struct ev_ring *r, const struct ev_cursor *c, int timeout_ms);

/* Escape s into out (cap bytes, NUL-terminated; truncated on a char
 * boundary of the escaping) as above. space: also escape ' '. Returns length. */
size_t ev_escape(const char *s, char *out, size_t cap, int space);
/* Undo ev_escape in place (`\xNN` for any NN but 00); returns the new length. */
size_t ev_unescape(char *s);

#endif
