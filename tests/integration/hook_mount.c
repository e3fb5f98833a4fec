/* csi-plugin-hook mount and unmount: each check is a script run in a private
 * mount namespace (unshare -m), so every mount it makes vanishes with it even
 * when a check fails. The scripts compare /proc/self/mountinfo before and
 * after; csifs is reachable there too (poststop --unmount). */
#include "tests/integration/hook_fixture.h"

TestSuite(hook_mount, .init = hook_setup, .fini = hook_teardown, .timeout = 180);

/* Shared by every check: $hook, $d (a fresh dir), fail, h (the hook, which
 * must succeed), same_mounts (the mounts under $d are as at the start). */
static const char prelude[] =
    "set -u\n"
    "hook=$1 d=$2\n"
    "shift 2\n"
    "mkdir -p \"$d\"\n"
    "fail() { echo \"FAIL: $*\"; exit 1; }\n"
    "h() { sh \"$hook\" \"$@\" || fail \"csi-plugin-hook $*: exit $?\"; }\n"
    /* only the mounts under $d: other tests mount and unmount at the same time */
    "mounts() { awk -v d=\"$d/\" 'index($5, d) == 1' /proc/self/mountinfo; }\n"
    "before=$(mounts)\n"
    "same_mounts() {\n"
    "    [ \"$(mounts)\" = \"$before\" ] && return 0\n"
    "    printf '%s\\n' \"$before\" >\"$d/before\"; mounts >\"$d/after\"\n"
    "    diff \"$d/before\" \"$d/after\"; fail \"mountinfo differs $1\"\n"
    "}\n"
    "markers() { ls \"$CSIFS_HOOK_STATE\" 2>/dev/null | grep -c selfbind; }\n";

/* Run prelude + body in a private mount namespace: its output; fails the
 * test unless it exits 0. */
static void in_namespace(const char *name, const char *body)
{
    char script[600], dir[600], outp[700], cmd[4096];
    static char out[16384];
    snprintf(script, sizeof(script), "%s/%s.sh", work, name);
    snprintf(dir, sizeof(dir), "%s/%s", work, name);
    snprintf(outp, sizeof(outp), "%s.out", dir);
    FILE *f = fopen(script, "w");
    cr_assert(f);
    fputs(prelude, f);
    fputs(body, f);
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof(cmd),
             "timeout 120 unshare -m --propagation private sh '%s' %s '%s' >'%s' 2>&1", script,
             HOOK, dir, outp);
    int st = system(cmd);
    slurp(outp, out, sizeof(out));
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: %s", name, out);
}

/* Test 3: mount then unmount leaves mountinfo as it was, for each mode, SRC
 * not a mount point before; DST is made when missing. */
Test(hook_mount, unmount_undoes_mount_in_every_mode)
{
    in_namespace("modes",
                 "mkdir \"$d/src\"\n"
                 "for mode in private host-to-task bidirectional; do\n"
                 "    h mount --propagation $mode \"$d/src\" \"$d/dst-$mode\"\n"
                 "    [ -d \"$d/dst-$mode\" ] || fail \"$mode: DST not made\"\n"
                 "    mountpoint -q \"$d/dst-$mode\" || fail \"$mode: DST not mounted\"\n"
                 "    if [ $mode = private ]; then\n"
                 "        ! mountpoint -q \"$d/src\" || fail \"private: SRC bound onto itself\"\n"
                 "    else\n"
                 "        mountpoint -q \"$d/src\" || fail \"$mode: SRC not bound onto itself\"\n"
                 "        [ \"$(markers)\" = 1 ] || fail \"$mode: no self-bind marker\"\n"
                 "    fi\n"
                 "    h unmount \"$d/dst-$mode\"\n"
                 "    same_mounts \"after $mode\"\n"
                 "    [ \"$(markers)\" = 0 ] || fail \"$mode: marker left\"\n"
                 "done\n"
                 /* a file SRC: DST made as a file */
                 "echo data >\"$d/file\"\n"
                 "h mount --propagation host-to-task \"$d/file\" \"$d/sub/dst-file\"\n"
                 "[ -f \"$d/sub/dst-file\" ] || fail 'file DST not made as a file'\n"
                 "[ \"$(cat \"$d/sub/dst-file\")\" = data ] || fail 'file DST not bound'\n"
                 "h unmount \"$d/sub/dst-file\"\n"
                 "same_mounts 'after the file'\n"
                 /* unmounting what is not mounted: exit 1, nothing changed */
                 "out=$(sh \"$hook\" unmount \"$d/dst-private\" 2>&1) && fail 'unmount twice: 0'\n"
                 "case $out in *'is not a mount point'*) ;; *) fail \"unmount twice: $out\" ;; "
                 "esac\n"
                 "same_mounts 'after a refused unmount'\n");
}

/* Test 3: two DSTs from one SRC share its self-bind: the first unmount
 * keeps it, the second removes it; a busy DST is unmounted lazily; poststop
 * --unmount does the same. */
Test(hook_mount, the_last_unmount_undoes_the_self_bind)
{
    start_fs("mount-two", FS_OPTS);
    in_namespace("two",
                 "mkdir \"$d/src\"\n"
                 "h mount --propagation host-to-task \"$d/src\" \"$d/dst1\"\n"
                 "h mount --propagation bidirectional \"$d/src\" \"$d/dst2\"\n"
                 "[ \"$(markers)\" = 1 ] || fail 'one self-bind, one marker'\n"
                 "h unmount \"$d/dst1\"\n"
                 "! mountpoint -q \"$d/dst1\" || fail 'dst1 still mounted'\n"
                 "mountpoint -q \"$d/src\" || fail 'the first unmount undid the self-bind'\n"
                 "mountpoint -q \"$d/dst2\" || fail 'dst2 went with dst1'\n"
                 /* busy: a process has its cwd in dst2 */
                 "(cd \"$d/dst2\" && exec sleep 60) &\n"
                 "busy=$!\n"
                 "sleep 0.2\n"
                 "h unmount \"$d/dst2\"\n"
                 "kill $busy; wait $busy 2>/dev/null\n"
                 "same_mounts 'after both'\n"
                 "[ \"$(markers)\" = 0 ] || fail 'marker left'\n"
                 /* poststop --unmount, twice (idempotent) */
                 "h prestart --type node --plugin mp --alloc a1 >/dev/null\n"
                 "h mount --propagation host-to-task \"$d/src\" \"$d/dst3\"\n"
                 "h mount --propagation private \"$d/src\" \"$d/dst4\"\n"
                 "for i in 1 2; do\n"
                 "    h poststop --type node --plugin mp --alloc a1 --unmount \"$d/dst3\" "
                 "--unmount \"$d/dst4\"\n"
                 "    same_mounts \"after poststop $i\"\n"
                 "done\n"
                 "[ ! -e \"$CSIFS_MOUNT/csi-node/mp/a1\" ] || fail 'poststop did not deregister'\n");
}

/* A SRC that was a mount point is left one; mount refuses what does not
 * fit before changing anything. */
Test(hook_mount, refusals_change_nothing)
{
    in_namespace("refuse",
                 "mkdir \"$d/src\" \"$d/dir\"\n"
                 "mount -t tmpfs src \"$d/src\"\n"
                 "before=$(mounts)\n"
                 "h mount --propagation host-to-task \"$d/src\" \"$d/dst\"\n"
                 "h unmount \"$d/dst\"\n"
                 "mountpoint -q \"$d/src\" || fail 'SRC, a mount point before, was unmounted'\n"
                 "[ \"$(markers)\" = 0 ] || fail 'a marker for a SRC that mount did not bind'\n"
                 "touch \"$d/file\"\n"
                 "before=$(mounts)\n"
                 "for args in \"$d/src $d/file\" \"$d/file $d/dir\" \"$d/nothere $d/x\"; do\n"
                 "    # shellcheck disable=SC2086\n"
                 "    out=$(sh \"$hook\" mount --propagation private $args 2>&1) && "
                 "fail \"mount $args: 0\"\n"
                 "    case $out in 'csi-plugin-hook: mount: '*) ;; *) fail \"mount $args: $out\" ;; "
                 "esac\n"
                 "done\n"
                 "[ ! -e \"$d/x\" ] || fail 'DST made for a missing SRC'\n"
                 "same_mounts 'after refused mounts'\n");
}
