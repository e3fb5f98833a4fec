/* fi->fh tokens (fs/fh.c, DESIGN 13): a live token finds its open file; a
 * released, forged or out-of-range one is stale (NULL: the caller answers
 * EBADF), never a pointer followed. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>

#include "fs/node.h"

static struct fs *fs;

static void setup(void)
{
    struct fs_opts o = { .mountpoint = "/nonexistent-csifs-fh" };
    cr_assert_eq(fs_session(&fs, &o), 0);
}

static void teardown(void)
{
    fs_destroy(fs);
}

TestSuite(fh_token, .init = setup, .fini = teardown);

static void release(uint64_t token)
{
    struct fs_fh *h = fs_fh_released(fs, token);
    cr_assert_not_null(h);
    pthread_mutex_lock(&fs->fh_mu);
    fs_fh_drop(fs, h);
    pthread_mutex_unlock(&fs->fh_mu);
}

Test(fh_token, stale_tokens_are_refused)
{
    struct fs_fh a = { .kind = K_METRICS }, b = { .kind = K_METRICS };
    uint64_t ta, tb;
    cr_assert_eq(fs_fh_put(fs, &a, 5, O_RDONLY, &ta), 0);
    cr_assert_eq(fs_fh_get(fs, ta, 5), &a);
    release(ta);
    cr_assert_null(fs_fh_get(fs, ta, 5), "a released token is stale");
    cr_assert_eq(fs_fh_put(fs, &b, 5, O_RDONLY, &tb), 0);
    cr_assert_neq(ta, tb, "a slot used again gets a new generation");
    cr_assert_null(fs_fh_get(fs, ta, 5), "the old token stays stale");
    cr_assert_eq(fs_fh_get(fs, tb, 5), &b);
    cr_assert_null(fs_fh_get(fs, tb + (1ull << 32), 5), "another generation");
    cr_assert_null(fs_fh_get(fs, 0, 5), "token 0");
    cr_assert_null(fs_fh_get(fs, (tb & ~0xffffffffull) | 0xffffffffull, 5), "out of range");
    cr_assert_null(fs_fh_get(fs, (uint64_t)(uintptr_t)&b, 5), "a pointer is no token");
    release(tb);
}

Test(fh_token, a_predecessors_token_is_adopted_or_stale)
{
    /* a slot live in the table with no open file here: a predecessor's. Its
     * inode no longer resolving (no registry attached: only fixed nodes) or
     * of another kind makes it stale, never a crash. */
    struct fs_fh a = { .kind = K_METRICS };
    uint64_t ta;
    cr_assert_eq(fs_fh_put(fs, &a, 5, O_RDONLY, &ta), 0);
    fs->fh_ptr[(ta & 0xffffffffu) - 1] = NULL;   /* as a successor finds it */
    cr_assert_null(fs_fh_get(fs, ta, 999999), "another inode than the one opened");
    cr_assert_null(fs_fh_released(fs, ta), "released: no open file here");
    cr_assert_null(fs_fh_get(fs, ta, 5), "and its slot freed: stale");
}

/* A predecessor's metrics file is adopted: opened again here once, and its
 * token finds it from then on. A slot saying another kind than the file
 * at its inode now is stale. */
Test(fh_token, a_predecessors_metrics_file_is_adopted_another_kind_is_not)
{
    struct reg *reg = NULL;
    struct reg_opts ro = { 0 };
    cr_assert_eq(reg_open(&reg, &ro), 0);
    fs->reg = reg;
    struct fs_node root, m;
    cr_assert_eq(fs_resolve(fs, fs_ino(0, SLOT_ROOT), &root), 0);
    cr_assert_eq(fs_child(fs, &root, "metrics", &m), 0);
    cr_assert_eq(m.kind, K_METRICS);
    struct fs_fh a = { .kind = K_METRICS }, b = { .kind = K_EVENTS };
    uint64_t ta, tb;
    cr_assert_eq(fs_fh_put(fs, &a, m.ino, O_RDONLY, &ta), 0);
    cr_assert_eq(fs_fh_put(fs, &b, m.ino, O_RDONLY, &tb), 0);
    fs->fh_ptr[(ta & 0xffffffffu) - 1] = NULL;   /* as a successor finds them */
    fs->fh_ptr[(tb & 0xffffffffu) - 1] = NULL;
    struct fs_fh *h = fs_fh_get(fs, ta, m.ino);
    cr_assert_not_null(h, "the metrics file is opened again");
    cr_assert_neq(h, &a);
    cr_assert_eq(h->kind, K_METRICS);
    cr_assert_eq(h->n.ino, m.ino);
    cr_assert_eq(fs_fh_get(fs, ta, m.ino), h, "adopted once, then found");
    cr_assert_null(fs_fh_get(fs, tb, m.ino), "an events slot at the metrics inode: stale");
    cr_assert_null(fs_fh_released(fs, tb), "no open file here: its slot is freed");
    cr_assert_eq(fs_fh_released(fs, ta), h);
    pthread_mutex_lock(&fs->fh_mu);
    LIST_REMOVE(h, link);
    fs_fh_drop(fs, h);
    pthread_mutex_unlock(&fs->fh_mu);
    fs_kinds[h->kind].release(fs, h);
    cr_assert_null(fs_fh_get(fs, ta, m.ino), "released: stale");
    fs->reg = NULL;
    reg_close(reg);
}
