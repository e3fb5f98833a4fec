/* The fixture shared by the store tests (store.c, store_crash.c): a temp
 * dir per test, a store with a registry on it (struct su), and assertions.
 * Included once by each test file. */
#ifndef CSIFS_STORE_FIXTURE_H
#define CSIFS_STORE_FIXTURE_H

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <lmdb.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/storeutil.h"
#include "tests/lib/testutil.h"

static char *tmp;                    /* this test's temp dir */
static char state[PATH_MAX];         /* <tmp>/state, or on the tmpfs */
static char fsdir[PATH_MAX - 64];       /* <tmp>/fs: the tmpfs of the full-disk test */
static struct su s;

static void setup(void)
{
    tmp = tu_tmpdir("store");
    cr_assert(tmp, "tu_tmpdir: %s", strerror(errno));
    snprintf(state, sizeof(state), "%s/state", tmp);
    snprintf(fsdir, sizeof(fsdir), "%s/fs", tmp);
    s = (struct su){ .dir = state };
}

static void teardown(void)
{
    su_close(&s);
    umount2(fsdir, MNT_DETACH);      /* the full-disk test's tmpfs, if any */
    tu_rmrf(tmp);
    free(tmp);
}

TestSuite(store, .init = setup, .fini = teardown);

static inline void open_ok(void)
{
    int rc = su_open(&s);
    cr_assert_eq(rc, 0, "su_open: %d %s", rc, s.err);
}

static inline void reopen(void)
{
    su_close(&s);
    open_ok();
}

static inline uint64_t reg_ok(const char *plugin, const char *alloc)
{
    int64_t seq = su_register(s.reg, REG_NODE, plugin, alloc);
    cr_assert_gt(seq, 0, "register %s/%s: %lld", plugin, alloc, (long long)seq);
    return (uint64_t)seq;
}

static inline void ready_ok(uint64_t inst, const char *socket)
{
    int rc = su_make_ready(s.reg, inst, socket);
    cr_assert_eq(rc, 0, "make ready %s: %d", socket, rc);
}

static inline void assert_current(const char *plugin, const char *want)
{
    struct reg_node p;
    char cur[REG_NAME_MAX + 1] = "";
    cr_assert_eq(reg_plugin_lookup(s.reg, REG_NODE, plugin, &p), 0);
    ssize_t n = reg_current_get(s.reg, p.seq, cur, sizeof(cur));
    cr_assert_str_eq(n < 0 ? "-" : cur, want, "current of %s", plugin);
}

static inline void assert_attr(uint64_t inst, enum reg_attr a, const char *want)
{
    char v[256];
    cr_assert_geq(reg_attr_show(s.reg, inst, a, v, sizeof(v)), 0);
    cr_assert_str_eq(v, want, "%s", reg_attrs[a].name);
}

/* Children report through a pipe rather than their exit status: under
 * valgrind a forked child of Criterion exits 99 for blocks of Criterion's
 * own (nanomsg) that only a thread of the parent pointed to. */
#define CHILD_DONE INT32_MAX

#endif
