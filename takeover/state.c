/* The state memfd. See state.h. */
#include "takeover/state.h"

#include "base/log.h"
#include "fs/pending.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define TK_MAGIC 0x31304b5346495343ull     /* "CSIFSK01" */
#define TK_LAYOUT 3u                       /* 2: pending links, health; 3: nonce */
#define TK_INIT_CAP 4096u                  /* FUSE_INIT in: 104 bytes at 7.45 */
#define TK_FHS 65536u
#define TK_HEALTH 16384u                   /* instances whose health is kept */

struct tk_hdr {
    uint64_t magic;
    uint32_t layout, size;
    uint32_t init_len, nfhs;
    uint64_t nonce;                  /* the connection's (the ring of store.h) */
    unsigned char init[TK_INIT_CAP];
    struct fs_saved_fh fhs[];        /* nfhs of them */
};
/* then, each at a 64-byte boundary: the pending links (struct
 * pending_table), the health slots (struct reg_keep_table, TK_HEALTH
 * slots; only the ones used are touched) */

#define TK_ALIGN(n) (((n) + 63u) & ~(size_t)63u)

static size_t links_off(void)
{
    return TK_ALIGN(sizeof(struct tk_hdr) + (size_t)TK_FHS * sizeof(struct fs_saved_fh));
}

static size_t health_off(void)
{
    return TK_ALIGN(links_off() + sizeof(struct pending_table));
}

static size_t layout_size(void)
{
    return health_off() + sizeof(struct reg_keep_table) +
           (size_t)TK_HEALTH * sizeof(struct reg_keep_slot);
}

static int map(struct tk_state *s)
{
    s->size = layout_size();
    s->map = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    if (s->map == MAP_FAILED) {
        s->map = NULL;
        return -errno;
    }
    return 0;
}

int tk_state_make(struct tk_state *s)
{
    s->map = NULL;
    s->fd = memfd_create("csifs-state", MFD_CLOEXEC);
    int rc = s->fd < 0 ? -errno : ftruncate(s->fd, (off_t)layout_size()) < 0 ? -errno : map(s);
    if (rc < 0) {
        tk_state_close(s);
        return rc;
    }
    struct tk_hdr *h = s->map;
    h->magic = TK_MAGIC;
    h->layout = TK_LAYOUT;
    h->size = (uint32_t)s->size;
    h->nfhs = TK_FHS;
    return 0;
}

int tk_state_adopt(struct tk_state *s, int fd, char *why, size_t cap)
{
    struct stat st;
    s->fd = fd;
    s->map = NULL;
    int rc = fstat(fd, &st) < 0 ? -errno : 0;
    if (rc == 0 && (size_t)st.st_size < sizeof(struct tk_hdr)) {
        snprintf(why, cap, "the handed state is %lld bytes, no csifs state",
                 (long long)st.st_size);
        rc = -EINVAL;
    } else if (rc < 0) {
        snprintf(why, cap, "the handed state: %s", strerror(-rc));
    }
    if (rc == 0 && (rc = map(s)) < 0)
        snprintf(why, cap, "the handed state cannot be mapped: %s", strerror(-rc));
    const struct tk_hdr *h = s->map;    /* its header is there: read it first */
    if (rc == 0 && (h->magic != TK_MAGIC || h->layout != TK_LAYOUT)) {
        snprintf(why, cap, "the handed state is %s layout %u, not layout %u (another csifs "
                 "version): refused", h->magic == TK_MAGIC ? "csifs's" : "not csifs's",
                 h->magic == TK_MAGIC ? h->layout : 0, TK_LAYOUT);
        rc = -EINVAL;
    } else if (rc == 0 && ((size_t)st.st_size < layout_size() || h->nfhs != TK_FHS ||
                           h->init_len > TK_INIT_CAP)) {
        snprintf(why, cap, "the handed state (layout %u) is %lld bytes, not %zu: refused",
                 TK_LAYOUT, (long long)st.st_size, layout_size());
        rc = -EINVAL;
    }
    if (rc < 0)
        tk_state_close(s);
    return rc;
}

void tk_state_handover(struct tk_state *s, struct fs_handover *out, bool takeover)
{
    struct tk_hdr *h = s->map;
    *out = (struct fs_handover){ .init = h->init, .init_cap = TK_INIT_CAP,
                                 .init_len = &h->init_len, .fhs = h->fhs, .nfhs = h->nfhs,
                                 .links = (void *)((char *)s->map + links_off()),
                                 .takeover = takeover };
}

uint64_t *tk_state_nonce(struct tk_state *s)
{
    return s->map ? &((struct tk_hdr *)s->map)->nonce : NULL;
}

void tk_state_keep(struct tk_state *s, struct reg *reg, bool takeover)
{
    unsigned long n = 0;
    int rc = reg_keep(reg, (void *)((char *)s->map + health_off()), TK_HEALTH, takeover, &n);
    if (rc < 0)
        csifs_log(LOG_ERR, "the kept health cannot be restored: %s", strerror(-rc));
    if (takeover)
        csifs_log(LOG_INFO, "kept the health of %lu instances", n);
}

void tk_state_close(struct tk_state *s)
{
    if (s->map)
        munmap(s->map, s->size);
    if (s->fd >= 0)
        close(s->fd);
    s->map = NULL;
    s->fd = -1;
}
