/* fs/lookups.c, the kernel's lookup counts: against a plain array of counts,
 * through growth, forgets that empty slots inside probe runs (backward
 * shift), and inodes of one object (one home block) and of many objects. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "fs/node.h"

#define NOBJ 3000
#define NINO (NOBJ << SLOT_BITS)

static struct fs fs;
static uint64_t *want;               /* want[ino]: the count the kernel holds */

static void setup(void)
{
    memset(&fs, 0, sizeof(fs));
    cr_assert_eq(fs_lookups_init(&fs), 0);
    want = calloc(NINO, sizeof(*want));
    cr_assert(want);
}

static void teardown(void)
{
    fs_lookups_fini(&fs);
    free(want);
}

TestSuite(lookups, .init = setup, .fini = teardown, .timeout = 60);

static void agree(void)
{
    for (fuse_ino_t ino = 2; ino < NINO; ino++)
        if (fs_lookups_known(&fs, ino) != (want[ino] > 0))
            cr_assert_fail("inode %lu: known %d, held %llu", (unsigned long)ino,
                     fs_lookups_known(&fs, ino), (unsigned long long)want[ino]);
}

Test(lookups, counts_follow_adds_and_forgets)
{
    unsigned seed = 7;
    for (int round = 0; round < 4; round++) {
        /* many objects, a directory's worth of slots each, some twice */
        for (int k = 0; k < 40000; k++) {
            fuse_ino_t ino = (fuse_ino_t)(1 + rand_r(&seed) % (NOBJ - 1)) << SLOT_BITS |
                             (fuse_ino_t)(rand_r(&seed) % 16);
            fs_lookups_add(&fs, ino);
            want[ino]++;
        }
        agree();
        /* forget about half: part of a count, or all of it */
        for (fuse_ino_t ino = 2; ino < NINO; ino++) {
            if (!want[ino] || rand_r(&seed) % 2)
                continue;
            uint64_t n = rand_r(&seed) % 3 ? want[ino] : 1;
            fs_lookups_forget(&fs, ino, n);
            want[ino] -= n;
        }
        agree();
    }
    for (fuse_ino_t ino = 2; ino < NINO; ino++)
        if (want[ino])
            fs_lookups_forget(&fs, ino, want[ino]), want[ino] = 0;
    agree();
}

Test(lookups, forget_of_an_unknown_inode_changes_nothing)
{
    fuse_ino_t a = (fuse_ino_t)5 << SLOT_BITS | 3;
    fs_lookups_add(&fs, a);
    fs_lookups_forget(&fs, a + 1, 1);
    cr_assert(fs_lookups_known(&fs, a));
    cr_assert_not(fs_lookups_known(&fs, a + 1));
    cr_assert(fs_lookups_known(&fs, FUSE_ROOT_ID));   /* the root: always held */
}
