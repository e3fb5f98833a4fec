/* The LMDB state store under the registry (DESIGN section 7, issue 3):
 * restore, the v1 upgrade, a full disk, a second process. Each test has its
 * own temp dir. Durability under SIGKILL is in store_crash.c. */
#include "tests/unit/store_fixture.h"

/* 1. Restore races on client restart. */
Test(store, restore_keeps_order_current_and_times)
{
    open_ok();
    uint64_t a0 = reg_ok("ebs", "a0"), a1 = reg_ok("ebs", "a1");
    ready_ok(a0, "/run/csi-test/a0.sock");
    ready_ok(a1, "/run/csi-test/a1.sock");
    cr_assert_eq(reg_attr_store(s.reg, a0, REG_A_MOUNT_POINT, "/mnt/a0\n", 8), 0);
    assert_current("ebs", "a1");
    char *before = su_dump(s.reg, true);

    reopen();
    char *after = su_dump(s.reg, true);
    cr_assert_str_eq(after, before);
    assert_current("ebs", "a1");
    assert_attr(a1, REG_A_HEALTH, "unknown\n");
    assert_attr(a1, REG_A_REASON, "restored, not yet re-probed\n");
    assert_attr(a1, REG_A_READY, "1\n");
    assert_attr(a0, REG_A_MOUNT_POINT, "/mnt/a0\n");

    uint64_t ev = ev_next_seq(reg_events(s.reg));
    cr_assert_eq(reg_instance_register(s.reg, REG_NODE, "ebs", "a0"), -EEXIST);
    cr_assert_eq(ev_next_seq(reg_events(s.reg)), ev, "no event for a refused mkdir");
    char *again = su_dump(s.reg, true);
    cr_assert_str_eq(again, before);
    reopen();
    free(again);
    again = su_dump(s.reg, true);
    cr_assert_str_eq(again, before);
    free(before);
    free(after);
    free(again);
}

/* The load sorts the records by seq with a radix sort (two passes past 255
 * records): plugins and instances made against their key order come back
 * in the order they were made. */
Test(store, restore_keeps_order_past_one_byte_of_seq)
{
    open_ok();
    char p[16], a[16];
    for (int k = 0; k < 30; k++)
        for (int j = 0; j < 10; j++) {
            snprintf(p, sizeof(p), "p%02d", 29 - k);
            snprintf(a, sizeof(a), "a%d", 9 - j);
            reg_ok(p, a);
        }
    char *dump[2];                   /* as made, as restored */
    for (int k = 0; k < 2; k++) {
        if (k)
            reopen();
        dump[k] = su_dump(s.reg, true);
    }
    cr_assert_str_eq(dump[1], dump[0]);
    free(dump[0]);
    free(dump[1]);
}

/* A probe result for inst (with a fingerprint when ok), as the prober
 * would send. */
static void probe_ok(uint64_t inst, bool ok)
{
    struct reg_node n;
    cr_assert_eq(reg_get(s.reg, inst, &n), 0);
    char nodeid[80];
    snprintf(nodeid, sizeof(nodeid), "node-%s", n.alloc);
    struct reg_fingerprint fp = { "test.csi", "1.0", nodeid, 7, "", "" };
    struct reg_probe p = { .gen = n.gen, .outcome = ok ? REG_PROBE_OK : REG_PROBE_ERROR,
                           .reason = ok ? NULL : "connect: Connection refused",
                           .latency_us = 10, .fp = ok ? &fp : NULL };
    cr_assert_eq(reg_probe_result(s.reg, inst, &p), 0);
}

/* 2. Replacement after host restart. */
Test(store, new_instance_after_restart_becomes_current)
{
    open_ok();
    uint64_t a0 = reg_ok("ebs", "a0"), a1 = reg_ok("ebs", "a1");
    ready_ok(a0, "/run/csi-test/a0.sock");
    ready_ok(a1, "/run/csi-test/a1.sock");
    reopen();
    assert_current("ebs", "a1");
    uint64_t a2 = reg_ok("ebs", "a2");
    assert_current("ebs", "a1");
    ready_ok(a2, "/run/csi-test/a2.sock");
    assert_attr(a2, REG_A_HEALTH, "healthy\n");
    /* held until each restored instance has had its first probe */
    assert_current("ebs", "a1");
    probe_ok(a0, true);
    assert_current("ebs", "a1");
    probe_ok(a1, true);
    assert_current("ebs", "a2");
    reopen();
    assert_current("ebs", "a2");
    cr_assert_eq(su_inst(s.reg, REG_NODE, "ebs", "a2"), (int64_t)a2);
}

/* ---- 5. the v1 fixture ---- */

static void fixture_path(char *out, size_t cap)
{
    int rc = su_source_path("tests/fixtures/v1/data.mdb", out, cap);
    cr_assert_eq(rc, 0, "fixture %s: %s", out, strerror(-rc));
}

static void copy_file(const char *from, const char *to)
{
    int rc = su_copy_file(from, to);
    cr_assert_eq(rc, 0, "copy %s: %s", from, strerror(-rc));
}

/* The backup dirs in state; the name of the last in name. */
static int backups(char *name, size_t cap)
{
    DIR *d = opendir(state);
    cr_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "backup-v1-", 10)) {
            snprintf(name, cap, "%s/%s", state, e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

static void assert_backup_is_v1(const char *dir)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val key = { 7, "version" }, val;
    cr_assert_eq(mdb_env_create(&env), 0);
    int rc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOLOCK, 0600);
    if (rc == 0 && (rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn)) == 0) {
        if ((rc = mdb_dbi_open(txn, NULL, 0, &dbi)) == 0)
            rc = mdb_get(txn, dbi, &key, &val);
        rc = rc == 0 && val.mv_size == 1 && *(char *)val.mv_data == '1' ? 0 : -1;
        mdb_txn_abort(txn);
    }
    mdb_env_close(env);
    cr_assert_eq(rc, 0, "%s holds a version 1 store", dir);
}

static const char v1_expected[] =
    "csi-controller/ebs current=ebs-ctrl-0 seq=1 registered=1700000000000000000\n"
    "  ebs-ctrl-0 ready=1 socket=/var/lib/nomad/plugins/ebs-ctrl-0/csi.sock mount_point= "
    "seq=2 registered=1700000001000000000 container_mount_point= provider=ebs.csi.aws.com "
    "version=v1.30.0\n"
    "csi-node/hostpath current=- seq=7 registered=1700000006000000000\n"
    "csi-node/nfs current=- seq=5 registered=1700000004000000000\n"
    "  nfs-7 ready=0 socket=/var/lib/nomad/plugins/nfs-7/csi.sock mount_point= seq=6 "
    "registered=1700000005000000000 container_mount_point= provider= version= nodeid= "
    "max_volumes=\n"
    "csi-node/ebs current=ebs-node-0 seq=3 registered=1700000002000000000\n"
    "  ebs-node-0 ready=1 socket=/var/lib/nomad/plugins/ebs-node-0/csi.sock "
    "mount_point=/var/lib/nomad/client/csi/node/ebs seq=4 registered=1700000003000000000 "
    "container_mount_point=/local/csi provider=ebs.csi.aws.com version=v1.30.0 "
    "nodeid=i-0abc123 max_volumes=25\n";

Test(store, v1_fixture_upgrades_once)
{
    char fixture[PATH_MAX], file[PATH_MAX + 16], backup[PATH_MAX + 300];
    fixture_path(fixture, sizeof(fixture));
    cr_assert_eq(mkdir(state, 0700), 0);
    snprintf(file, sizeof(file), "%s/data.mdb", state);
    copy_file(fixture, file);
    cr_assert_eq(store_check(state, s.err, sizeof(s.err)), 0, "%s", s.err);
    char other[PATH_MAX + 16];
    snprintf(other, sizeof(other), "%s/lock.mdb", state);
    cr_assert_neq(access(other, F_OK), 0, "store_check made no lock.mdb");
    snprintf(other, sizeof(other), "%s/csifs.lock", state);
    cr_assert_neq(access(other, F_OK), 0, "store_check made no csifs.lock");

    open_ok();
    char *dump = su_dump(s.reg, true);
    cr_assert_str_eq(dump, v1_expected);
    cr_assert_eq(ev_next_seq(reg_events(s.reg)), 131073, "the reserved event block is kept");
    cr_assert_eq(backups(backup, sizeof(backup)), 1);
    assert_backup_is_v1(backup);
    uint64_t ebs = (uint64_t)su_inst(s.reg, REG_NODE, "ebs", "ebs-node-0");
    assert_attr(ebs, REG_A_TOPOLOGY, "topology.ebs.csi.aws.com/zone=eu-west-1a\n");
    assert_attr(ebs, REG_A_CAPABILITIES, "node:STAGE_UNSTAGE_VOLUME\n");
    su_close(&s);

    uint32_t crc1, crc2;
    cr_assert_eq(su_file_crc(file, &crc1), 0);
    cr_assert_eq(store_check(state, s.err, sizeof(s.err)), 0, "%s", s.err);
    open_ok();
    char *again = su_dump(s.reg, true);
    cr_assert_str_eq(again, dump, "the second open changes nothing");
    su_close(&s);
    cr_assert_eq(su_file_crc(file, &crc2), 0);
    cr_assert_eq(crc1, crc2, "data.mdb is untouched by a second open");
    cr_assert_eq(backups(backup, sizeof(backup)), 1, "no second backup");

    open_ok();                       /* and it is a working v2 store */
    reg_ok("nfs", "nfs-8");
    assert_current("nfs", "-");
    free(dump);
    free(again);
}

/* ---- 7. a full disk ---- */

/* Fill the tmpfs with a file at path, then give back `leave` bytes. */
static void fill_disk(const char *path, off_t leave)
{
    char block[4096];
    memset(block, 'x', sizeof(block));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    cr_assert_geq(fd, 0);
    while (write(fd, block, sizeof(block)) > 0)
        ;
    cr_assert_eq(errno, ENOSPC, "filling the tmpfs: %s", strerror(errno));
    off_t end = lseek(fd, 0, SEEK_END);
    cr_assert_eq(ftruncate(fd, end > leave ? end - leave : 0), 0);
    close(fd);
}

/* One mutation that needs room; rc 0 or -ENOSPC, and on -ENOSPC nothing may
 * change: neither what reads show nor the event stream. */
static int try_mutation(int k, uint64_t inst)
{
    char *before = su_dump(s.reg, true), value[4001];
    uint64_t ev = ev_next_seq(reg_events(s.reg));
    int rc;
    if (k % 3 == 0) {
        memset(value, 'a' + k % 26, 4000);
        value[0] = '/';
        rc = reg_attr_store(s.reg, inst, REG_A_CONTAINER_MOUNT_POINT, value, 4000);
    } else {
        snprintf(value, sizeof(value), "b%d", k);
        rc = reg_instance_register(s.reg, REG_NODE, "ebs", value);
    }
    cr_assert(rc == 0 || rc == -ENOSPC, "mutation %d on a full disk: %d", k, rc);
    if (rc == -ENOSPC) {
        char *after = su_dump(s.reg, true);
        cr_assert_str_eq(after, before, "a failed mutation changed the registry");
        cr_assert_eq(ev_next_seq(reg_events(s.reg)), ev, "a failed mutation emitted events");
        free(after);
    }
    free(before);
    return rc;
}

Test(store, full_disk_fails_with_enospc_and_changes_nothing)
{
    /* A private mount namespace: the tmpfs goes away with this process. */
    cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare: %s", strerror(errno));
    cr_assert_eq(mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL), 0);
    cr_assert_eq(mkdir(fsdir, 0700), 0);
    cr_assert_eq(mount("tmpfs", fsdir, "tmpfs", 0, "size=1m,mode=0700"), 0,
                 "mount tmpfs: %s", strerror(errno));
    snprintf(state, sizeof(state), "%s/state", fsdir);
    open_ok();
    uint64_t a0 = reg_ok("ebs", "a0");
    ready_ok(a0, "/run/csi-test/a0.sock");
    cr_assert_eq(reg_attr_store(s.reg, a0, REG_A_MOUNT_POINT, "/mnt/a0", 7), 0);

    /* One page left first: LMDB's multi-page write comes up short and it
     * says EIO ("short write, filesystem full?"); then no room at all: ENOSPC.
     * Both must reach the registry as -ENOSPC. */
    char filler[PATH_MAX + 16];
    snprintf(filler, sizeof(filler), "%s/filler", fsdir);
    int k = 0;
    for (int phase = 0; phase < 2; phase++) {
        fill_disk(filler, phase ? 0 : 4096);
        int failed = 0, start = k;
        for (; k < start + 300 && failed < 4; k++)
            failed += try_mutation(k, a0) == -ENOSPC;
        cr_assert_geq(failed, 1, "phase %d: no mutation failed in %d tries", phase, k - start);
    }
    assert_attr(a0, REG_A_MOUNT_POINT, "/mnt/a0\n");
    assert_current("ebs", "a0");
    /* The reserve of DESIGN 7: a removal commits on a full disk. */
    int rc = reg_instance_deregister(s.reg, REG_NODE, "ebs", "a0");
    cr_assert_eq(rc, 0, "deregister on a full disk: %d", rc);
    char *full = su_dump(s.reg, true);

    cr_assert_eq(unlink(filler), 0);
    cr_assert_eq(reg_instance_register(s.reg, REG_NODE, "ebs", "after"), 0);
    cr_assert_eq(try_mutation(0, (uint64_t)su_inst(s.reg, REG_NODE, "ebs", "after")), 0);
    char *now = su_dump(s.reg, true);
    cr_assert_str_neq(now, full);
    reopen();
    char *restored = su_dump(s.reg, true);
    cr_assert_str_eq(restored, now, "what was acknowledged is what is restored");
    free(full);
    free(now);
    free(restored);
}

Test(store, nosync_commits_reach_the_file_at_close)
{
    char err[256];
    struct store *st;
    cr_assert_eq(store_open(&st, state, 0x80, err, sizeof(err)), -EINVAL, "unknown flags");
    s.flags = STORE_NOSYNC;
    open_ok();
    reg_ok("bench", "n0");
    su_close(&s);
    s.flags = 0;
    open_ok();
    cr_assert_gt(su_inst(s.reg, REG_NODE, "bench", "n0"), 0);
}

/* The meta is written when a bound moves, not with every commit: seqs are
 * reserved REG_SEQ_BLOCK at a time (backend.h). After a restart new seqs
 * start past every seq handed out before. */
static struct counted {
    const struct reg_backend *inner;
    int commits, metas;
} counted;

static int counted_commit(void *ctx, const struct store_txn *t)
{
    counted.commits++;
    counted.metas += !t->keep_meta;
    return counted.inner->commit(ctx, t);
}

static void open_counted(struct reg_backend *be)
{
    cr_assert_eq(store_open(&s.st, state, s.flags, s.err, sizeof(s.err)), 0, "%s", s.err);
    counted = (struct counted){ .inner = store_backend(s.st) };
    *be = *counted.inner;
    be->commit = counted_commit;
    struct reg_opts o = { .backend = be };
    cr_assert_eq(reg_open(&s.reg, &o), 0);
}

Test(store, seqs_reserved_in_blocks_meta_written_once_per_block)
{
    struct reg_backend be;
    s.flags = STORE_NOSYNC;
    open_counted(&be);
    uint64_t last = 0;
    char p[16], a[16];
    int n = 0;
    for (; last < REG_SEQ_BLOCK + 40; n++) {
        snprintf(p, sizeof(p), "p%d", n / 100);
        snprintf(a, sizeof(a), "a%d", n % 100);
        uint64_t seq = reg_ok(p, a);
        cr_assert_gt(seq, last, "seqs increase");
        last = seq;
    }
    cr_assert_geq(counted.commits, n);
    cr_assert_eq(counted.metas, 2, "the first commit and the block's end: %d metas, %d commits",
                 counted.metas, counted.commits);
    su_close(&s);
    for (int restart = 0; restart < 2; restart++) {
        open_counted(&be);
        snprintf(a, sizeof(a), "r%d", restart);
        uint64_t seq = reg_ok("p0", a);
        cr_assert_gt(seq, last, "after a restart: %llu not past %llu", (unsigned long long)seq,
                     (unsigned long long)last);
        last = seq;
        cr_assert_eq(counted.commits, 1);
        cr_assert_eq(counted.metas, 1, "the restart's first seq moves the bound");
        su_close(&s);
    }
    s.flags = 0;
    open_ok();
    cr_assert_eq(su_inst(s.reg, REG_NODE, "p0", "r1"), (int64_t)last);
}

/* ---- 8. a second process ---- */

Test(store, second_process_refused_with_its_pid)
{
    int up[2], down[2];
    cr_assert_eq(pipe(up), 0);
    cr_assert_eq(pipe(down), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {                  /* the holder: opens only after the fork */
        struct su c = { .dir = state };
        close(up[0]);
        close(down[1]);
        int32_t rc = su_open(&c);
        char go;
        if (write(up[1], &rc, sizeof(rc)) != sizeof(rc) || read(down[0], &go, 1) < 0)
            _exit(1);
        su_close(&c);
        rc = CHILD_DONE;             /* see CHILD_DONE */
        (void)!write(up[1], &rc, sizeof(rc));
        _exit(0);
    }
    close(up[1]);
    close(down[0]);
    int32_t child_rc = -1;
    cr_assert_eq(read(up[0], &child_rc, sizeof(child_rc)), sizeof(child_rc));
    cr_assert_eq(child_rc, 0, "the holder opened the store");

    char want[64];
    snprintf(want, sizeof(want), "state dir in use by pid %d", (int)pid);
    int rc = su_open(&s);
    bool named = strstr(s.err, want) && strstr(s.err, "csifs.lock");
    char err[512];
    int crc = store_check(state, err, sizeof(err));
    bool cnamed = strstr(err, want) != NULL;
    close(down[1]);                  /* let the holder go */
    int32_t done = 0;
    cr_assert_eq(read(up[0], &done, sizeof(done)), sizeof(done));
    waitpid(pid, NULL, 0);
    close(up[0]);
    cr_assert_eq(rc, -EBUSY, "second open: %d %s", rc, s.err);
    cr_assert(named, "message \"%s\" names the lock file and the pid %d", s.err, (int)pid);
    cr_assert_eq(crc, -EBUSY, "store_check: %d %s", crc, err);
    cr_assert(cnamed, "store_check message \"%s\"", err);
    cr_assert_eq(done, CHILD_DONE, "the holder closed its store");

    open_ok();                       /* free again once the holder is gone */
    struct su twin = { .dir = state };
    snprintf(want, sizeof(want), "state dir in use by pid %d", (int)getpid());
    cr_assert_eq(su_open(&twin), -EBUSY, "a second open in one process is refused too");
    cr_assert(strstr(twin.err, want), "%s", twin.err);
}

/* DESIGN 2: current follows health, each move is committed, and a restart
 * alone never moves it. */
Test(store, current_persisted_and_held_at_restart)
{
    open_ok();
    uint64_t a0 = reg_ok("ebs", "a0"), a1 = reg_ok("ebs", "a1");
    ready_ok(a0, "/run/csi-test/a0.sock");
    ready_ok(a1, "/run/csi-test/a1.sock");
    assert_current("ebs", "a1");
    probe_ok(a1, false);             /* the newest dies: failover to a0 */
    assert_attr(a1, REG_A_HEALTH, "unhealthy\n");
    assert_current("ebs", "a0");
    reopen();                        /* the move was committed */
    assert_current("ebs", "a0");
    probe_ok(a1, true);              /* a0 not probed yet: holds */
    assert_current("ebs", "a0");
    probe_ok(a0, true);              /* all probed: the newest healthy */
    assert_current("ebs", "a1");
    reopen();
    assert_current("ebs", "a1");
    probe_ok(a0, true);              /* the newest's plugin died while down: */
    assert_current("ebs", "a1");     /* no move before its first probe */
    probe_ok(a1, false);
    assert_attr(a1, REG_A_HEALTH, "unhealthy\n");
    assert_current("ebs", "a0");
}

