/* Wake-ups held for a quiet moment (base/later.c): a thread that holds
 * rings its bells at its next flush, any other thread at once; a held bell
 * is due after FS_SPIN_NS; a removed bell is never rung. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base/defaults.h"
#include "base/knobs.h"
#include "base/later.h"

static int fd = -1, bell = -1;

static void setup(void)
{
    fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    cr_assert_geq(fd, 0);
    cr_assert_eq(csifs_later_add(fd, &bell), 0);
}

static void teardown(void)
{
    csifs_later_hold(false);
    csifs_later_remove(bell);
    close(fd);
}

TestSuite(later, .init = setup, .fini = teardown);

/* What the eventfd was rung since the last call: 0 when not. */
static uint64_t rung(void)
{
    uint64_t n = 0;
    if (read(fd, &n, sizeof(n)) < 0) {
        cr_assert_eq(errno, EAGAIN);
        return 0;
    }
    return n;
}

Test(later, a_thread_that_does_not_hold_rings_at_once)
{
    csifs_later_ring(bell);
    cr_assert_eq(rung(), 1);
    cr_assert_not(csifs_later_due(csifs_mono_ns() + 10 * (int64_t)FS_SPIN_NS));
}

Test(later, a_holding_thread_rings_at_its_flush_once)
{
    csifs_later_hold(true);
    csifs_later_ring(bell);
    csifs_later_ring(bell);
    cr_assert_eq(rung(), 0, "held until the flush");
    csifs_later_flush();
    cr_assert_eq(rung(), 1, "rung once for both");
    csifs_later_flush();
    cr_assert_eq(rung(), 0);
}

static void *flusher(void *arg)
{
    (void)arg;
    csifs_later_flush();
    return NULL;
}

Test(later, any_thread_flushes_what_another_held)
{
    pthread_t th;
    csifs_later_hold(true);
    csifs_later_ring(bell);
    cr_assert_eq(pthread_create(&th, NULL, flusher, NULL), 0);
    pthread_join(th, NULL);
    cr_assert_eq(rung(), 1);
}

Test(later, a_held_bell_is_due_after_the_spin)
{
    csifs_later_hold(true);
    int64_t t0 = csifs_mono_ns();
    csifs_later_ring(bell);
    if (FS_SPIN_NS > 0)
        cr_assert_not(csifs_later_due(t0));
    cr_assert(csifs_later_due(csifs_mono_ns() + FS_SPIN_NS));
    csifs_later_flush();
    cr_assert_not(csifs_later_due(csifs_mono_ns() + FS_SPIN_NS), "nothing held");
    cr_assert_eq(rung(), 1);
}

Test(later, a_removed_bell_is_not_rung)
{
    csifs_later_hold(true);
    csifs_later_ring(bell);
    csifs_later_remove(bell);
    csifs_later_flush();
    cr_assert_eq(rung(), 0);
    cr_assert_eq(csifs_later_add(fd, &bell), 0, "its slot is free again");
}

Test(later, at_most_eight_bells)
{
    int b[8], n = 0;
    while (n < 8 && csifs_later_add(fd, &b[n]) == 0)
        n++;
    cr_assert_eq(n, 7, "one is the suite's");
    int extra;
    cr_assert_eq(csifs_later_add(fd, &extra), -ENOSPC);
    for (int k = 0; k < n; k++)
        csifs_later_remove(b[k]);
    cr_assert_eq(csifs_later_add(fd, &extra), 0);
    csifs_later_remove(extra);
}
