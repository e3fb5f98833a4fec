/* knobs: the timing constants tuned on this VM, in one place. Each names
 * the bench row(s) that justify it (docs/benchmarks.md); A/B one with
 * `make CFLAGS="-O2 -g -DNAME=V"` and `BENCH_ONLY=<rows> make bench`, three
 * runs each. Numbers that the contract fixes (DESIGN 3's 100 ms to 5 s
 * backoff, DESIGN 7's re-probe spread) are not knobs: csi/prober_int.h. */
#ifndef CSIFS_KNOBS_H
#define CSIFS_KNOBS_H

/* registry/mutate.c: after a batch of n, the next leader waits this long
 * for n queued mutations before it commits. Row: register_burst
 * (fsyncs/registration), with register_parallel. */
#ifndef MUT_GATHER_US
#define MUT_GATHER_US 200
#endif

/* fs/serve.c: the FUSE thread keeps reading /dev/fuse this long after a
 * request it answered before it sleeps (0: sleep at once, but after a
 * replay's READ: FS_STREAM_SPIN_NS). Rows: read_open, browse_warm (a
 * reader's next request finds it awake). */
#ifndef FS_SPIN_NS
#define FS_SPIN_NS 200000
#endif
/* fs/serve.c: how long a loop thread sleeps idle before it gives back what
 * a busy spell kept (fs_serve_on_sleep: callers' comm files). Shorter than
 * the fd checks' patience (make stress, prober_faults), far longer than a
 * busy loop's sleeps between requests handed to the commit thread, which
 * would otherwise close the files each time. Row: register_parallel. */
#ifndef FS_QUIET_MS
#define FS_QUIET_MS 100
#endif
/* fs/events_file.c: after a READ of events that filled a buffer of a
 * quarter of st_blksize or more (a replay in progress), the FUSE thread
 * that answered it keeps reading this long: cat spends 0.4-0.5 ms between
 * two 1 MiB READs. Row: events_replay. */
#ifndef FS_STREAM_SPIN_NS
#define FS_STREAM_SPIN_NS 1000000
#endif

/* csi/: a round holds the lane (there is one: due rounds start one after
 * the other) until it ends or this many ms. Rows: probe_fanout (p99),
 * hung_neighbour, death_detect (its cost). */
#ifndef PR_LANE_MS
#define PR_LANE_MS 2
#endif
/* csi/: a finished call does not wake the scheduler when it wakes within
 * this many ms anyway. Rows: probe_fanout (CPU), probe_call. */
#ifndef PR_DONE_LAG_MS
#define PR_DONE_LAG_MS 2
#endif

#endif
