/* Health kept across a takeover (registry.h reg_keep, registry/keep.c) on a
 * real store: a registry reopened on the same store and the same slots
 * (as a successor on the state memfd) shows the health, reason, ready and
 * history it had; a slot torn by a kill (odd ver), or one whose socket or
 * ready the store contradicts, is not taken (the instance reads "restored,
 * not yet re-probed"); a fresh start clears the slots; a deregistration
 * frees its slot. */
#include <criterion/criterion.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/storeutil.h"
#include "tests/lib/testutil.h"

#define NSLOTS 8

static char *tmp;
static char state[PATH_MAX];
static struct su s;
static struct reg_keep_table *t;

static void setup(void)
{
    tmp = tu_tmpdir("keep");
    cr_assert(tmp);
    snprintf(state, sizeof(state), "%s/state", tmp);
    s = (struct su){ .dir = state };
    cr_assert_eq(su_open(&s), 0, "%s", s.err);
    t = calloc(1, sizeof(*t) + NSLOTS * sizeof(t->slot[0]));
    cr_assert(t);
}

static void teardown(void)
{
    su_close(&s);
    free(t);
    tu_rmrf(tmp);
    free(tmp);
}

TestSuite(keep, .init = setup, .fini = teardown, .timeout = 60);

/* Close and reopen the registry on the same store, keeping t (restore). */
static unsigned long reopen(bool restore)
{
    su_close(&s);
    cr_assert_eq(su_open(&s), 0, "%s", s.err);
    unsigned long n = 0;
    cr_assert_eq(reg_keep(s.reg, t, NSLOTS, restore, &n), 0);
    return n;
}

static const char *show(uint64_t i, enum reg_attr a)
{
    static char buf[4][2048];
    static unsigned k;
    char *b = buf[k++ % 4];
    cr_assert_geq(reg_attr_show(s.reg, i, a, b, sizeof(buf[0])), 0);
    return b;
}

/* a: healthy after a probe; b: unhealthy after a failed one. */
static void two(uint64_t *a, uint64_t *b)
{
    unsigned long n;
    cr_assert_eq(reg_keep(s.reg, t, NSLOTS, false, &n), 0);
    *a = (uint64_t)su_register(s.reg, REG_NODE, "p", "a");
    *b = (uint64_t)su_register(s.reg, REG_NODE, "p", "b");
    cr_assert_eq(su_make_ready(s.reg, *a, "/run/a.sock"), 0);
    cr_assert_eq(su_make_ready(s.reg, *b, "/run/b.sock"), 0);
    struct reg_node nb;
    cr_assert_eq(reg_get(s.reg, *b, &nb), 0);
    struct reg_probe p = { .gen = nb.gen, .outcome = REG_PROBE_ERROR,
                           .reason = "connect: Connection refused", .latency_us = 9 };
    cr_assert_eq(reg_probe_result(s.reg, *b, &p), 0);
    cr_assert_str_eq(show(*b, REG_A_HEALTH), "unhealthy\n");
}

Test(keep, a_reopened_registry_shows_the_kept_health)
{
    uint64_t a, b;
    two(&a, &b);
    char hist_a[2048], hist_b[2048], reason_b[256];
    snprintf(hist_a, sizeof(hist_a), "%s", show(a, REG_A_HISTORY));
    snprintf(hist_b, sizeof(hist_b), "%s", show(b, REG_A_HISTORY));
    snprintf(reason_b, sizeof(reason_b), "%s", show(b, REG_A_REASON));
    cr_assert_eq(reopen(true), 2);
    cr_assert_str_eq(show(a, REG_A_HEALTH), "healthy\n");
    cr_assert_str_eq(show(a, REG_A_REASON), "ok\n");
    cr_assert_str_eq(show(b, REG_A_HEALTH), "unhealthy\n");
    cr_assert_str_eq(show(b, REG_A_REASON), reason_b);
    cr_assert_str_eq(show(b, REG_A_READY), "1\n");
    cr_assert_str_eq(show(a, REG_A_HISTORY), hist_a);
    cr_assert_str_eq(show(b, REG_A_HISTORY), hist_b);
    /* the next probe goes on from there: no change, one more history line */
    struct reg_node na;
    cr_assert_eq(reg_get(s.reg, a, &na), 0);
    struct reg_probe p = { .gen = na.gen, .outcome = REG_PROBE_OK, .latency_us = 5 };
    cr_assert_eq(reg_probe_result(s.reg, a, &p), 0);
    cr_assert_str_eq(show(a, REG_A_HEALTH), "healthy\n");
    cr_assert_eq(tu_count_lines(show(a, REG_A_HISTORY)), tu_count_lines(hist_a) + 1);
    /* and again: the slot was written by that probe */
    cr_assert_eq(reopen(true), 2);
    cr_assert_eq(tu_count_lines(show(a, REG_A_HISTORY)), tu_count_lines(hist_a) + 1);
}

Test(keep, torn_or_contradicted_slots_are_not_taken)
{
    uint64_t a, b;
    two(&a, &b);
    for (unsigned k = 0; k < t->hi; k++) {
        if (t->slot[k].seq == a)
            t->slot[k].ver |= 1u;                  /* a kill mid-write */
        if (t->slot[k].seq == b)
            t->slot[k].ready = 0;                  /* the store says ready 1 */
    }
    cr_assert_eq(reopen(true), 0);
    cr_assert_str_eq(show(a, REG_A_HEALTH), "unknown\n");
    cr_assert_str_eq(show(a, REG_A_REASON), "restored, not yet re-probed\n");
    cr_assert_str_eq(show(b, REG_A_REASON), "restored, not yet re-probed\n");
    for (unsigned k = 0; k < NSLOTS; k++)
        cr_assert_eq(t->slot[k].seq, 0, "slot %u not freed", k);
}

Test(keep, a_fresh_start_clears_and_a_deregistration_frees)
{
    uint64_t a, b;
    two(&a, &b);
    cr_assert_eq(t->hi, 2);
    cr_assert_eq(reg_instance_deregister(s.reg, REG_NODE, "p", "a"), 0);
    unsigned used = 0;
    for (unsigned k = 0; k < NSLOTS; k++)
        used += t->slot[k].seq != 0;
    cr_assert_eq(used, 1, "the deregistered instance's slot is freed");
    cr_assert_eq(reopen(false), 0);
    cr_assert_eq(t->hi, 0);
    cr_assert_str_eq(show(b, REG_A_REASON), "restored, not yet re-probed\n");
}
