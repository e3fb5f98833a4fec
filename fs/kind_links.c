/* The symlink kinds: current, socket, pending links (rows in node.c). */
#include "fs/kinds.h"

#include <errno.h>
#include <string.h>

static off_t len_of(ssize_t len)
{
    return len > 0 ? (off_t)len : 0;
}

bool fs_current_exists(const struct fs_node *n)
{
    return n->r.current != 0;
}

off_t fs_current_size(struct fs *fs, const struct fs_node *n)
{
    return len_of(reg_current_get(fs->reg, n->r.seq, NULL, 0));
}

ssize_t fs_current_readlink(struct fs *fs, const struct fs_node *n, char *buf, size_t cap)
{
    return reg_current_get(fs->reg, n->r.seq, buf, cap);
}

bool fs_socket_exists(const struct fs_node *n)
{
    return n->r.has_socket;
}

off_t fs_socket_size(struct fs *fs, const struct fs_node *n)
{
    return len_of(reg_socket_get(fs->reg, n->r.seq, NULL, 0));
}

ssize_t fs_socket_readlink(struct fs *fs, const struct fs_node *n, char *buf, size_t cap)
{
    return reg_socket_get(fs->reg, n->r.seq, buf, cap);
}

int fs_socket_unlink(struct fs *fs, const struct fs_node *n, const char *name)
{
    (void)name;
    return reg_socket_set(fs->reg, n->r.seq, NULL);
}

off_t fs_pending_size(struct fs *fs, const struct fs_node *n)
{
    struct pending_link l;
    return pending_get(&fs->pend, n->pending, &l) ? 0 : (off_t)strlen(l.target);
}

ssize_t fs_pending_readlink(struct fs *fs, const struct fs_node *n, char *buf, size_t cap)
{
    struct pending_link l;
    int rc = pending_get(&fs->pend, n->pending, &l);
    if (rc < 0)
        return rc;
    snprintf(buf, cap, "%s", l.target);
    return (ssize_t)strlen(l.target);
}

int fs_pending_unlink(struct fs *fs, const struct fs_node *n, const char *name)
{
    return pending_del(&fs->pend, n->r.seq, name);
}
