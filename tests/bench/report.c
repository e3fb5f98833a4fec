/* The rows of the benchmark, their samples, and the three outputs: a
 * readable table, one `bench NAME value=V baseline=B ratio=R goal=G ok|short`
 * line per row, and build/bench.json. */
#include "tests/bench/bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

struct row_def {
    const char *name, *workload, *baseline, *unit;
    char op;                    /* '>' means >=, '<' means <= */
    double goal;                /* on the ratio when there is a baseline, else on the value */
    const char *unit2;          /* a second measure (probe_fanout's p99), or NULL;
                                   with a baseline, against its own (bench_sample2) */
    char op2;
    double goal2;
    bool sum;                   /* a count: the sum of the repetitions, not the median */
};

#define ROW(n, w, b, u, o, g) { .name = n, .workload = w, .baseline = b, .unit = u, .op = o, .goal = g }

static const struct row_def rows[R_NROWS] = {
    [R_BROWSE_COLD] = ROW("browse_cold", "ls -lR of the tree, first pass after drop_caches",
                          "floorfs", "entries/s", '>', 0.9),
    [R_BROWSE_WARM] = ROW("browse_warm", "ls -lR of the tree, second pass", "floorfs",
                          "entries/s", '>', 0.9),
    [R_BROWSE_HOT] = ROW("browse_hot", "ls -lR of the tree, steady (median of passes 3-5)",
                         "tmpfs", "entries/s", '>', 1.0),
    [R_READ_OPEN] = ROW("read_open", "open/read/close of every health file, warm", "floorfs",
                        "files/s", '>', 0.9),
    [R_READ_PREAD] = ROW("read_pread", "pread of every health file, fds kept open", "tmpfs",
                         "preads/s", '>', 0.8),
    [R_STAT_DEEP] = ROW("stat_deep", "stat() of <type>/<plugin>/current/socket", "floorfs",
                        "stats/s", '>', 0.9),
    [R_METRICS_READ] = ROW("metrics_read", "cat metrics with the tree (10,000 instances)", NULL,
                           "ms", '<', 20.0),
    [R_HTTP_METRICS] = ROW("http_metrics", "GET /metrics (-o http=) with the tree (10,000 instances)",
                           NULL, "ms", '<', 20.0),
    [R_KUBELET_REGISTER] = ROW("kubelet_register", "-o kubelet_dir=: plugin healthy to its "
                               "registration socket's appearance", NULL, "ms", '<', 100.0),
    [R_CLUSTER_PROPAGATE] = ROW("cluster_propagate", "etcd: a health change on one host to its "
                                "visibility in another's cluster view (p99)", NULL, "ms", '<',
                                50.0),
    [R_CLUSTER_WRITES] = ROW("cluster_writes", "etcd write transactions per health change "
                             "(raft proposals committed)", NULL, "txns", '<', 1.0),
    [R_CLUSTER_VIEW_SCALE] = { .name = "cluster_view_scale",
                               .workload = "1,000 hosts x 5 plugins in etcd: csifs start to the "
                                           "full view, RssAnon growth",
                               .unit = "ms", .op = '<', .goal = 2000.0,
                               .unit2 = "MiB", .op2 = '<', .goal2 = 40.0 },
    [R_CLUSTER_ISOLATION] = ROW("cluster_isolation", "register_serial on a publishing host, "
                                "etcd SIGSTOPped", "etcd running", "cycles/s", '>', 0.95),
    [R_REGISTER_SERIAL] = ROW("register_serial", "1 writer: mkdir + socket symlink + rmdir, durable",
                              "durable floorfs", "cycles/s", '>', 0.9),
    [R_REGISTER_PARALLEL] = ROW("register_parallel", "8 writers on different plugins, durable",
                                "register_serial", "cycles/s", '>', 3.0),
    [R_REGISTER_BURST] = ROW("register_burst",
                             "1,000 mkdir(2) of instances by 64 processes, durable", NULL,
                             "fsyncs/registration", '<', 0.1),
    [R_PROBE_FANOUT] = { .name = "probe_fanout",
                         .workload = "healthy instances, heartbeat=1s: csifs CPU, p99 probe",
                         .baseline = "bare gRPC core, same rate",
                         .unit = "%", .op = '<', .goal = 1.0,
                         .unit2 = "ms", .op2 = '<', .goal2 = 1.2 },
    [R_PROBE_SPREAD] = ROW("probe_spread", "probe_fanout: share of a second's probes in its "
                           "busiest 100 ms", NULL, "%", '<', 15.0),
    [R_DEATH_DETECT] = ROW("death_detect", "100 healthy at heartbeat=30s, plugin SIGKILLed: "
                           "until all unhealthy", NULL, "ms", '<', 1000.0),
    [R_PROBE_CALL] = ROW("probe_call", "one Probe round trip through the prober (median)",
                         "bare gRPC core call", "us", '<', 1.2),
    [R_HUNG_NEIGHBOUR] = ROW("hung_neighbour", "probe_fanout + 10 hanging plugins: healthy p99 "
                             "/ bare gRPC core's p99 in the same window",
                             "the same without them", "x bare", '<', 1.2),
    [R_RESTART] = ROW("restart", "csifs start to mounted-and-listing, tree persisted", NULL, "ms",
                      '<', 200.0),
    [R_MEMORY] = ROW("memory", "RSS with the tree (no sockets) and a full events ring", NULL,
                     "MiB", '<', 64.0),
    [R_MEMORY_LIVE] = ROW("memory_live", "RSS growth per live probed plugin",
                          "bare gRPC core channel", "KiB", '<', 1.2),
    [R_FAILOVER] = { .name = "failover",
                     .workload = "rmdir of current, then readlink from another process",
                     .unit = "stale", .op = '<', .goal = 0.0, .sum = true },
    [R_EVENTS_REPLAY] = ROW("events_replay", "one cat events reading a full ring",
                            "cat of the same lines in a tmpfs file", "lines/s", '>', 0.8),
    [R_RESTART_100K] = ROW("restart_100k", "csifs start to listing all 1,000 plugins, "
                           "100,000 instances persisted", NULL, "ms", '<', 300.0),
    [R_TAKEOVER] = ROW("takeover", "SIGKILL of csifs to the first request its successor answers "
                       "(the tree, test fd store)", NULL, "ms", '<', 100.0),
    [R_UPGRADE] = ROW("upgrade", "the longest stat() of a stat loop across a SIGUSR2 "
                      "(the tree, test fd store)", NULL, "ms", '<', 100.0),
    [R_MEMORY_100K] = ROW("memory_100k", "RssAnon growth per instance, 100,000 instances "
                          "restored (no sockets)", NULL, "KiB", '<', 0.4),
};

#define MAX_SAMPLES 64

static struct {
    double v[MAX_SAMPLES], v2[MAX_SAMPLES], b[MAX_SAMPLES], b2[MAX_SAMPLES];
    int n;
    char note[512];
} got[R_NROWS];

bool bench_wants(enum row r)
{
    if (!cfg.only)
        return true;
    size_t len = strlen(rows[r].name);
    for (const char *p = cfg.only; *p; p += strcspn(p, ","), p += *p == ',')
        if (strcspn(p, ",") == len && !strncmp(p, rows[r].name, len))
            return true;
    return false;
}

void bench_sample(enum row r, double v, double v2, double b)
{
    bench_sample2(r, v, v2, b, NAN);
}

void bench_sample2(enum row r, double v, double v2, double b, double b2)
{
    if (got[r].n == MAX_SAMPLES)
        return;
    int k = got[r].n++;
    got[r].v[k] = v;
    got[r].v2[k] = v2;
    got[r].b[k] = b;
    got[r].b2[k] = b2;
    if (!isnan(b2))
        say("  %s #%d: %.4g vs %.4g %s: %.3f; %.4g vs %.4g %s: %.3f", rows[r].name, k + 1, v, b,
            rows[r].unit, v / b, v2, b2, rows[r].unit2, v2 / b2);
    else
    if (isnan(b))
        say("  %s #%d: %.4g %s", rows[r].name, k + 1, v, rows[r].unit);
    else
        say("  %s #%d: %.4g vs %.4g %s: %.3f", rows[r].name, k + 1, v, b, rows[r].unit, v / b);
}

void bench_note(enum row r, const char *fmt, ...)
{
    size_t len = strlen(got[r].note);
    if (len && len + 2 < sizeof(got[r].note))
        strcat(got[r].note, "; "), len += 2;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(got[r].note + len, sizeof(got[r].note) - len, fmt, ap);
    va_end(ap);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_pct(double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(*v), cmp_double);
    double rank = p / 100.0 * (double)n;     /* nearest rank: ceil(rank) */
    size_t k = (size_t)rank;
    k += (double)k < rank;
    return v[k ? k - 1 : 0];
}

double bench_median(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* What a row comes to. */
struct outcome {
    double value, value2, baseline, baseline2, ratio, ratio2;
    bool measured, ok;
};

static double reduce(const struct row_def *d, const double *src, int n)
{
    double tmp[MAX_SAMPLES], s = 0;
    memcpy(tmp, src, (size_t)n * sizeof(double));
    if (!d->sum)
        return bench_median(tmp, (size_t)n);
    for (int k = 0; k < n; k++)
        s += tmp[k];
    return s;
}

static bool meets(char op, double x, double goal)
{
    return !isnan(x) && (op == '>' ? x >= goal : x <= goal);
}

static struct outcome outcome_of(enum row r)
{
    const struct row_def *d = &rows[r];
    int n = got[r].n;
    struct outcome o = { NAN, NAN, NAN, NAN, NAN, NAN, n > 0, false };
    if (!n)
        return o;
    o.value = reduce(d, got[r].v, n);
    o.value2 = d->unit2 ? reduce(d, got[r].v2, n) : NAN;
    if (d->baseline) {
        double ratios[MAX_SAMPLES];
        for (int k = 0; k < n; k++)
            ratios[k] = got[r].v[k] / got[r].b[k];
        o.baseline = reduce(d, got[r].b, n);
        o.ratio = bench_median(ratios, (size_t)n);
        o.ok = meets(d->op, o.ratio, d->goal);
        if (d->unit2) {
            for (int k = 0; k < n; k++)
                ratios[k] = got[r].v2[k] / got[r].b2[k];
            o.baseline2 = reduce(d, got[r].b2, n);
            o.ratio2 = bench_median(ratios, (size_t)n);
            o.ok = o.ok && meets(d->op2, o.ratio2, d->goal2);
        }
    } else {
        o.ok = meets(d->op, o.value, d->goal) && (!d->unit2 || meets(d->op2, o.value2, d->goal2));
    }
    return o;
}

/* A number, short and exact enough: 123456, 12.3, 0.123. */
static const char *num(double x, char *buf, size_t len)
{
    if (isnan(x))
        snprintf(buf, len, "-");
    else if (x >= 100 || x <= -100 || x == (double)(long long)x)
        snprintf(buf, len, "%.0f", x);
    else if (x >= 10 || x <= -10)
        snprintf(buf, len, "%.1f", x);
    else
        snprintf(buf, len, "%.3g", x);
    return buf;
}

static void fmt_value(const struct row_def *d, const struct outcome *o, char *buf, size_t len)
{
    char a[32], b[32];
    if (!o->measured)
        snprintf(buf, len, "-");
    else if (d->unit2)
        snprintf(buf, len, "%s%s,%s%s", num(o->value, a, 32), d->unit, num(o->value2, b, 32),
                 d->unit2);
    else
        snprintf(buf, len, "%s%s", num(o->value, a, 32), d->unit);
}

static void fmt_goal(const struct row_def *d, char *buf, size_t len)
{
    char a[32], b[32];
    const char *unit = d->baseline ? "" : d->unit;
    int n = snprintf(buf, len, "%s%s%s", d->op == '>' ? ">=" : "<=", num(d->goal, a, 32), unit);
    if (d->unit2)
        snprintf(buf + n, len - (size_t)n, ",%s%s%s", d->op2 == '>' ? ">=" : "<=",
                 num(d->goal2, b, 32), d->baseline ? "" : d->unit2);
}

static void fmt_baseline(const struct row_def *d, const struct outcome *o, char *buf,
                         size_t len)
{
    char a[32], b[32];
    if (!d->baseline || !o->measured)
        snprintf(buf, len, "-");
    else if (d->unit2)
        snprintf(buf, len, "%s%s,%s%s", num(o->baseline, a, 32), d->unit,
                 num(o->baseline2, b, 32), d->unit2);
    else
        snprintf(buf, len, "%s%s", num(o->baseline, a, 32), d->unit);
}

static void host(char *cpu, size_t cpulen, char *kernel, size_t klen)
{
    snprintf(cpu, cpulen, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof(line), f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && colon) {
            snprintf(cpu, cpulen, "%s", colon + 2);
            cpu[strcspn(cpu, "\n")] = '\0';
            break;
        }
    }
    if (f)
        fclose(f);
    struct utsname u;
    uname(&u);
    snprintf(kernel, klen, "%s %s %s", u.sysname, u.release, u.machine);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double x)
{
    if (isnan(x))
        fprintf(f, "null");
    else
        fprintf(f, "%.6g", x);
}

static void json_samples(FILE *f, const char *key, const double *v, int n)
{
    fprintf(f, ", \"%s\": [", key);
    for (int k = 0; k < n; k++) {
        fprintf(f, k ? ", " : "");
        json_num(f, v[k]);
    }
    fprintf(f, "]");
}

static void write_json(const char *path, const char *cpu, const char *kernel, double wall_s)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return;
    }
    fprintf(f, "{\n  \"cpu\": ");
    json_str(f, cpu);
    fprintf(f, ", \"cpus\": %ld, \"kernel\": ", sysconf(_SC_NPROCESSORS_ONLN));
    json_str(f, kernel);
    fprintf(f, ",\n  \"quick\": %s, \"repetitions\": %d, \"wall_s\": %.1f,\n  \"rows\": [\n",
            cfg.quick ? "true" : "false", cfg.reps, wall_s);
    bool first = true;
    for (int r = 0; r < R_NROWS; r++) {
        if (!bench_wants(r))
            continue;
        const struct row_def *d = &rows[r];
        struct outcome o = outcome_of(r);
        char goal[64];
        fmt_goal(d, goal, sizeof(goal));
        fprintf(f, "%s    {\"name\": \"%s\", \"workload\": ", first ? "" : ",\n", d->name);
        json_str(f, d->workload);
        fprintf(f, ", \"unit\": \"%s\", \"value\": ", d->unit);
        json_num(f, o.value);
        if (d->unit2) {
            fprintf(f, ", \"unit2\": \"%s\", \"value2\": ", d->unit2);
            json_num(f, o.value2);
        }
        fprintf(f, ", \"baseline_name\": ");
        json_str(f, d->baseline ? d->baseline : "");
        fprintf(f, ", \"baseline\": ");
        json_num(f, o.baseline);
        fprintf(f, ", \"ratio\": ");
        json_num(f, o.ratio);
        fprintf(f, ", \"goal\": \"%s\", \"ok\": %s", goal, o.ok ? "true" : "false");
        json_samples(f, "samples", got[r].v, got[r].n);
        if (d->unit2)
            json_samples(f, "samples2", got[r].v2, got[r].n);
        if (d->baseline)
            json_samples(f, "baseline_samples", got[r].b, got[r].n);
        if (d->baseline && d->unit2) {
            json_samples(f, "baseline2_samples", got[r].b2, got[r].n);
            fprintf(f, ", \"ratio2\": ");
            json_num(f, o.ratio2);
        }
        fprintf(f, ", \"note\": ");
        json_str(f, got[r].note);
        fprintf(f, "}");
        first = false;
    }
    fprintf(f, "\n  ]\n}\n");
    fclose(f);
}

/* A row's printed cells; false when the run leaves it out. */
struct cells {
    struct outcome o;
    char v[64], b[64], g[64], ra[32];
};

static bool cells(enum row r, struct cells *c)
{
    if (!bench_wants(r))
        return false;
    c->o = outcome_of(r);
    fmt_value(&rows[r], &c->o, c->v, sizeof(c->v));
    fmt_baseline(&rows[r], &c->o, c->b, sizeof(c->b));
    fmt_goal(&rows[r], c->g, sizeof(c->g));
    num(c->o.ratio, c->ra, sizeof(c->ra));
    if (rows[r].unit2 && rows[r].baseline) {
        char b[16];
        size_t n = strlen(c->ra);
        snprintf(c->ra + n, sizeof(c->ra) - n, ",%s", num(c->o.ratio2, b, sizeof(b)));
    }
    return true;
}

void bench_report(const char *json_path, double wall_s)
{
    char cpu[256], kernel[256], stamp[64];
    host(cpu, sizeof(cpu), kernel, sizeof(kernel));
    time_t now = time(NULL);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("csifs bench %s (%s, %d repetitions, %.0f s)\n", stamp, cfg.quick ? "quick" : "full",
           cfg.reps, wall_s);
    printf("cpu: %s x %ld, kernel: %s\n", cpu, sysconf(_SC_NPROCESSORS_ONLN), kernel);
    printf("tree: %d plugins x %d instances; live plugins: %d; ring: %d events\n\n",
           cfg.plugins, cfg.insts, cfg.live, cfg.events);
    printf("%-18s %-16s %-16s %-7s %-14s %-6s %s\n", "row", "value", "baseline", "ratio", "goal",
           "", "workload (baseline)");
    struct cells c;
    for (int r = 0; r < R_NROWS; r++) {
        const struct row_def *d = &rows[r];
        if (cells(r, &c))
            printf("%-18s %-16s %-16s %-7s %-14s %-6s %s%s%s%s\n", d->name, c.v, c.b, c.ra, c.g,
                   c.o.ok ? "ok" : "SHORT", d->workload, d->baseline ? " (" : "",
                   d->baseline ? d->baseline : "", d->baseline ? ")" : "");
    }
    for (int r = 0; r < R_NROWS; r++)
        if (bench_wants(r) && got[r].note[0])
            printf("  %s: %s\n", rows[r].name, got[r].note);
    printf("\n");
    for (int r = 0; r < R_NROWS; r++)
        if (cells(r, &c))
            printf("bench %s value=%s baseline=%s ratio=%s goal=%s %s\n", rows[r].name, c.v, c.b,
                   c.ra, c.g, c.o.ok ? "ok" : "short");
    fflush(stdout);
    if (json_path)
        write_json(json_path, cpu, kernel, wall_s);
}
