/* Snapshot files: built at open, read at any offset (snapshot.h). */
#include "fs/snapshot.h"
#include "fs/kinds.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct snap {
    struct fs_fh h;              /* first */
    char *buf;
    size_t len;
};

void fs_buf_printf(struct fs_buf *b, const char *fmt, ...)
{
    for (int pass = 0; pass < 2 && !b->err; pass++) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->err = -EINVAL;
        } else if ((size_t)n < room) {
            b->len += (size_t)n;
            return;
        } else {
            size_t cap = b->cap ? b->cap : 4096;
            while (cap - b->len <= (size_t)n)
                cap *= 2;
            char *p = realloc(b->p, cap);
            if (!p) {
                b->err = -ENOMEM;
                return;
            }
            b->p = p;
            b->cap = cap;
        }
    }
}

void fs_buf_free(struct fs_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

int fs_snap_open(struct fs_buf *b, struct fuse_file_info *fi, struct fs_fh **out)
{
    struct snap *s = b->err ? NULL : calloc(1, sizeof(*s));
    if (!s) {
        int rc = b->err ? b->err : -ENOMEM;
        fs_buf_free(b);
        return rc;
    }
    s->buf = b->p;
    s->len = b->len;
    memset(b, 0, sizeof(*b));
    fi->direct_io = 1;
    *out = &s->h;
    return 0;
}

void fs_snap_read(struct fs *fs, fuse_req_t req, struct fs_fh *h, size_t size, off_t off,
                  struct fuse_file_info *fi)
{
    (void)fs, (void)fi;
    struct snap *s = (struct snap *)h;
    size_t start = off < 0 ? 0 : (size_t)off < s->len ? (size_t)off : s->len;
    size_t k = s->len - start < size ? s->len - start : size;
    fuse_reply_buf(req, s->buf ? s->buf + start : "", k);
}

void fs_snap_release(struct fs *fs, struct fs_fh *h)
{
    (void)fs;
    struct snap *s = (struct snap *)h;
    free(s->buf);
    free(s);
}
