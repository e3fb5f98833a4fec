/* later: wake-ups that can wait for a quiet moment.
 *
 * A helper thread woken by a change (the prober: a socket to try) takes a
 * CPU. Woken right after the change's answer, on a small machine it takes
 * it from the caller's next request or from the FUSE loop that would read
 * it. The FUSE loop's threads hold their wake-ups instead (csifs_later_hold)
 * and ring them at the next quiet moment: before one sleeps, or once one
 * has been held FS_SPIN_NS (csifs_later_due: checked after each request,
 * while polling, and before a commit). Any other thread rings at once.
 * Nothing is dropped: a held wake-up is rung as if late. (Ringing before
 * every commit, in the sync's wait, cost the commit the ring's own 14 us:
 * docs/benchmarks.md.) */
#ifndef CSIFS_LATER_H
#define CSIFS_LATER_H

#include <stdbool.h>
#include <stdint.h>

/* A bell: eventfd fd, rung with csifs_later_ring. At most 8. 0 or -ENOSPC. */
int csifs_later_add(int fd, int *bell);
/* No ring of bell after this returns (its fd may then be closed). */
void csifs_later_remove(int bell);
/* Write 1 to bell's eventfd: now, or at this thread's next flush when it
 * holds (csifs_later_hold). */
void csifs_later_ring(int bell);
/* This thread's rings wait for csifs_later_flush (true) or are rung at once. */
void csifs_later_hold(bool on);
/* Ring every held bell (any thread may call it; cheap when none is held). */
void csifs_later_flush(void);
/* Whether a bell has been held FS_SPIN_NS or longer at now (monotonic ns). */
bool csifs_later_due(int64_t now_ns);
/* csifs_later_flush if csifs_later_due(now_ns). */
void csifs_later_flush_due(int64_t now_ns);

#endif
