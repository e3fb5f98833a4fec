/* 8 threads doing random operations; afterwards the invariants hold. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"
#include "tests/lib/storeutil.h"
#include "tests/lib/testutil.h"

#define THREADS 8
#define PLUGINS 3
#define ALLOCS 6
/* Each operation appends at most 4 events: the ring (1 << 20) never wraps. */
#define MAX_OPS 200000

static struct reg *reg;
static volatile int stop;
static long total_ops;
static volatile int bad_rc; /* first unexpected return (asserted in the main thread) */
static const struct reg_fingerprint fp = { "p", "1", "n", 0, "", "" };

static int allowed(int rc)
{
    return rc == 0 || rc == -EEXIST || rc == -ENOENT || rc == -ENOTEMPTY || rc == -ESTALE;
}

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    char p[8], a[8];
    long ops = 0;
    while (!stop && __atomic_add_fetch(&total_ops, 1, __ATOMIC_RELAXED) <= MAX_OPS) {
        snprintf(p, sizeof(p), "p%d", rand_r(&seed) % PLUGINS);
        snprintf(a, sizeof(a), "a%d", rand_r(&seed) % ALLOCS);
        enum reg_type t = rand_r(&seed) % REG_NTYPES;
        struct reg_node pn, in;
        int rc = 0;
        switch (rand_r(&seed) % 8) {
        case 0: rc = reg_plugin_create(reg, t, p); break;
        case 1: rc = reg_plugin_remove(reg, t, p); break;
        case 2: case 3: rc = reg_instance_register(reg, t, p, a); break;
        case 4: rc = reg_instance_deregister(reg, t, p, a); break;
        default:
            if (reg_plugin_lookup(reg, t, p, &pn) || reg_instance_lookup(reg, pn.seq, a, &in))
                break;
            if (!in.has_socket || rand_r(&seed) % 4 == 0) {
                rc = reg_socket_set(reg, in.seq, rand_r(&seed) % 2 ? "/s1" : "/s2");
                if (rc == -ENOENT)
                    rc = 0;
                break;
            }
            struct reg_probe pr = { .gen = in.gen, .fp = &fp,
                                    .outcome = rand_r(&seed) % 3 ? REG_PROBE_OK : REG_PROBE_ERROR,
                                    .reason = "x" };
            rc = reg_probe_result(reg, in.seq, &pr);
            if (rc == -EINVAL)   /* OK without fp never happens: fp is always set */
                rc = -1;
        }
        if (!allowed(rc) && !bad_rc)
            bad_rc = rc;
        ops++;
    }
    return (void *)ops;
}

struct check {
    uint64_t last;
    uint64_t newest_ready, newest_healthy;  /* newest_healthy: ready and healthy */
    uint64_t current;
    bool current_ready;              /* current is a ready instance of the plugin */
    int n;
};

static int check_inst(const struct reg_node *n, void *arg)
{
    struct check *c = arg;
    cr_assert(c->last == 0 || n->seq < c->last, "order: %llu after %llu",
              (unsigned long long)n->seq, (unsigned long long)c->last);
    c->last = n->seq;
    if (n->ready && !c->newest_ready)
        c->newest_ready = n->seq;
    if (n->ready && n->health == REG_HEALTHY && !c->newest_healthy)
        c->newest_healthy = n->seq;
    if (n->seq == c->current)
        c->current_ready = n->ready;
    c->n++;
    return 0;
}

static int check_plugin(const struct reg_node *p, void *arg)
{
    (void)arg;
    struct check c = { .current = p->current };
    cr_assert_eq(reg_list(reg, p->type, p->seq, 0, check_inst, &c), 0);
    cr_assert_eq(c.n, (int)p->count);
    /* DESIGN 2: the newest ready instance that is healthy; when none is, it
     * stays on a ready one; with no ready instance, none */
    if (c.newest_healthy)
        cr_assert_eq(p->current, c.newest_healthy, "%s current %llu, newest healthy %llu",
                     p->plugin, (unsigned long long)p->current,
                     (unsigned long long)c.newest_healthy);
    else if (c.newest_ready)
        cr_assert(c.current_ready, "%s current %llu is not a ready instance", p->plugin,
                  (unsigned long long)p->current);
    else
        cr_assert_eq(p->current, 0, "%s current %llu with no ready instance", p->plugin,
                     (unsigned long long)p->current);
    return 0;
}

Test(concurrency, random_operations_keep_invariants)
{
    struct reg_opts o = { .events_ring = 1 << 20, .health_timeout_ms = 10 };
    cr_assert_eq(reg_open(&reg, &o), 0);
    struct ev_cursor cur;
    ev_cursor_init(reg_events(reg), &cur);
    pthread_t th[THREADS];
    for (uintptr_t k = 0; k < THREADS; k++)
        cr_assert_eq(pthread_create(&th[k], NULL, worker, (void *)(k + 1)), 0);
    tu_sleep_ms(2000);
    stop = 1;
    long total = 0;
    for (int k = 0; k < THREADS; k++) {
        void *ops;
        pthread_join(th[k], &ops);
        total += (long)ops;
    }
    cr_assert_eq(bad_rc, 0, "a worker got %d", bad_rc);
    cr_assert_gt(total, 1000);
    for (int t = 0; t < REG_NTYPES; t++)
        cr_assert_eq(reg_list(reg, t, 0, 0, check_plugin, NULL), 0);
    /* every event seq unique and increasing, no loss in a big ring */
    static char buf[1 << 16];
    uint64_t last = 0, count = 0;
    size_t n, carry = 0;
    while ((n = ev_read(reg_events(reg), &cur, buf + carry, sizeof(buf) - 1 - carry)) > 0) {
        n += carry;
        buf[n] = '\0';
        char *l = buf, *nl;
        while ((nl = strchr(l, '\n'))) {
            cr_assert(strncmp(l, "lost", 4) != 0);
            uint64_t seq = strtoull(l, NULL, 10);
            cr_assert_gt(seq, last);
            last = seq;
            count++;
            l = nl + 1;
        }
        carry = n - (size_t)(l - buf);
        memmove(buf, l, carry);
    }
    cr_assert_eq(carry, 0);
    cr_assert_gt(count, 100);
    reg_close(reg);
}

/* ---- what is committed of `current` is what is applied (DESIGN 2, 7) ---- */

static uint64_t race_b;
static const struct reg_fingerprint *race_fp = &fp;   /* what race_b's probe says */

static void *probe_b_healthy(void *arg)
{
    struct reg *r = arg;
    struct reg_node n;
    intptr_t rc = reg_get(r, race_b, &n);
    struct reg_probe p = { .gen = n.gen, .outcome = REG_PROBE_OK, .latency_us = 10,
                           .fp = race_fp };
    if (rc == 0)
        rc = reg_probe_result(r, race_b, &p);
    return (void *)rc;
}

struct race {
    struct su s;
    char dir[4096], *tmp;
    uint64_t a, b;                   /* node/p/a, then node/p/b */
    struct reg_node nb;              /* b as race_open leaves it */
};

/* A registry on a store in a new temp dir, with a (ready and healthy, on
 * /run/a.sock) and b (newer, on /run/b.sock: probed OK when b_ready, else
 * not probed) registered. */
static void race_open(struct race *r, bool b_ready)
{
    r->tmp = tu_tmpdir("race");
    cr_assert(r->tmp);
    snprintf(r->dir, sizeof(r->dir), "%s/state", r->tmp);
    r->s.dir = r->dir;
    cr_assert_eq(su_open(&r->s), 0, "%s", r->s.err);
    int64_t a = su_register(r->s.reg, REG_NODE, "p", "a");
    int64_t b = su_register(r->s.reg, REG_NODE, "p", "b");
    cr_assert(a > 0 && b > 0);
    r->a = (uint64_t)a;
    r->b = (uint64_t)b;
    cr_assert_eq(su_make_ready(r->s.reg, r->a, "/run/a.sock"), 0);
    cr_assert_eq(b_ready ? su_make_ready(r->s.reg, r->b, "/run/b.sock")
                         : reg_socket_set(r->s.reg, r->b, "/run/b.sock"), 0);
    cr_assert_eq(reg_get(r->s.reg, r->b, &r->nb), 0);
}

static void race_close(struct race *r)
{
    su_close(&r->s);
    tu_rmrf(r->tmp);
    free(r->tmp);
}

/* race_b's OK probe (race_fp) on a thread, its batch held mid-commit:
 * returns once the batch is taken, not applied. */
static pthread_t hold_probe_b(struct reg *r, uint64_t b)
{
    race_b = b;
    unsigned held = __atomic_load_n(&reg_test_commits_held, __ATOMIC_ACQUIRE);
    reg_test_commit_delay_ms = 300;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, probe_b_healthy, r), 0);
    while (__atomic_load_n(&reg_test_commits_held, __ATOMIC_ACQUIRE) == held)
        tu_sleep_ms(1);
    return th;
}

static void release_probe_b(pthread_t th)
{
    void *rc;
    pthread_join(th, &rc);
    reg_test_commit_delay_ms = 0;
    race_fp = &fp;
    cr_assert_eq((intptr_t)rc, 0);
}

/* p's current in memory, then (reopened: restored as persisted) in the store. */
static void current_both(struct su *s, uint64_t plugin, char *mem, char *st)
{
    cr_assert_gt(reg_current_get(s->reg, plugin, mem, 64), 0);
    su_close(s);
    cr_assert_eq(su_open(s), 0, "%s", s->err);
    cr_assert_gt(reg_current_get(s->reg, plugin, st, 64), 0);
}

/* b (newer) unhealthy, a healthy and current. b's probe says healthy: its
 * move of current to b is queued and its batch held mid-commit; then b's
 * socket changes (b unknown: current goes back to a). That change is
 * validated while the move is not applied yet: the move back must be in
 * its commit, or memory says a and the store b (a restart moves it). */
Test(concurrency, socket_change_behind_a_queued_move_of_current_commits_it)
{
    char mem[64], st[64];
    struct race r = { 0 };
    race_open(&r, true);
    struct su *s = &r.s;
    struct reg_node nb = r.nb;
    uint64_t plugin = nb.parent;
    struct reg_probe bad = { .gen = nb.gen, .outcome = REG_PROBE_ERROR, .reason = "refused" };
    cr_assert_eq(reg_probe_result(s->reg, r.b, &bad), 0);
    current_both(s, plugin, mem, st);
    cr_assert_str_eq(mem, "a");
    cr_assert_str_eq(st, "a");
    /* reopened: every instance restored; probe both again */
    cr_assert_eq(su_make_ready(s->reg, r.a, "/run/a2.sock"), 0);
    cr_assert_eq(reg_get(s->reg, r.b, &nb), 0);
    bad.gen = nb.gen;
    cr_assert_eq(reg_probe_result(s->reg, r.b, &bad), 0);
    cr_assert_eq(reg_current_get(s->reg, plugin, mem, sizeof(mem)) > 0 && !strcmp(mem, "a"), 1);

    pthread_t th = hold_probe_b(s->reg, r.b);
    cr_assert_eq(reg_socket_set(s->reg, r.b, "/run/b2.sock"), 0);
    release_probe_b(th);
    current_both(s, plugin, mem, st);
    cr_assert_str_eq(mem, "a", "memory's current: %s", mem);
    cr_assert_str_eq(st, mem, "the store's current %s, memory's %s", st, mem);
    race_close(&r);
}

/* ---- a probe validated behind a queued probe of the same instance ---- */

/* a ready but unhealthy and current; b has its socket, not probed yet. b's
 * OK probe (b ready and healthy: current moves to b) is held mid-commit;
 * then b's next probe fails. It is validated while the first is not
 * applied: its outcome must follow from b as the first leaves it (ready,
 * was healthy: unhealthy), not from memory (not ready, unknown), or its
 * apply takes b's readiness back and leaves current on an instance that
 * is not ready. */
Test(concurrency, probe_behind_a_queued_probe_of_the_same_instance_keeps_ready)
{
    char mem[64], st[64];
    struct race r = { 0 };
    race_open(&r, false);
    struct su *s = &r.s;
    struct reg_node na, nb = r.nb;
    cr_assert_eq(reg_get(s->reg, r.a, &na), 0);
    struct reg_probe bad = { .gen = na.gen, .outcome = REG_PROBE_ERROR, .reason = "refused" };
    cr_assert_eq(reg_probe_result(s->reg, r.a, &bad), 0);
    uint64_t plugin = nb.parent;
    cr_assert_eq(reg_current_get(s->reg, plugin, mem, sizeof(mem)) > 0 && !strcmp(mem, "a"), 1);

    pthread_t th = hold_probe_b(s->reg, r.b);
    bad.gen = nb.gen;
    cr_assert_eq(reg_probe_result(s->reg, r.b, &bad), 0);
    release_probe_b(th);
    cr_assert_eq(reg_get(s->reg, r.b, &nb), 0);
    cr_assert(nb.ready, "b is no longer ready");
    cr_assert_eq(nb.health, REG_UNHEALTHY, "b's health %d", nb.health);
    current_both(s, plugin, mem, st);
    cr_assert_str_eq(mem, "b", "memory's current: %s", mem);
    cr_assert_str_eq(st, "b", "the store's current: %s", st);
    cr_assert_eq(reg_get(s->reg, r.b, &nb), 0);
    cr_assert(nb.ready, "b restored not ready");
    race_close(&r);
}

/* b healthy with version 1; a probe saying version 2 is held mid-commit,
 * then one saying 1 again. Compared with memory (1), not with the queued 2,
 * it would change nothing, and 2 would stay in memory and the store. */
Test(concurrency, fingerprint_behind_a_queued_fingerprint_change_is_committed)
{
    static const struct reg_fingerprint v1 = { "test.csi", "1", "node-b", 0, "", "" },
                                        v2 = { "test.csi", "2", "node-b", 0, "", "" };
    char v[64];
    struct race r = { 0 };
    race_open(&r, true);
    struct su *s = &r.s;
    struct reg_probe back = { .gen = r.nb.gen, .outcome = REG_PROBE_OK, .fp = &v1 };
    cr_assert_eq(reg_probe_result(s->reg, r.b, &back), 0);

    race_fp = &v2;
    pthread_t th = hold_probe_b(s->reg, r.b);
    cr_assert_eq(reg_probe_result(s->reg, r.b, &back), 0);
    release_probe_b(th);
    for (int pass = 0; pass < 2; pass++) {  /* memory, then the store */
        ssize_t n = reg_attr_show(s->reg, r.b, REG_A_VERSION, v, sizeof(v) - 1);
        cr_assert_gt(n, 0);
        v[n] = '\0';
        cr_assert_str_eq(v, "1\n", "%s: version %s", pass ? "the store" : "memory", v);
        su_close(s);
        cr_assert_eq(su_open(s), 0, "%s", s->err);
    }
    race_close(&r);
}
