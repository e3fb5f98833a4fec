/* Read-side handlers: lookup, forget, getattr, readlink, open, read, poll,
 * release. Inode handlers resolve, then call the kind's operation; file
 * handlers dispatch on the kind their open handle recorded. */
#include "fs/ops.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fs *fs = fs_req(req, FS_OP_LOOKUP);
    struct fs_node dir;
    int rc = fs_resolve(fs, parent, &dir);
    fs_reply_child(req, fs, rc, &dir, name);
}

void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    struct fs *fs = fs_req(req, FS_OP_FORGET);
    fs_lookups_forget(fs, ino, nlookup);
    fuse_reply_none(req);
}

void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
    struct fs *fs = fs_req(req, FS_OP_FORGET);
    for (size_t k = 0; k < count; k++)
        fs_lookups_forget(fs, f[k].ino, f[k].nlookup);
    fuse_reply_none(req);
}

void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct fs *fs = fs_req(req, FS_OP_GETATTR);
    struct fs_node n;
    struct stat st;
    int rc = fs_resolve(fs, ino, &n);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    fs_stat(fs, &n, &st);
    fuse_reply_attr(req, &st, fs_kinds[n.kind].brief ? 0 : fs->attr_timeout);
}

void fs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct fs *fs = fs_req(req, FS_OP_READLINK);
    struct fs_node n;
    char buf[REG_SOCKET_MAX + 1];
    ssize_t len = fs_resolve(fs, ino, &n);
    if (len == 0)
        len = fs_kinds[n.kind].readlink ? fs_kinds[n.kind].readlink(fs, &n, buf, sizeof(buf))
                                        : -EINVAL;
    if (len < 0)
        fuse_reply_err(req, (int)-len);
    else
        fuse_reply_readlink(req, buf);
}

static void fh_link(struct fs *fs, struct fs_fh *h)
{
    pthread_mutex_lock(&fs->fh_mu);
    LIST_INSERT_HEAD(&fs->open_fhs, h, link);
    pthread_mutex_unlock(&fs->fh_mu);
}

/* Unlink h and hand it to its kind's release. */
static void fh_release(struct fs *fs, struct fs_fh *h)
{
    pthread_mutex_lock(&fs->fh_mu);
    LIST_REMOVE(h, link);
    fs_fh_drop(fs, h);
    pthread_mutex_unlock(&fs->fh_mu);
    fs_kinds[h->kind].release(fs, h);
}

void fs_fh_release_all(struct fs *fs)
{
    while (!LIST_EMPTY(&fs->open_fhs))
        fh_release(fs, LIST_FIRST(&fs->open_fhs));
}

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct fs *fs = fs_req(req, FS_OP_OPEN);
    struct fs_fh *h = NULL;
    int rc = fs_fh_open(fs, ino, fi, -1, &h);
    if (rc == 0) {
        if ((rc = fs_fh_put(fs, h, ino, fi->flags, &fi->fh)) < 0)
            fs_kinds[h->kind].release(fs, h);
        else
            fh_link(fs, h);
    }
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else if (fuse_reply_open(req, fi) == -ENOENT)
        fh_release(fs, h);           /* the opener was interrupted: no release will come */
}

void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                struct fuse_file_info *fi)
{
    struct fs *fs = fs_req(req, FS_OP_READ);
    struct fs_fh *h = fs_fh_get(fs, fi->fh, ino);
    if (h)
        fs_kinds[h->kind].read(fs, req, h, size, off, fi);
    else
        fuse_reply_err(req, EBADF);
}

void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct fs *fs = fs_req(req, FS_OP_RELEASE);
    struct fs_fh *h = fs_fh_released(fs, fi->fh);
    if (h)
        fh_release(fs, h);
    fuse_reply_err(req, 0);
}

void fs_op_poll(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi,
                struct fuse_pollhandle *ph)
{
    struct fs *fs = fs_req(req, FS_OP_POLL);
    struct fs_fh *h = fs_fh_get(fs, fi->fh, ino);
    if (!h) {
        if (ph)
            fuse_pollhandle_destroy(ph);
        fuse_reply_err(req, EBADF);
        return;
    }
    /* libfuse 3.14's struct fuse_pollhandle starts with the kernel's kh
     * (fuse_lowlevel.c): kept so that a successor can wake the poller */
    if (ph)
        fs_fh_note_kh(fs, h, *(const uint64_t *)(const void *)ph);
    if (fs_kinds[h->kind].poll) {
        fs_kinds[h->kind].poll(fs, req, h, fi, ph);
        return;
    }
    if (ph)
        fuse_pollhandle_destroy(ph);
    fuse_reply_poll(req, POLLIN | POLLRDNORM);
}
