/* A process's memory and CPU from cgroup v2 or /proc (proc_stats.h). */
#include "fs/proc_stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The first line of root+path into buf (newline stripped); 0 or -errno. */
static int read_file(const char *root, const char *path, char *buf, size_t cap)
{
    char p[4096];
    if (snprintf(p, sizeof(p), "%s%s", root, path) >= (int)sizeof(p))
        return -ENAMETOOLONG;
    FILE *f = fopen(p, "re");
    if (!f)
        return -errno;
    size_t n = fread(buf, 1, cap - 1, f);
    int err = ferror(f) ? -EIO : 0;
    fclose(f);
    buf[n] = '\0';
    return err;
}

/* The value after `key` at a line start of text, as an unsigned number. */
static int field(const char *text, const char *key, uint64_t *out)
{
    size_t kl = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (!strncmp(l, key, kl)) {
            char *end;
            unsigned long long v = strtoull(l + kl, &end, 10);
            if (end == l + kl)
                return -EINVAL;
            *out = v;
            return 0;
        }
    return -ENOENT;
}

/* /proc/PID/stat: state (not a zombie) and utime + stime. */
static int proc_stat(const char *root, pid_t pid, double *cpu)
{
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int rc = read_file(root, path, buf, sizeof(buf));
    if (rc < 0)
        return rc == -ENOENT || rc == -ESRCH ? -ENOENT : rc;
    const char *p = strrchr(buf, ')');     /* comm may hold spaces and parens */
    char state;
    unsigned long long ut, st;
    if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &state,
                     &ut, &st) != 3)
        return -EINVAL;
    if (state == 'Z' || state == 'X')
        return -ENOENT;
    long hz = sysconf(_SC_CLK_TCK);
    *cpu = (double)(ut + st) / (double)(hz > 0 ? hz : 100);
    return 0;
}

/* The cgroup2 mount (point and root) from mountinfo; 0 or -ENOENT. */
static int cgroup2_mount(const char *root, char *mnt, size_t mcap, char *mroot, size_t rcap)
{
    char p[1024], line[4096];
    snprintf(p, sizeof(p), "%s/proc/self/mountinfo", root);
    FILE *f = fopen(p, "re");
    if (!f)
        return -ENOENT;
    int rc = -ENOENT;
    while (rc && fgets(line, sizeof(line), f)) {
        char r[1024], m[1024], fstype[64];
        const char *sep = strstr(line, " - ");
        if (sep && sscanf(line, "%*s %*s %*s %1023s %1023s", r, m) == 2 &&
            sscanf(sep + 3, "%63s", fstype) == 1 && !strcmp(fstype, "cgroup2")) {
            snprintf(mnt, mcap, "%s", m);
            snprintf(mroot, rcap, "%s", r);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

/* The v2 group of pid: its path (as /proc/PID/cgroup says) and its dir. */
static int cgroup_dir(const char *root, pid_t pid, char *group, size_t gcap, char *dir,
                      size_t dcap)
{
    char path[64], buf[8192], mnt[1024], mroot[1024];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    if (read_file(root, path, buf, sizeof(buf)) < 0)
        return -ENOENT;
    const char *g = strstr(buf, "0::");
    if (!g || (g != buf && g[-1] != '\n') || cgroup2_mount(root, mnt, sizeof(mnt), mroot,
                                                             sizeof(mroot)) < 0)
        return -ENOENT;
    g += 3;
    size_t gl = strcspn(g, "\n");
    snprintf(group, gcap, "%.*s", (int)gl, g);
    const char *rel = group;
    size_t rl = strlen(mroot);
    if (strcmp(mroot, "/")) {                /* a mount of a subtree */
        if (strncmp(group, mroot, rl) || (group[rl] && group[rl] != '/'))
            return -ENOENT;
        rel = group + rl;
    }
    snprintf(dir, dcap, "%s%s%s", root, mnt, rel);
    return 0;
}

/* Alone: the group's cgroup.procs lists exactly pid. */
static bool alone(const char *dir, pid_t pid)
{
    char buf[64];
    int n = 0;
    long only = 0;
    char p[2200];
    snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
    FILE *f = fopen(p, "re");
    if (!f)
        return false;
    while (fgets(buf, sizeof(buf), f) && n < 2) {
        only = strtol(buf, NULL, 10);
        n++;
    }
    fclose(f);
    return n == 1 && only == pid;
}

static int from_cgroup(const char *dir, struct fs_proc_stats *s)
{
    char buf[4096];
    uint64_t usec;
    if (read_file(dir, "/memory.current", buf, sizeof(buf)) < 0)
        return -ENOENT;
    s->memory_bytes = strtoull(buf, NULL, 10);
    s->memory_peak_bytes = read_file(dir, "/memory.peak", buf, sizeof(buf)) == 0
                           ? strtoull(buf, NULL, 10) : 0;
    if (read_file(dir, "/cpu.stat", buf, sizeof(buf)) < 0 || field(buf, "usage_usec ", &usec))
        return -ENOENT;
    s->cpu_seconds = (double)usec / 1e6;
    return 0;
}

int fs_proc_stats(const char *root, pid_t pid, struct fs_proc_stats *s)
{
    memset(s, 0, sizeof(*s));
    if (pid <= 0)
        return -ENOENT;
    s->pid = pid;
    double cpu = 0;
    int rc = proc_stat(root, pid, &cpu);
    if (rc < 0)
        return rc;
    char dir[2048], path[64], buf[8192];
    uint64_t rss = 0, hwm = 0;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((rc = read_file(root, path, buf, sizeof(buf))) < 0)
        return rc == -ENOENT ? -ENOENT : rc;
    field(buf, "VmRSS:", &rss);              /* absent for kernel threads: 0 */
    field(buf, "VmHWM:", &hwm);
    if (cgroup_dir(root, pid, s->cgroup, sizeof(s->cgroup), dir, sizeof(dir)) < 0)
        s->cgroup[0] = '\0';
    else if (alone(dir, pid) && from_cgroup(dir, s) == 0)
        s->from_cgroup = true;
    if (!s->from_cgroup) {
        s->memory_bytes = rss * 1024;
        s->cpu_seconds = cpu;
    }
    if (!s->memory_peak_bytes)               /* no memory.peak on older kernels */
        s->memory_peak_bytes = hwm * 1024;
    return 0;
}

void fs_proc_stats_format(const struct fs_proc_stats *s, struct fs_buf *b)
{
    fs_buf_printf(b, "pid %d\n", (int)s->pid);
    if (s->cgroup[0])
        fs_buf_printf(b, "cgroup %s\n", s->cgroup);
    fs_buf_printf(b, "memory_bytes %" PRIu64 "\nmemory_peak_bytes %" PRIu64
                     "\ncpu_seconds %.6f\n", s->memory_bytes, s->memory_peak_bytes,
                  s->cpu_seconds);
}
