#!/bin/sh
# make bench: csifs side by side with tmpfs, raw LMDB and bare gRPC core.
#
#   sh scripts/bench.sh [BUILD]      BUILD defaults to build
#   BENCH_QUICK=1                    smaller sizes, about 30 s (a smoke run)
#   BENCH_ONLY=ROW[,ROW...]          only the groups holding those rows
#   BENCH_VERBOSE=1                  progress on stderr (else in BUILD/bench.log)
#
# Prints the table, then one `bench NAME value=V baseline=B ratio=R goal=G
# ok|short` line per row; writes BUILD/bench.json. Exits 0 whether or not the
# goals are met; 1 only when the benchmark itself could not run. Needs root
# (FUSE allow_other, a tmpfs mount, /proc/sys/vm/drop_caches). The driver
# runs in its own session, so anything it leaves behind (a csifs of a group
# that failed half-way) is stopped at the end.
set -u
BUILD=${1:-build}
export BUILD

if [ "$(id -u)" -ne 0 ]; then
    echo "bench: needs root (FUSE allow_other, tmpfs, drop_caches)" >&2
    exit 1
fi
for bin in csifs csi-test-plugin csifs-bench; do
    if [ ! -x "$BUILD/$bin" ]; then
        echo "bench: $BUILD/$bin is missing: run make first" >&2
        exit 1
    fi
done

set -- --json "$BUILD/bench.json"
case "${BENCH_QUICK:-0}" in 0|'') ;; *) set -- "$@" --quick ;; esac
[ -n "${BENCH_ONLY:-}" ] && set -- "$@" --only "$BENCH_ONLY"

log="$BUILD/bench.log"
if [ -n "${BENCH_VERBOSE:-}" ]; then
    log=/dev/stderr
else
    echo "bench: running (a few minutes; progress in $log)" >&2
fi

CSIFS_TEST_RUNDIR=$(mktemp -d); export CSIFS_TEST_RUNDIR
made="$CSIFS_TEST_RUNDIR/made"
# Field $1 of /proc/PID/stat after the comm: 20 start time, 3 process group.
stat_field() { sed 's/.*) //' "/proc/$2/stat" 2>/dev/null | cut -d' ' -f"$1"; }
# SIG ($1) to every noted process still running (same start time) outside
# the driver's process group ($2); then (KILL) the noted dirs nothing is
# mounted in any more.
signal_noted() {
    [ -s "$made" ] || return 0
    while read -r kind p start; do
        [ "$kind" = pid ] && [ "$(stat_field 20 "$p")" = "$start" ] &&
            [ "$(stat_field 3 "$p")" != "$2" ] && kill -"$1" "$p" 2>/dev/null
    done <"$made"
    [ "$1" = KILL ] && while read -r kind d; do
        [ "$kind" = dir ] && ! grep -q " $d/" /proc/self/mounts && rm -rf "$d"
    done <"$made"
}
# After the driver: wake the etcd members (a stopped one would hold up the
# daemons' shutdown), stop the group and wait for it, then kill the rest.
stop_all() {
    signal_noted CONT "$1"
    kill -TERM "-$1" 2>/dev/null
    i=0
    while kill -0 "-$1" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    signal_noted KILL "$1"
    rm -rf "$CSIFS_TEST_RUNDIR"
}

setsid -w "$BUILD/csifs-bench" "$@" 2>"$log" &
pid=$!
trap 'stop_all "$pid"; exit 130' INT TERM
wait "$pid"
rc=$?
trap - INT TERM
stop_all "$pid"

if [ "$rc" -ne 0 ]; then
    [ "$log" != /dev/stderr ] && tail -n 20 "$log" >&2
    echo "bench: the driver failed (status $rc)" >&2
    exit 1
fi
exit 0
