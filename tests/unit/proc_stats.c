/* The plugin-resources reader (fs/proc_stats.h) on fixture trees: cgroup v2
 * found through /proc/PID/cgroup and mountinfo, used only when the process
 * is alone in its group; the /proc fallbacks; gone and zombie processes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/proc_stats.h"
#include "tests/lib/testutil.h"

static char *root;

static void put(const char *rel, const char *content)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(content, f);
    fclose(f);
}

#define STAT_LINE(state) "42 (csi plugin) (x)) " state " 1 42 42 0 -1 4194560 100 0 0 0 " \
                         "150 50 0 0 20 0 3 0 100 1000000 300 18446744073709551615\n"
#define STATUS "Name:\tplugin\nVmPeak:\t 9000 kB\nVmHWM:\t    5000 kB\nVmRSS:\t    4000 kB\n"

static void setup(void)
{
    root = tu_tmpdir("procstats");
    cr_assert(root);
    put("proc/42/stat", STAT_LINE("S"));
    put("proc/42/status", STATUS);
    /* a cgroup2 mount not at /sys/fs/cgroup, beside v1 ones */
    put("proc/self/mountinfo",
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "40 23 0:40 / /cg2 rw,nosuid - cgroup2 cgroup2 rw\n");
    put("proc/42/cgroup", "4:memory:/x\n0::/system.slice/nomad-alloc-3f2a.scope\n");
    put("cg2/system.slice/nomad-alloc-3f2a.scope/cgroup.procs", "42\n");
    put("cg2/system.slice/nomad-alloc-3f2a.scope/memory.current", "18350080\n");
    put("cg2/system.slice/nomad-alloc-3f2a.scope/memory.peak", "20971520\n");
    put("cg2/system.slice/nomad-alloc-3f2a.scope/cpu.stat",
        "usage_usec 1234567\nuser_usec 1000000\nsystem_usec 234567\n");
}

static void teardown(void)
{
    tu_rmrf(root);
    free(root);
}

TestSuite(proc_stats, .init = setup, .fini = teardown);

static char *format(const struct fs_proc_stats *s)
{
    static char out[1024];
    struct fs_buf b = { 0 };
    fs_proc_stats_format(s, &b);
    cr_assert_eq(b.err, 0);
    snprintf(out, sizeof(out), "%.*s", (int)b.len, b.p);
    fs_buf_free(&b);
    return out;
}

Test(proc_stats, cgroup_v2_when_alone)
{
    struct fs_proc_stats s;
    cr_assert_eq(fs_proc_stats(root, 42, &s), 0);
    cr_assert(s.from_cgroup);
    cr_assert_str_eq(format(&s), "pid 42\ncgroup /system.slice/nomad-alloc-3f2a.scope\n"
                                 "memory_bytes 18350080\nmemory_peak_bytes 20971520\n"
                                 "cpu_seconds 1.234567\n");
}

Test(proc_stats, cgroup_without_memory_peak_uses_vmhwm)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/cg2/system.slice/nomad-alloc-3f2a.scope/memory.peak", root);
    cr_assert_eq(unlink(p), 0);
    struct fs_proc_stats s;
    cr_assert_eq(fs_proc_stats(root, 42, &s), 0);
    cr_assert_eq(s.memory_bytes, 18350080);
    cr_assert_eq(s.memory_peak_bytes, 5000 * 1024);
}

Test(proc_stats, not_alone_in_its_group_uses_proc)
{
    put("cg2/system.slice/nomad-alloc-3f2a.scope/cgroup.procs", "42\n43\n");
    struct fs_proc_stats s;
    cr_assert_eq(fs_proc_stats(root, 42, &s), 0);
    cr_assert_not(s.from_cgroup);
    long hz = sysconf(_SC_CLK_TCK);
    char want[512];
    snprintf(want, sizeof(want), "pid 42\ncgroup /system.slice/nomad-alloc-3f2a.scope\n"
             "memory_bytes 4096000\nmemory_peak_bytes 5120000\ncpu_seconds %.6f\n",
             200.0 / (double)hz);
    cr_assert_str_eq(format(&s), want);
}

Test(proc_stats, cgroup_v1_only_has_no_cgroup_line)
{
    put("proc/self/mountinfo",
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n");
    struct fs_proc_stats s;
    cr_assert_eq(fs_proc_stats(root, 42, &s), 0);
    cr_assert_str_eq(s.cgroup, "");
    cr_assert_not(strstr(format(&s), "cgroup"));
    cr_assert_eq(s.memory_bytes, 4000 * 1024);
}

Test(proc_stats, subtree_mount_root)
{
    /* a cgroup namespace's mount: root /system.slice at /cg2 */
    put("proc/self/mountinfo", "40 23 0:40 /system.slice /cg2 rw - cgroup2 cgroup2 rw\n");
    put("cg2/nomad-alloc-3f2a.scope/cgroup.procs", "42\n");
    put("cg2/nomad-alloc-3f2a.scope/memory.current", "777\n");
    put("cg2/nomad-alloc-3f2a.scope/cpu.stat", "usage_usec 2000000\n");
    struct fs_proc_stats s;
    cr_assert_eq(fs_proc_stats(root, 42, &s), 0);
    cr_assert(s.from_cgroup);
    cr_assert_eq(s.memory_bytes, 777);
    cr_assert_eq(s.memory_peak_bytes, 5000 * 1024, "no memory.peak: VmHWM");
}

Test(proc_stats, zombie_gone_and_unknown)
{
    struct fs_proc_stats s;
    put("proc/42/stat", STAT_LINE("Z"));
    cr_assert_eq(fs_proc_stats(root, 42, &s), -ENOENT);
    cr_assert_eq(fs_proc_stats(root, 99, &s), -ENOENT);
    cr_assert_eq(fs_proc_stats(root, 0, &s), -ENOENT);
}

Test(proc_stats, this_process_on_the_live_system)
{
    struct fs_proc_stats s;
    cr_assert_eq(fs_proc_stats("", getpid(), &s), 0);
    cr_assert_gt(s.memory_bytes, 0);
    cr_assert_geq(s.memory_peak_bytes, s.memory_bytes / 2);
}
