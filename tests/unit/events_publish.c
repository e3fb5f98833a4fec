/* The published-seq cursor of the events ring: a line is readable only once
 * published, in seq order; the registry publishes a change's events after
 * its subscribers ran (DESIGN 4: what an event names reads the new value). */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "registry/registry.h"
#include "tests/lib/testutil.h"

static void append(struct ev_ring *r, int n)
{
    for (int k = 0; k < n; k++)
        cr_assert_gt(ev_append(r, "registered", "csi-node/p", NULL, NULL), 0);
}

/* Everything readable now, as one string. */
static const char *read_all(struct ev_ring *r, struct ev_cursor *c)
{
    static char buf[8192];
    size_t n = ev_read(r, c, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    return buf;
}

Test(events_publish, appended_lines_wait_for_publish)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, 8, 1), 0);
    struct ev_cursor c;
    ev_cursor_init(r, &c);
    append(r, 3);
    cr_assert_eq(ev_next_seq(r), 4);
    cr_assert_eq(ev_published(r), 1);
    cr_assert_eq(ev_ready(r, &c), 0);
    cr_assert_eq(ev_wait(r, &c, 10), 0);
    cr_assert_str_eq(read_all(r, &c), "");
    ev_publish(r, 1, 3);
    cr_assert_eq(ev_ready(r, &c), 1);
    const char *s = read_all(r, &c);
    cr_assert_eq(tu_count_lines(s), 2, "%s", s);
    cr_assert(!strncmp(s, "1 ", 2) && strstr(s, "\n2 "), "%s", s);
    cr_assert_eq(ev_ready(r, &c), 0);
    ev_publish(r, 3, 3);             /* empty range: nothing, no wait */
    cr_assert_eq(ev_published(r), 3);
    ev_publish(r, 3, 4);
    s = read_all(r, &c);
    cr_assert(!strncmp(s, "3 ", 2) && tu_count_lines(s) == 1, "%s", s);
    /* a reader opened now replays only what is published */
    append(r, 1);
    struct ev_cursor c2;
    ev_cursor_init(r, &c2);
    cr_assert_eq(tu_count_lines(read_all(r, &c2)), 3);
    ev_ring_free(r);
}

struct later {
    struct ev_ring *r;
    int done;
};

static void *publish_later(void *arg)
{
    struct later *l = arg;
    ev_publish(l->r, 3, 5);
    __atomic_store_n(&l->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

Test(events_publish, later_range_waits_for_earlier)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, 8, 1), 0);
    struct ev_cursor c;
    ev_cursor_init(r, &c);
    append(r, 4);
    struct later l = { r, 0 };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, publish_later, &l), 0);
    tu_sleep_ms(100);
    /* lines 3-4 are not published ahead of 1-2 */
    cr_assert_eq(__atomic_load_n(&l.done, __ATOMIC_ACQUIRE), 0);
    cr_assert_eq(ev_published(r), 1);
    cr_assert_str_eq(read_all(r, &c), "");
    ev_publish(r, 1, 3);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_eq(l.done, 1);
    cr_assert_eq(ev_published(r), 5);
    const char *s = read_all(r, &c);
    cr_assert_eq(tu_count_lines(s), 4, "%s", s);
    cr_assert(!strncmp(s, "1 ", 2) && strstr(s, "\n4 "), "%s", s);
    ev_ring_free(r);
}

Test(events_publish, lost_counts_published_lines_only)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, 2, 1), 0);
    struct ev_cursor c;
    ev_cursor_init(r, &c);
    append(r, 5);                    /* 1-3 overwritten, 4-5 retained */
    cr_assert_eq(ev_ready(r, &c), 0, "an unpublished loss is not reported yet");
    cr_assert_str_eq(read_all(r, &c), "");
    ev_publish(r, 1, 3);
    cr_assert_str_eq(read_all(r, &c), "lost 2\n");
    cr_assert_eq(ev_ready(r, &c), 0);
    ev_publish(r, 3, 6);
    const char *s = read_all(r, &c);
    cr_assert(!strncmp(s, "lost 1\n4 ", 9) && strstr(s, "\n5 "), "%s", s);
    cr_assert_eq(tu_count_lines(s), 3, "%s", s);
    ev_ring_free(r);
}

Test(events_publish, publish_counts_watchers)
{
    struct ev_ring *r;
    cr_assert_eq(ev_ring_new(&r, 8, 1), 0);
    append(r, 3);
    cr_assert_eq(ev_publish(r, 1, 2), 0, "no reader waits: nobody to wake");
    ev_watch(r, 1);
    ev_watch(r, 1);
    cr_assert_eq(ev_publish(r, 2, 3), 2);
    ev_watch(r, -1);
    ev_watch(r, -1);
    cr_assert_eq(ev_publish(r, 3, 4), 0);
    ev_ring_free(r);
}

/* ---- the registry publishes after its subscribers ---- */

static struct reg *reg;
static uint64_t seen_pub[64];        /* ev_published() during each notification */
static int nseen;

static void record(const struct reg_change *c, void *arg)
{
    (void)c;
    (void)arg;
    if (nseen < 64)
        seen_pub[nseen++] = ev_published(reg_events(reg));
}

Test(events_publish, subscribers_run_before_the_event_is_readable)
{
    struct reg_opts o = { .events_ring = 64, .health_timeout_ms = 1000 };
    cr_assert_eq(reg_open(&reg, &o), 0);
    cr_assert_eq(reg_subscribe(reg, record, NULL), 0);
    struct ev_ring *ring = reg_events(reg);
    /* a committed mutation (the leader's path) */
    uint64_t before = ev_next_seq(ring);
    cr_assert_eq(reg_plugin_create(reg, REG_NODE, "p"), 0);
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", "a"), 0);
    cr_assert_eq(nseen, 2);
    cr_assert_eq(seen_pub[0], before, "registered p readable before its subscribers ran");
    cr_assert_eq(seen_pub[1], before + 1);
    cr_assert_eq(ev_published(ring), before + 2, "published when the call returns");
    /* a probe result applied without a commit (mut_apply_now) */
    struct reg_node pn, in;
    cr_assert_eq(reg_plugin_lookup(reg, REG_NODE, "p", &pn), 0);
    cr_assert_eq(reg_instance_lookup(reg, pn.seq, "a", &in), 0);
    cr_assert_eq(reg_socket_set(reg, in.seq, "/run/a.sock"), 0);
    cr_assert_eq(reg_get(reg, in.seq, &in), 0);
    before = ev_next_seq(ring);
    nseen = 0;
    struct reg_probe p = { .gen = in.gen, .outcome = REG_PROBE_ERROR, .reason = "x" };
    cr_assert_eq(reg_probe_result(reg, in.seq, &p), 0);
    cr_assert_eq(ev_next_seq(ring), before + 1, "one health event");
    cr_assert_geq(nseen, 1);
    for (int k = 0; k < nseen; k++)
        cr_assert_eq(seen_pub[k], before, "health readable before its subscribers ran");
    cr_assert_eq(ev_published(ring), before + 1);
    reg_close(reg);
}

/* Writers of both paths at once; a slow subscriber counts health changes per
 * instance; a reader that never blocks checks that it never reads more
 * health events of an instance than were notified. */
#define NINST 2
static uint64_t inst[NINST];
static long notified[NINST];
static volatile int stop;

static void count_health(const struct reg_change *c, void *arg)
{
    (void)arg;
    for (int k = 0; k < NINST; k++)
        if (c->kind == REG_C_HEALTH && c->inst == inst[k]) {
            tu_sleep_ms(1);          /* a slow subscriber (the kernel's cache) */
            __atomic_add_fetch(&notified[k], 1, __ATOMIC_RELEASE);
        }
}

static void *prober(void *arg)
{
    int k = (int)(uintptr_t)arg;
    for (unsigned n = 0; !stop; n++) {
        struct reg_node in;
        if (reg_get(reg, inst[k], &in) < 0)
            break;
        char why[32];
        snprintf(why, sizeof(why), "err %u", n % 3);
        struct reg_probe p = { .gen = in.gen, .outcome = REG_PROBE_ERROR, .reason = why };
        int rc = reg_probe_result(reg, inst[k], &p);
        if (rc < 0 && rc != -ESTALE)
            break;
    }
    return NULL;
}

static void *socketer(void *arg)
{
    (void)arg;
    for (unsigned n = 0; !stop; n++)
        if (reg_socket_set(reg, inst[n % NINST], n % 2 ? "/run/b.sock" : "/run/a.sock") < 0)
            break;
    return NULL;
}

Test(events_publish, concurrent_paths_publish_after_subscribers, .timeout = 60)
{
    struct reg_opts o = { .events_ring = 1 << 16, .health_timeout_ms = 1000 };
    cr_assert_eq(reg_open(&reg, &o), 0);
    struct ev_ring *ring = reg_events(reg);
    struct ev_cursor cur;
    ev_cursor_init(ring, &cur);
    cr_assert_eq(reg_plugin_create(reg, REG_NODE, "p"), 0);
    struct reg_node pn, in;
    cr_assert_eq(reg_plugin_lookup(reg, REG_NODE, "p", &pn), 0);
    for (int k = 0; k < NINST; k++) {
        char a[16];
        snprintf(a, sizeof(a), "a%d", k);
        cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", a), 0);
        cr_assert_eq(reg_instance_lookup(reg, pn.seq, a, &in), 0);
        inst[k] = in.seq;
        cr_assert_eq(reg_socket_set(reg, inst[k], "/run/a.sock"), 0);
    }
    cr_assert_eq(reg_subscribe(reg, count_health, NULL), 0);
    uint64_t first = ev_published(ring);
    /* replayed lines came before the subscriber */
    static char buf[1 << 16];
    while (ev_read(ring, &cur, buf, sizeof(buf)) > 0)
        ;
    pthread_t th[NINST + 1];
    for (uintptr_t k = 0; k < NINST; k++)
        cr_assert_eq(pthread_create(&th[k], NULL, prober, (void *)k), 0);
    cr_assert_eq(pthread_create(&th[NINST], NULL, socketer, NULL), 0);
    long read_health[NINST] = { 0 };
    uint64_t last = first - 1;
    char line[4096];
    size_t len = 0;
    int64_t end = tu_now_ms() + 1500;
    while (tu_now_ms() < end) {
        size_t n = ev_read(ring, &cur, line + len, 1);
        if (n == 0)
            continue;                /* never blocks: polls as fast as it can */
        if (line[len++] != '\n' && len < sizeof(line) - 1)
            continue;
        line[len] = '\0';
        len = 0;
        cr_assert(strncmp(line, "lost", 4), "%s", line);
        uint64_t seq = strtoull(line, NULL, 10);
        cr_assert_eq(seq, last + 1, "seq %llu after %llu", (unsigned long long)seq,
                     (unsigned long long)last);
        last = seq;
        for (int k = 0; k < NINST; k++) {
            char path[48];
            snprintf(path, sizeof(path), " health csi-node/p/a%d ", k);
            if (!strstr(line, path))
                continue;
            read_health[k]++;
            long got = __atomic_load_n(&notified[k], __ATOMIC_ACQUIRE);
            cr_assert_leq(read_health[k], got, "read health event %ld of a%d, %ld notified: %s",
                          read_health[k], k, got, line);
        }
    }
    stop = 1;
    for (int k = 0; k <= NINST; k++)
        pthread_join(th[k], NULL);
    cr_assert_gt(read_health[0] + read_health[1], 20, "too few health events to check");
    reg_close(reg);
}

/* ---- current moves for readers only once the changes before it ran ---- */

static char cur_at[16][16 + REG_NAME_MAX + 1]; /* "<kind> <current>" at each notification */
static int ncur;

static void record_current(const struct reg_change *c, void *arg)
{
    (void)arg;
    char name[REG_NAME_MAX + 1] = "none";
    ssize_t n = reg_current_get(reg, c->plugin, name, sizeof(name));
    if (n >= 0)
        name[n] = '\0';
    else
        strcpy(name, "none");
    if (ncur < 16)
        snprintf(cur_at[ncur++], sizeof(cur_at[0]), "%d %s", (int)c->kind, name);
}

static uint64_t healthy_inst(uint64_t plugin, const char *alloc)
{
    static const struct reg_fingerprint fp = { .provider = "x", .version = "1",
                                               .nodeid = "n1", .topology = "",
                                               .capabilities = "" };
    struct reg_node in;
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", alloc), 0);
    cr_assert_eq(reg_instance_lookup(reg, plugin, alloc, &in), 0);
    cr_assert_eq(reg_socket_set(reg, in.seq, "/run/a.sock"), 0);
    cr_assert_eq(reg_get(reg, in.seq, &in), 0);
    ncur = 0;
    struct reg_probe p = { .gen = in.gen, .outcome = REG_PROBE_OK, .fp = &fp };
    cr_assert_eq(reg_probe_result(reg, in.seq, &p), 0);
    return in.seq;
}

/* The health change of the instance becoming current (whose subscriber
 * drops the kernel's cached `ready` page) sees the old current; the current
 * change sees the new one. */
Test(events_publish, current_moves_after_the_subscribers_of_the_health_before_it)
{
    struct reg_opts o = { .events_ring = 64, .health_timeout_ms = 1000 };
    cr_assert_eq(reg_open(&reg, &o), 0);
    cr_assert_eq(reg_plugin_create(reg, REG_NODE, "p"), 0);
    struct reg_node pn;
    cr_assert_eq(reg_plugin_lookup(reg, REG_NODE, "p", &pn), 0);
    cr_assert_eq(reg_subscribe(reg, record_current, NULL), 0);
    healthy_inst(pn.seq, "a");
    uint64_t b = healthy_inst(pn.seq, "b");
    char want[3][sizeof(cur_at[0])];
    snprintf(want[0], sizeof(want[0]), "%d a", REG_C_HEALTH);
    snprintf(want[1], sizeof(want[1]), "%d b", REG_C_CURRENT);
    bool health_seen = false, current_seen = false;
    for (int k = 0; k < ncur; k++) {
        int kind = atoi(cur_at[k]);
        if (kind == REG_C_HEALTH) {
            cr_assert_str_eq(cur_at[k], want[0], "b's health change saw current move already");
            health_seen = true;
        } else if (kind == REG_C_CURRENT) {
            cr_assert(health_seen, "current notified before b's health");
            cr_assert_str_eq(cur_at[k], want[1]);
            current_seen = true;
        }
    }
    cr_assert(health_seen && current_seen, "%d notifications", ncur);
    struct reg_node now;
    cr_assert_eq(reg_get(reg, pn.seq, &now), 0);
    cr_assert_eq(now.current, b);
    /* b deregistered: current goes back to a with b's removal */
    ncur = 0;
    cr_assert_eq(reg_instance_deregister(reg, REG_NODE, "p", "b"), 0);
    cr_assert_eq(ncur, 2, "removal and current");
    snprintf(want[2], sizeof(want[2]), "%d a", REG_C_CURRENT);
    cr_assert_str_eq(cur_at[1], want[2]);
    reg_close(reg);
}

/* ---- the answer comes between the two kinds of subscribers ---- */

static char order[64];               /* b: a reg_subscribe one, r: the reply, a: an after one */
static size_t norder;
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;

static void mark(char what)
{
    pthread_mutex_lock(&order_mu);
    if (norder + 1 < sizeof(order))
        order[norder++] = what;
    pthread_mutex_unlock(&order_mu);
}

static void sub_before(const struct reg_change *c, void *arg)
{
    (void)arg;
    if (c->kind == REG_C_INST_ADD)
        mark('b');
}

static void sub_after(const struct reg_change *c, void *arg)
{
    (void)arg;
    if (c->kind == REG_C_INST_ADD)
        mark('a');
}

static int reply_rc = 1;
static uint64_t reply_pub;           /* ev_published() when the reply came */

static void on_reply(void *arg, int rc)
{
    (void)arg;
    reply_rc = rc;
    reply_pub = ev_published(reg_events(reg));
    mark('r');
}

/* A registry with plugin p, and a subscriber of each kind. */
static void open_with(reg_sub_fn before, reg_sub_fn after)
{
    struct reg_opts o = { .events_ring = 64, .health_timeout_ms = 1000 };
    cr_assert_eq(reg_open(&reg, &o), 0);
    cr_assert_eq(reg_plugin_create(reg, REG_NODE, "p"), 0);
    cr_assert_eq(reg_subscribe_after(reg, after, NULL), 0);
    cr_assert_eq(reg_subscribe(reg, before, NULL), 0);
}

Test(events_publish, a_queued_caller_is_answered_after_the_subscribers_before_it)
{
    open_with(sub_before, sub_after);
    uint64_t want = ev_next_seq(reg_events(reg)) + 1;
    /* queued (the FUSE thread's way): answered on the commit thread */
    reg_reply_set(on_reply, NULL);
    int rc = reg_instance_register(reg, REG_NODE, "p", "a");
    reg_reply_set(NULL, NULL);
    cr_assert_eq(rc, REG_QUEUED);
    reg_quiesce(reg);
    cr_assert_eq(reply_rc, 0);
    cr_assert_eq(reply_pub, want, "the reply came before the event was readable");
    pthread_mutex_lock(&order_mu);
    order[norder] = '\0';
    cr_assert_str_eq(order, "bra", "subscribers, reply, after-subscribers: %s", order);
    norder = 0;
    pthread_mutex_unlock(&order_mu);
    /* a waiting caller returns once both kinds ran */
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", "b"), 0);
    pthread_mutex_lock(&order_mu);
    order[norder] = '\0';
    cr_assert_str_eq(order, "ba", "%s", order);
    pthread_mutex_unlock(&order_mu);
    reg_close(reg);
}

/* ---- a leader lets go before its last subscribers ---- */

static char seq_log[64];             /* A/a: a's subscriber before/after the answer, B/b: b's */
static size_t nseq;
static bool b_applied_meanwhile;
static pthread_t b_thread;

static void log_seq(char what)
{
    pthread_mutex_lock(&order_mu);
    if (nseq + 1 < sizeof(seq_log))
        seq_log[nseq++] = what;
    pthread_mutex_unlock(&order_mu);
}

static void no_reply(void *arg, int rc)
{
    (void)arg;
    (void)rc;
}

/* A thread's registration of p/<alloc> as the FUSE thread does it: queued
 * with reply fn, leading its own commit. */
struct leading {
    const char *alloc;
    reg_reply_fn fn;
};

static void *register_leading(void *arg)
{
    const struct leading *l = arg;
    reg_reply_set(l->fn, NULL);
    reg_lead_offer(true);
    int rc = reg_instance_register(reg, REG_NODE, "p", l->alloc);
    reg_lead_offer(false);
    reg_reply_set(NULL, NULL);
    struct reg *due = reg_lead_due();
    if (rc == REG_QUEUED && due)
        reg_lead(due);
    return NULL;
}

static const struct leading b_leading = { "b", no_reply };

static bool b_exists(void *arg)
{
    (void)arg;
    struct reg_node pn, in;
    return reg_plugin_lookup(reg, REG_NODE, "p", &pn) == 0 &&
           reg_instance_lookup(reg, pn.seq, "b", &in) == 0;
}

static void seq_before(const struct reg_change *c, void *arg)
{
    (void)arg;
    if (c->kind == REG_C_INST_ADD)
        log_seq(c->alloc_name[0] == 'a' ? 'A' : 'B');
}

/* a's: registers b meanwhile, and sees it committed and applied before
 * this subscriber returns; b's subscribers wait for it. */
static void seq_after(const struct reg_change *c, void *arg)
{
    (void)arg;
    if (c->kind != REG_C_INST_ADD)
        return;
    log_seq(c->alloc_name[0]);
    if (c->alloc_name[0] != 'a')
        return;
    cr_assert_eq(pthread_create(&b_thread, NULL, register_leading, (void *)&b_leading), 0);
    b_applied_meanwhile = tu_wait_for(b_exists, NULL, 3000);
    usleep(50 * 1000);               /* b's subscribers, if they did not wait, ran by now */
    log_seq('.');
}

Test(events_publish, the_next_mutation_is_led_while_the_last_subscribers_run)
{
    open_with(seq_before, seq_after);
    cr_assert_eq(reg_instance_register(reg, REG_NODE, "p", "a"), 0);
    pthread_join(b_thread, NULL);
    reg_quiesce(reg);
    cr_assert(b_applied_meanwhile, "b waited for a's last subscribers to be led");
    pthread_mutex_lock(&order_mu);
    seq_log[nseq] = '\0';
    cr_assert_str_eq(seq_log, "Aa.Bb", "the subscribers out of commit order: %s", seq_log);
    pthread_mutex_unlock(&order_mu);
    reg_close(reg);
}

/* ---- reg_close waits for a leader's last subscribers ---- */

static int slow_done;                /* the after-subscriber finished (atomic) */

static void slow_after(const struct reg_change *c, void *arg)
{
    (void)arg;
    if (c->kind != REG_C_INST_ADD)
        return;
    usleep(200 * 1000);
    __atomic_store_n(&slow_done, 1, __ATOMIC_RELEASE);
}

static int replied;

static void flag_reply(void *arg, int rc)
{
    (void)arg;
    (void)rc;
    __atomic_store_n(&replied, 1, __ATOMIC_RELEASE);
}

static const struct leading z_leading = { "z", flag_reply };

static bool was_replied(void *arg)
{
    (void)arg;
    return __atomic_load_n(&replied, __ATOMIC_ACQUIRE);
}

Test(events_publish, close_waits_for_the_last_subscribers_of_a_leader_that_let_go)
{
    open_with(sub_before, slow_after);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, register_leading, (void *)&z_leading), 0);
    cr_assert(tu_wait_for(was_replied, NULL, 3000), "z was not answered");
    cr_assert_eq(__atomic_load_n(&slow_done, __ATOMIC_ACQUIRE), 0,
                 "answered only after the after-subscriber");
    reg_close(reg);                  /* the leader still in slow_after: must wait */
    cr_assert_eq(__atomic_load_n(&slow_done, __ATOMIC_ACQUIRE), 1,
                 "reg_close returned while a leader ran its last subscribers");
    pthread_join(th, NULL);
}
