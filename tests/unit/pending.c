/* Group commit through the registry API, on a real LMDB store: validation
 * against what is queued, batches, failed commits (issue 14 tests 2, 3).
 * Every commit is held by the test-only reg_test_commit_delay_ms so that
 * mutations started meanwhile queue behind it. */
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/storeutil.h"
#include "tests/lib/testutil.h"

static char *tmp;
static char state[PATH_MAX];
static struct su s;

static void setup(void)
{
    tmp = tu_tmpdir("pending");
    cr_assert(tmp);
    snprintf(state, sizeof(state), "%s/state", tmp);
    s = (struct su){ .dir = state };
    cr_assert_eq(su_open(&s), 0, "%s", s.err);
}

static void teardown(void)
{
    reg_test_commit_delay_ms = 0;
    reg_test_fail_commit = NULL;
    su_close(&s);
    tu_rmrf(tmp);
    free(tmp);
}

TestSuite(pending, .init = setup, .fini = teardown, .timeout = 60);

enum op { OP_PLUGIN_ADD, OP_PLUGIN_DEL, OP_INST_ADD, OP_INST_DEL, OP_ATTR, OP_SOCKET };

struct call {
    enum op op;
    const char *plugin, *alloc, *value;
    uint64_t inst;
    int delay_ms;
    int rc;
    int64_t took_ms;
    pthread_t th;
};

static void *run_call(void *arg)
{
    struct call *c = arg;
    tu_sleep_ms(c->delay_ms);
    int64_t t0 = tu_now_ms();
    switch (c->op) {
    case OP_PLUGIN_ADD: c->rc = reg_plugin_create(s.reg, REG_NODE, c->plugin); break;
    case OP_PLUGIN_DEL: c->rc = reg_plugin_remove(s.reg, REG_NODE, c->plugin); break;
    case OP_INST_ADD: c->rc = reg_instance_register(s.reg, REG_NODE, c->plugin, c->alloc); break;
    case OP_INST_DEL: c->rc = reg_instance_deregister(s.reg, REG_NODE, c->plugin, c->alloc); break;
    case OP_ATTR:
        c->rc = reg_attr_store(s.reg, c->inst, REG_A_MOUNT_POINT, c->value, strlen(c->value));
        break;
    case OP_SOCKET: c->rc = reg_socket_set(s.reg, c->inst, c->value); break;
    }
    c->took_ms = tu_now_ms() - t0;
    return NULL;
}

/* Run the calls concurrently (each after its delay) and wait for all. */
static void run_all(struct call *c, int n)
{
    for (int k = 0; k < n; k++)
        cr_assert_eq(pthread_create(&c[k].th, NULL, run_call, &c[k]), 0);
    for (int k = 0; k < n; k++)
        pthread_join(c[k].th, NULL);
}

static void reopen(void)
{
    su_close(&s);
    s = (struct su){ .dir = state };
    cr_assert_eq(su_open(&s), 0, "%s", s.err);
}

Test(pending, same_new_instance_twice_one_wins_the_other_eexist_at_once)
{
    cr_assert_eq(reg_plugin_create(s.reg, REG_NODE, "p"), 0);
    reg_test_commit_delay_ms = 1000;
    struct call c[2] = { { .op = OP_INST_ADD, .plugin = "p", .alloc = "a" },
                         { .op = OP_INST_ADD, .plugin = "p", .alloc = "a", .delay_ms = 100 } };
    run_all(c, 2);
    cr_assert_eq(c[0].rc, 0);
    cr_assert_eq(c[1].rc, -EEXIST, "validated against the queued registration: %d", c[1].rc);
    cr_assert_lt(c[1].took_ms, 700, "refused at validation, not after the commit");
    char *now = su_dump(s.reg, true);
    reopen();
    char *restored = su_dump(s.reg, true);
    cr_assert_str_eq(restored, now);
    free(now);
    free(restored);
}

Test(pending, instance_under_a_plugin_being_removed_is_enoent)
{
    cr_assert_eq(reg_plugin_create(s.reg, REG_NODE, "q"), 0);
    reg_test_commit_delay_ms = 1000;
    struct call c[3] = { { .op = OP_PLUGIN_DEL, .plugin = "q" },
                         { .op = OP_INST_ADD, .plugin = "q", .alloc = "a", .delay_ms = 100 },
                         { .op = OP_PLUGIN_ADD, .plugin = "q", .delay_ms = 150 } };
    run_all(c, 3);
    cr_assert_eq(c[0].rc, 0);
    cr_assert_eq(c[1].rc, -ENOENT, "no instance under a plugin whose rmdir is queued");
    cr_assert_eq(c[2].rc, 0, "a queued removal frees the name for a new plugin");
    reg_test_commit_delay_ms = 0;
    reopen();
    cr_assert_eq(su_inst(s.reg, REG_NODE, "q", "a"), -ENOENT);
    struct reg_node n;
    cr_assert_eq(reg_plugin_lookup(s.reg, REG_NODE, "q", &n), 0);
    cr_assert_eq(n.count, 0, "no dangling instance");
}

Test(pending, plugin_with_a_queued_registration_is_not_empty)
{
    cr_assert_eq(reg_plugin_create(s.reg, REG_NODE, "p"), 0);
    reg_test_commit_delay_ms = 1000;
    struct call c[2] = { { .op = OP_INST_ADD, .plugin = "p", .alloc = "a" },
                         { .op = OP_PLUGIN_DEL, .plugin = "p", .delay_ms = 100 } };
    run_all(c, 2);
    cr_assert_eq(c[0].rc, 0);
    cr_assert_eq(c[1].rc, -ENOTEMPTY);
}

Test(pending, max_instances_counts_queued_registrations)
{
    su_close(&s);
    s = (struct su){ .dir = state };
    /* su_open with max_instances 2: open the store and registry by hand */
    char err[256];
    cr_assert_eq(store_open(&s.st, state, 0, err, sizeof(err)), 0, "%s", err);
    struct reg_opts o = { .backend = store_backend(s.st), .max_instances = 2 };
    cr_assert_eq(reg_open(&s.reg, &o), 0);
    cr_assert_eq(reg_plugin_create(s.reg, REG_NODE, "p"), 0);
    reg_test_commit_delay_ms = 1000;
    static const char *const names[] = { "a", "b", "c", "d" };
    struct call c[4];
    for (int k = 0; k < 4; k++)
        c[k] = (struct call){ .op = OP_INST_ADD, .plugin = "p", .alloc = names[k],
                              .delay_ms = k ? 100 : 0 };
    run_all(c, 4);
    int ok = 0, nospc = 0;
    for (int k = 0; k < 4; k++) {
        ok += c[k].rc == 0;
        nospc += c[k].rc == -ENOSPC;
    }
    cr_assert_eq(ok, 2);
    cr_assert_eq(nospc, 2);
}

/* The queued socket change makes a probe of the old generation stale. */
Test(pending, probe_of_a_socket_being_changed_is_stale)
{
    int64_t i = su_register(s.reg, REG_NODE, "p", "a");
    cr_assert_gt(i, 0);
    cr_assert_eq(reg_socket_set(s.reg, (uint64_t)i, "/run/one.sock"), 0);
    struct reg_node n;
    cr_assert_eq(reg_get(s.reg, (uint64_t)i, &n), 0);
    reg_test_commit_delay_ms = 1000;
    struct call c = { .op = OP_SOCKET, .inst = (uint64_t)i, .value = "/run/two.sock" };
    cr_assert_eq(pthread_create(&c.th, NULL, run_call, &c), 0);
    tu_sleep_ms(100);
    static const struct reg_fingerprint fp = { "x", "1", "node", 0, "", "" };
    struct reg_probe pr = { .gen = n.gen, .outcome = REG_PROBE_OK, .fp = &fp };
    cr_assert_eq(reg_probe_result(s.reg, (uint64_t)i, &pr), -ESTALE);
    pthread_join(c.th, NULL);
    cr_assert_eq(c.rc, 0);
}

/* Writers of one batch share a commit; a failed commit fails them all (and
 * those queued behind), and changes nothing: memory, events, store. */
Test(pending, failed_commit_fails_the_batch_and_changes_nothing)
{
    int64_t i = su_register(s.reg, REG_NODE, "p", "old");
    cr_assert_gt(i, 0);
    cr_assert_eq(reg_attr_store(s.reg, (uint64_t)i, REG_A_MOUNT_POINT, "/m", 2), 0);
    char *before = su_dump(s.reg, true);
    uint64_t ev = ev_next_seq(reg_events(s.reg));
    char trigger[PATH_MAX];
    snprintf(trigger, sizeof(trigger), "%s/fail", tmp);
    FILE *f = fopen(trigger, "w");
    cr_assert(f);
    fclose(f);
    reg_test_fail_commit = trigger;
    reg_test_commit_delay_ms = 1000;
    struct call c[6] = {
        { .op = OP_INST_ADD, .plugin = "p", .alloc = "a" },
        { .op = OP_INST_ADD, .plugin = "p", .alloc = "b", .delay_ms = 100 },
        { .op = OP_ATTR, .inst = (uint64_t)i, .value = "/n", .delay_ms = 100 },
        { .op = OP_PLUGIN_ADD, .plugin = "r", .delay_ms = 100 },
        { .op = OP_INST_ADD, .plugin = "r", .alloc = "x", .delay_ms = 150 },
        { .op = OP_INST_DEL, .plugin = "p", .alloc = "old", .delay_ms = 150 },
    };
    run_all(c, 6);
    for (int k = 0; k < 6; k++)
        cr_assert_eq(c[k].rc, -EIO, "call %d: %d", k, c[k].rc);
    char *after = su_dump(s.reg, true);
    cr_assert_str_eq(after, before, "a failed batch changed the registry");
    cr_assert_eq(ev_next_seq(reg_events(s.reg)), ev, "a failed batch emitted events");
    /* the names are free again, and a restart shows what was there */
    reg_test_commit_delay_ms = 0;
    cr_assert_eq(reg_instance_register(s.reg, REG_NODE, "p", "a"), 0);
    cr_assert_eq(reg_instance_deregister(s.reg, REG_NODE, "p", "a"), 0);
    reopen();
    char *restored = su_dump(s.reg, true);
    cr_assert_str_eq(restored, before);
    free(before);
    free(after);
    free(restored);
}

/* Many writers, few commits: a batch holds every mutation queued meanwhile,
 * and each caller sees its own change when it returns. */
Test(pending, a_batch_answers_each_caller_after_its_commit)
{
    cr_assert_eq(reg_plugin_create(s.reg, REG_NODE, "p"), 0);
    reg_test_commit_delay_ms = 200;
    enum { N = 16 };
    struct call c[N];
    char names[N][16];
    for (int k = 0; k < N; k++) {
        snprintf(names[k], sizeof(names[k]), "i%d", k);
        c[k] = (struct call){ .op = OP_INST_ADD, .plugin = "p", .alloc = names[k],
                              .delay_ms = k ? 50 : 0 };
    }
    int64_t t0 = tu_now_ms();
    run_all(c, N);
    int64_t took = tu_now_ms() - t0;
    for (int k = 0; k < N; k++)
        cr_assert_eq(c[k].rc, 0);
    /* one commit alone would be 200 ms each: 16 in a row take 3.2 s */
    cr_assert_lt(took, 16 * 200, "16 writers did not share commits (%lld ms)", (long long)took);
    reg_test_commit_delay_ms = 0;
    char *now = su_dump(s.reg, true);
    reopen();
    char *restored = su_dump(s.reg, true);
    cr_assert_str_eq(restored, now);
    free(now);
    free(restored);
}
