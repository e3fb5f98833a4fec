/* proc_stats: what a process costs (DESIGN section 11), for `stats` and
 * `metrics`. Its cgroup v2 group's figures when it is alone in one (the
 * group found through /proc/PID/cgroup and the cgroup2 mount in
 * /proc/self/mountinfo, not assumed at /sys/fs/cgroup), else /proc/PID/status
 * (VmRSS, VmHWM) and /proc/PID/stat (utime + stime).
 *
 * root prefixes every path ("" on a live system; a fixture tree in tests).
 */
#ifndef CSIFS_PROC_STATS_H
#define CSIFS_PROC_STATS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs/snapshot.h"

struct fs_proc_stats {
    pid_t pid;
    char cgroup[512];            /* the v2 group's path, "" without one */
    bool from_cgroup;            /* alone in it: the figures are the group's */
    uint64_t memory_bytes, memory_peak_bytes;
    double cpu_seconds;
};

/* -ENOENT when pid is 0, gone or a zombie; -errno if its figures cannot be
 * read. */
int fs_proc_stats(const char *root, pid_t pid, struct fs_proc_stats *out);
/* `key value` lines, as cgroup's memory.stat: pid, cgroup (with a v2 group),
 * memory_bytes, memory_peak_bytes, cpu_seconds. */
void fs_proc_stats_format(const struct fs_proc_stats *s, struct fs_buf *b);

#endif
