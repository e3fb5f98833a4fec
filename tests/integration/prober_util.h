/* Helpers of the prober integration tests (tests/integration/prober*.c):
 * header only (each test binary is one file). One csifs process (struct tf)
 * per test, set with pu_use(); every bound
 * is a liveness deadline scaled by tu_ms() (CSIFS_TEST_SLACK). Failures
 * are Criterion assertions. */
#ifndef CSIFS_PROBER_UTIL_H
#define CSIFS_PROBER_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/fsrun.h"
#include "tests/lib/plugin_proc.h"
#include "tests/lib/testutil.h"

static struct tf *tt __attribute__((unused));

/* One suite of a prober test binary: its csifs (t), a teardown that kills
 * the plugins and csifs it started (by pid), and spawn(opts) of csifs
 * tagged tag. */
#define PU_SUITE(suite, tag, secs)                                               \
    static struct tf t;                                                          \
    static void teardown(void)                                                   \
    {                                                                            \
        tp_kill_all();                                                           \
        tf_stop(&t);                                                             \
    }                                                                            \
    TestSuite(suite, .fini = teardown, .timeout = secs);                         \
    static void spawn(const char *opts)                                          \
    {                                                                            \
        pu_use(&t);                                                              \
        pu_spawn(tag, opts);                                                     \
    }

/* The csifs the helpers below talk to. */
static inline void pu_use(struct tf *t)
{
    tt = t;
}

/* Spawn csifs (process mode) with -o opts, tagged tag. */
static inline void pu_spawn(const char *tag, const char *opts)
{
    struct tf_opts o = { .tag = tag, .extra_opts = opts };
    cr_assert_eq(tf_spawn(tt, &o), 0, "tf_spawn");
}

/* A socket path in the test's temp dir (a static rotating buffer). */
static inline const char *pu_sock(const char *name)
{
    const char *p = tu_path(tt->dir, name);
    cr_assert(p && strlen(p) < 108, "socket path too long");
    return p;
}

/* mkdir -p <type>/<plugin>/<alloc> and point its socket at target. */
static inline void pu_reg(const char *inst, const char *target)
{
    cr_assert_eq(tf_sh(tt, "mkdir -p %s && ln -s '%s' %s/socket", inst, target, inst), 0,
                 "register %s", inst);
}

struct pu_want {
    const char *rel, *value;
    bool link;
};

static inline bool pu_holds(void *arg)
{
    const struct pu_want *w = arg;
    const char *v = w->link ? tf_readlink(tt, w->rel) : tf_cat(tt, w->rel);
    return v && strcmp(v, w->value) == 0;
}

/* Wait until the file (or link) reads value: a liveness bound of ms. */
static inline void pu_wait_value(const char *rel, const char *value, bool link, int64_t ms)
{
    struct pu_want w = { rel, value, link };
    bool ok = tu_wait_for(pu_holds, &w, ms);
    const char *v = link ? tf_readlink(tt, rel) : tf_cat(tt, rel);
    cr_assert(ok, "%s reads \"%s\" after %lld ms, want \"%s\"", rel, v ? v : strerror(errno),
              (long long)tu_ms(ms), value);
}

/* The retained events hold a line with this text. */
static inline void pu_has_event(const char *text)
{
    cr_assert_eq(tf_sh(tt, "timeout 1 cat events | grep -qF '%s'", text), 0,
                 "no event \"%s\"", text);
}

/* How many retained event lines contain text. */
static inline int pu_count_events(const char *text)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "cd '%s' && timeout 1 cat events | grep -cF '%s'", tt->mnt, text);
    FILE *f = popen(cmd, "r");
    cr_assert(f, "popen: %s", strerror(errno));
    int n = -1;
    if (fscanf(f, "%d", &n) != 1)
        n = -1;
    pclose(f);
    cr_assert_geq(n, 0, "cannot count events \"%s\"", text);
    return n;
}

/* The file's content, malloc'd (NULL with errno). */
static inline char *pu_cat(const char *rel)
{
    const char *v = tf_cat(tt, rel);
    return v ? strdup(v) : NULL;
}

#define WAIT_CAT(rel, value, ms) pu_wait_value(rel, value, false, ms)
#define WAIT_LINK(rel, value, ms) pu_wait_value(rel, value, true, ms)
/* The file (or link) reads value: at once, but for the few microseconds
 * between two invalidations of one change (health is fresh, reason not yet). */
#define is(rel, value) pu_wait_value(rel, value, false, 200)
#define link_is(rel, value) pu_wait_value(rel, value, true, 200)

#define PLUGIN(pp, ...) \
    cr_assert_eq(tp_start((pp), "--socket", __VA_ARGS__, (const char *)NULL), 0, "tp_start")

#endif
