/* The LMDB state store under the registry (DESIGN section 7, issue 3):
 * restore, durability under SIGKILL, event seqs across crashes, the v1
 * upgrade, a full disk, a second process. Each test has its own temp dir. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <lmdb.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/storeutil.h"
#include "tests/lib/testutil.h"

static char *tmp;                    /* this test's temp dir */
static char state[PATH_MAX];         /* <tmp>/state, or on the tmpfs */
static char fsdir[PATH_MAX - 64];       /* <tmp>/fs: the tmpfs of the full-disk test */
static struct su s;

static void setup(void)
{
    tmp = tu_tmpdir("store");
    cr_assert(tmp, "tu_tmpdir: %s", strerror(errno));
    snprintf(state, sizeof(state), "%s/state", tmp);
    snprintf(fsdir, sizeof(fsdir), "%s/fs", tmp);
    s = (struct su){ .dir = state };
}

static void teardown(void)
{
    su_close(&s);
    umount2(fsdir, MNT_DETACH);      /* the full-disk test's tmpfs, if any */
    tu_rmrf(tmp);
    free(tmp);
}

TestSuite(store, .init = setup, .fini = teardown);

static void open_ok(void)
{
    int rc = su_open(&s);
    cr_assert_eq(rc, 0, "su_open: %d %s", rc, s.err);
}

static void reopen(void)
{
    su_close(&s);
    open_ok();
}

static uint64_t reg_ok(const char *plugin, const char *alloc)
{
    int64_t seq = su_register(s.reg, REG_NODE, plugin, alloc);
    cr_assert_gt(seq, 0, "register %s/%s: %lld", plugin, alloc, (long long)seq);
    return (uint64_t)seq;
}

static void ready_ok(uint64_t inst, const char *socket)
{
    int rc = su_make_ready(s.reg, inst, socket);
    cr_assert_eq(rc, 0, "make ready %s: %d", socket, rc);
}

static void assert_current(const char *plugin, const char *want)
{
    struct reg_node p;
    char cur[REG_NAME_MAX + 1] = "";
    cr_assert_eq(reg_lookup_plugin(s.reg, REG_NODE, plugin, &p), 0);
    ssize_t n = reg_current_get(s.reg, p.seq, cur, sizeof(cur));
    cr_assert_str_eq(n < 0 ? "-" : cur, want, "current of %s", plugin);
}

static void assert_attr(uint64_t inst, enum reg_attr a, const char *want)
{
    char v[256];
    cr_assert_geq(reg_attr_show(s.reg, inst, a, v, sizeof(v)), 0);
    cr_assert_str_eq(v, want, "%s", reg_attrs[a].name);
}

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
    assert_current("ebs", "a2");
    reopen();
    assert_current("ebs", "a2");
    cr_assert_eq(su_inst(s.reg, REG_NODE, "ebs", "a2"), (int64_t)a2);
}

/* ---- 3. durability under SIGKILL ---- */

#define K_PLUGINS 3
#define K_INST 6
#define K_OPS 40
#define K_ROUNDS 24

struct minst {
    char alloc[16], sock[48], mp[16];
    bool ready;
};
struct mplug {
    char name[8];
    struct minst in[K_INST];         /* oldest first */
    int n;
};
struct model {
    struct mplug p[K_PLUGINS];       /* plugin k has type k % 2 */
    int np;
    unsigned next_alloc;
};
enum opk { OP_PLUGIN, OP_REGISTER, OP_SOCKET, OP_READY, OP_ATTR, OP_DEREGISTER };
struct op {
    enum opk k;
    int p, i;
    char arg[48];
};

static void model_apply(struct model *m, const struct op *o)
{
    struct mplug *p = &m->p[o->p];
    struct minst *i = &p->in[o->i];
    switch (o->k) {
    case OP_PLUGIN:
        snprintf(m->p[m->np++].name, sizeof(p->name), "p%d", o->p);
        break;
    case OP_REGISTER:
        memset(&p->in[p->n], 0, sizeof(*i));
        snprintf(p->in[p->n++].alloc, sizeof(i->alloc), "%s", o->arg);
        break;
    case OP_SOCKET:
        snprintf(i->sock, sizeof(i->sock), "%s", o->arg);
        break;
    case OP_READY:
        i->ready = true;
        break;
    case OP_ATTR:
        snprintf(i->mp, sizeof(i->mp), "%s", o->arg);
        break;
    case OP_DEREGISTER:
        memmove(i, i + 1, (size_t)(p->n - o->i - 1) * sizeof(*i));
        p->n--;
        break;
    }
}

/* A valid next operation for m, chosen with r. */
static struct op model_gen(struct model *m, unsigned *r)
{
    struct op o = { .p = m->np };
    if (m->np == 0 || (m->np < K_PLUGINS && rand_r(r) % 8 == 0))
        return o;                    /* OP_PLUGIN */
    o.p = rand_r(r) % m->np;
    struct mplug *p = &m->p[o.p];
    int pick = rand_r(r) % 10;
    if (p->n == 0 || (pick < 3 && p->n < K_INST)) {
        o.k = OP_REGISTER;
        snprintf(o.arg, sizeof(o.arg), "a%u", m->next_alloc++);
        return o;
    }
    o.i = rand_r(r) % p->n;
    struct minst *i = &p->in[o.i];
    if (pick < 5 || (pick < 7 && !*i->sock)) {
        o.k = OP_SOCKET;
        if (rand_r(r) % 5)
            snprintf(o.arg, sizeof(o.arg), "/run/csi-test/%s-%d.sock", i->alloc, rand_r(r) % 100);
    } else if (pick < 7) {
        o.k = OP_READY;
        snprintf(o.arg, sizeof(o.arg), "%s", i->sock);
    } else if (pick < 8) {
        o.k = OP_ATTR;
        snprintf(o.arg, sizeof(o.arg), "/mnt/%d", rand_r(r) % 1000);
    } else {
        o.k = OP_DEREGISTER;
    }
    return o;
}

/* The model in su_dump(reg, false)'s format. */
static char *model_dump(const struct model *m)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f);
    for (int type = 0; type < REG_NTYPES; type++) {
        for (int k = m->np - 1; k >= 0; k--) {
            const struct mplug *p = &m->p[k];
            if (k % 2 != type)
                continue;
            const char *cur = "-";
            for (int j = p->n - 1; j >= 0 && *cur == '-'; j--)
                if (p->in[j].ready)
                    cur = p->in[j].alloc;
            fprintf(f, "%s/%s current=%s\n", reg_type_names[type], p->name, cur);
            for (int j = p->n - 1; j >= 0; j--)
                fprintf(f, "  %s ready=%d socket=%s mount_point=%s\n", p->in[j].alloc,
                        p->in[j].ready, *p->in[j].sock ? p->in[j].sock : "-", p->in[j].mp);
        }
    }
    fclose(f);
    return buf;
}

static int do_op(struct reg *reg, const struct model *m, const struct op *o)
{
    const struct mplug *p = &m->p[o->p];
    enum reg_type type = (enum reg_type)(o->p % 2);
    if (o->k == OP_PLUGIN) {
        char name[8];
        snprintf(name, sizeof(name), "p%d", o->p);
        return reg_plugin_create(reg, type, name);
    }
    if (o->k == OP_REGISTER)
        return reg_instance_register(reg, type, p->name, o->arg);
    int64_t inst = su_inst(reg, type, p->name, p->in[o->i].alloc);
    if (inst < 0)
        return (int)inst;
    switch (o->k) {
    case OP_SOCKET: return reg_socket_set(reg, (uint64_t)inst, o->arg);
    case OP_READY: return su_make_ready(reg, (uint64_t)inst, o->arg);
    case OP_ATTR: return reg_attr_store(reg, (uint64_t)inst, REG_A_MOUNT_POINT, o->arg,
                                        strlen(o->arg));
    default: return reg_instance_deregister(reg, type, p->name, p->in[o->i].alloc);
    }
}

/* Children report through a pipe rather than their exit status: under
 * valgrind a forked child of Criterion exits 99 for blocks of Criterion's
 * own (nanomsg) that only a thread of the parent pointed to. */
#define CHILD_DONE INT32_MAX

/* The child: open the store (nothing LMDB exists before the fork), run the
 * ops, and report each acknowledged one's index through fd; -1 on failure,
 * CHILD_DONE once all are done and the store is closed. */
static void kill_child(const struct model *states, const struct op *ops, int n, int fd)
{
    struct su c = { .dir = state };
    int32_t k = -1;
    if (su_open(&c) < 0) {
        (void)!write(fd, &k, sizeof(k));
        _exit(1);
    }
    for (k = 0; k < n; k++) {
        if (do_op(c.reg, &states[k], &ops[k]) < 0) {
            k = -1;
            (void)!write(fd, &k, sizeof(k));
            _exit(1);
        }
        if (write(fd, &k, sizeof(k)) != sizeof(k))
            _exit(1);
    }
    su_close(&c);
    k = CHILD_DONE;
    (void)!write(fd, &k, sizeof(k));
    _exit(0);
}

static struct model states[K_OPS + 1];

struct kill_stats {
    int acked, killed, in_flight_kept;
};

/* One round from model m: leaves in m the state the store must now hold. */
static void kill_round(struct model *m, unsigned *r, int round, struct kill_stats *ks)
{
    struct op ops[K_OPS];
    states[0] = *m;
    for (int k = 0; k < K_OPS; k++) {
        states[k + 1] = states[k];
        ops[k] = model_gen(&states[k + 1], r);
        model_apply(&states[k + 1], &ops[k]);
    }
    int kill_after = rand_r(r) % (K_OPS + 1), delay_us = rand_r(r) % 3000;
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        close(fds[0]);
        kill_child(states, ops, K_OPS, fds[1]);
    }
    close(fds[1]);
    int acked = 0, bad = 0, done = 0;
    int32_t v;
    while (acked < kill_after && read(fds[0], &v, sizeof(v)) == sizeof(v))
        bad |= v != acked++;
    usleep((useconds_t)delay_us);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    while (read(fds[0], &v, sizeof(v)) == sizeof(v)) {
        if (v == CHILD_DONE)
            done = 1;
        else
            bad |= v != acked++;
    }
    close(fds[0]);
    cr_assert_not(bad, "round %d: the child failed an operation", round);
    cr_assert((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) || (done && acked == K_OPS),
              "round %d: child status 0x%x after %d acks", round, status, acked);

    open_ok();
    char *got = su_dump(s.reg, false), *want = model_dump(&states[acked]);
    bool same = !strcmp(got, want);
    ks->acked += acked;
    ks->killed += WIFSIGNALED(status);
    if (!same && acked < K_OPS) {    /* the op in flight may have committed */
        free(want);
        want = model_dump(&states[++acked]);
        same = !strcmp(got, want);
        ks->in_flight_kept += same;
    }
    cr_assert(same, "round %d, %d acked: store holds\n%s\nexpected\n%s", round, acked, got,
              want);
    free(got);
    free(want);
    su_close(&s);
    *m = states[acked];
}

Test(store, sigkill_loses_no_acknowledged_change, .timeout = 300)
{
    unsigned r = (unsigned)time(NULL) ^ (unsigned)getpid();
    struct model m = { .np = 0 };
    struct kill_stats ks = { 0 };
    cr_log_info("sigkill seed %u", r);
    for (int round = 0; round < K_ROUNDS; round++)
        kill_round(&m, &r, round, &ks);
    cr_log_info("%d rounds, %d killed, %d ops acknowledged, %d unacknowledged ops found "
                "committed", K_ROUNDS, ks.killed, ks.acked, ks.in_flight_kept);
    cr_assert_gt(ks.acked, K_ROUNDS, "the child got some work done");
    cr_assert_gt(ks.killed, K_ROUNDS / 2, "most rounds end in a SIGKILL");
}

/* ---- 4. event seqs across SIGKILL ---- */

/* The child: register and deregister, reporting after each acknowledged
 * change the last event seq handed out. Alloc names are new each round. */
static void event_child(int fd, int round)
{
    struct su c = { .dir = state };
    if (su_open(&c) < 0)
        _exit(1);
    reg_plugin_create(c.reg, REG_NODE, "ev");
    for (int k = 0;; k++) {
        char alloc[32];
        snprintf(alloc, sizeof(alloc), "r%de%d", round, k / 2);
        int rc = k % 2 ? reg_instance_deregister(c.reg, REG_NODE, "ev", alloc)
                       : reg_instance_register(c.reg, REG_NODE, "ev", alloc);
        uint64_t last = ev_next_seq(reg_events(c.reg)) - 1;
        if (rc < 0 || write(fd, &last, sizeof(last)) != sizeof(last))
            _exit(1);
    }
}

static uint64_t first_event_seq(void)
{
    struct ev_cursor c;
    char line[256];
    ev_cursor_init(reg_events(s.reg), &c);
    size_t n = ev_read(reg_events(s.reg), &c, line, sizeof(line) - 1);
    line[n] = '\0';
    cr_assert_gt(n, 0, "an event was emitted");
    return strtoull(line, NULL, 10);
}

Test(store, event_seq_never_repeats_across_sigkill, .timeout = 120)
{
    unsigned r = (unsigned)time(NULL) ^ (unsigned)getpid();
    uint64_t seen = 0;
    for (int round = 0; round < 6; round++) {
        int fds[2];
        cr_assert_eq(pipe(fds), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            event_child(fds[1], round);
        }
        close(fds[1]);
        int want = 1 + rand_r(&r) % 30, got = 0;
        bool back = false;
        uint64_t last;
        while (got < want && read(fds[0], &last, sizeof(last)) == sizeof(last)) {
            back |= last <= seen;
            seen = last;
            got++;
        }
        usleep((useconds_t)(rand_r(&r) % 2000));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        while (read(fds[0], &last, sizeof(last)) == sizeof(last)) {
            back |= last <= seen;
            seen = last;
        }
        close(fds[0]);
        cr_assert_not(back, "round %d: an event seq went back", round);
        cr_assert_eq(got, want, "round %d: the child stopped early", round);

        open_ok();
        cr_assert_gt(ev_next_seq(reg_events(s.reg)), seen, "round %d", round);
        cr_assert_eq(reg_plugin_create(s.reg, REG_CONTROLLER, "probe"), 0);
        uint64_t first = first_event_seq();
        cr_assert_gt(first, seen, "round %d: event seq %llu after %llu", round,
                     (unsigned long long)first, (unsigned long long)seen);
        cr_assert_eq(reg_plugin_remove(s.reg, REG_CONTROLLER, "probe"), 0);
        seen = ev_next_seq(reg_events(s.reg)) - 1;
        su_close(&s);
    }
}

/* ---- 5. the v1 fixture ---- */

/* tests/fixtures/v1/data.mdb from the source tree: the working directory
 * (make check runs at the top) or up from the binary (build/tests/unit/). */
static void fixture_path(char *out, size_t cap)
{
    const char *rel = "tests/fixtures/v1/data.mdb";
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    snprintf(out, cap, "%s", rel);
    for (int up = 0; access(out, R_OK) != 0 && n > 0 && up < 6; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash)
            break;
        *slash = '\0';
        snprintf(out, cap, "%s/%s", exe, rel);
    }
    cr_assert_eq(access(out, R_OK), 0, "fixture %s: %s", rel, strerror(errno));
}

static void copy_file(const char *from, const char *to)
{
    char buf[65536];
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert(in >= 0 && out >= 0, "copy %s: %s", from, strerror(errno));
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        cr_assert_eq(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
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
    int rc = reg_instance_deregister(s.reg, REG_NODE, "ebs", "a0");
    cr_assert(rc == -ENOSPC || rc == 0, "deregister on a full disk: %d", rc);
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
