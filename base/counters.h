/* counters: process-wide counters for <mnt>/metrics (DESIGN section 11).
 *
 * Each is kept where the thing it counts happens (the store's commits, the
 * prober's probe durations, the events ring, the registry's mutations), with
 * relaxed atomics: no lock, a few nanoseconds. They start at 0 with the
 * process. Per-plugin counts (probes, health changes) live in the registry's
 * model instead, so that a snapshot sees them together with the tree.
 */
#ifndef CSIFS_COUNTERS_H
#define CSIFS_COUNTERS_H

#include <stdbool.h>
#include <stdint.h>

/* Plugin types (enum reg_type; registry.c checks that they agree). */
#define CNT_NTYPES 2

/* Histogram bucket upper bounds, in microseconds (the last is +Inf). */
#define CNT_NBUCKETS 14
extern const int64_t cnt_bucket_us[CNT_NBUCKETS];

struct cnt_hist {
    uint64_t bucket[CNT_NBUCKETS + 1];   /* not cumulative; [CNT_NBUCKETS]: above all */
    uint64_t count;
    uint64_t sum_us;
};

/* csifs_mutations_total{op}, in this order (counted by registry/mutate.c). */
enum cnt_mut { CNT_M_MKDIR, CNT_M_RMDIR, CNT_M_SOCKET, CNT_M_ATTR, CNT_M_FINGERPRINT,
               CNT_M_READY, CNT_M_PROBE, CNT_NMUT };
extern const char *const cnt_mut_names[CNT_NMUT];

struct cnt {
    uint64_t mutations[CNT_NMUT];
    uint64_t store_commits, store_syncs;
    struct cnt_hist store_commit;
    uint64_t store_used_bytes, store_map_bytes;      /* gauges, set after each commit */
    struct cnt_hist probe[CNT_NTYPES];               /* one probe round, by type */
    uint64_t events, events_lost;
    /* cluster publisher (cluster/publish.h): on when cluster= is given */
    uint64_t cluster_on, cluster_up, cluster_publish_ok, cluster_publish_error;
    struct cnt_hist cluster_publish;                 /* local change to etcd commit */
    uint64_t cluster_view_on, cluster_view_nodes;    /* cluster_view (cluster/view.h) */
};
extern struct cnt cnt;

static inline void cnt_add(uint64_t *c, uint64_t n)
{
    __atomic_add_fetch(c, n, __ATOMIC_RELAXED);
}
static inline void cnt_set(uint64_t *c, uint64_t v)
{
    __atomic_store_n(c, v, __ATOMIC_RELAXED);
}
static inline uint64_t cnt_get(const uint64_t *c)
{
    return __atomic_load_n(c, __ATOMIC_RELAXED);
}
/* One observation of us microseconds. */
void cnt_hist_observe(struct cnt_hist *h, int64_t us);
/* A consistent-enough copy (each field read atomically). */
void cnt_hist_read(const struct cnt_hist *h, struct cnt_hist *out);

#endif
