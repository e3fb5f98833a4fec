/* <mnt>/metrics: a Prometheus text 0.0.4 snapshot of the registry (DESIGN 11).
 *
 * The tree's figures and the counters are copied in one reg_walk, under one
 * registry read lock, so they agree with each other; the text (and the
 * plugins' /proc figures) are made after the lock is released. */
#include "fs/kinds.h"
#include "fs/events_file.h"
#include "fs/proc_stats.h"
#include "base/counters.h"
#include "base/version.h"
#include "registry/walk.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

struct m_plugin {
    struct reg_walk_plugin w;        /* name and current point into the copies */
    char name[REG_NAME_MAX + 1], current[REG_NAME_MAX + 1];
};
struct m_inst {
    enum reg_type type;
    char plugin[REG_NAME_MAX + 1], alloc[REG_NAME_MAX + 1];
    pid_t pid;
};

struct snap {
    struct cnt c;
    struct cnt_hist commit, probe[REG_NTYPES], cluster_publish;
    struct m_plugin *p;
    size_t np, pcap;
    struct m_inst *i;
    size_t ni, icap;
};

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 64;
    void *p = realloc(*v, c * size);
    if (!p)
        return -ENOMEM;
    *v = p;
    *cap = c;
    return 0;
}

static int on_begin(void *arg)
{
    struct snap *s = arg;
    for (int k = 0; k < CNT_NMUT; k++)
        s->c.mutations[k] = cnt_get(&cnt.mutations[k]);
    s->c.store_commits = cnt_get(&cnt.store_commits);
    s->c.store_syncs = cnt_get(&cnt.store_syncs);
    s->c.store_used_bytes = cnt_get(&cnt.store_used_bytes);
    s->c.store_map_bytes = cnt_get(&cnt.store_map_bytes);
    s->c.events = cnt_get(&cnt.events);
    s->c.events_lost = cnt_get(&cnt.events_lost);
    cnt_hist_read(&cnt.store_commit, &s->commit);
    s->c.cluster_on = cnt_get(&cnt.cluster_on);
    s->c.cluster_up = cnt_get(&cnt.cluster_up);
    s->c.cluster_publish_ok = cnt_get(&cnt.cluster_publish_ok);
    s->c.cluster_publish_error = cnt_get(&cnt.cluster_publish_error);
    s->c.cluster_view_on = cnt_get(&cnt.cluster_view_on);
    s->c.cluster_view_nodes = cnt_get(&cnt.cluster_view_nodes);
    cnt_hist_read(&cnt.cluster_publish, &s->cluster_publish);
    for (int t = 0; t < REG_NTYPES; t++)
        cnt_hist_read(&cnt.probe[t], &s->probe[t]);
    return 0;
}

static int on_plugin(const struct reg_walk_plugin *w, void *arg)
{
    struct snap *s = arg;
    if (grow((void **)&s->p, &s->pcap, s->np, sizeof(*s->p)) < 0)
        return -ENOMEM;
    struct m_plugin *m = &s->p[s->np++];
    m->w = *w;
    snprintf(m->name, sizeof(m->name), "%s", w->name);
    snprintf(m->current, sizeof(m->current), "%s", w->current ? w->current : "");
    return 0;
}

static int on_inst(const struct reg_walk_inst *w, void *arg)
{
    struct snap *s = arg;
    if (!w->pid)
        return 0;
    if (grow((void **)&s->i, &s->icap, s->ni, sizeof(*s->i)) < 0)
        return -ENOMEM;
    struct m_inst *m = &s->i[s->ni++];
    m->type = w->type;
    m->pid = w->pid;
    snprintf(m->plugin, sizeof(m->plugin), "%s", w->plugin);
    snprintf(m->alloc, sizeof(m->alloc), "%s", w->alloc);
    return 0;
}

static void family(struct fs_buf *b, const char *name, const char *type, const char *help)
{
    fs_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void histogram(struct fs_buf *b, const char *name, const char *labels,
                      const struct cnt_hist *h)
{
    uint64_t cum = 0;
    const char *sep = *labels ? "," : "";
    for (int k = 0; k < CNT_NBUCKETS; k++) {
        cum += h->bucket[k];
        fs_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, labels, sep,
                      (double)cnt_bucket_us[k] / 1e6, cum);
    }
    fs_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep, h->count);
    const char *open = *labels ? "{" : "", *close = *labels ? "}" : "";
    fs_buf_printf(b, "%s_sum%s%s%s %.6f\n%s_count%s%s%s %" PRIu64 "\n", name, open, labels,
                  close, (double)h->sum_us / 1e6, name, open, labels, close, h->count);
}

static const char *const result_names[3] = { "ok", "not_ready", "error" };

/* The families drawn from the tree. */
static void tree(struct fs_buf *b, const struct snap *s)
{
    family(b, "csifs_plugins", "gauge", "Plugin directories, by type.");
    for (int t = 0; t < REG_NTYPES; t++) {
        size_t n = 0;
        for (size_t k = 0; k < s->np; k++)
            n += s->p[k].w.type == (enum reg_type)t;
        fs_buf_printf(b, "csifs_plugins{type=\"%s\"} %zu\n", reg_type_names[t], n);
    }
    family(b, "csifs_instances", "gauge", "Instance directories, by plugin and health.");
    for (size_t k = 0; k < s->np; k++)
        for (int h = 0; h < REG_NHEALTH; h++)
            fs_buf_printf(b, "csifs_instances{type=\"%s\",plugin=\"%s\",health=\"%s\"} %u\n",
                          reg_type_names[s->p[k].w.type], s->p[k].name, reg_health_names[h],
                          s->p[k].w.instances[h]);
    family(b, "csifs_current_info", "gauge", "The instance `current` names (always 1).");
    for (size_t k = 0; k < s->np; k++)
        if (s->p[k].current[0])
            fs_buf_printf(b, "csifs_current_info{type=\"%s\",plugin=\"%s\",alloc=\"%s\"} 1\n",
                          reg_type_names[s->p[k].w.type], s->p[k].name, s->p[k].current);
    family(b, "csifs_current_healthy", "gauge",
           "1 when the instance `current` names is healthy, else 0.");
    for (size_t k = 0; k < s->np; k++)
        if (s->p[k].current[0])
            fs_buf_printf(b, "csifs_current_healthy{type=\"%s\",plugin=\"%s\"} %d\n",
                          reg_type_names[s->p[k].w.type], s->p[k].name,
                          s->p[k].w.current_health == REG_HEALTHY);
    family(b, "csifs_probes_total", "counter", "Probe rounds recorded, by result.");
    for (size_t k = 0; k < s->np; k++)
        for (int r = 0; r < 3; r++)
            fs_buf_printf(b, "csifs_probes_total{type=\"%s\",plugin=\"%s\",result=\"%s\"} "
                          "%" PRIu64 "\n", reg_type_names[s->p[k].w.type], s->p[k].name,
                          result_names[r], s->p[k].w.probes[r]);
    family(b, "csifs_health_changes_total", "counter",
           "Instances entering a health state, by state.");
    for (size_t k = 0; k < s->np; k++)
        for (int h = 0; h < REG_NHEALTH; h++)
            fs_buf_printf(b, "csifs_health_changes_total{type=\"%s\",plugin=\"%s\","
                          "health=\"%s\"} %" PRIu64 "\n", reg_type_names[s->p[k].w.type],
                          s->p[k].name, reg_health_names[h], s->p[k].w.health_changes[h]);
}

/* The plugins' processes, read now (after the lock). */
static void plugins(struct fs_buf *b, const struct snap *s)
{
    struct fs_proc_stats *ps = calloc(s->ni ? s->ni : 1, sizeof(*ps));
    if (!ps) {
        b->err = -ENOMEM;
        return;
    }
    for (size_t k = 0; k < s->ni; k++)
        if (fs_proc_stats("", s->i[k].pid, &ps[k]) < 0)
            ps[k].pid = 0;
    static const char *const fam[2][3] = {
        { "csifs_plugin_memory_bytes", "gauge", "Memory of the instance's plugin process." },
        { "csifs_plugin_cpu_seconds_total", "counter", "CPU time of the plugin process." },
    };
    for (int f = 0; f < 2; f++) {
        family(b, fam[f][0], fam[f][1], fam[f][2]);
        for (size_t k = 0; k < s->ni; k++)
            if (ps[k].pid)
                fs_buf_printf(b, "%s{type=\"%s\",plugin=\"%s\",alloc=\"%s\"} %.*f\n",
                              fam[f][0], reg_type_names[s->i[k].type], s->i[k].plugin,
                              s->i[k].alloc, f ? 6 : 0,
                              f ? ps[k].cpu_seconds : (double)ps[k].memory_bytes);
    }
    free(ps);
}

static void counters(struct fs_buf *b, struct fs *fs, const struct snap *s)
{
    family(b, "csifs_probe_duration_seconds", "histogram", "Duration of a probe round.");
    for (int t = 0; t < REG_NTYPES; t++) {
        char l[48];
        snprintf(l, sizeof(l), "type=\"%s\"", reg_type_names[t]);
        histogram(b, "csifs_probe_duration_seconds", l, &s->probe[t]);
    }
    family(b, "csifs_events_total", "counter", "Event lines appended to the ring.");
    fs_buf_printf(b, "csifs_events_total %" PRIu64 "\n", s->c.events);
    family(b, "csifs_events_lost_total", "counter", "Event lines readers were overtaken on.");
    fs_buf_printf(b, "csifs_events_lost_total %" PRIu64 "\n", s->c.events_lost);
    family(b, "csifs_event_readers", "gauge", "Open readers of the events file.");
    fs_buf_printf(b, "csifs_event_readers %u\n", fs_events_readers(fs));
    family(b, "csifs_mutations_total", "counter", "Registry changes made, by operation.");
    for (int k = 0; k < CNT_NMUT; k++)
        fs_buf_printf(b, "csifs_mutations_total{op=\"%s\"} %" PRIu64 "\n", cnt_mut_names[k],
                      s->c.mutations[k]);
    family(b, "csifs_store_commits_total", "counter", "LMDB write transactions committed.");
    fs_buf_printf(b, "csifs_store_commits_total %" PRIu64 "\n", s->c.store_commits);
    family(b, "csifs_store_syncs_total", "counter", "fsyncs of the state store.");
    fs_buf_printf(b, "csifs_store_syncs_total %" PRIu64 "\n", s->c.store_syncs);
    family(b, "csifs_store_commit_duration_seconds", "histogram", "Duration of a commit.");
    histogram(b, "csifs_store_commit_duration_seconds", "", &s->commit);
    family(b, "csifs_store_used_bytes", "gauge", "Bytes of the store's map in use.");
    fs_buf_printf(b, "csifs_store_used_bytes %" PRIu64 "\n", s->c.store_used_bytes);
    family(b, "csifs_store_map_bytes", "gauge", "Size of the store's map.");
    fs_buf_printf(b, "csifs_store_map_bytes %" PRIu64 "\n", s->c.store_map_bytes);
    family(b, "csifs_fuse_requests_total", "counter", "FUSE requests served, by operation.");
    for (int k = 0; k < FS_NOPS; k++)
        fs_buf_printf(b, "csifs_fuse_requests_total{op=\"%s\"} %" PRIu64 "\n", fs_op_names[k],
                      __atomic_load_n(&fs->req_by_op[k], __ATOMIC_RELAXED));
}

/* DESIGN 11's cluster families, with cluster= only. */
static void cluster(struct fs_buf *b, const struct snap *s)
{
    if (!s->c.cluster_on)
        return;
    family(b, "csifs_cluster_up", "gauge", "1 while publishing to etcd (connected).");
    fs_buf_printf(b, "csifs_cluster_up %" PRIu64 "\n", s->c.cluster_up);
    family(b, "csifs_cluster_publish_total", "counter", "Plugin keys written, by result.");
    fs_buf_printf(b, "csifs_cluster_publish_total{result=\"ok\"} %" PRIu64 "\n"
                  "csifs_cluster_publish_total{result=\"error\"} %" PRIu64 "\n",
                  s->c.cluster_publish_ok, s->c.cluster_publish_error);
    family(b, "csifs_cluster_publish_seconds", "histogram",
           "From a local change to its commit in etcd.");
    histogram(b, "csifs_cluster_publish_seconds", "", &s->cluster_publish);
    if (!s->c.cluster_view_on)
        return;
    family(b, "csifs_cluster_view_nodes", "gauge", "Node keys in the cluster view.");
    fs_buf_printf(b, "csifs_cluster_view_nodes %" PRIu64 "\n", s->c.cluster_view_nodes);
}

/* csifs_kubelet_registered (-o kubelet_dir=): the kubelet's verdicts, read
 * now (after the lock). */
static void kubelet(struct fs_buf *b, const struct snap *s)
{
    if (!fs_kubelet_on())
        return;
    family(b, "csifs_kubelet_registered", "gauge", "1 when the kubelet registered the "
           "plugin's provider, 0 while it has not (waiting, refused, conflict).");
    for (size_t k = 0; k < s->np; k++)
        if (s->p[k].w.type == REG_NODE)
            fs_kubelet_metric(b, s->p[k].name);
}

/* The text into b (DESIGN 11); 0 or -errno (b->err on a full buffer). */
static int build(struct fs *fs, struct fs_buf *b)
{
    struct snap s = { 0 };
    struct reg_walk_cb cb = { on_begin, on_plugin, on_inst, &s };
    int rc = reg_walk(fs->reg, &cb);
    if (rc == 0) {
        family(b, "csifs_build_info", "gauge", "csifs's version (always 1).");
        fs_buf_printf(b, "csifs_build_info{version=\"%s\"} 1\n", CSIFS_VERSION);
        family(b, "csifs_start_time_seconds", "gauge", "When csifs mounted, in Unix time.");
        fs_buf_printf(b, "csifs_start_time_seconds %" PRId64 "\n", fs->mount_ns / 1000000000);
        tree(b, &s);
        counters(b, fs, &s);
        cluster(b, &s);
        kubelet(b, &s);
        plugins(b, &s);
        rc = b->err;
    }
    free(s.p);
    free(s.i);
    return rc;
}

int fs_metrics_open(struct fs *fs, const struct fs_node *n, struct fuse_file_info *fi,
                    struct fs_fh **out)
{
    (void)n;
    struct fs_buf b = { 0 };
    int rc = build(fs, &b);
    if (rc == 0)
        return fs_snap_open(&b, fi, out);
    fs_buf_free(&b);
    return rc;
}

int fs_metrics_text(struct fs *fs, char **text, size_t *len)
{
    struct fs_buf b = { 0 };
    int rc = build(fs, &b);
    if (rc < 0) {
        fs_buf_free(&b);
        return rc;
    }
    *text = b.p;
    *len = b.len;
    return 0;
}
