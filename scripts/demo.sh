#!/bin/sh
# make demo: a tour of csifs on a temporary mount, about 20 s. Registers a
# real plugin (csi-test-plugin) through the hook, shows health and current,
# makes a rolling update, stops the old plugin, deregisters it, prints the
# events. Cleans up after itself: its own csifs and plugins by PID, its own
# mount only. Usage: scripts/demo.sh [BUILD_DIR] (default build), as root;
# DEMO_PAUSE=S pauses S seconds before each step (default 1, to read along).
set -eu
LC_ALL=C
export LC_ALL

build=${1:-build}
csifs=$build/csifs
plugin=$build/csi-test-plugin
hook="sh $(pwd)/scripts/csi-plugin-hook"
slack=${CSIFS_TEST_SLACK:-1}
slack=${slack%%.*}                  # whole seconds: 1.5 counts as 1
case $slack in ''|*[!0-9]*|0) slack=1 ;; esac
pause=${DEMO_PAUSE:-1}

for b in "$csifs" "$plugin"; do
    [ -x "$b" ] || { echo "demo: $b missing: run make first" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/csifs-demo.XXXXXX")
mnt=$tmp/mnt
case $tmp in
    *[[:space:]\\]*) rmdir "$tmp"; echo "demo: TMPDIR must not hold spaces or backslashes" >&2; exit 1 ;;
esac
fs_pid='' p1='' p2=''

# Our mount is still there: field 5 of mountinfo is the mount point
# (the path holds no character that mountinfo escapes: checked above).
mounted() { awk -v m="$mnt" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# stop PID: SIGTERM, wait up to 5 s (it is our child), then SIGKILL.
stop() {
    [ -n "$1" ] || return 0
    kill "$1" 2>/dev/null || return 0
    n=0
    while kill -0 "$1" 2>/dev/null && [ $n -lt $((50 * slack)) ]; do sleep 0.1; n=$((n + 1)); done
    kill -KILL "$1" 2>/dev/null || :
    wait "$1" 2>/dev/null || :
}

cleanup() {
    rc=$?
    set +e
    [ "$rc" -eq 0 ] || [ ! -s "$tmp/csifs.log" ] || { echo "demo: failed; the csifs log:" >&2; cat "$tmp/csifs.log" >&2; }
    stop "$p1"
    stop "$p2"
    stop "$fs_pid"
    if mounted; then
        umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
    fi
    if mounted; then
        echo "demo: $mnt is still mounted; $tmp left in place" >&2
    else
        rm -rf --one-file-system "$tmp"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { sleep "$pause"; printf '\n== %s\n' "$*"; }
# show CMD: print it, run it in the mount.
show() { printf '$ %s\n' "$1"; (cd "$mnt" && eval "$1"); }

# wait_for SECONDS CMD: until CMD succeeds, polling every 0.1 s.
wait_for() {
    n=0 lim=$(($1 * 10 * slack))
    shift
    until "$@"; do
        n=$((n + 1))
        [ $n -lt $lim ] || { echo "demo: timed out waiting for: $*" >&2; return 1; }
        sleep 0.1
    done
}
serving() { [ "$(stat -f -c %t "$mnt" 2>/dev/null)" = 65735546 ] && [ -e "$mnt/events" ]; }
health_is() { [ "$(cat "$mnt/csi-node/demo/$1/health" 2>/dev/null)" = "$2" ]; }

say "csifs on a temporary mount"
mkdir -p "$mnt"
printf '$ %s -f -o state=%s,heartbeat=1s %s &\n' "$csifs" "$tmp/state" "$mnt"
"$csifs" -f -o "state=$tmp/state,heartbeat=1s" "$mnt" 2>"$tmp/csifs.log" &
fs_pid=$!
wait_for 10 serving || { cat "$tmp/csifs.log" >&2; exit 1; }
show 'ls -l'

export CSIFS_MOUNT="$mnt" CSIFS_SOCKET_ROOT="$tmp/sockets"

# start_plugin ALLOC VERSION: register ALLOC through the hook, start a plugin
# on its socket; sets started to its pid.
start_plugin() {
    printf '$ csi-plugin-hook prestart --type node --plugin demo --alloc %s\n' "$1"
    $hook prestart --type node --plugin demo --alloc "$1"
    printf '$ csi-test-plugin --type node --name demo.csi.example --vendor-version %s --socket %s &\n' \
        "$2" "$CSIFS_SOCKET_ROOT/$1/csi.sock"
    "$plugin" --type node --name demo.csi.example --vendor-version "$2" \
        --node-id demo-node --socket "$CSIFS_SOCKET_ROOT/$1/csi.sock" >"$tmp/$1.log" 2>&1 &
    started=$!
    printf '$ csi-plugin-hook wait --type node --plugin demo --alloc %s --timeout %ss\n' "$1" $((10 * slack))
    $hook wait --type node --plugin demo --alloc "$1" --timeout $((10 * slack))s
}

say "register allocation a1 and start its plugin"
start_plugin a1 1.0.0
p1=$started
show 'ls -l csi-node/demo/a1'
show 'cat csi-node/demo/a1/health csi-node/demo/a1/reason csi-node/demo/a1/provider csi-node/demo/a1/version'
show 'readlink csi-node/demo/current'

say "rolling update: allocation a2 with version 2.0.0 arrives"
start_plugin a2 2.0.0
p2=$started
show 'ls csi-node/demo'
show 'readlink csi-node/demo/current; cat csi-node/demo/current/version'

say "the old plugin stops"
printf '$ kill %s\n' "$p1"
stop "$p1"
p1=''
wait_for 10 health_is a1 unhealthy
show 'cat csi-node/demo/a1/health csi-node/demo/a1/reason'
show 'readlink csi-node/demo/current'

say "deregister a1"
printf '$ csi-plugin-hook poststop --type node --plugin demo --alloc a1\n'
$hook poststop --type node --plugin demo --alloc a1
show 'ls csi-node/demo; readlink csi-node/demo/current'

say "a consumer dials the current socket without knowing an allocation"
printf '$ csi-plugin-hook wait-plugin --type node --plugin demo\n'
$hook wait-plugin --type node --plugin demo --timeout $((5 * slack))s

say "events"
show 'timeout 1 cat events || :'

say "the last plugin stops and is deregistered: no current instance is left"
printf '$ kill %s\n' "$p2"
stop "$p2"
p2=''
printf '$ csi-plugin-hook poststop --type node --plugin demo --alloc a2\n'
$hook poststop --type node --plugin demo --alloc a2
show 'ls -A csi-node/demo; readlink csi-node/demo/current || echo "no current"'

say "SIGTERM to csifs: it unmounts and exits 0"
printf '$ kill %s; wait %s\n' "$fs_pid" "$fs_pid"
kill "$fs_pid"
st=0
wait "$fs_pid" || st=$?
fs_pid=''
echo "csifs exited with status $st"
mounted && { echo "demo: $mnt is still mounted" >&2; exit 1; }
[ "$st" -eq 0 ] || exit 1
echo "demo: done"
