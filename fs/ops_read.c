/* Read-side handlers: lookup, getattr, readlink, readdir(plus), open, read. */
#include "fs/node.h"
#include "fs/events_file.h"
#include "fs/attr_file.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

/* Entry parameters: cached for long, but for pending links, which expire
 * without a change anyone is told of. */
static void entry_param(struct fs *fs, const struct fs_node *n, struct fuse_entry_param *e)
{
    bool brief = n->kind == K_PENDING;
    memset(e, 0, sizeof(*e));
    e->ino = n->ino;
    e->entry_timeout = brief ? 0 : fs->entry_timeout;
    e->attr_timeout = brief ? 0 : fs->attr_timeout;
    fs_stat(fs, n, &e->attr);
}

void fs_reply_entry(fuse_req_t req, struct fs *fs, const struct fs_node *n)
{
    struct fuse_entry_param e;
    entry_param(fs, n, &e);
    fuse_reply_entry(req, &e);
}

void fs_reply_child(fuse_req_t req, struct fs *fs, int rc, const struct fs_node *dir,
                    const char *name)
{
    struct fs_node n;
    if (rc == 0)
        rc = fs_child(fs, dir, name, &n);
    if (rc < 0)
        fuse_reply_err(req, -rc);   /* never a cached negative entry */
    else
        fs_reply_entry(req, fs, &n);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_req(req);
    struct fs_node dir;
    int rc = fs_resolve(fs, parent, &dir);
    fs_reply_child(req, fs, rc, &dir, name);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    (void)ino;
    (void)nlookup;                   /* inodes are derived from seqs: nothing to free */
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
    (void)count;
    (void)f;
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct fs *fs = fs_req(req);
    struct fs_node n;
    struct stat st;
    int rc = fs_resolve(fs, ino, &n);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    fs_stat(fs, &n, &st);
    fuse_reply_attr(req, &st, fs->attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct fs *fs = fs_req(req);
    struct fs_node n;
    char buf[REG_SOCKET_MAX + 1];
    struct pending_link l;
    ssize_t len = fs_resolve(fs, ino, &n);
    if (len == 0) {
        switch (n.kind) {
        case K_SOCKET: len = reg_socket_get(fs->reg, n.r.seq, buf, sizeof(buf)); break;
        case K_CURRENT: len = reg_current_get(fs->reg, n.r.seq, buf, sizeof(buf)); break;
        case K_PENDING:
            len = pending_get(&fs->pend, n.pending, &l);
            if (len == 0)
                strcpy(buf, l.target);
            break;
        default: len = -EINVAL;
        }
    }
    if (len < 0)
        fuse_reply_err(req, (int)-len);
    else
        fuse_reply_readlink(req, buf);
}

/* ---- readdir ---- */

struct dirbuf {
    fuse_req_t req;
    struct fs *fs;
    bool plus;
    char *buf;
    size_t size, len;
    off_t skip;                      /* fixed entries with a cookie <= skip are done */
    off_t base;                      /* cookie of a registry child = seq + base */
    bool full;
};

/* Add one entry; false once the buffer is full. */
static bool add(struct dirbuf *d, const char *name, const struct fs_node *n, off_t cookie)
{
    size_t room = d->size - d->len, used;
    if (d->plus) {
        struct fuse_entry_param e;
        entry_param(d->fs, n, &e);
        used = fuse_add_direntry_plus(d->req, d->buf + d->len, room, name, &e, cookie);
    } else {
        struct stat st = { .st_ino = n->ino, .st_mode = fs_kinds[n->kind].fmt };
        used = fuse_add_direntry(d->req, d->buf + d->len, room, name, &st, cookie);
    }
    if (used > room) {
        d->full = true;
        return false;
    }
    d->len += used;
    return true;
}

/* Entries of fixed position: cookie = position + 1. */
static bool add_fixed(struct dirbuf *d, off_t pos, const char *name, const struct fs_node *n)
{
    if (pos + 1 <= d->skip)
        return true;
    return add(d, name, n, pos + 1);
}

static int add_child(const struct reg_node *r, void *arg)
{
    struct dirbuf *d = arg;
    struct fs_node n;
    fs_node_of(r, &n);               /* under reg_list's read lock: no reg_get */
    return !add(d, r->kind == REG_K_PLUGIN ? r->plugin : r->alloc, &n,
                (off_t)r->seq + d->base);
}

static void list_dir(struct dirbuf *d, const struct fs_node *dir)
{
    struct fs *fs = d->fs;
    struct fs_node parent, n;
    fuse_ino_t up = dir->kind == K_ROOT || dir->kind == K_TYPE ? FUSE_ROOT_ID
                    : dir->kind == K_PLUGIN ? fs_ino(0, 2 + dir->type) : fs_ino(dir->r.parent, 0);
    if (fs_resolve(fs, up, &parent) < 0)
        parent = *dir;
    if (!add_fixed(d, 0, ".", dir) || !add_fixed(d, 1, "..", &parent))
        return;
    off_t pos = 2;
    switch (dir->kind) {
    case K_ROOT:
        for (int t = 0; t < REG_NTYPES; t++, pos++)
            if (fs_resolve(fs, fs_ino(0, 2 + (unsigned)t), &n) == 0 &&
                !add_fixed(d, pos, reg_type_names[t], &n))
                return;
        if (fs_child(fs, dir, fs_kinds[K_EVENTS].name, &n) == 0)
            add_fixed(d, pos, fs_kinds[K_EVENTS].name, &n);
        return;
    case K_PLUGIN:
        if (fs_resolve(fs, fs_ino(dir->r.seq, 1), &n) == 0 &&
            !add_fixed(d, pos, fs_kinds[K_CURRENT].name, &n))
            return;
        pos++;
        /* fall through */
    case K_TYPE:
        d->base = pos;
        reg_list(fs->reg, dir->type, dir->kind == K_PLUGIN ? dir->r.seq : 0,
                 d->skip > pos ? (uint64_t)(d->skip - pos) : 0, add_child, d);
        return;
    case K_INST:
        for (unsigned slot = 1; slot < SLOT_ATTR0 + REG_NATTRS; slot++, pos++)
            if (fs_resolve(fs, fs_ino(dir->r.seq, slot), &n) == 0 &&
                !add_fixed(d, pos, n.kind == K_SOCKET ? fs_kinds[K_SOCKET].name
                                                      : reg_attrs[n.attr].name, &n))
                return;
        return;
    default:
        return;
    }
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
    struct fs *fs = fs_req(req);
    struct fs_node dir;
    int rc = fs_resolve(fs, ino, &dir);
    if (rc == 0 && fs_kinds[dir.kind].fmt != S_IFDIR)
        rc = -ENOTDIR;
    char *buf = rc == 0 ? malloc(size) : NULL;
    if (rc == 0 && !buf)
        rc = -ENOMEM;
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    struct dirbuf d = { .req = req, .fs = fs, .plus = plus, .buf = buf, .size = size,
                        .skip = off };
    list_dir(&d, &dir);
    fuse_reply_buf(req, buf, d.len);
    free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    readdir_common(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)fi;
    readdir_common(req, ino, size, off, true);
}

/* ---- attribute files ---- */

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_req(req);
    struct fs_node n;
    int rc = fs_resolve(fs, ino, &n);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    /* Listings stay in the kernel until a change invalidates the dir inode. */
    fi->cache_readdir = 1;
    fi->keep_cache = 1;
    fuse_reply_open(req, fi);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_req(req);
    struct fs_node n;
    int rc = fs_resolve(fs, ino, &n);
    int acc = fi->flags & O_ACCMODE;
    if (rc == 0 && n.kind == K_EVENTS) {
        rc = acc == O_RDONLY ? fs_events_open(fs, fi) : -EACCES;
    } else if (rc == 0 && n.kind == K_ATTR) {
        rc = fs_attr_open(fs, &n, fi);
    } else if (rc == 0) {
        rc = -EISDIR;
    }
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    struct fs *fs = fs_req(req);
    struct fs_node n;
    int rc = fs_resolve(fs, ino, &n);
    if (rc == 0 && n.kind == K_EVENTS) {
        fs_events_read(fs, req, size, fi);
        return;
    }
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fs_attr_read(fs, req, &n, size, off, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_req(req);
    struct fs_node n;
    if (fs_resolve(fs, ino, &n) == 0 && n.kind == K_EVENTS) {
        fs_events_release(fs, fi);
    } else {
        fs_attr_release(fs, fi);
    }
    fuse_reply_err(req, 0);
}

static void op_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                    struct fuse_pollhandle *ph)
{
    struct fs *fs = fs_req(req);
    struct fs_node n;
    int rc = fs_resolve(fs, ino, &n);
    if (rc == 0 && n.kind == K_EVENTS) {
        fs_events_poll(fs, req, fi, ph);
        return;
    }
    if (rc == 0 && n.kind == K_ATTR) {
        fs_attr_poll(fs, req, &n, fi, ph);
        return;
    }
    if (ph)
        fuse_pollhandle_destroy(ph);
    fuse_reply_poll(req, rc < 0 ? POLLERR : POLLIN | POLLRDNORM);
}

void fs_ops_read(struct fuse_lowlevel_ops *ops)
{
    ops->lookup = op_lookup;
    ops->forget = op_forget;
    ops->forget_multi = op_forget_multi;
    ops->getattr = op_getattr;
    ops->readlink = op_readlink;
    ops->opendir = op_opendir;
    ops->readdir = op_readdir;
    ops->readdirplus = op_readdirplus;
    ops->open = op_open;
    ops->read = op_read;
    ops->release = op_release;
    ops->poll = op_poll;
}
