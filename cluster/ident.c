/* cluster identity: the instance ID and lease ID of this state dir, kept
 * in their own small LMDB file <state>/cluster.mdb (MDB_NOSUBDIR), apart
 * from the registry's store (whose schema and checks they would change).
 * See publish.h. */
#include "cluster/publish.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const MDB_val key_instance = { 8, "instance" }, key_lease = { 5, "lease" };

static int lmdb_errno(int rc)
{
    return rc == 0 ? 0 : rc > 0 ? -rc : -EIO;
}

static int put(MDB_txn *txn, MDB_dbi dbi, const MDB_val *k, const char *v)
{
    MDB_val val = { strlen(v), (void *)v };
    return mdb_put(txn, dbi, (MDB_val *)k, &val, 0);
}

/* The value of k into buf (cap bytes, NUL-terminated); "" when absent. */
static int get(MDB_txn *txn, MDB_dbi dbi, const MDB_val *k, char *buf, size_t cap)
{
    MDB_val val;
    int rc = mdb_get(txn, dbi, (MDB_val *)k, &val);
    buf[0] = '\0';
    if (rc == MDB_NOTFOUND)
        return 0;
    if (rc == 0 && val.mv_size < cap) {
        memcpy(buf, val.mv_data, val.mv_size);
        buf[val.mv_size] = '\0';
    }
    return rc;
}

/* Open the file, run fn in a write transaction, commit. */
static int with_txn(const char *state, int (*fn)(MDB_txn *, MDB_dbi, void *), void *arg)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/cluster.mdb", state);
    MDB_env *env;
    int rc = mdb_env_create(&env);
    if (rc)
        return lmdb_errno(rc);
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    if ((rc = mdb_env_set_mapsize(env, 1 << 20)) == 0 &&
        (rc = mdb_env_open(env, path, MDB_NOSUBDIR, 0600)) == 0 &&
        (rc = mdb_txn_begin(env, NULL, 0, &txn)) == 0 &&
        (rc = mdb_dbi_open(txn, NULL, 0, &dbi)) == 0 && (rc = fn(txn, dbi, arg)) == 0) {
        rc = mdb_txn_commit(txn);
        txn = NULL;
    }
    if (txn)
        mdb_txn_abort(txn);
    mdb_env_close(env);
    return lmdb_errno(rc);
}

struct ident_arg {
    char *instance;             /* CL_INSTANCE_LEN + 1 */
    int64_t *lease;
    int64_t new_lease;
};

static int load_fn(MDB_txn *txn, MDB_dbi dbi, void *arg)
{
    struct ident_arg *a = arg;
    char lease[32];
    int rc = get(txn, dbi, &key_instance, a->instance, CL_INSTANCE_LEN + 1);
    if (rc == 0)
        rc = get(txn, dbi, &key_lease, lease, sizeof(lease));
    if (rc)
        return rc;
    *a->lease = strtoll(lease, NULL, 16);
    if (strlen(a->instance) == CL_INSTANCE_LEN)
        return 0;
    uint8_t raw[CL_INSTANCE_LEN / 2];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return EIO;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(a->instance + 2 * i, 3, "%02x", raw[i]);
    return put(txn, dbi, &key_instance, a->instance);
}

int cl_ident_load(const char *state, char instance[CL_INSTANCE_LEN + 1], int64_t *lease)
{
    struct ident_arg a = { instance, lease, 0 };
    return with_txn(state, load_fn, &a);
}

static int save_fn(MDB_txn *txn, MDB_dbi dbi, void *arg)
{
    struct ident_arg *a = arg;
    char lease[32];
    snprintf(lease, sizeof(lease), "%" PRIx64, (uint64_t)a->new_lease);
    return put(txn, dbi, &key_lease, lease);
}

int cl_ident_save_lease(const char *state, int64_t lease)
{
    struct ident_arg a = { NULL, NULL, lease };
    return with_txn(state, save_fn, &a);
}
