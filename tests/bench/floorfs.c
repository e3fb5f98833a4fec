/* floorfs: the floor of the tree rows. The smallest correct low-level FUSE
 * server for the bench's tree, so a row can be judged against what any
 * FUSE filesystem can do on this kernel, not against tmpfs.
 *
 *   floorfs MOUNTPOINT SRC [STATE]
 *
 * At start it walks SRC (the bench's tree, e.g. its tmpfs copy) into
 * arrays: names, modes, sizes, the content of regular files, symlink
 * targets. It then serves them from the arrays with csifs's own settings
 * (docs/benchmarks.md, "The floor", cites the csifs line of each) and
 * csifs's own receive loop (fs_serve). No validation beyond a name lookup.
 * With STATE (a directory), mkdir, symlink and rmdir are answered after one
 * synchronous LMDB commit each, inline: the durable floor of register_serial.
 * SIGTERM or SIGINT unmounts and exits. */
#include "fs/serve.h"
#include "tests/bench/walk.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT 86400.0      /* entry and attr timeout: csifs's CACHE_SECONDS */
#define MAX_CONTENT 4096     /* regular files' content kept (attribute files are small) */

struct node {
    char *name;
    fuse_ino_t parent;
    mode_t mode;
    char *data;               /* file content or symlink target */
    size_t size;
    struct timespec mtime;
    fuse_ino_t *kids;         /* directories: children, sorted by name */
    size_t nkids, capkids;
};

static struct node *nodes;    /* inode i is nodes[i - 1]; the root is 1 */
static size_t nnodes, capnodes;
static MDB_env *env;          /* the durable variant */
static MDB_dbi dbi;

static struct node *node(fuse_ino_t ino)
{
    return ino >= 1 && ino <= nnodes && nodes[ino - 1].name ? &nodes[ino - 1] : NULL;
}

static int kid_cmp(const void *key, const void *elem)
{
    return strcmp(key, nodes[*(const fuse_ino_t *)elem - 1].name);
}

/* The slot in dir's sorted children where name is or would go. */
static size_t kid_slot(const struct node *dir, const char *name, bool *found)
{
    size_t lo = 0, hi = dir->nkids;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = kid_cmp(name, &dir->kids[mid]);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    *found = false;
    return lo;
}

/* A new node under parent (0: the root); its inode, or 0 without memory. */
static fuse_ino_t add(fuse_ino_t parent, const char *name, mode_t mode, const char *data,
                      size_t size)
{
    if (nnodes == capnodes) {
        size_t cap = capnodes ? 2 * capnodes : 1024;
        struct node *v = realloc(nodes, cap * sizeof(*v));
        if (!v)
            return 0;
        nodes = v, capnodes = cap;
    }
    struct node *n = &nodes[nnodes];
    *n = (struct node){ .name = strdup(name), .parent = parent ? parent : 1, .mode = mode,
                        .size = size };
    n->data = size || S_ISLNK(mode) ? malloc(size + 1) : NULL;
    if (!n->name || ((size || S_ISLNK(mode)) && !n->data))
        return 0;
    if (n->data)
        memcpy(n->data, data, size), n->data[size] = '\0';
    clock_gettime(CLOCK_REALTIME, &n->mtime);
    fuse_ino_t ino = ++nnodes;
    struct node *dir = parent ? &nodes[parent - 1] : NULL;
    if (dir) {
        bool found;
        size_t at = kid_slot(dir, name, &found);
        if (dir->nkids == dir->capkids) {
            size_t cap = dir->capkids ? 2 * dir->capkids : 8;
            fuse_ino_t *k = realloc(dir->kids, cap * sizeof(*k));
            if (!k)
                return 0;
            dir->kids = k, dir->capkids = cap;
        }
        memmove(&dir->kids[at + 1], &dir->kids[at], (dir->nkids - at) * sizeof(*dir->kids));
        dir->kids[at] = ino;
        dir->nkids++;
    }
    return ino;
}

static int load(fuse_ino_t parent, const char *src);

static int load_one(const char *path, const char *name, const struct stat *st, void *arg)
{
    char buf[MAX_CONTENT];
    ssize_t len = 0;
    if (S_ISLNK(st->st_mode))
        len = readlink(path, buf, sizeof(buf));
    else if (S_ISREG(st->st_mode) && st->st_size > 0) {
        int fd = open(path, O_RDONLY | O_NONBLOCK);
        len = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
        if (fd >= 0)
            close(fd);
    }
    fuse_ino_t ino = add(*(fuse_ino_t *)arg, name, st->st_mode, buf, len > 0 ? (size_t)len : 0);
    if (!ino)
        return -ENOMEM;
    return S_ISDIR(st->st_mode) ? load(ino, path) : 0;
}

/* Walk src into the arrays under parent; 0 or -errno. */
static int load(fuse_ino_t parent, const char *src)
{
    return bench_walk(src, load_one, &parent);
}

/* ---- the operations ---- */

static void fill(fuse_ino_t ino, struct stat *st)
{
    const struct node *n = &nodes[ino - 1];
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    st->st_mode = n->mode;
    st->st_nlink = 1;
    st->st_size = (off_t)n->size;
    st->st_blocks = (st->st_size + 511) / 512;
    st->st_mtim = st->st_ctim = st->st_atim = n->mtime;
}

static void entry(fuse_ino_t ino, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof(*e));
    e->ino = ino;
    e->entry_timeout = e->attr_timeout = TIMEOUT;
    fill(ino, &e->attr);
}

static fuse_ino_t find(fuse_ino_t parent, const char *name)
{
    struct node *dir = node(parent);
    bool found = false;
    size_t at = dir && dir->kids ? kid_slot(dir, name, &found) : 0;
    return found ? dir->kids[at] : 0;
}

static void op_init(void *data, struct fuse_conn_info *conn)
{
    (void)data;
    if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
        conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
    if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
        conn->want |= FUSE_CAP_CACHE_SYMLINKS;
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    fuse_ino_t ino = find(parent, name);
    struct fuse_entry_param e;
    if (!ino) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    entry(ino, &e);
    fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct stat st;
    if (!node(ino)) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    fill(ino, &st);
    fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct node *n = node(ino);
    if (n && S_ISLNK(n->mode))
        fuse_reply_readlink(req, n->data);
    else
        fuse_reply_err(req, EINVAL);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino, (void)fi;
    fuse_reply_err(req, ENOSYS);     /* the kernel then sends no OPENDIR again */
}

/* ".", "..", then the children; an entry's cookie is its position + 1. */
static void list(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
    struct node *dir = node(ino);
    if (!dir || !S_ISDIR(dir->mode)) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    char *buf = malloc(size);
    size_t len = 0;
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    for (size_t i = (size_t)off; i < dir->nkids + 2; i++) {
        fuse_ino_t k = i == 0 ? ino : i == 1 ? dir->parent : dir->kids[i - 2];
        const char *name = i == 0 ? "." : i == 1 ? ".." : nodes[k - 1].name;
        struct fuse_entry_param e;
        size_t used;
        entry(k, &e);
        if (plus)
            used = fuse_add_direntry_plus(req, buf + len, size - len, name, &e, (off_t)i + 1);
        else
            used = fuse_add_direntry(req, buf + len, size - len, name, &e.attr, (off_t)i + 1);
        if (used > size - len)
            break;
        len += used;
    }
    fuse_reply_buf(req, buf, len);
    free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    list(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)fi;
    list(req, ino, size, off, true);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    if (!node(ino)) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)fi;
    struct node *n = node(ino);
    size_t at = n && (size_t)off < n->size ? (size_t)off : 0;
    size_t len = n && (size_t)off < n->size ? n->size - at : 0;
    fuse_reply_buf(req, len ? n->data + at : NULL, len < size ? len : size);
}

/* ---- the durable variant: one synchronous LMDB commit per change ---- */

static int commit(fuse_ino_t parent, const char *name, const char *value)
{
    char key[512];
    int klen = snprintf(key, sizeof(key), "%lu/%s", (unsigned long)parent, name);
    MDB_txn *txn;
    MDB_val k = { .mv_size = (size_t)klen, .mv_data = key };
    MDB_val v = { .mv_size = value ? strlen(value) : 0, .mv_data = (void *)value };
    int rc = mdb_txn_begin(env, NULL, 0, &txn);
    if (rc != 0)
        return rc;
    rc = value ? mdb_put(txn, dbi, &k, &v, 0) : mdb_del(txn, dbi, &k, NULL);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_txn_commit(txn);
}

static void make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                 const char *target)
{
    struct fuse_entry_param e;
    fuse_ino_t ino;
    if (!node(parent) || find(parent, name)) {
        fuse_reply_err(req, node(parent) ? EEXIST : ENOENT);
        return;
    }
    if (commit(parent, name, target ? target : "") != 0) {
        fuse_reply_err(req, EIO);
        return;
    }
    ino = add(parent, name, mode, target, target ? strlen(target) : 0);
    if (!ino) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    entry(ino, &e);
    fuse_reply_entry(req, &e);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    make(req, parent, name, S_IFDIR | (mode & 0777), NULL);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    make(req, parent, name, S_IFLNK | 0777, target);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct node *dir = node(parent);
    bool found = false;
    size_t at = dir && dir->kids ? kid_slot(dir, name, &found) : 0;
    if (!found) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (commit(parent, name, NULL) != 0) {
        fuse_reply_err(req, EIO);
        return;
    }
    struct node *n = &nodes[dir->kids[at] - 1];
    memmove(&dir->kids[at], &dir->kids[at + 1], (dir->nkids - at - 1) * sizeof(*dir->kids));
    dir->nkids--;
    for (size_t i = 0; i < n->nkids; i++) {  /* a mkdir'd dir holds at most its socket */
        struct node *k = &nodes[n->kids[i] - 1];
        free(k->name), free(k->data);
        k->name = NULL;
    }
    free(n->kids), free(n->data), free(n->name);
    n->name = NULL;                          /* its inode is not reused */
    fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
    .init = op_init,
    .lookup = op_lookup,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .open = op_open,
    .read = op_read,
    .mkdir = op_mkdir,               /* these three only with STATE (see main) */
    .symlink = op_symlink,
    .rmdir = op_rmdir,
};

static int open_store(const char *dir)
{
    MDB_txn *txn;
    int rc = mdb_env_create(&env);
    if (rc == 0)
        rc = mdb_env_set_mapsize(env, 64u << 20);
    if (rc == 0)
        rc = mdb_env_open(env, dir, 0, 0600);
    if (rc == 0 && (rc = mdb_txn_begin(env, NULL, 0, &txn)) == 0) {
        rc = mdb_dbi_open(txn, NULL, 0, &dbi);
        rc = rc == 0 ? mdb_txn_commit(txn) : (mdb_txn_abort(txn), rc);
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: floorfs MOUNTPOINT SRC [STATE]\n");
        return 2;
    }
    struct fuse_lowlevel_ops o = ops;
    if (argc < 4)
        o.mkdir = NULL, o.symlink = NULL, o.rmdir = NULL;   /* read-only: EROFS-like ENOSYS */
    else if (open_store(argv[3]) != 0) {
        fprintf(stderr, "floorfs: cannot open an LMDB environment in %s\n", argv[3]);
        return 1;
    }
    if (!add(0, "", S_IFDIR | 0755, NULL, 0) || load(1, argv[2]) < 0) {
        fprintf(stderr, "floorfs: cannot load %s\n", argv[2]);
        return 1;
    }
    char *fargv[] = { argv[0], "-oallow_other,default_permissions,fsname=floorfs,subtype=floorfs" };
    struct fuse_args args = FUSE_ARGS_INIT(2, fargv);
    struct fuse_session *se = fuse_session_new(&args, &o, sizeof(o), NULL);
    fuse_opt_free_args(&args);
    if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[1]) != 0) {
        fprintf(stderr, "floorfs: cannot mount on %s\n", argv[1]);
        return 1;
    }
    int rc = fs_serve(se);
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    if (env)
        mdb_env_close(env);
    return rc < 0 ? 1 : 0;
}
