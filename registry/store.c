/* The LMDB state store: the state dir and its lock, open (validate, upgrade,
 * set up), the registry's backend (commit, load). See store.h. */
#include "registry/store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

struct store {
    MDB_env *env;
    MDB_dbi dbi;
    int lockfd;
    char *dir;
    char file[4096];                 /* <dir>/data.mdb, for messages */
    struct reg_backend be;
};

/* ---- the state dir ---- */

int store_fsync_path(const char *path, bool dir)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | (dir ? O_DIRECTORY : 0));
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static int read_pid(int fd)
{
    char buf[32];
    /* The holder writes its pid right after taking the lock: give it 1 s. */
    for (int tries = 0; tries < 100; tries++) {
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            long pid = strtol(buf, NULL, 10);
            if (pid > 0)
                return (int)pid;
        }
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

int store_lock(const char *dir, bool excl, int *fd, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, STORE_LOCK);
    *fd = open(path, (excl ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*fd < 0)
        return !excl && errno == ENOENT ? 0 : store_fail(err, errlen, -errno, "%s: %s", path,
                                                        strerror(errno));
    if (flock(*fd, (excl ? LOCK_EX : LOCK_SH) | LOCK_NB) == 0) {
        char pid[24];
        int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
        if (!excl || (ftruncate(*fd, 0) == 0 && pwrite(*fd, pid, (size_t)n, 0) == n))
            return 0;
    }
    int e = errno, holder = e == EWOULDBLOCK ? read_pid(*fd) : 0;
    close(*fd);
    *fd = -1;
    if (e != EWOULDBLOCK)
        return store_fail(err, errlen, -e, "%s: %s", path, strerror(e));
    if (holder)
        return store_fail(err, errlen, -EBUSY, "%s: state dir in use by pid %d", path, holder);
    return store_fail(err, errlen, -EBUSY, "%s: state dir in use by another process", path);
}

/* The lock file, as its holder wrote it:
 *   PID\nconn=NN\nmount=PATH\n   (conn and mount once the holder mounted) */
int store_lock_note(struct store *st, const char *mount, unsigned conn)
{
    char buf[4200];
    int n = snprintf(buf, sizeof(buf), "%ld\nconn=%u\nmount=%s\n", (long)getpid(), conn, mount);
    if (n < 0 || n >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    /* pwrite first, then cut: a reader never sees an empty file */
    if (pwrite(st->lockfd, buf, (size_t)n, 0) != n || ftruncate(st->lockfd, n) < 0)
        return -errno;
    return 0;
}

int store_lock_holder(const char *dir, struct store_holder *h)
{
    char path[4096], buf[4200];
    memset(h, 0, sizeof(*h));
    snprintf(path, sizeof(path), "%s/%s", dir, STORE_LOCK);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    int busy = flock(fd, LOCK_SH | LOCK_NB) == 0 ? 0 : errno == EWOULDBLOCK ? 1 : -errno;
    ssize_t n = busy == 1 ? pread(fd, buf, sizeof(buf) - 1, 0) : 0;
    close(fd);
    if (busy <= 0)
        return busy;
    buf[n > 0 ? n : 0] = '\0';
    h->pid = strtol(buf, NULL, 10);
    const char *c = strstr(buf, "\nconn="), *m = strstr(buf, "\nmount=");
    if (c)
        h->conn = (unsigned)strtoul(c + 6, NULL, 10);
    if (m) {
        snprintf(h->mount, sizeof(h->mount), "%s", m + 7);
        h->mount[strcspn(h->mount, "\n")] = '\0';
    }
    return 1;
}

/* mkdir dir 0700 unless it exists; make a new entry durable. */
static int make_dir(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (mkdir(dir, 0700) == 0) {
        char *copy = strdup(dir);
        int rc = copy ? store_fsync_path(dirname(copy), true) : -ENOMEM;
        free(copy);
        return rc < 0 ? store_fail(err, errlen, rc, "%s: fsync of its parent: %s", dir,
                                   strerror(-rc)) : 0;
    }
    if (errno != EEXIST)
        return store_fail(err, errlen, -errno, "%s: %s", dir, strerror(errno));
    if (stat(dir, &st) < 0)
        return store_fail(err, errlen, -errno, "%s: %s", dir, strerror(errno));
    return S_ISDIR(st.st_mode) ? 0 : store_fail(err, errlen, -ENOTDIR, "%s: not a directory",
                                                dir);
}

/* ---- commit ---- */

/* LMDB reports a full disk as ENOSPC, or as EIO after a short write
 * ("short write, filesystem full?" in mdb_page_flush): an EIO with less than
 * 1 MiB left on the filesystem is taken for a full disk. */
static int commit_errno(const struct store *st, int rc)
{
    if (rc == MDB_MAP_FULL || rc == ENOSPC || rc == EDQUOT || rc == EFBIG)
        return -ENOSPC;
    struct statvfs vfs;
    if (rc == EIO && statvfs(st->dir, &vfs) == 0 &&
        (uint64_t)(geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail) * vfs.f_frsize < (1u << 20))
        return -ENOSPC;
    return -EIO;
}

static int put_rec(MDB_txn *txn, MDB_dbi dbi, const struct store_rec *r)
{
    const struct store_plugin *p = &r->u.plugin;
    const struct store_inst *i = &r->u.inst;
    bool plugin = r->op == STORE_PUT_PLUGIN || r->op == STORE_DEL_PLUGIN;
    enum reg_type type = plugin ? p->type : i->type;
    const char *name = plugin ? p->name : i->plugin;
    if ((unsigned)type >= REG_NTYPES || !name || (!plugin && !i->alloc))
        return EINVAL;
    char buf[STORE_KEY_MAX];
    MDB_val key;
    if (plugin)
        store_key_plugin(&key, buf, type, name);
    else
        store_key_inst(&key, buf, type, name, i->alloc);
    if (r->op == STORE_DEL_PLUGIN || r->op == STORE_DEL_INST) {
        int rc = mdb_del(txn, dbi, &key, NULL);
        return rc == MDB_NOTFOUND ? 0 : rc;   /* already gone: the same end */
    }
    if (plugin) {
        Csifs__Store__Plugin m = CSIFS__STORE__PLUGIN__INIT;
        m.type = (Csifs__Store__PluginType)type;
        m.name = (char *)name;
        m.seq = p->seq;
        m.registered_ns = p->registered_ns;
        return store_put_msg(txn, dbi, &key, SK_PLUGIN, &m.base);
    }
    Csifs__Store__Instance m;
    Csifs__Store__Fingerprint fp;
    store_inst_to_pb(i, &m, &fp);
    return store_put_msg(txn, dbi, &key, SK_INST, &m.base);
}

static int store_commit(void *ctx, const struct store_txn *t)
{
    struct store *st = ctx;
    MDB_txn *txn = NULL;
    int rc = t->n < 0 || t->n > STORE_TXN_MAX ? EINVAL : mdb_txn_begin(st->env, NULL, 0, &txn);
    for (int k = 0; rc == 0 && k < t->n; k++)
        rc = put_rec(txn, st->dbi, &t->rec[k]);
    if (rc == 0) {
        Csifs__Store__Meta m = CSIFS__STORE__META__INIT;
        m.next_seq = t->meta.next_seq;
        m.ev_reserved = t->meta.ev_reserved;
        rc = store_put_msg(txn, st->dbi, &store_key_meta, SK_META, &m.base);
    }
    if (rc == 0)
        rc = mdb_txn_commit(txn);    /* frees txn, even when it fails */
    else if (txn)
        mdb_txn_abort(txn);
    return rc == 0 ? 0 : commit_errno(st, rc);
}

/* ---- load ---- */

struct lrec {
    enum store_kind kind;
    uint64_t seq;
    ProtobufCMessage *msg;
};

struct loader {
    struct lrec *r;
    size_t n, cap;
};

static int load_rec(void *arg, enum store_kind kind, ProtobufCMessage *msg)
{
    struct loader *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        struct lrec *r = realloc(l->r, cap * sizeof(*r));
        if (!r)
            return -ENOMEM;
        l->r = r;
        l->cap = cap;
    }
    uint64_t seq = kind == SK_PLUGIN ? ((Csifs__Store__Plugin *)msg)->seq
                                     : ((Csifs__Store__Instance *)msg)->seq;
    l->r[l->n++] = (struct lrec){ kind, seq, msg };
    return 1;
}

/* Plugins before instances, each in ascending seq. */
static int cmp_lrec(const void *a, const void *b)
{
    const struct lrec *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind == SK_PLUGIN ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int store_load(void *ctx, const struct store_load_cb *cb, struct store_meta *meta)
{
    struct store *st = ctx;
    struct loader l = { 0 };
    struct store_scan s = { .rec = load_rec, .arg = &l };
    MDB_txn *txn;
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0)
        return store_errno(rc);
    rc = store_scan(txn, st->dbi, STORE_VERSION, &s, st->file, NULL, 0);
    mdb_txn_abort(txn);
    if (l.n)
        if (l.n)
        qsort(l.r, l.n, sizeof(*l.r), cmp_lrec);
    for (size_t k = 0; k < l.n && rc == 0; k++) {
        if (l.r[k].kind == SK_PLUGIN) {
            struct store_plugin p;
            store_plugin_from_pb((Csifs__Store__Plugin *)l.r[k].msg, &p);
            rc = cb->plugin(&p, cb->arg);
        } else {
            struct store_inst i;
            store_inst_from_pb((Csifs__Store__Instance *)l.r[k].msg, &i);
            rc = cb->inst(&i, cb->arg);
        }
    }
    for (size_t k = 0; k < l.n; k++)
        protobuf_c_message_free_unpacked(l.r[k].msg, NULL);
    free(l.r);
    if (rc == 0 && s.has_meta)
        *meta = s.meta;
    return rc;
}

/* ---- open, close ---- */

/* A new store gets its version key at once: a store with records and no
 * version is refused. */
static int init_version(struct store *st)
{
    MDB_txn *txn;
    char buf[12];
    MDB_val val;
    store_version_val(STORE_VERSION, &val, buf);
    int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
    if (rc != 0)
        return rc;
    if ((rc = mdb_put(txn, st->dbi, (MDB_val *)&store_key_version, &val, 0)) != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_txn_commit(txn);
}

/* The environment, read-write, after validation. */
static int open_env(struct store *st, unsigned flags, int version, char *err, size_t errlen)
{
    MDB_txn *txn;
    int dead, rc = mdb_env_create(&st->env);
    if (rc == 0 && (rc = mdb_env_set_mapsize(st->env, STORE_MAP_SIZE)) == 0 &&
        (rc = mdb_env_open(st->env, st->dir,
                           MDB_NOTLS | (flags & STORE_NOSYNC ? MDB_NOSYNC : 0), 0600)) == 0 &&
        (rc = mdb_reader_check(st->env, &dead)) == 0 &&
        (rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn)) == 0) {
        if ((rc = mdb_dbi_open(txn, NULL, 0, &st->dbi)) == 0)
            rc = mdb_txn_commit(txn);
        else
            mdb_txn_abort(txn);
    }
    if (rc != 0)
        return store_fail(err, errlen, store_errno(rc), "%s: %s", st->file,
                          mdb_strerror(rc));
    if (version == 1)
        return store_upgrade_v1(st->env, st->dbi, st->dir, err, errlen);
    if (version == 0 && (rc = init_version(st)) != 0)
        return store_fail(err, errlen, commit_errno(st, rc), "%s: writing the version: %s",
                          st->file, mdb_strerror(rc));
    rc = store_fsync_path(st->dir, true);      /* data.mdb may be new */
    return rc < 0 ? store_fail(err, errlen, rc, "%s: fsync: %s", st->dir, strerror(-rc)) : 0;
}

int store_open(struct store **out, const char *dir, unsigned flags, char *err,
               size_t errlen)
{
    if (flags & ~STORE_NOSYNC)
        return store_fail(err, errlen, -EINVAL, "store_open: unknown flags 0x%x", flags);
    struct store *st = calloc(1, sizeof(*st));
    if (!st || !(st->dir = strdup(dir))) {
        free(st);
        return store_fail(err, errlen, -ENOMEM, "%s: out of memory", dir);
    }
    st->lockfd = -1;
    int version = 0, rc = 0;
    if (snprintf(st->file, sizeof(st->file), "%s/%s", dir, STORE_DATA) >= (int)sizeof(st->file))
        rc = store_fail(err, errlen, -ENAMETOOLONG, "%s: path too long", dir);
    if (rc == 0)
        rc = make_dir(dir, err, errlen);
    if (rc == 0)
        rc = store_lock(dir, true, &st->lockfd, err, errlen);
    if (rc == 0)
        rc = store_validate(dir, &version, err, errlen);
    if (rc == 0)
        rc = open_env(st, flags, version, err, errlen);
    if (rc < 0) {
        store_close(st);
        return rc;
    }
    st->be = (struct reg_backend){ store_commit, store_load, st };
    *out = st;
    return 0;
}

void store_close(struct store *st)
{
    if (!st)
        return;
    if (st->env)
        mdb_env_close(st->env);
    if (st->lockfd >= 0)
        close(st->lockfd);
    free(st->dir);
    free(st);
}

const struct reg_backend *store_backend(struct store *st)
{
    return &st->be;
}
