/* Schema version 1 -> 2.
 *
 * Version 1 (proto/registry.proto) kept one instance per type and plugin,
 * inside the plugin's record, and no sequence numbers. Version 2 keys plugins
 * and instances apart and orders them by a shared sequence. The upgrade gives
 * every plugin and instance a seq in order of registration time (a plugin
 * before its instance on a tie, then by key), keeps every field, carries the
 * reserved event block over, and rewrites the whole database in one write
 * transaction, after a compacted copy of the environment to
 * <dir>/backup-v1-<YYYYMMDDTHHMMSSZ>/ made durable. A failure leaves the
 * store at version 1 (and the backup in place).
 */
#include "registry/store_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

struct v1obj {
    const Csifs__Store__V1Plugin *p;
    bool inst;                       /* the plugin's instance, else the plugin */
    uint64_t seq;
};

struct v1set {
    Csifs__Store__V1Plugin **p;
    size_t n, cap;
};

static int keep_v1(void *arg, enum store_kind kind, ProtobufCMessage *msg)
{
    struct v1set *s = arg;
    if (kind != SK_V1_PLUGIN)
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        Csifs__Store__V1Plugin **p = realloc(s->p, cap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        s->p = p;
        s->cap = cap;
    }
    s->p[s->n++] = (Csifs__Store__V1Plugin *)msg;
    return 1;
}

static int64_t obj_time(const struct v1obj *o)
{
    return o->inst ? o->p->instance->registered_ns : o->p->registered_ns;
}

static int cmp_obj(const void *a, const void *b)
{
    const struct v1obj *x = a, *y = b;
    int64_t tx = obj_time(x), ty = obj_time(y);
    if (tx != ty)
        return tx < ty ? -1 : 1;
    if (x->inst != y->inst)
        return x->inst ? 1 : -1;
    if (x->p->type != y->p->type)
        return x->p->type < y->p->type ? -1 : 1;
    return strcmp(x->p->name, y->p->name);
}

/* One v1 object as its v2 record. */
static int put_obj(MDB_txn *txn, MDB_dbi dbi, const struct v1obj *o)
{
    char buf[STORE_KEY_MAX];
    MDB_val key;
    if (!o->inst) {
        Csifs__Store__Plugin m = CSIFS__STORE__PLUGIN__INIT;
        m.type = o->p->type;
        m.name = o->p->name;
        m.seq = o->seq;
        m.registered_ns = o->p->registered_ns;
        store_key_plugin(&key, buf, (enum reg_type)m.type, m.name);
        return store_put_msg(txn, dbi, &key, SK_PLUGIN, &m.base);
    }
    const Csifs__Store__V1Instance *i = o->p->instance;
    Csifs__Store__Instance m = CSIFS__STORE__INSTANCE__INIT;
    m.type = o->p->type;
    m.plugin = o->p->name;
    m.alloc = i->alloc;
    m.seq = o->seq;
    m.registered_ns = i->registered_ns;
    m.socket = i->socket;
    m.ready = i->ready;
    m.fp = i->fp;
    m.mount_point = i->mount_point;
    m.container_mount_point = i->container_mount_point;
    store_key_inst(&key, buf, (enum reg_type)m.type, m.plugin, m.alloc);
    return store_put_msg(txn, dbi, &key, SK_INST, &m.base);
}

/* Empty the database and write it again as version 2, in txn. */
static int rewrite(MDB_txn *txn, MDB_dbi dbi, struct v1set *s, const struct store_meta *m1)
{
    struct v1obj *o = calloc(2 * s->n + 1, sizeof(*o));
    if (!o)
        return ENOMEM;
    size_t n = 0;
    for (size_t k = 0; k < s->n; k++) {
        o[n++] = (struct v1obj){ s->p[k], false, 0 };
        if (s->p[k]->instance)
            o[n++] = (struct v1obj){ s->p[k], true, 0 };
    }
    qsort(o, n, sizeof(*o), cmp_obj);
    char vbuf[12];
    MDB_val ver;
    store_version_val(STORE_VERSION, &ver, vbuf);
    int rc = mdb_drop(txn, dbi, 0);
    if (rc == 0)
        rc = mdb_put(txn, dbi, (MDB_val *)&store_key_version, &ver, 0);
    for (size_t k = 0; k < n && rc == 0; k++) {
        o[k].seq = k + 1;
        rc = put_obj(txn, dbi, &o[k]);
    }
    if (rc == 0) {
        Csifs__Store__Meta m = CSIFS__STORE__META__INIT;
        m.next_seq = n + 1;
        m.ev_reserved = m1->ev_reserved > 1 ? m1->ev_reserved : 1;
        rc = store_put_msg(txn, dbi, &store_key_meta, SK_META, &m.base);
    }
    free(o);
    return rc;
}

/* A compacted, durable copy of the environment in a new backup dir. */
static int backup(MDB_env *env, const char *dir, char *err, size_t errlen)
{
    char stamp[32], path[4200], file[4300];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
    for (int n = 0;; n++) {
        snprintf(path, sizeof(path), n ? "%s/backup-v1-%s-%d" : "%s/backup-v1-%s", dir, stamp, n);
        if (mkdir(path, 0700) == 0)
            break;
        if (errno != EEXIST || n == 99)
            return store_fail(err, errlen, -errno, "%s: %s", path, strerror(errno));
    }
    int rc = mdb_env_copy2(env, path, MDB_CP_COMPACT);
    if (rc != 0)
        return store_fail(err, errlen, store_errno(rc), "%s: backup before the upgrade "
                          "from schema version 1: %s", path, mdb_strerror(rc));
    snprintf(file, sizeof(file), "%s/%s", path, STORE_DATA);
    if ((rc = store_fsync_path(file, false)) < 0 || (rc = store_fsync_path(path, true)) < 0 ||
        (rc = store_fsync_path(dir, true)) < 0)
        return store_fail(err, errlen, rc, "%s: fsync of the backup: %s", path, strerror(-rc));
    return 0;
}

int store_upgrade_txn(MDB_txn *txn, MDB_dbi dbi, const char *file, char *err, size_t errlen)
{
    struct v1set set = { 0 };
    struct store_scan s = { .rec = keep_v1, .arg = &set };
    int rc = store_scan(txn, dbi, 1, &s, file, err, errlen);
    if (rc == 0)
        rc = rewrite(txn, dbi, &set, &s.meta);
    if (rc > 0)
        rc = store_fail(err, errlen, store_errno(rc), "%s: upgrade from schema version 1: %s",
                        file, mdb_strerror(rc));
    for (size_t k = 0; k < set.n; k++)
        protobuf_c_message_free_unpacked(&set.p[k]->base, NULL);
    free(set.p);
    return rc;
}

int store_upgrade_v1(MDB_env *env, MDB_dbi dbi, const char *dir, char *err, size_t errlen)
{
    char file[4200];
    snprintf(file, sizeof(file), "%s/%s", dir, STORE_DATA);
    int rc = backup(env, dir, err, errlen);
    if (rc < 0)
        return rc;
    MDB_txn *txn;
    if ((rc = mdb_txn_begin(env, NULL, 0, &txn)) == 0 &&
        (rc = store_upgrade_txn(txn, dbi, file, err, errlen)) == 0)
        rc = mdb_txn_commit(txn);    /* frees txn, even when it fails */
    else if (rc < 0)
        mdb_txn_abort(txn);
    if (rc > 0)
        rc = store_fail(err, errlen, store_errno(rc), "%s: upgrade from schema version 1: %s",
                        file, mdb_strerror(rc));
    return rc;
}
