/* register_serial against the durable floor: floorfs answering each mkdir,
 * symlink and rmdir after one synchronous LMDB commit, inline, on the same
 * disk, both mounted and taking the cycles in turns (raw LMDB commits in
 * the note); register_parallel against
 * register_serial. csifs runs durable (no nosync), as in production. A
 * cycle is mkdir of an instance, its `socket` symlink, rmdir: three commits.
 * register_burst: 1,000 registrations by 64 processes at once, each on its
 * own plugin (the kernel serialises the mkdirs of one directory), counted
 * in LMDB write transactions, one fdatasync each. */
#include "tests/bench/bench.h"

#include <errno.h>
#include <lmdb.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct tf t;
#define NOTE_MAX 64
static char target[4096];      /* what `socket` points at: no plugin there */

/* n synchronous write commits of one small record each into a fresh
 * environment in dir: seconds, or NAN. */
static double lmdb_commits(const char *dir, int n)
{
    MDB_env *env = NULL;
    MDB_dbi dbi;
    MDB_txn *txn;
    char key[32], val[200];
    memset(val, 'v', sizeof(val));
    mkdir(dir, 0700);
    int rc = mdb_env_create(&env);
    if (rc == 0)
        rc = mdb_env_set_mapsize(env, (size_t)1 << 30);
    if (rc == 0)
        rc = mdb_env_open(env, dir, 0, 0600);
    if (rc == 0 && (rc = mdb_txn_begin(env, NULL, 0, &txn)) == 0) {
        rc = mdb_dbi_open(txn, NULL, 0, &dbi);
        rc = rc ? rc : mdb_txn_commit(txn);
    }
    double t0 = now_s();
    for (int i = 0; rc == 0 && i < n; i++) {
        MDB_val k = { (size_t)snprintf(key, sizeof(key), "k%d", i % 1000), key };
        MDB_val v = { sizeof(val), val };
        if ((rc = mdb_txn_begin(env, NULL, 0, &txn)) == 0) {
            rc = mdb_put(txn, dbi, &k, &v, 0);
            rc = rc ? (mdb_txn_abort(txn), rc) : mdb_txn_commit(txn);
        }
    }
    double dt = now_s() - t0;
    if (rc)
        say("lmdb %s: %s", dir, mdb_strerror(rc));
    if (env)
        mdb_env_close(env);
    return rc ? NAN : dt;
}

struct writer {
    const char *root;          /* the mount */
    const char *plugin;
    const char *target;        /* what `socket` points at */
    int cycles;
    pthread_barrier_t *go;
    int failed;
};

static void *write_cycles(void *arg)
{
    struct writer *w = arg;
    char inst[4096], sock[4200];
    if (w->go)
        pthread_barrier_wait(w->go);
    for (int k = 0; k < w->cycles; k++) {
        snprintf(inst, sizeof(inst), "%s/csi-node/%s/a%d", w->root, w->plugin, k);
        snprintf(sock, sizeof(sock), "%s/socket", inst);
        if (mkdir(inst, 0755) < 0 || symlink(w->target, sock) < 0 || rmdir(inst) < 0)
            if (!w->failed++)
                say("register %s: %s", inst, strerror(errno));
    }
    return NULL;
}

/* The last committed LMDB write transaction of the store in state: each
 * commit is one fdatasync. 0 when it cannot be read. */
static uint64_t last_txnid(const char *state)
{
    MDB_env *env;
    MDB_envinfo info;
    uint64_t id = 0;
    if (mdb_env_create(&env) != 0)
        return 0;
    if (mdb_env_open(env, state, MDB_RDONLY, 0600) == 0 && mdb_env_info(env, &info) == 0)
        id = info.me_last_txnid;
    mdb_env_close(env);
    return id;
}

/* The commits a run of cycles cost, for the row's note (each one fsync). */
static void note_commits(enum row r, uint64_t before, int cycles)
{
    uint64_t after = last_txnid(t.state);
    if (before && after >= before)
        bench_note(r, "%llu commits for %d cycles (%.2f per cycle)",
                   (unsigned long long)(after - before), cycles,
                   (double)(after - before) / cycles);
}

double register_serial_on(struct tf *on, const char *plugin, const char *to, int cycles)
{
    struct writer w = { on->mnt, plugin, to, cycles, NULL, 0 };
    double t0 = now_s();
    write_cycles(&w);
    double dt = now_s() - t0;
    return w.failed ? NAN : cycles / dt;
}

/* The value of an unlabelled sample in csifs's `metrics` file, or NAN. */
static double metric(const char *name)
{
    FILE *f = fopen(tf_path(&t, "metrics"), "r");
    char line[512];
    double v = NAN;
    size_t n = strlen(name);
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, name, n) && line[n] == ' ')
            v = strtod(line + n + 1, NULL);
    if (f)
        fclose(f);
    return v;
}

/* register_serial's cycles go to csifs and to the floor in turns, chunks
 * of SERIAL_CHUNK, the order reversed each chunk, so that both meet the
 * disk in the same phases (one side's whole run after the other's read
 * 0.64 to 0.89 of it within one bench run: docs/benchmarks.md). */
#define SERIAL_CHUNK 100

/* Seconds one writer takes for cycles on `on`, or NAN. */
static double serial_chunk(struct tf *on, int cycles)
{
    return cycles / register_serial_on(on, "serial", target, cycles);
}

/* One writer on csifs and on the durable floor (a fresh floorfs each
 * call), in turns: csifs's cycles/s, the floor's in *base (NAN: could not
 * run). The note says how much of an operation (a third of a cycle) the
 * commit itself took, csifs's own commit histogram. */
static double serial_pair(double *base)
{
    char src[4200], mnt[4200], state[4200];
    snprintf(src, sizeof(src), "%s/floor-src/csi-node/serial", t.dir);
    snprintf(state, sizeof(state), "%s/floor-state", t.dir);
    snprintf(mnt, sizeof(mnt), "%s/floor", t.dir);
    const char *prep[] = { "sh", "-c", "rm -rf \"$0\" \"$1\" && mkdir -p \"$0\" \"$1\"", src, state,
                           NULL };
    *base = NAN;
    if (run_fg(prep) != 0)
        return NAN;
    snprintf(src, sizeof(src), "%s/floor-src", t.dir);
    pid_t pid = floor_start(mnt, src, state);
    if (pid < 0)
        return NAN;
    struct tf floor = { .mnt = mnt };
    uint64_t before = last_txnid(t.state);
    double s0 = metric("csifs_store_commit_duration_seconds_sum");
    double n0 = metric("csifs_store_commit_duration_seconds_count");
    struct tf *side[2] = { &t, &floor };     /* csifs first in even chunks */
    double took[2] = { 0, 0 };
    for (int done = 0, k = 0; done < cfg.reg_cycles; k++) {
        int n = cfg.reg_cycles - done < SERIAL_CHUNK ? cfg.reg_cycles - done : SERIAL_CHUNK;
        for (int j = 0; j < 2; j++)
            took[(j + k) % 2] += serial_chunk(side[(j + k) % 2], n);
        done += n;
    }
    floor_stop(pid, mnt);
    note_commits(R_REGISTER_SERIAL, before, cfg.reg_cycles);
    double v = cfg.reg_cycles / took[0];
    double ds = metric("csifs_store_commit_duration_seconds_sum") - s0;
    double dn = metric("csifs_store_commit_duration_seconds_count") - n0;
    if (dn > 0 && v > 0)
        bench_note(R_REGISTER_SERIAL, "a commit %.0f us of %.0f us an operation", ds / dn * 1e6,
                   1e6 / v / 3);
    *base = cfg.reg_cycles / took[1];
    return v;
}

/* cfg.par_writers writers on plugins w0, w1...: cycles/s over all. */
static double parallel(void)
{
    int n = cfg.par_writers;
    pthread_t th[n];
    struct writer w[n];
    char names[n][16];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    for (int k = 0; k < n; k++) {
        snprintf(names[k], sizeof(names[k]), "w%d", k);
        w[k] = (struct writer){ t.mnt, names[k], target, cfg.par_cycles, &go, 0 };
        pthread_create(&th[k], NULL, write_cycles, &w[k]);
    }
    uint64_t before = last_txnid(t.state);
    pthread_barrier_wait(&go);
    double t0 = now_s();
    for (int k = 0; k < n; k++)
        pthread_join(th[k], NULL);
    double dt = now_s() - t0;
    pthread_barrier_destroy(&go);
    note_commits(R_REGISTER_PARALLEL, before, n * cfg.par_cycles);
    return (double)n * cfg.par_cycles / dt;
}

#define BURST_PROCS 64
#define BURST_REGS 1000

/* One repetition: fsyncs per registration, or NAN. */
static double burst(int rep)
{
    int rc = 0, go[2];
    for (int k = 0; rc == 0 && k < BURST_PROCS; k++)
        rc = mkdirf(&t, "csi-node/b%d-%d", rep, k);
    if (rc < 0 || pipe(go) < 0)
        return NAN;
    pid_t pids[BURST_PROCS];
    for (int k = 0; k < BURST_PROCS; k++) {
        if ((pids[k] = fork()) == 0) {
            char c, path[4200];
            close(go[1]);
            if (read(go[0], &c, 1) < 0)
                _exit(2);
            int bad = 0;
            for (int i = k; i < BURST_REGS; i += BURST_PROCS) {
                snprintf(path, sizeof(path), "%s/csi-node/b%d-%d/a%d", t.mnt, rep, k, i);
                bad |= mkdir(path, 0755) < 0;
            }
            _exit(bad);
        }
    }
    close(go[0]);
    uint64_t before = last_txnid(t.state);
    double t0 = now_s();
    close(go[1]);                    /* all start at once */
    int failed = 0;
    for (int k = 0; k < BURST_PROCS; k++) {
        int st;
        if (pids[k] < 0 || waitpid(pids[k], &st, 0) != pids[k] || !WIFEXITED(st) ||
            WEXITSTATUS(st))
            failed++;
    }
    double dt = now_s() - t0;
    uint64_t after = last_txnid(t.state);
    if (failed || !before || after < before) {
        say("register_burst: %d writers failed (txnid %llu -> %llu)", failed,
            (unsigned long long)before, (unsigned long long)after);
        return NAN;
    }
    bench_note(R_REGISTER_BURST, "%llu commits for %d registrations in %.2f s",
               (unsigned long long)(after - before), BURST_REGS, dt);
    return (double)(after - before) / BURST_REGS;
}

void bench_register(void)
{
    if (bench_wants(R_REGISTER_BURST)) {
        if (daemon_start(&t, "bench-burst", NULL) < 0)
            return;
        for (int rep = 0; rep < cfg.reps; rep++)
            bench_sample(R_REGISTER_BURST, burst(rep), NAN, NAN);
        daemon_stop(&t);
    }
    if (!bench_wants(R_REGISTER_SERIAL) && !bench_wants(R_REGISTER_PARALLEL))
        return;
    say("register: %d cycles, %d writers x %d", cfg.reg_cycles, cfg.par_writers, cfg.par_cycles);
    /* BENCH_REGISTER_OPTS=nosync: the same cycles without fsync (evidence
     * for the README: what a cycle costs besides its commits) */
    if (daemon_start(&t, "bench-register", getenv("BENCH_REGISTER_OPTS")) < 0)
        return;
    snprintf(target, sizeof(target), "%s/nothing-listens-here.sock", t.dir);
    int rc = mkdirf(&t, "csi-node/serial");
    for (int k = 0; rc == 0 && k < cfg.par_writers; k++)
        rc = mkdirf(&t, "csi-node/w%d", k);
    if (rc < 0)
        say("register: set-up failed: %s", strerror(-rc));
    double raw[NOTE_MAX];
    int nraw = 0;
    for (int rep = 0; rc == 0 && rep < cfg.reps; rep++) {
        char dir[4200];
        snprintf(dir, sizeof(dir), "%s/lmdb%d", t.dir, rep);
        double base, ser, par, lmdb;
        if (rep % 2 == 0) {
            ser = serial_pair(&base);
            lmdb = lmdb_commits(dir, 3 * cfg.reg_cycles);
            par = parallel();
        } else {
            par = parallel();
            lmdb = lmdb_commits(dir, 3 * cfg.reg_cycles);
            ser = serial_pair(&base);
        }
        bench_sample(R_REGISTER_SERIAL, ser, NAN, base);
        bench_sample(R_REGISTER_PARALLEL, par, NAN, ser);
        if (nraw < NOTE_MAX)
            raw[nraw++] = cfg.reg_cycles / lmdb;
    }
    if (nraw)
        bench_note(R_REGISTER_SERIAL, "3 sync LMDB commits (raw, no FUSE): %.0f cycles/s (median)",
                   bench_median(raw, (size_t)nraw));
    daemon_stop(&t);
}
