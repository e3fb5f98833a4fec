/* Snapshot files (metrics, stats): the whole content is built at open into
 * a buffer, then read at any offset; size 0 and direct I/O, as in /proc, so
 * that `ls -l` costs nothing and every open sees a fresh value. */
#ifndef CSIFS_SNAPSHOT_H
#define CSIFS_SNAPSHOT_H

#include <stdarg.h>
#include <stddef.h>

#include "fs/node.h"

/* A growing text buffer; err sticks at the first failure (-ENOMEM). */
struct fs_buf {
    char *p;
    size_t len, cap;
    int err;
};
void fs_buf_printf(struct fs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fs_buf_free(struct fs_buf *b);

/* Hand a built buffer to the open file (taking it), as the kind's open
 * returns: direct I/O, not seekable past the end. 0 or b->err. */
int fs_snap_open(struct fs_buf *b, struct fuse_file_info *fi, struct fs_fh **out);

#endif
