/* What a successor on the same FUSE connection needs from fs/ (DESIGN 13):
 * the handover memory (INIT request, open-file table, pending links) and
 * the first steps of a takeover that only fs/ can make (see fs.h). */
#include "fs/inval.h"
#include "fs/node.h"
#include "fs/serve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int fs_handover(struct fs *fs, const struct fs_handover *h)
{
    pthread_mutex_lock(&fs->fh_mu);
    bool busy = !LIST_EMPTY(&fs->open_fhs);
    pthread_mutex_unlock(&fs->fh_mu);
    if (busy || !h->fhs || !h->nfhs)
        return -EINVAL;
    free(fs->own_fhs);
    fs->own_fhs = NULL;
    fs->fhs = h->fhs;
    fs->nfhs = h->nfhs;
    fs->init_buf = h->init;
    fs->init_cap = h->init_cap;
    fs->init_len = h->init_len;
    fs->handover = true;
    fs->takeover = h->takeover;
    if (h->links)
        pending_adopt(&fs->pend, h->links, h->takeover);
    fs_serve_keep_init(h->init, h->init_cap, h->init_len);
    return fs_fh_table_init(fs);
}

int fs_fd(struct fs *fs)
{
    return fuse_session_fd(fs->se);
}

int fs_replay_init(struct fs *fs)
{
    uint32_t len = fs->init_len ? *fs->init_len : 0;
    if (!fs->takeover || len == 0 || len > fs->init_cap)
        return -ENOENT;
    /* libfuse answers INIT (the kernel refuses the reply, ENOENT, which
     * libfuse ignores): the session is initialised, op_init runs */
    void *copy = malloc(len);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, fs->init_buf, len);
    struct fuse_buf b = { .size = len, .mem = copy };
    fuse_session_process_buf(fs->se, &b);
    free(copy);
    fs_lookups_blind(fs);
    return 0;
}

struct seqs {
    uint64_t *v;
    size_t n, cap;
};

static int collect(const struct reg_node *n, void *arg)
{
    struct seqs *s = arg;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        uint64_t *v = realloc(s->v, cap * sizeof(*v));
        if (!v)
            return 1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = n->seq;
    return 0;
}

unsigned long fs_inval_all_current(struct fs *fs)
{
    unsigned long sent = 0;
    struct seqs plugins = { 0 }, insts = { 0 };
    for (int t = 0; t < REG_NTYPES; t++) {
        size_t from = plugins.n;
        reg_list(fs->reg, (enum reg_type)t, 0, 0, collect, &plugins);
        for (size_t k = from; k < plugins.n; k++) {
            fs_inval_inode_later(fs, fs_ino(plugins.v[k], fs_kinds[K_CURRENT].slot));
            sent++;
            size_t i0 = insts.n;
            reg_list(fs->reg, (enum reg_type)t, plugins.v[k], 0, collect, &insts);
            for (size_t i = i0; i < insts.n; i++, sent++)
                fs_inval_inode_later(fs, fs_ino(insts.v[i], SLOT_ATTR0 + REG_A_HEALTH));
        }
    }
    free(plugins.v);
    free(insts.v);
    return sent;
}

unsigned fs_polled(struct fs *fs, uint64_t *kh, unsigned cap)
{
    return fs_fh_polled(fs, kh, cap);
}

int fs_session_mount_fd(struct fs *fs, int fd)
{
    char dev[32];
    snprintf(dev, sizeof(dev), "/dev/fd/%d", fd);
    if (fuse_session_mount(fs->se, dev) != 0)
        return -EIO;
    fs->mounted = true;
    return 0;
}
