/* csifs-bench: csifs side by side with tmpfs, raw LMDB and bare gRPC core.
 *
 * main.c     command line, sizes, the order of the groups
 * report.c   the rows (names, goals), per-repetition samples, medians, the
 *            table, the `bench ...` lines and bench.json
 * sys.c      clocks, /proc readers, child processes, tmpfs, csifs daemons
 * tree.c     browse_cold, browse_hot, read_open, read_pread, stat_deep,
 *            metrics_read, http_metrics, restart, memory (one 1,000 x 10 tree)
 * register.c register_serial, register_parallel, register_burst, the raw
 *            LMDB baseline
 * probe.c    probe_fanout, probe_spread, hung_neighbour, memory_live,
 *            death_detect, probe_call
 * bare.c     the bare gRPC core baselines (run in a child process)
 * ring.c     failover, events_replay
 * kubelet.c  kubelet_register
 * cluster.c  cluster_propagate, cluster_writes, cluster_isolation (a real
 *            3-member etcd); cluster_scale.c cluster_view_scale
 * scale.c    restart_100k, memory_100k (a 1,000 x 100 tree)
 * takeover.c takeover, upgrade (the tree, under the test fd store)
 * floorfs.c  the floor of the tree rows (a program of its own: build/floorfs)
 * counts.c   --requests: FUSE requests per workload (in-process mount)
 *
 * Each figure is measured in the same run as its baseline, alternating
 * between them, repetition by repetition. csifs runs as a separate process
 * (build/csifs -f), as in production. Nothing here asserts a timing.
 */
#ifndef CSIFS_BENCH_H
#define CSIFS_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/lib/fsrun.h"

/* ---- sizes (main.c) ---- */
struct bench_cfg {
    bool quick;
    int reps;                 /* repetitions of every row, >= 3 */
    int plugins, insts;       /* the browse tree: plugins x instances */
    int stats;                /* stat_deep: stat() calls per repetition */
    int reg_cycles;           /* register_serial cycles; the LMDB baseline
                                 commits 3 x this many */
    int par_writers, par_cycles;  /* register_parallel: cycles per writer (all
                                     together as many as register_serial) */
    int live, hung;           /* probe_fanout plugins, hung_neighbour's hung ones */
    int window_s;             /* probe_fanout window (hung_neighbour's: at most
                                 16 s, what `history` holds at 1 s heartbeats) */
    int call_every_ms, call_samples;  /* probe_call: heartbeat, probes per repetition
                                         (at most 16: what `history` keeps) */
    int failovers, failover_batch;
    int events;               /* events_replay ring */
    const char *only;         /* run only the groups holding a row named so */
};
extern struct bench_cfg cfg;

/* ---- rows and samples (report.c) ---- */
enum row {
    R_BROWSE_COLD, R_BROWSE_WARM, R_BROWSE_HOT, R_READ_OPEN, R_READ_PREAD, R_STAT_DEEP, R_METRICS_READ,
    R_REGISTER_SERIAL, R_REGISTER_PARALLEL, R_REGISTER_BURST, R_PROBE_FANOUT, R_PROBE_SPREAD,
    R_DEATH_DETECT, R_PROBE_CALL,
    R_HUNG_NEIGHBOUR, R_RESTART, R_MEMORY, R_MEMORY_LIVE, R_FAILOVER,
    R_EVENTS_REPLAY, R_RESTART_100K, R_MEMORY_100K, R_HTTP_METRICS, R_KUBELET_REGISTER,
    R_CLUSTER_PROPAGATE, R_CLUSTER_WRITES, R_CLUSTER_VIEW_SCALE, R_CLUSTER_ISOLATION,
    R_TAKEOVER, R_UPGRADE, R_NROWS
};

/* One repetition: v (and v2, probe_fanout's p99) against baseline b (NAN
 * when the row has none). */
void bench_sample(enum row r, double v, double v2, double b);
/* The same for a row whose second measure has its own baseline b2. */
void bench_sample2(enum row r, double v, double v2, double b, double b2);
/* A free-form note for the row, shown under the table and in the JSON. */
void bench_note(enum row r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Does the run include row r (cfg.only)? */
bool bench_wants(enum row r);
/* Print the table and the `bench` lines to stdout; write json_path. */
void bench_report(const char *json_path, double wall_s);
/* Median (sorts v); p-th percentile (0..100) of v (sorts v). NAN if n == 0. */
double bench_median(double *v, size_t n);
double bench_pct(double *v, size_t n, double p);

/* ---- system (sys.c) ---- */
double now_s(void);                      /* monotonic seconds */
int64_t wall_ms(void);                   /* CLOCK_REALTIME in ms */
void sleep_s(double s);
long proc_rss_kib(pid_t pid);            /* VmRSS, -1 on error */
long proc_rss_anon_kib(pid_t pid);       /* RssAnon (no file pages), -1 on error */
double proc_cpu_s(pid_t pid);            /* utime + stime, -1 on error */
/* Time its threads (those alive now) spent runnable but waiting for a CPU
 * (/proc/PID/task/T/schedstat), -1 on error. */
double proc_runq_wait_s(pid_t pid);
/* The machine's CPU time so far, all CPUs (/proc/stat): busy (user, nice,
 * system, irq, softirq) and stolen by the hypervisor; 0 or -errno. */
int sys_cpu_steal(double *busy_s, double *steal_s);
/* Fork + exec argv (NULL-terminated) with stdout on out_fd (-1: /dev/null)
 * and stdin on in_fd (-1: /dev/null); returns the pid or -errno. */
pid_t run_bg(const char *const *argv, int in_fd, int out_fd);
/* run_bg and wait: the exit status, or -errno. */
int run_fg(const char *const *argv);
/* Run argv and parse the first number it prints: the number, or NAN when it
 * fails or prints none. run_values: the first n numbers into v; how many it
 * got, or -EIO when argv failed. */
double run_value(const char *const *argv);
int run_values(const char *const *argv, double *v, int n);
/* The same in two steps, for a child that runs while the caller measures
 * something else: run_start forks it with a pipe on its stdin (r->in: write
 * to it) and one on its stdout; run_finish closes r->in, reads what it
 * printed, waits for it and parses like run_values. */
struct run {
    const char *const *argv;
    pid_t pid;
    int in, out;
};
int run_start(const char *const *argv, struct run *r);
int run_finish(struct run *r, double *v, int n);
/* This binary (for the child modes). */
const char *self_exe(void);
/* echo 2 > /proc/sys/vm/drop_caches: the kernel forgets every unused dentry
 * and inode (FUSE forgets them too); 0 or -errno. */
int drop_dentries(void);
/* Mount a fresh tmpfs on dir (made if needed); unmount it. */
int tmpfs_mount(const char *dir);
void tmpfs_umount(const char *dir);
/* floorfs (tests/bench/floorfs.c) on mnt (made if needed) serving a copy of
 * src, durable with a state dir (NULL: read-only); waits until it is
 * mounted. Its pid, or -errno. floor_stop: SIGTERM, reap, unmount. */
pid_t floor_start(const char *mnt, const char *src, const char *state);
void floor_stop(pid_t pid, const char *mnt);
/* Spawn csifs -f on a fresh temp dir with -o state=...,<opts>; 0 or -errno. */
int daemon_start(struct tf *t, const char *tag, const char *opts);
/* GET path from -o http= on 127.0.0.1:port (HTTP/1.0, a fresh connection,
 * read to the end): seconds, or NAN (said why) unless the status is 200. */
double http_get_s(int port, const char *path);
/* Is the csifs of t still running? Says how it ended when it is not. */
bool daemon_alive(struct tf *t);
/* Stop it (tf_stop), saying first if it had died meanwhile. */
void daemon_stop(struct tf *t);
/* mkdir / symlink / rmdir under a mount with a relative path built by
 * printf; 0 or -errno. */
int mkdirf(struct tf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int symlinkf(struct tf *t, const char *target, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Read a small file under the mount into buf (NUL-terminated); bytes or -errno. */
ssize_t readf(struct tf *t, char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Wait until the file named by fmt (one %d, for i < n) under the mount
 * reads want and a newline, for every i; true when all did within timeout_s. */
bool wait_files(struct tf *t, const char *fmt, int n, const char *want, double timeout_s)
    __attribute__((format(printf, 2, 0)));
/* The time stamp (ms, CLOCK_REALTIME) of the next line of a csifs `events`
 * file holding needle, read from fd (O_NONBLOCK) within timeout_ms; -1
 * when none came. Forgets what was read. */
int64_t event_time(int fd, const char *needle, int timeout_ms);
/* Names readdir lists in dir, . and .. left out (-1: cannot open it). */
int dir_entries(const char *dir);
/* Print a progress line to stderr ("bench: ..."). */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- the tree's workloads (tree.c), also counted by counts.c ---- */
#define PREAD_PASSES 10
/* csi-node/p<i>/a<j> for cfg.plugins x cfg.insts; p0/a0's socket -> sock. */
int tree_build(struct tf *t, const char *sock);
/* `ls -lR root > /dev/null`: seconds. */
double ls_lr(const char *root);
/* "<root>/csi-node/p<i>/a<j>/health" for every instance (malloc'd). */
char **health_paths(const char *root);
void free_paths(char **v);
/* open/read/close of each of paths[0..n): seconds. */
double read_pass(char **paths, int n);
/* PREAD_PASSES preads of each of paths[0..n) through fds opened first: seconds. */
double pread_pass(char **paths, int n);
/* cfg.stats stat() calls of path: seconds. */
double stat_pass(const char *path);
/* `cat path > /dev/null`: seconds. */
double cat_pass(const char *path);
/* Stop t's csifs and start it again, durable, on the same state: ms from
 * the start until a readdir of csi-node lists `plugins` plugins, or NAN. */
double restart_until_listed(struct tf *t, int plugins);

/* cycles of register_serial's (register.c) on the mount of on, plugin
 * csi-node/<plugin> (made already), `socket` links pointing at to:
 * cycles/s, or NAN when one failed. */
double register_serial_on(struct tf *on, const char *plugin, const char *to, int cycles);

/* ---- groups ---- */
void bench_tree(void);        /* tree.c */
void bench_register(void);    /* register.c */
void bench_probe(void);       /* probe.c */
void bench_ring(void);        /* ring.c */
void bench_scale(void);       /* scale.c */
void bench_kubelet(void);     /* kubelet.c */
void bench_takeover(void);    /* takeover.c */
void bench_cluster(void);     /* cluster.c */
/* SIGCONT and SIGKILL the cluster group's etcd members (async-signal-safe:
 * the driver's signal handler). */
void bench_cluster_kill(void);
struct te;
void cluster_scale(struct te *e);   /* cluster_scale.c, on bench_cluster's etcd */
int bench_requests(void);     /* counts.c */

/* ---- child modes (bare.c, ring.c), run as `csifs-bench --child ...` ---- */
int bare_main(int argc, char **argv);
int readlinker_main(int argc, char **argv);
int cluster_fill_main(int argc, char **argv);   /* cluster-fill URL PREFIX HOSTS PLUGINS */

#endif
