/* Attribute files of an instance dir: sysfs-style snapshots and poll().
 * A read at offset 0 takes a fresh snapshot of the value; later offsets
 * continue it. poll() reports POLLPRI|POLLERR once health, ready or reason
 * changed since the open file last read. */
#include "fs/kinds.h"
#include "fs/inval.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

/* One per open file (fi->fh, which libfuse keeps as open() set it). */
struct attr_file {
    struct fs_fh h;              /* first */
    pthread_mutex_t mu;
    uint64_t seen;               /* the instance's health_ver at the last snapshot */
    char *buf;
    size_t len;
};

void fs_attr_stat(struct fs *fs, const struct fs_node *n, struct stat *st)
{
    if (reg_attrs[n->attr].flags & REG_AF_WRITABLE)
        st->st_mode |= S_IWUSR | (fs->has_registrar ? S_IWGRP : 0);
}

off_t fs_attr_size(struct fs *fs, const struct fs_node *n)
{
    ssize_t len = reg_attr_show(fs->reg, n->r.seq, n->attr, NULL, 0);
    return len > 0 ? (off_t)len : 0;
}

int fs_attr_write(struct fs *fs, const struct fs_node *n, const char *buf, size_t len,
                  off_t off)
{
    if (!(reg_attrs[n->attr].flags & REG_AF_WRITABLE))
        return -EACCES;
    if (off != 0)
        return -EINVAL;
    return reg_attr_store(fs->reg, n->r.seq, n->attr, buf, len);
}

int fs_attr_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                 struct fs_fh **out)
{
    (void)fs;
    int acc = fi->flags & O_ACCMODE;
    bool writable = reg_attrs[n->attr].flags & REG_AF_WRITABLE;
    if (acc != O_RDONLY && !writable)
        return -EACCES;              /* even for root */
    if (acc != O_RDONLY && (fi->flags & O_APPEND))
        return -EINVAL;
    struct attr_file *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    pthread_mutex_init(&a->mu, NULL);
    a->seen = n->r.health_ver;
    *out = &a->h;
    /* Readers keep pages until a change drops them (a read in flight
     * holds its pages locked, and the invalidation waits for them).
     * Writers bypass the page cache: a cached write holds page locks while
     * it waits for us, and the invalidation its own change triggers would
     * wait for those locks. */
    if (acc == O_RDONLY)
        fi->keep_cache = 1;
    else
        fi->direct_io = 1;
    return 0;
}

/* A fresh snapshot into a (with a->mu held). */
static int snapshot(struct fs *fs, const struct fs_node *n, struct attr_file *a)
{
    size_t cap = 256;
    struct reg_node now;             /* the change count first: a change after it shows */
    int rc = reg_get(fs->reg, n->r.seq, &now);
    if (rc < 0)
        return rc;
    for (;;) {
        char *b = realloc(a->buf, cap);
        if (!b)
            return -ENOMEM;
        a->buf = b;
        ssize_t len = reg_attr_show(fs->reg, n->r.seq, n->attr, a->buf, cap);
        if (len < 0)
            return (int)len;
        if ((size_t)len < cap) {
            a->len = (size_t)len;
            a->seen = now.health_ver;
            return 0;
        }
        cap = (size_t)len + 1;
    }
}

void fs_attr_read(struct fs *fs, fuse_req_t req, struct fs_fh *h, size_t size, off_t off,
                  struct fuse_file_info *fi)
{
    (void)fi;
    struct attr_file *a = (struct attr_file *)h;
    const struct fs_node *n = &h->n;
    pthread_mutex_lock(&a->mu);
    int rc = off == 0 || !a->buf ? snapshot(fs, n, a) : 0;
    if (rc < 0) {
        pthread_mutex_unlock(&a->mu);
        fuse_reply_err(req, -rc);
        return;
    }
    /* Reply from a copy, after unlocking: once the reply is in, the file
     * may be released (and a freed) by another thread at once. */
    size_t start = (size_t)off < a->len ? (size_t)off : a->len;
    size_t k = a->len - start < size ? a->len - start : size;
    char stack[4096], *copy = k <= sizeof(stack) ? stack : malloc(k);
    if (copy)
        memcpy(copy, a->buf + start, k);
    pthread_mutex_unlock(&a->mu);
    if (copy)
        fuse_reply_buf(req, copy, k);
    else
        fuse_reply_err(req, ENOMEM);
    if (copy != stack)
        free(copy);
}

void fs_attr_poll(struct fs *fs, fuse_req_t req, struct fs_fh *h, struct fuse_file_info *fi,
                  struct fuse_pollhandle *ph)
{
    (void)fi;
    struct attr_file *a = (struct attr_file *)h;
    const struct fs_node *n = &h->n;
    unsigned ev = POLLIN | POLLRDNORM;
    if (reg_attrs[n->attr].flags & REG_AF_POLL) {
        /* Arm first, then look, so that no change slips in between. */
        if (ph && fs_poll_arm(fs, n->r.seq, a, ph) == 0)
            ph = NULL;
        struct reg_node now;
        pthread_mutex_lock(&a->mu);
        uint64_t seen = a->seen;
        pthread_mutex_unlock(&a->mu);
        if (reg_get(fs->reg, n->r.seq, &now) < 0 || now.health_ver != seen) {
            fs_poll_forget(fs, a);
            ev |= POLLPRI | POLLERR;
        }
    }
    if (ph)
        fuse_pollhandle_destroy(ph);
    fuse_reply_poll(req, ev);
}

void fs_attr_release(struct fs *fs, struct fs_fh *h)
{
    struct attr_file *a = (struct attr_file *)h;
    fs_poll_forget(fs, a);
    pthread_mutex_destroy(&a->mu);
    free(a->buf);
    free(a);
}
