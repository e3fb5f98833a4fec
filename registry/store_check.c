/* Validation of a state dir, read-only: the pages (store_pages.c), then LMDB
 * opened MDB_RDONLY | MDB_NOLOCK (so not even lock.mdb is touched), the
 * version, every record, and what records say of each other. Then, for the
 * forked check, a trial of the first write of store_open, aborted. */
#include "registry/store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct xcheck {
    MDB_txn *txn;
    MDB_dbi dbi;
    uint64_t *seqs;
    size_t n, cap;
    const char *file;
    char *err;
    size_t errlen;
};

static int add_seq(struct xcheck *x, uint64_t seq)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 256;
        uint64_t *s = realloc(x->seqs, cap * sizeof(*s));
        if (!s)
            return store_fail(x->err, x->errlen, -ENOMEM, "%s: out of memory", x->file);
        x->seqs = s;
        x->cap = cap;
    }
    x->seqs[x->n++] = seq;
    return 0;
}

/* store_scan callback: collect seqs; an instance needs its plugin record. */
static int xcheck_rec(void *arg, enum store_kind kind, ProtobufCMessage *msg)
{
    struct xcheck *x = arg;
    if (kind == SK_PLUGIN)
        return add_seq(x, ((Csifs__Store__Plugin *)msg)->seq);
    if (kind != SK_INST)
        return 0;
    const Csifs__Store__Instance *i = (const void *)msg;
    char buf[STORE_KEY_MAX];
    MDB_val key, val;
    store_key_plugin(&key, buf, (enum reg_type)i->type, i->plugin);
    int rc = mdb_get(x->txn, x->dbi, &key, &val);
    if (rc == MDB_NOTFOUND)
        return store_fail(x->err, x->errlen, -EBADMSG,
                          "%s: instance %s/%s/%s has no plugin record \"%s\"", x->file,
                          reg_type_names[i->type], i->plugin, i->alloc, buf);
    if (rc != 0)
        return store_fail(x->err, x->errlen, store_errno(rc), "%s: %s", x->file,
                          mdb_strerror(rc));
    return add_seq(x, i->seq);
}

/* After the scan: seqs unique and below next_seq; a meta when records exist. */
static int xcheck_end(struct xcheck *x, const struct store_scan *s, size_t entries)
{
    if (entries > 1u + s->has_ring_ctl && !s->has_meta)
        return store_fail(x->err, x->errlen, -EBADMSG, "%s: the meta record is missing",
                          x->file);
    store_sort_u64(x->seqs, x->n);
    for (size_t k = 1; k < x->n; k++)
        if (x->seqs[k] == x->seqs[k - 1])
            return store_fail(x->err, x->errlen, -EBADMSG,
                              "%s: sequence number %llu is used by two records", x->file,
                              (unsigned long long)x->seqs[k]);
    if (x->n && x->seqs[x->n - 1] >= s->meta.next_seq)
        return store_fail(x->err, x->errlen, -EBADMSG,
                          "%s: sequence number %llu is not below the meta's next_seq %llu",
                          x->file, (unsigned long long)x->seqs[x->n - 1],
                          (unsigned long long)s->meta.next_seq);
    return 0;
}

static int check_records(MDB_env *env, int *version, const char *file, char *err,
                         size_t errlen)
{
    struct xcheck x = { .file = file, .err = err, .errlen = errlen };
    struct store_scan s = { .rec = xcheck_rec, .arg = &x };
    unsigned flags = 0;
    MDB_stat st;
    int rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &x.txn);
    if (rc == 0 && (rc = mdb_dbi_open(x.txn, NULL, 0, &x.dbi)) == 0 &&
        (rc = mdb_dbi_flags(x.txn, x.dbi, &flags)) == 0)
        rc = mdb_stat(x.txn, x.dbi, &st);
    if (rc != 0)
        rc = store_fail(err, errlen, store_errno(rc), "%s: %s", file, mdb_strerror(rc));
    else if (flags)
        rc = store_fail(err, errlen, -EBADMSG,
                        "%s: the main database has flags 0x%x: not a csifs store", file, flags);
    if (rc == 0)
        rc = store_read_version(x.txn, x.dbi, version, file, err, errlen);
    if (rc == 0 && *version)
        rc = store_scan(x.txn, x.dbi, *version, &s, file, err, errlen);
    if (rc == 0 && *version)
        rc = xcheck_end(&x, &s, st.ms_entries);
    if (x.txn)
        mdb_txn_abort(x.txn);
    free(x.seqs);
    return rc;
}

int store_validate(const char *dir, int *version, char *err, size_t errlen)
{
    char file[4096];
    struct stat st;
    *version = 0;
    if (snprintf(file, sizeof(file), "%s/%s", dir, STORE_DATA) >= (int)sizeof(file))
        return store_fail(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
    if (stat(file, &st) < 0)
        return errno == ENOENT ? 0 : store_fail(err, errlen, -errno, "%s: %s", file,
                                                strerror(errno));
    if (!S_ISREG(st.st_mode))
        return store_fail(err, errlen, -EINVAL, "%s: not a regular file", file);
    if (st.st_size == 0)
        return 0;                    /* LMDB sets up an empty file as a new one */
    int rc = store_check_pages(file, err, errlen);
    if (rc < 0)
        return rc;
    MDB_env *env = NULL;
    if ((rc = mdb_env_create(&env)) == 0 &&
        (rc = mdb_env_set_mapsize(env, STORE_MAP_SIZE)) == 0)
        rc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0600);
    if (rc != 0)
        rc = store_fail(err, errlen, store_errno(rc), "%s: %s", file, mdb_strerror(rc));
    else
        rc = check_records(env, version, file, err, errlen);
    if (env)
        mdb_env_close(env);
    return rc;
}

int store_check(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) < 0)
        return errno == ENOENT ? 0 : store_fail(err, errlen, -errno, "%s: %s", dir,
                                                strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return store_fail(err, errlen, -ENOTDIR, "%s: not a directory", dir);
    int fd = -1, version;
    int rc = store_lock(dir, false, &fd, err, errlen);
    if (rc == 0)
        rc = store_validate(dir, &version, err, errlen);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* ---- the trial write (store_try_write) ---- */

/* Put the meta record back as it is (a version 2 store): LMDB touches the
 * path to it and takes its new pages from the free list. */
static int put_meta_back(MDB_txn *txn, MDB_dbi dbi)
{
    MDB_val val;
    int rc = mdb_get(txn, dbi, (MDB_val *)&store_key_meta, &val);
    if (rc == MDB_NOTFOUND)
        return 0;
    return rc ? rc : mdb_put(txn, dbi, (MDB_val *)&store_key_meta, &val, 0);
}

/* What store_open writes first on a store of this version, in a write
 * transaction after, for version 1, the compacting backup (to /dev/null). */
static int first_write(MDB_env *env, MDB_dbi dbi, int version, const char *file, char *err,
                       size_t errlen)
{
    char buf[12];
    MDB_val val;
    MDB_txn *txn;
    int null, rc = 0;
    if (version == 1) {
        if ((null = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
            return store_fail(err, errlen, -errno, "/dev/null: %s", strerror(errno));
        rc = mdb_env_copyfd2(env, null, MDB_CP_COMPACT);
        close(null);
    }
    if (rc != 0 || (rc = mdb_txn_begin(env, NULL, 0, &txn)) != 0)
        return rc;
    if (version == 0) {
        store_version_val(STORE_VERSION, &val, buf);
        rc = mdb_put(txn, dbi, (MDB_val *)&store_key_version, &val, 0);
    } else {
        rc = version == 1 ? store_upgrade_txn(txn, dbi, file, err, errlen)
                          : put_meta_back(txn, dbi);
    }
    mdb_txn_abort(txn);              /* writes nothing: no page is flushed */
    return rc;
}

int store_try_write(const char *dir, char *err, size_t errlen)
{
    char file[4096];
    struct stat st;
    snprintf(file, sizeof(file), "%s/%s", dir, STORE_DATA);
    if (stat(file, &st) < 0 || st.st_size == 0)
        return 0;                    /* nothing yet, or store_check said why */
    int fd = -1, version = 0, dead;
    int rc = store_lock(dir, false, &fd, err, errlen);
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    if (rc == 0 && (rc = mdb_env_create(&env)) == 0 &&
        (rc = mdb_env_set_mapsize(env, STORE_MAP_SIZE)) == 0 &&
        (rc = mdb_env_open(env, dir, MDB_NOTLS, 0600)) == 0 &&
        (rc = mdb_reader_check(env, &dead)) == 0 &&
        (rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) == 0 &&
        (rc = mdb_dbi_open(txn, NULL, 0, &dbi)) == 0)
        rc = store_read_version(txn, dbi, &version, file, err, errlen);
    if (txn)
        mdb_txn_abort(txn);
    if (rc == 0)
        rc = first_write(env, dbi, version, file, err, errlen);
    if (rc > 0)
        rc = store_fail(err, errlen, store_errno(rc), "%s: %s", file, mdb_strerror(rc));
    if (env)
        mdb_env_close(env);
    if (fd >= 0)
        close(fd);
    return rc;
}
