/* The page walk (registry/store_pages.c) never refuses a healthy store:
 * plain LMDB, with random puts and deletes of small, large and overflow
 * values, now and then everything deleted one by one (root collapse, empty
 * tree) or dropped, and readers holding old snapshots so that the free
 * tree grows records and levels; the walk runs after every commit. */
#include <criterion/criterion.h>

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/testutil.h"
#include "registry/store_int.h"

static char *tmp;

static void setup(void)
{
    tmp = tu_tmpdir("walk");
    cr_assert(tmp, "tu_tmpdir: %s", strerror(errno));
}

static void teardown(void)
{
    tu_rmrf(tmp);
    free(tmp);
}

TestSuite(walk, .init = setup, .fini = teardown);

/* One transaction of ops random puts and deletes of keys k00000..k02999
 * (some 300 bytes longer), values of 1..900 bytes or 3..18 KB. */
static void churn(MDB_txn *txn, MDB_dbi dbi, int ops, unsigned *seed)
{
    static char val[18000];
    for (int k = 0; k < ops; k++) {
        char key[400];
        int kl = snprintf(key, sizeof(key), "k%05u", rand_r(seed) % 3000);
        if (rand_r(seed) % 7 == 0) {
            memset(key + kl, 'x', 300);
            kl += 300;
        }
        MDB_val kv = { (size_t)kl, key }, vv;
        int what = rand_r(seed) % 10, rc;
        if (what < 4) {
            rc = mdb_del(txn, dbi, &kv, NULL);
            cr_assert(rc == 0 || rc == MDB_NOTFOUND, "del: %s", mdb_strerror(rc));
            continue;
        }
        vv.mv_size = what == 9 ? 3000 + (size_t)rand_r(seed) % 15000
                               : 1 + (size_t)rand_r(seed) % 900;
        memset(val, 'a' + k % 26, vv.mv_size);
        vv.mv_data = val;
        rc = mdb_put(txn, dbi, &kv, &vv, 0);
        cr_assert_eq(rc, 0, "put: %s", mdb_strerror(rc));
    }
}

static void delete_all(MDB_txn *txn, MDB_dbi dbi)
{
    MDB_cursor *c;
    MDB_val k, v;
    cr_assert_eq(mdb_cursor_open(txn, dbi, &c), 0);
    while (mdb_cursor_get(c, &k, &v, MDB_FIRST) == 0)
        cr_assert_eq(mdb_cursor_del(c, 0), 0);
    mdb_cursor_close(c);
}

static void run(const unsigned seed0, int rounds)
{
    unsigned seed = seed0;
    char file[4096], err[512];
    snprintf(file, sizeof(file), "%s/data.mdb", tmp);
    MDB_env *env;
    MDB_txn *txn, *held = NULL, *rd;
    MDB_dbi dbi;
    cr_assert_eq(mdb_env_create(&env), 0);
    cr_assert_eq(mdb_env_set_mapsize(env, STORE_MAP_SIZE), 0);
    cr_assert_eq(mdb_env_open(env, tmp, MDB_NOSYNC | MDB_NOTLS, 0600), 0);
    for (int r = 0; r < rounds; r++) {
        if (r % 100 == 0) {          /* a reader keeps 100 commits of pages */
            if (held)
                mdb_txn_abort(held);
            cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &held), 0);
        }
        rd = NULL;
        if (rand_r(&seed) % 5 == 0)
            cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &rd), 0);
        cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
        cr_assert_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
        if (r % 250 == 120)
            delete_all(txn, dbi);
        else if (r % 250 == 200)
            cr_assert_eq(mdb_drop(txn, dbi, 0), 0);
        else
            churn(txn, dbi, 1 + rand_r(&seed) % 40, &seed);
        cr_assert_eq(mdb_txn_commit(txn), 0);
        if (rd)
            mdb_txn_abort(rd);
        int rc = store_check_pages(file, err, sizeof(err));
        cr_assert_eq(rc, 0, "seed %u round %d: a healthy store refused: %s", seed0, r, err);
    }
    if (held)
        mdb_txn_abort(held);
    MDB_stat fs;
    cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    cr_assert_eq(mdb_stat(txn, 0, &fs), 0);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    cr_assert_gt(fs.ms_entries, 10, "the free tree had records to check (%zu)", fs.ms_entries);
}

Test(walk, healthy_churn_is_never_refused, .timeout = 300)
{
    run(5, 1500);
}

Test(walk, healthy_churn_other_seed, .timeout = 300)
{
    run(31, 1500);
}

/* The radix sort the start-up sorts records with (store_codec.c): the
 * order qsort gives, stable, whatever bytes the keys use (one, two, all
 * eight, the top bit). */
struct keyed {
    uint32_t idx;
    uint64_t key;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;   /* stable: first seen first */
}

Test(sort, radix_matches_a_stable_qsort)
{
    static const uint64_t masks[] = { 0, 0xff, 0xffff, 0xffffff, ~0ull };
    enum { N = 3000 };
    struct keyed *a = calloc(N, sizeof(*a)), *b = calloc(N, sizeof(*b));
    uint64_t *u = calloc(N, sizeof(*u));
    cr_assert(a && b && u);
    srand(26);
    for (size_t m = 0; m < sizeof(masks) / sizeof(masks[0]); m++)
        for (size_t n = 0; n <= N; n = n ? n * 3 : 1) {
            for (size_t k = 0; k < n; k++) {
                uint64_t r = (uint64_t)rand() << 42 ^ (uint64_t)rand() << 21 ^ (uint64_t)rand();
                a[k] = (struct keyed){ (uint32_t)k, r % 97 == 0 ? 7 & masks[m] : r & masks[m] };
                u[k] = r & masks[m];
            }
            memcpy(b, a, n * sizeof(*a));
            qsort(b, n, sizeof(*b), cmp_keyed);
            cr_assert_eq(store_sort_by_u64(a, n, sizeof(*a), offsetof(struct keyed, key)), 0);
            for (size_t k = 0; k < n; k++)
                cr_assert(a[k].key == b[k].key && a[k].idx == b[k].idx,
                          "mask %zu, n %zu: element %zu", m, n, k);
            store_sort_u64(u, n);
            for (size_t k = 1; k < n; k++)
                cr_assert_leq(u[k - 1], u[k], "store_sort_u64: mask %zu, n %zu", m, n);
        }
    free(a);
    free(b);
    free(u);
}
