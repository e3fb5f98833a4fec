/* floorfs (tests/bench/floorfs.c), the bench's floor: it serves the tree it
 * was given as it is (ls -lR, find), and its durable variant commits mkdir,
 * symlink and rmdir to LMDB before it answers. */
#include "tests/lib/mntwatch.h"
#include "tests/lib/testutil.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#define FUSE_MAGIC 0x65735546

static char *dir;
static char src[512], mnt[512], state[512];
static pid_t pid = -1;

static int sh(const char *fmt, const char *a, const char *b)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), fmt, a, b);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool mounted(void *arg)
{
    (void)arg;
    struct statfs s;
    return statfs(mnt, &s) == 0 && s.f_type == FUSE_MAGIC;
}

static void setup(void)
{
    dir = tu_tmpdir("floorfs");
    cr_assert(dir);
    snprintf(src, sizeof(src), "%s/src", dir);
    snprintf(mnt, sizeof(mnt), "%s/mnt", dir);
    snprintf(state, sizeof(state), "%s/state", dir);
    /* a small bench tree: plugins, instances, attribute files, links */
    cr_assert_eq(sh("set -e; d=%s; mkdir -p %s\n"
                    "for p in 0 1 2; do for a in 0 1 2 3; do i=$d/csi-node/p$p/a$a\n"
                    "  mkdir -p $i; echo unknown >$i/health; : >$i/nodeid\n"
                    "  echo 'no socket set' >$i/reason; chmod 0444 $i/health $i/reason\n"
                    "done; ln -s a0 $d/csi-node/p$p/current; done\n"
                    "mkdir $d/csi-controller; ln -s /run/p0.sock $d/csi-node/p0/a0/socket",
                    src, state), 0);
    cr_assert_eq(mkdir(mnt, 0755), 0);
    tu_note("mnt", mnt);
    char bin[512];
    snprintf(bin, sizeof(bin), "%s/floorfs", tu_build_dir());
    pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        execl(bin, bin, mnt, src, state, (char *)NULL);
        _exit(127);
    }
    tu_note_pid(pid);
    cr_assert(tu_wait_for(mounted, NULL, 5000), "floorfs did not mount %s", mnt);
}

static void teardown(void)
{
    if (pid > 0) {
        kill(pid, SIGTERM);
        if (mw_wait(pid, tu_ms(5000)) < 0) {
            kill(pid, SIGKILL);
            mw_wait(pid, tu_ms(5000));
        }
    }
    if (mounted(NULL))
        sh("umount -l %s%s", mnt, "");
    tu_rmrf(dir);
    free(dir);
}

TestSuite(floorfs, .init = setup, .fini = teardown, .timeout = 60);

/* Every name, type, mode, link target and file size of the source, as find
 * sees them (a directory's size is the source file system's own). */
Test(floorfs, serves_the_tree_it_was_given)
{
    const char *list = "cd %s && find . -type d -printf '%%y %%m %%p\\n' -o "
                       "-printf '%%y %%m %%s %%p %%l\\n' | sort";
    char a[600], b[600];
    snprintf(a, sizeof(a), "%s/src.txt", dir);
    snprintf(b, sizeof(b), "%s/mnt.txt", dir);
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), list, src);
    cr_assert_eq(sh("%s >%s", cmd, a), 0);
    snprintf(cmd, sizeof(cmd), list, mnt);
    cr_assert_eq(sh("%s >%s", cmd, b), 0);
    cr_assert_eq(sh("diff %s %s >&2", a, b), 0, "floorfs's tree differs from its source");
    cr_assert_eq(sh("ls -lR %s >/dev/null%s", mnt, ""), 0);
    cr_assert_eq(sh("test \"$(cat %s/csi-node/p1/a2/health)\" = unknown%s", mnt, ""), 0);
    cr_assert_eq(sh("test \"$(readlink %s/csi-node/p0/current/socket)\" = /run/p0.sock%s", mnt,
                    ""), 0);
}

/* mkdir, ln -s and rmdir are each committed to LMDB before they return. */
Test(floorfs, durable_mkdir_symlink_rmdir)
{
    cr_assert_eq(sh("mkdir %s/csi-node/p2/a9 && ln -s /run/a9.sock %s/csi-node/p2/a9/socket",
                    mnt, mnt), 0);
    cr_assert_eq(sh("test \"$(readlink %s/csi-node/p2/a9/socket)\" = /run/a9.sock%s", mnt, ""), 0);
    cr_assert_eq(sh("mdb_dump -p %s | grep -q '/a9$' && mdb_dump -p %s | grep -q ' /run/a9.sock$'",
                    state, state), 0, "mkdir and symlink not in LMDB");
    cr_assert_eq(sh("rmdir %s/csi-node/p2/a9 && ! test -e %s/csi-node/p2/a9", mnt, mnt), 0);
    cr_assert_neq(sh("mdb_dump -p %s | grep -q '/a9$'%s", state, ""), 0, "rmdir not in LMDB");
    cr_assert_neq(sh("mkdir %s/csi-node/p2/a0 2>/dev/null%s", mnt, ""), 0, "mkdir of a name there");
}
