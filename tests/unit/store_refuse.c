/* Stores csifs must refuse to start on (DESIGN section 7, issue 3 test 6):
 * each refused by store_open and store_check with its code and a message
 * naming data.mdb and the problem, and data.mdb byte-for-byte unchanged. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/storeutil.h"
#include "tests/lib/testutil.h"
#include "registry/store_int.h"

#define MARKER "/run/csi-test/marker-q7Zk.sock"

static char *tmp;
static char state[PATH_MAX - 64], file[PATH_MAX];
static struct su s;

/* A healthy store with some pages: ebs/a0 ready on MARKER, and more
 * instances with long mount points. */
static void setup(void)
{
    tmp = tu_tmpdir("refuse");
    cr_assert(tmp, "tu_tmpdir: %s", strerror(errno));
    snprintf(state, sizeof(state), "%s/state", tmp);
    snprintf(file, sizeof(file), "%s/data.mdb", state);
    s = (struct su){ .dir = state };
    int rc = su_open(&s);
    cr_assert_eq(rc, 0, "%d %s", rc, s.err);
    int64_t a0 = su_register(s.reg, REG_NODE, "ebs", "a0");
    cr_assert_gt(a0, 0);
    cr_assert_eq(su_make_ready(s.reg, (uint64_t)a0, MARKER), 0);
    char mp[1001];
    for (int k = 0; k < 40; k++) {
        char alloc[16];
        snprintf(alloc, sizeof(alloc), "b%d", k);
        int64_t i = su_register(s.reg, REG_CONTROLLER, "big", alloc);
        cr_assert_gt(i, 0);
        memset(mp, 'a' + k % 26, 1000);
        mp[0] = '/';
        cr_assert_eq(reg_attr_store(s.reg, (uint64_t)i, REG_A_MOUNT_POINT, mp, 1000), 0);
    }
    su_close(&s);
}

static void teardown(void)
{
    su_close(&s);
    tu_rmrf(tmp);
    free(tmp);
}

TestSuite(refuse, .init = setup, .fini = teardown);

/* store_open and store_check both refuse with code and a message holding
 * data.mdb's path and what; data.mdb is unchanged. */
static void expect_refused(int code, const char *what)
{
    uint32_t before, after;
    char err[512];
    cr_assert_eq(su_file_crc(file, &before), 0);
    int rc = su_open(&s);
    cr_log_info("refused: %s", s.err);
    cr_assert_eq(rc, code, "store_open: %d (%s), want %d", rc, s.err, code);
    cr_assert(strstr(s.err, file) && strstr(s.err, what),
              "message \"%s\" names %s and \"%s\"", s.err, file, what);
    rc = store_check(state, err, sizeof(err));
    cr_assert_eq(rc, code, "store_check: %d (%s), want %d", rc, err, code);
    cr_assert_str_eq(err, s.err);
    cr_assert_eq(su_file_crc(file, &after), 0);
    cr_assert_eq(after, before, "data.mdb changed");
}

/* Overwrite len bytes of data.mdb at off. */
static void patch(off_t off, const void *bytes, size_t len)
{
    int fd = open(file, O_WRONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pwrite(fd, bytes, len, off), (ssize_t)len);
    close(fd);
}

/* The newest meta page's root of the free tree (db 0) or the main tree
 * (db 1), and the page size. */
static uint64_t meta_root(int db, uint32_t *psize)
{
    unsigned char m[2][152];
    int fd = open(file, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pread(fd, m[0], sizeof(m[0]), 0), sizeof(m[0]));
    memcpy(psize, m[0] + 40, 4);
    cr_assert_eq(pread(fd, m[1], sizeof(m[1]), *psize), sizeof(m[1]));
    close(fd);
    uint64_t txn[2], root;
    memcpy(&txn[0], m[0] + 144, 8);
    memcpy(&txn[1], m[1] + 144, 8);
    memcpy(&root, m[txn[1] > txn[0]] + (db ? 128 : 80), 8);
    return root;
}

static uint64_t main_root(uint32_t *psize)
{
    return meta_root(1, psize);
}

Test(refuse, healthy_store_passes_untouched)
{
    uint32_t before, after;
    cr_assert_eq(su_file_crc(file, &before), 0);
    cr_assert_eq(store_check(state, s.err, sizeof(s.err)), 0, "%s", s.err);
    cr_assert_eq(su_file_crc(file, &after), 0);
    cr_assert_eq(after, before);
    char missing[PATH_MAX];
    snprintf(missing, sizeof(missing), "%s/none", tmp);
    cr_assert_eq(store_check(missing, s.err, sizeof(s.err)), 0, "a new state dir is fine");
    cr_assert_eq(access(missing, F_OK), -1, "store_check creates nothing");
}

Test(refuse, unknown_version)
{
    cr_assert_eq(su_raw_put(state, "version", "3", 1), 0);
    expect_refused(-ENOTSUP, "unknown schema version \"3\"");
}

Test(refuse, missing_version_key)
{
    cr_assert_eq(su_raw_put(state, "version", NULL, 0), 0);
    expect_refused(-ENOKEY, "the version key is missing");
}

Test(refuse, flipped_byte_fails_the_crc)
{
    int fd = open(file, O_RDWR);
    cr_assert_geq(fd, 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    char *buf = malloc((size_t)st.st_size);
    cr_assert(buf);
    cr_assert_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
    int flipped = 0;             /* every copy: old page versions linger */
    for (char *p = buf; (p = memmem(p, (size_t)(buf + st.st_size - p), MARKER,
                                    strlen(MARKER))); p++, flipped++) {
        char c = p[strlen(MARKER) - 6] ^ 0x01;
        cr_assert_eq(pwrite(fd, &c, 1, p - buf + (off_t)strlen(MARKER) - 6), 1);
    }
    free(buf);
    close(fd);
    cr_assert_gt(flipped, 0, "the marker is in data.mdb");
    expect_refused(-EBADMSG, "record \"i/csi-node/ebs/a0\" fails its checksum");
}

Test(refuse, truncated_data_mdb)
{
    uint32_t psize;
    uint64_t root = main_root(&psize);
    cr_assert_eq(truncate(file, (off_t)(root * psize + psize / 2)), 0);
    expect_refused(-ENODATA, "truncated");
}

Test(refuse, truncated_inside_the_meta_page)
{
    cr_assert_eq(truncate(file, 100), 0);
    expect_refused(-ENODATA, "truncated: 100 bytes end inside meta page 0");
}

Test(refuse, record_that_does_not_decode)
{
    /* A good header and CRC over a payload that is not protobuf. */
    const char *key = "i/csi-node/ebs/zz";
    unsigned char v[8 + 4] = { 1, 2, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff };
    uint32_t crc = store_crc32(0, key, strlen(key));
    crc = store_crc32(crc, v, 4);
    crc = store_crc32(crc, v + 8, 4);
    for (int i = 0; i < 4; i++)
        v[4 + i] = (unsigned char)(crc >> (8 * i));
    cr_assert_eq(su_raw_put(state, key, v, sizeof(v)), 0);
    expect_refused(-EBADMSG, "record \"i/csi-node/ebs/zz\" does not decode as Instance");
}

Test(refuse, instance_without_its_plugin)
{
    cr_assert_eq(su_raw_put(state, "p/csi-node/ebs", NULL, 0), 0);
    expect_refused(-EBADMSG, "instance csi-node/ebs/a0 has no plugin record");
}

Test(refuse, foreign_key)
{
    cr_assert_eq(su_raw_put(state, "x/other", "data", 4), 0);
    expect_refused(-EBADMSG, "record \"x/other\" is not a key of schema version 2");
}

Test(refuse, not_an_lmdb_file)
{
    char junk[16384];
    memset(junk, 0x5a, sizeof(junk));
    patch(0, junk, sizeof(junk));
    expect_refused(-EUCLEAN, "not an LMDB meta page (MDB_INVALID)");
}

Test(refuse, lmdb_version_mismatch)
{
    uint32_t psize, v = 999;
    main_root(&psize);
    patch(20, &v, sizeof(v));
    patch(psize + 20, &v, sizeof(v));
    expect_refused(-EPROTONOSUPPORT, "MDB_VERSION_MISMATCH");
}

Test(refuse, corrupted_page)
{
    uint32_t psize;
    uint64_t root = main_root(&psize);
    uint16_t flags = 0;          /* neither branch nor leaf */
    patch((off_t)(root * psize + 10), &flags, sizeof(flags));
    expect_refused(-EUCLEAN, "corrupted");
}

/* The fuzz reproducer tests/fuzz/corpus/store_image/regress-v1-lmdb-segv:
 * the v1 fixture with a leaf node's flags set to F_DUPDATA in a database
 * that is not DUPSORT (and junk in the page's free gap). LMDB's cursor
 * follows the node into an xcursor that does not exist and dies of SIGSEGV;
 * the page walk refuses it before LMDB maps the file. */
/* A fuzz reproducer of tests/fuzz/corpus/store_image/ as data.mdb of the
 * state dir; then refused by store_open, store_check and, the same, by
 * store_check_forked (what csifs runs). */
static void expect_repro_refused(const char *name, int code, const char *what)
{
    char rel[256], repro[PATH_MAX];
    snprintf(rel, sizeof(rel), "tests/fuzz/corpus/store_image/%s", name);
    int rc = su_source_path(rel, repro, sizeof(repro));
    cr_assert_eq(rc, 0, "reproducer %s: %s", repro, strerror(-rc));
    cr_assert_eq(unlink(file), 0);
    char lock[PATH_MAX + 16];
    snprintf(lock, sizeof(lock), "%s/lock.mdb", state);
    unlink(lock);
    cr_assert_eq(su_copy_file(repro, file), 0);
    expect_refused(code, what);
    char err[512];
    cr_assert_eq(store_check_forked(state, err, sizeof(err)), code, "%s", err);
    cr_assert_str_eq(err, s.err, "the child's message comes back");
}

Test(refuse, dupdata_node_in_a_plain_database)
{
    expect_repro_refused("regress-v1-lmdb-segv", -EUCLEAN,
                         "page 2 has a node with flags its database cannot hold");
}

/* Fuzz reproducer regress-open-mdb-put-abort: meta page 0 holds txn 1 (empty
 * trees), meta page 1 txn 0 with a main-tree root of page 0. Read without a
 * lock file LMDB takes the newest meta, 0; with one (store_open) it takes
 * me_metas[1 & 1], and the first mdb_put dies on assert(root > 1). */
Test(refuse, newest_meta_on_the_wrong_page)
{
    expect_repro_refused("regress-open-mdb-put-abort", -EUCLEAN,
                         "meta page 0 holds transaction 1, which belongs on meta page 1");
}

/* Fuzz reproducer regress-commit-free-record-overlap: a free-list record
 * of 41 bytes whose node runs one byte into the next one (its even size
 * two). Reads and opens go through; the first commit deletes the record
 * (mdb_freelist_save) and mdb_node_del's memmove writes past the page. */
Test(refuse, overlapping_nodes)
{
    expect_repro_refused("regress-commit-free-record-overlap", -EUCLEAN,
                         "page 10 has nodes that overlap or leave gaps");
}

/* The main tree's root cut to one key, then instead its first child
 * emptied: LMDB never leaves either on disk, and asserts on the first
 * (mdb_page_search_root, mdb_rebalance) or reads a node that is not there
 * on the second (mdb_cursor_first). */
Test(refuse, branch_with_one_key)
{
    uint32_t psize;
    uint64_t root = main_root(&psize);
    uint16_t lower = 16 + 2;
    patch((off_t)(root * psize + 12), &lower, sizeof(lower));
    char what[64];
    snprintf(what, sizeof(what), "page %llu is a branch with one key", (unsigned long long)root);
    expect_refused(-EUCLEAN, what);
}

Test(refuse, empty_leaf)
{
    uint32_t psize;
    uint64_t root = main_root(&psize), child = 0;
    unsigned char pg[65536];
    int fd = open(file, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pread(fd, pg, psize, (off_t)(root * psize)), (ssize_t)psize);
    uint16_t flags, off;
    memcpy(&flags, pg + 10, 2);
    memcpy(&off, pg + 16, 2);
    cr_assert_eq(flags, 0x01, "the main root is a branch");
    memcpy(&child, pg + off, 6);     /* the 48-bit page number of node 0 */
    cr_assert_eq(pread(fd, pg, psize, (off_t)(child * psize)), (ssize_t)psize);
    close(fd);
    memcpy(&flags, pg + 10, 2);
    cr_assert_eq(flags, 0x02, "its first child is a leaf");
    uint16_t lower = 16;
    patch((off_t)(child * psize + 12), &lower, sizeof(lower));
    char what[64];
    snprintf(what, sizeof(what), "page %llu is an empty leaf", (unsigned long long)child);
    expect_refused(-EUCLEAN, what);
}

/* What csifs runs: a check that dies of a signal (LMDB on damage the page
 * walk does not know: SIGSEGV, or SIGABRT from one of its assertions) is a
 * refusal naming data.mdb, not a crash. */
static int crashing_check(const char *dir, char *err, size_t errlen)
{
    (void)dir, (void)err, (void)errlen;
    raise(SIGSEGV);
    return 0;
}

static int aborting_check(const char *dir, char *err, size_t errlen)
{
    (void)dir, (void)err, (void)errlen;
    abort();                         /* as LMDB's mdb_assert_fail */
}

Test(refuse, check_killed_by_a_signal_is_refused)
{
    char err[512];
    uint32_t before, after;
    cr_assert_eq(su_file_crc(file, &before), 0);
    cr_assert_eq(store_check_forked(state, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(su_file_crc(file, &after), 0);
    cr_assert_eq(after, before, "the check and its trial write leave data.mdb as it was");
    int rc = store_run_forked(crashing_check, "reading it", state, err, sizeof(err));
    cr_assert_eq(rc, -EUCLEAN, "%d %s", rc, err);
    cr_assert(strstr(err, file) && strstr(err, "signal 11") && strstr(err, "reading it"),
              "message \"%s\"", err);
    rc = store_run_forked(aborting_check, "testing", state, err, sizeof(err));
    cr_assert_eq(rc, -EUCLEAN, "%d %s", rc, err);
    cr_assert(strstr(err, file) && strstr(err, "signal 6 (Aborted) testing"),
              "message \"%s\"", err);
}

/* Whether dir holds an entry named backup-v1-*. */
static bool has_backup(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert(d, "%s: %s", dir, strerror(errno));
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));)
        found = strncmp(e->d_name, "backup-v1-", 10) == 0;
    closedir(d);
    return found;
}

/* On a version 1 store the trial is the compacting backup (to /dev/null)
 * and the upgrade, aborted: the store stays as it was, with no backup. */
Test(refuse, trial_write_leaves_a_v1_store_as_it_is)
{
    char fixture[PATH_MAX], err[512];
    int rc = su_source_path("tests/fixtures/v1/data.mdb", fixture, sizeof(fixture));
    cr_assert_eq(rc, 0, "fixture %s: %s", fixture, strerror(-rc));
    cr_assert_eq(unlink(file), 0);
    cr_assert_eq(su_copy_file(fixture, file), 0);
    uint32_t before, after;
    cr_assert_eq(su_file_crc(file, &before), 0);
    cr_assert_eq(store_check_forked(state, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(su_file_crc(file, &after), 0);
    cr_assert_eq(after, before, "data.mdb changed");
    cr_assert(!has_backup(state), "no backup dir is made");
    cr_assert_eq(su_open(&s), 0, "%s", s.err);   /* and the real open upgrades it */
    su_close(&s);
    cr_assert(has_backup(state), "the real upgrade made its backup");
}

/* The trial write alone (without the page walk that refuses it first) on
 * regress-open-mdb-put-abort: LMDB's assertion kills the child, and that is
 * a refusal with a message; data.mdb is left as it was. */
Test(refuse, trial_write_killed_by_lmdb_is_refused)
{
    expect_repro_refused("regress-open-mdb-put-abort", -EUCLEAN, "belongs on meta page 1");
    char err[512];
    uint32_t before, after;
    cr_assert_eq(su_file_crc(file, &before), 0);
    int rc = store_run_forked(store_try_write, "in a trial write", state, err, sizeof(err));
    cr_log_info("refused: %s", err);
    cr_assert_eq(rc, -EUCLEAN, "%d %s", rc, err);
    cr_assert(strstr(err, file) && strstr(err, "signal 6 (Aborted) in a trial write: the "
                                               "LMDB environment is corrupted"),
              "message \"%s\"", err);
    cr_assert_eq(su_file_crc(file, &after), 0);
    cr_assert_eq(after, before, "data.mdb changed");
}

/* Fuzz reproducer regress-v1-free-dupsort, on this store: the free-page
 * tree flagged DUPSORT, which LMDB's compacting copy and page allocator
 * answer with an assertion (abort). */
Test(refuse, free_tree_with_other_flags)
{
    uint32_t psize;
    uint16_t flags = 0x04 | 0x08;    /* MDB_DUPSORT | MDB_INTEGERKEY */
    main_root(&psize);
    patch(44, &flags, sizeof(flags));
    patch(psize + 44, &flags, sizeof(flags));
    expect_refused(-EUCLEAN, "the free-page tree flags 0xc");
}

/* Fuzz reproducer regress-v1-meta1-psize, on this store: the metas
 * disagree on the page size; LMDB maps with the newest one's and reads
 * past the end of the file (SIGBUS). */
Test(refuse, metas_with_two_page_sizes)
{
    uint32_t psize, other;
    main_root(&psize);
    other = psize * 2;
    patch(psize + 40, &other, sizeof(other));
    char what[80];
    snprintf(what, sizeof(what), "meta page 1 gives page size %u, meta page 0 %u", other, psize);
    expect_refused(-EUCLEAN, what);
}

/* The first free-list record made to name the main tree's root: a page
 * both free and in use, which LMDB's first write hands out again and its
 * mdb_page_touch or mdb_page_dirty assertion answers. */
Test(refuse, free_page_in_use)
{
    uint32_t psize;
    uint64_t root = main_root(&psize), froot = meta_root(0, &psize), rec[2] = { 1, root };
    unsigned char pg[65536];
    int fd = open(file, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pread(fd, pg, psize, (off_t)(froot * psize)), (ssize_t)psize);
    close(fd);
    uint16_t flags, off, ksize, nflags;
    memcpy(&flags, pg + 10, 2);
    memcpy(&off, pg + 16, 2);
    memcpy(&nflags, pg + off + 4, 2);
    memcpy(&ksize, pg + off + 6, 2);
    cr_assert(froot != ~0ull && flags == 0x02 && nflags == 0,
              "the free tree is one leaf (root %llu, flags 0x%x), its first record inline",
              (unsigned long long)froot, flags);
    char err[512];
    patch((off_t)(froot * psize + off + 8 + ksize), rec, sizeof(rec));
    int rc = store_run_forked(store_try_write, "in a trial write", state, err, sizeof(err));
    cr_assert(rc == -EUCLEAN && strstr(err, "signal 6 (Aborted) in a trial write"),
              "LMDB's write path, without the page walk: %d %s", rc, err);
    char what[80];
    snprintf(what, sizeof(what), "page %llu is used twice", (unsigned long long)root);
    expect_refused(-EUCLEAN, what);
}

/* Random damage anywhere in data.mdb: refused with one of the codes of
 * store.h, or harmless (flips in free or slack space) and then the store opens
 * and loads; never a crash, and a refused file is left as it is. */
Test(refuse, random_damage_is_refused_or_harmless, .timeout = 120)
{
    struct stat st;
    cr_assert_eq(stat(file, &st), 0);
    size_t size = (size_t)st.st_size;
    unsigned char *good = malloc(size), *bad = malloc(size);
    cr_assert(good && bad);
    int fd = open(file, O_RDWR);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pread(fd, good, size, 0), (ssize_t)size);
    unsigned r = 12345;
    int refused = 0;
    for (int t = 0; t < 100; t++) {
        memcpy(bad, good, size);
        for (int f = 1 + rand_r(&r) % 4; f > 0; f--)
            bad[(size_t)rand_r(&r) % size] = (unsigned char)rand_r(&r);
        cr_assert_eq(pwrite(fd, bad, size, 0), (ssize_t)size);
        char err[512];
        int rc = store_check(state, err, sizeof(err));
        cr_assert(rc == 0 || rc == -EUCLEAN || rc == -ENODATA || rc == -EBADMSG ||
                  rc == -ENOKEY || rc == -ENOTSUP || rc == -EPROTONOSUPPORT,
                  "trial %d: %d %s", t, rc, err);
        if (rc == 0) {
            rc = su_open(&s);
            cr_assert_eq(rc, 0, "trial %d: checked fine, then %d %s", t, rc, s.err);
            su_close(&s);
        } else {
            uint32_t want = store_crc32(0, bad, size), got;
            cr_assert_eq(su_file_crc(file, &got), 0);
            cr_assert_eq(got, want, "trial %d: a refused data.mdb changed", t);
            refused++;
        }
    }
    close(fd);
    free(good);
    free(bad);
    cr_assert_gt(refused, 10, "most damage is noticed");
}
