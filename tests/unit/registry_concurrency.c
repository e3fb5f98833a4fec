/* 8 threads doing random operations; afterwards the invariants hold. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry/registry.h"
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
