/* The ring of committed requests (DESIGN 13 "Exactly once", store.h): a
 * mutation that answers a FUSE request records (nonce, unique, opcode,
 * parent, name) and its outcome in its own commit; a resent request finds
 * it only on the same connection and with the same opcode, parent and
 * name. A real LMDB store in a temp dir per test. */
#include "tests/unit/store_fixture.h"

#define OP_MKDIR 9                   /* FUSE opcodes (linux/fuse.h) */
#define OP_RMDIR 11
#define OP_WRITE 16
#define NONCE 0x5eedf00dULL

static struct reg_ring_key key(uint64_t unique, uint32_t opcode, uint64_t parent,
                               const char *name)
{
    struct reg_ring_key k = { .unique = unique, .parent = parent, .opcode = opcode };
    snprintf(k.name, sizeof(k.name), "%s", name);
    return k;
}

/* mkdir csi-node/<plugin> as FUSE request `unique` (parent nodeid 5). */
static void mkdir_as(uint64_t unique, const char *plugin)
{
    struct reg_ring_key k = key(unique, OP_MKDIR, 5, plugin);
    reg_ring_set(&k);
    int rc = reg_plugin_create(s.reg, REG_NODE, plugin);
    reg_ring_set(NULL);
    cr_assert_eq(rc, 0, "mkdir %s: %d", plugin, rc);
}

static int find(uint64_t unique, uint32_t opcode, uint64_t parent, const char *name, int *rc)
{
    struct reg_ring_key k = key(unique, opcode, parent, name);
    *rc = -1;
    return reg_ring_find(s.reg, &k, rc);
}

static void open_ring(uint64_t nonce, bool fresh)
{
    open_ok();
    cr_assert_eq(store_ring_start(s.st, nonce, fresh), 0);
}

Test(store, ring_match_returns_the_recorded_outcome)
{
    open_ring(NONCE, true);
    mkdir_as(42, "ebs");
    int rc;
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), 0, "a committed mkdir is in the ring");
    cr_assert_eq(rc, 0, "its outcome: success");
}

Test(store, ring_nonce_mismatch_is_not_found)
{
    open_ring(NONCE, true);
    mkdir_as(42, "ebs");
    int rc;
    cr_assert_eq(store_ring_start(s.st, NONCE + 1, false), 0);
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), -ENOENT,
                 "the same unique on another connection is another request");
    mkdir_as(42, "efs");
    cr_assert_eq(find(42, OP_MKDIR, 5, "efs", &rc), 0, "this connection's unique 42");
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), -ENOENT);
}

Test(store, ring_opcode_parent_or_name_mismatch_is_not_found)
{
    open_ring(NONCE, true);
    mkdir_as(42, "ebs");
    int rc;
    cr_assert_eq(find(42, OP_RMDIR, 5, "ebs", &rc), -ENOENT, "another opcode");
    cr_assert_eq(find(42, OP_MKDIR, 6, "ebs", &rc), -ENOENT, "another parent");
    cr_assert_eq(find(42, OP_MKDIR, 5, "efs", &rc), -ENOENT, "another name");
    cr_assert_eq(find(43, OP_MKDIR, 5, "ebs", &rc), -ENOENT, "another unique");
}

Test(store, ring_refused_mutation_records_nothing)
{
    open_ring(NONCE, true);
    mkdir_as(42, "ebs");
    struct reg_ring_key k = key(44, OP_MKDIR, 5, "ebs");
    reg_ring_set(&k);
    cr_assert_eq(reg_plugin_create(s.reg, REG_NODE, "ebs"), -EEXIST);
    reg_ring_set(NULL);
    int rc;
    cr_assert_eq(find(44, OP_MKDIR, 5, "ebs", &rc), -ENOENT, "only commits are recorded");
}

/* An attribute write as FUSE WRITE request `unique` on nodeid 77. */
static void write_as(uint64_t unique, uint64_t inst)
{
    struct reg_ring_key k = key(unique, OP_WRITE, 77, "");
    const char *v = unique % 2 ? "/m/odd" : "/m/even";
    reg_ring_set(&k);
    int rc = reg_attr_store(s.reg, inst, REG_A_MOUNT_POINT, v, strlen(v));
    reg_ring_set(NULL);
    cr_assert_eq(rc, 0, "write %llu: %d", (unsigned long long)unique, rc);
}

Test(store, ring_unique_outside_the_ring_is_evicted)
{
    s.flags = STORE_NOSYNC;          /* 4,097 commits */
    open_ring(NONCE, true);
    uint64_t a0 = reg_ok("ebs", "a0");
    write_as(2, a0);
    int rc;
    cr_assert_eq(find(2, OP_WRITE, 77, "", &rc), 0);
    for (uint64_t u = 3; u < 3 + STORE_RING_SIZE; u++)
        write_as(u, a0);
    cr_assert_eq(find(2, OP_WRITE, 77, "", &rc), -ENOENT,
                 "4,096 later mutations pushed it out");
    cr_assert_eq(find(3, OP_WRITE, 77, "", &rc), 0, "the oldest of the last 4,096 stays");
    cr_assert_eq(find(2 + STORE_RING_SIZE, OP_WRITE, 77, "", &rc), 0, "the newest");
}

static int replies;                  /* queued mutations answered 0 */

static void on_reply(void *arg, int rc)
{
    (void)arg;
    if (rc == 0)
        __atomic_add_fetch(&replies, 1, __ATOMIC_RELAXED);
}

/* mkdir as request `unique`, queued as a FUSE thread queues it: the
 * registry answers it after its commit (on_reply). */
static void mkdir_queued(uint64_t unique, const char *plugin)
{
    struct reg_ring_key k = key(unique, OP_MKDIR, 5, plugin);
    reg_reply_set(on_reply, NULL);
    reg_ring_set(&k);
    int rc = reg_plugin_create(s.reg, REG_NODE, plugin);
    reg_ring_set(NULL);
    reg_reply_set(NULL, NULL);
    cr_assert_eq(rc, REG_QUEUED, "mkdir %s: %d", plugin, rc);
    reg_quiesce(s.reg);              /* answered */
}

/* The ring's records in the closed store's data.mdb ("r/" + 2 bytes). */
static size_t ring_records(void)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_cursor *c;
    MDB_val k = { 2, "r/" }, v;
    size_t n = 0;
    cr_assert_eq(mdb_env_create(&env), 0);
    cr_assert_eq(mdb_env_open(env, state, MDB_RDONLY, 0600), 0);
    cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    cr_assert_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    cr_assert_eq(mdb_cursor_open(txn, dbi, &c), 0);
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
         rc == 0 && k.mv_size == 4 && !memcmp(k.mv_data, "r/", 2);
         rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
        n++;
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return n;
}

Test(store, ring_answered_request_leaves_at_the_next_commit)
{
    s.flags = STORE_NOSYNC;          /* 200 commits */
    open_ring(NONCE, true);
    mkdir_queued(42, "ebs");
    cr_assert_eq(replies, 1, "answered after its commit");
    int rc;
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), 0, "answered, no commit since: kept");
    mkdir_as(43, "efs");             /* a waiting caller answers its request itself */
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), -ENOENT,
                 "the next commit dropped it: an answered request is never sent again");
    cr_assert_eq(find(43, OP_MKDIR, 5, "efs", &rc), 0,
                 "a request the registry did not answer keeps its record");
    for (uint64_t u = 100; u < 300; u++) {
        char name[16];
        snprintf(name, sizeof(name), "p%llu", (unsigned long long)u);
        mkdir_queued(u, name);
    }
    cr_assert_eq(replies, 201);
    cr_assert_eq(find(299, OP_MKDIR, 5, "p299", &rc), 0, "the last, no commit after it");
    cr_assert_eq(find(298, OP_MKDIR, 5, "p298", &rc), -ENOENT);
    su_close(&s);
    cr_assert_eq(ring_records(), 2, "in data.mdb: 43's and the last answered one's");
    open_ring(NONCE, false);         /* a takeover finds them */
    cr_assert_eq(find(299, OP_MKDIR, 5, "p299", &rc), 0);
    cr_assert_eq(find(43, OP_MKDIR, 5, "efs", &rc), 0);
}

/* An attribute write as request `unique`, queued (answered after its commit). */
static void write_queued(uint64_t unique, uint64_t inst)
{
    struct reg_ring_key k = key(unique, OP_WRITE, 77, "");
    reg_reply_set(on_reply, NULL);
    reg_ring_set(&k);
    int rc = reg_attr_store(s.reg, inst, REG_A_MOUNT_POINT, unique % 2 ? "/m/1" : "/m/2", 4);
    reg_ring_set(NULL);
    reg_reply_set(NULL, NULL);
    cr_assert_eq(rc, REG_QUEUED, "write %llu: %d", (unsigned long long)unique, rc);
    reg_quiesce(s.reg);
}

/* Every record answered and dropped, the next position read at open is 0;
 * a takeover keeps the connection's base, so its next record must not go
 * below it, where no look-up would see it. */
Test(store, ring_takeover_after_the_ring_emptied_numbers_past_its_base, .timeout = 120)
{
    s.flags = STORE_NOSYNC;          /* 4,098 commits */
    open_ring(NONCE - 1, true);
    mkdir_queued(40, "ebs");         /* position 0, answered: kept, no commit since */
    reopen();
    cr_assert_eq(store_ring_start(s.st, NONCE, true), 0, "a fresh connection: base 1");
    uint64_t a0 = reg_ok("ebs", "a0");
    for (uint64_t u = 2; u < 2 + STORE_RING_SIZE; u++)
        write_queued(u, a0);         /* positions 1 to 4,096: slot 0 written again */
    cr_assert_eq(reg_attr_store(s.reg, a0, REG_A_MOUNT_POINT, "/m/3", 4), 0,
                 "a commit with no request of its own drops the last answered");
    su_close(&s);
    cr_assert_eq(ring_records(), 0, "every record answered and dropped");
    open_ring(NONCE, false);         /* a takeover */
    mkdir_as(7, "efs");
    reopen();
    cr_assert_eq(store_ring_start(s.st, NONCE, false), 0, "and another");
    int rc;
    cr_assert_eq(find(7, OP_MKDIR, 5, "efs", &rc), 0,
                 "the first takeover's record is past the base it kept");
}

Test(store, ring_survives_close_and_reopen)
{
    open_ring(NONCE, true);
    mkdir_as(42, "ebs");
    reopen();
    cr_assert_eq(store_ring_start(s.st, NONCE, false), 0, "a takeover keeps the nonce");
    int rc;
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), 0, "in LMDB, not in memory");
    mkdir_as(43, "efs");
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), 0, "the next position follows, "
                 "it does not overwrite");
    cr_assert_eq(find(43, OP_MKDIR, 5, "efs", &rc), 0);
}

Test(store, ring_fresh_nonce_empties_it)
{
    open_ring(NONCE, true);
    mkdir_as(42, "ebs");
    reopen();
    cr_assert_eq(store_ring_start(s.st, NONCE + 1, true), 0, "a fresh connection");
    int rc;
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), -ENOENT);
    cr_assert_eq(store_ring_start(s.st, NONCE, false), 0, "a stale nonce handed back");
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), -ENOENT, "emptied, not only unmatched");
    reopen();                        /* and durably so */
    cr_assert_eq(store_ring_start(s.st, NONCE, false), 0);
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), -ENOENT);
}

Test(store, ring_damaged_record_refuses_the_store)
{
    open_ring(NONCE, true);
    mkdir_as(42, "ebs");
    su_close(&s);
    cr_assert_eq(su_raw_put(state, "r/AB", "junk", 4), 0);
    cr_assert_eq(su_open(&s), -EBADMSG, "a bad ring record is a bad record: %s", s.err);
    cr_assert(strstr(s.err, "r/AB"), "named: %s", s.err);
    cr_assert_eq(su_raw_put(state, "r/AB", NULL, 0), 0);
    cr_assert_eq(su_raw_put(state, "ring", "junk", 4), 0);
    cr_assert_eq(su_open(&s), -EBADMSG, "a bad ring control: %s", s.err);
    cr_assert(strstr(s.err, "\"ring\""), "named: %s", s.err);
}

Test(store, ring_fresh_connection_records_anew)
{
    open_ring(NONCE, true);
    for (uint64_t k = 0; k < 64; k++) {
        char name[16];
        snprintf(name, sizeof(name), "p%llu", (unsigned long long)k);
        mkdir_as(100 + k, name);
    }
    reopen();
    cr_assert_eq(store_ring_start(s.st, NONCE + 1, true), 0);
    int rc;
    cr_assert_eq(find(100, OP_MKDIR, 5, "p0", &rc), -ENOENT);
    mkdir_as(100, "q0");             /* uniques start again on a new connection */
    cr_assert_eq(find(100, OP_MKDIR, 5, "q0", &rc), 0, "the new connection's own record");
    reopen();
    cr_assert_eq(store_ring_start(s.st, NONCE + 1, false), 0, "its takeover");
    cr_assert_eq(find(100, OP_MKDIR, 5, "q0", &rc), 0);
    cr_assert_eq(find(101, OP_MKDIR, 5, "p1", &rc), -ENOENT, "never the old connection's");
}

Test(store, ring_control_alone_is_a_valid_store)
{
    open_ring(NONCE, true);          /* a fresh start writes the control, no commit yet */
    reopen();
    cr_assert_eq(store_ring_start(s.st, NONCE, false), 0);
    mkdir_as(42, "ebs");
    int rc;
    cr_assert_eq(find(42, OP_MKDIR, 5, "ebs", &rc), 0);
}
