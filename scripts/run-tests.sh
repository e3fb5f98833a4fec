#!/bin/sh
# Runs test binaries (Criterion) and prints one closing line "N passed, N failed".
#   run-tests.sh [--lanes N] BIN... [--serial BIN...]
# With --lanes N, the binaries before --serial run in N lanes at once (a
# lane: every N-th of them, one after another, in a run of this script of
# its own; its output is printed whole once every lane ended), then those
# after --serial one at a time (the suites that start etcd, floods or crash
# loops). Each binary's wall time follows its output ("-- NAME: N s").
# Those named in $VALGRIND_TESTS run a second time under valgrind (memcheck,
# leaks and errors fatal). Every binary runs even when an earlier one failed.
#
# Cleanup is by PID and by what this run made, never by name or pattern
# (other runs share the machine): each binary runs in a session of its own
# (setsid), and the test library notes in $CSIFS_TEST_RUNDIR/made every temp
# dir, mount point and process it starts (tests/lib/testutil.h tu_note).
# After each binary, whatever of that is left (a test that crashed before
# its own cleanup) is removed: the binary's process group gets SIGKILL, so
# do noted pids whose start time still matches, FUSE mounts on a noted mount
# point or inside a noted dir have their connection aborted and are
# detached, and the noted dirs are removed.
set -u
passed=0; failed=0; bad=""
log=$(mktemp)
CSIFS_TEST_RUNDIR=$(mktemp -d); export CSIFS_TEST_RUNDIR
made="$CSIFS_TEST_RUNDIR/made"
trap 'rm -f "$log"; rm -rf "$CSIFS_TEST_RUNDIR"' EXIT

# The start time (field 22 of /proc/PID/stat; the comm may hold spaces).
starttime() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# "<conn> <mount point>" of every fuse mount at or under a noted path.
our_mounts() {
    awk 'NR == FNR { if ($1 == "mnt" || $1 == "dir") want[$2] = 1; next }
         { split($0, half, " - "); if (half[2] !~ /^fuse/) next
           split($3, dev, ":"); p = $5
           for (w in want) if (p == w || index(p, w "/") == 1) { print dev[2], p; break } }' \
        "$made" /proc/self/mountinfo
}

cleanup_run() { # $1 = pid (and process group) of the binary that just ended
    kill -KILL -- "-$1" 2>/dev/null
    [ -s "$made" ] || return 0
    while read -r kind pid start; do
        [ "$kind" = pid ] && [ "$(starttime "$pid")" = "$start" ] && kill -KILL "$pid" 2>/dev/null
    done <"$made"
    our_mounts | sort -k2 -r | while read -r conn mnt; do
        echo "run-tests: left behind: $mnt (connection $conn): aborting and detaching" >&2
        [ -w "/sys/fs/fuse/connections/$conn/abort" ] && echo 1 >"/sys/fs/fuse/connections/$conn/abort"
        umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null
    done
    while read -r kind path; do
        [ "$kind" = dir ] && [ -d "$path" ] && rm -rf --one-file-system "$path"
    done <"$made"
    : >"$made"
}

# Run "$@" in its own session, SIGINT and SIGQUIT at their default action
# (a lane is a background job of sh, which starts with both ignored; so may
# this script be: a binary inherits that, and the shells it starts could not
# trap them); its exit status.
run_own() {
    pidf="$CSIFS_TEST_RUNDIR/pid"; rm -f "$pidf"
    # shellcheck disable=SC2016  # $$ and $0 belong to the inner sh
    setsid -w env --default-signal=INT,QUIT sh -c 'echo $$ >"$0"; exec "$@"' "$pidf" "$@" \
        >"$log" 2>&1; rc=$?
    pid=$(cat "$pidf" 2>/dev/null)
    [ -z "$pid" ] || cleanup_run "$pid"
    return "$rc"
}

count() { # $1 = name, $2 = exit status; reads the Criterion synthesis line in $log
    c_line=$(grep -a 'Synthesis:' "$log" | tail -n 1)
    c_tested=$(echo "$c_line" | sed -n 's/.*Tested: \([0-9]*\).*/\1/p')
    c_pass=$(echo "$c_line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    if [ -z "$c_tested" ] || [ "$2" -ne 0 ]; then
        # no synthesis (crash before the end) or non-zero exit: the whole binary failed
        c_fail=$(( ${c_tested:-1} - ${c_pass:-0} )); [ "$c_fail" -gt 0 ] || c_fail=1
    else
        c_fail=$((c_tested - c_pass))
    fi
    # a sanitizer report (a leak found at a worker's exit) fails the binary
    if grep -aq 'ERROR: [A-Za-z]*Sanitizer' "$log" && [ "$c_fail" -eq 0 ]; then
        c_fail=1; c_pass=$(( ${c_pass:-1} - 1 ))
    fi
    passed=$((passed + ${c_pass:-0})); failed=$((failed + c_fail))
    [ "$c_fail" -eq 0 ] || bad="$bad $1"
}

lanes=1
if [ "${1:-}" = --lanes ]; then lanes=$2; shift 2; fi
par=""; ser=""; after=0
for a in "$@"; do
    if [ "$a" = --serial ]; then after=1
    elif [ "$after" = 1 ]; then ser="$ser $a"
    else par="$par $a"; fi
done
if [ "$lanes" -gt 1 ]; then
    k=0
    while [ "$k" -lt "$lanes" ]; do
        # shellcheck disable=SC2086  # the lists are paths without blanks
        set -- $par
        i=0; mine=""
        for t in "$@"; do [ $((i % lanes)) -eq "$k" ] && mine="$mine $t"; i=$((i + 1)); done
        # shellcheck disable=SC2086
        [ -z "$mine" ] || sh "$0" $mine >"$CSIFS_TEST_RUNDIR/lane$k" 2>&1 &
        k=$((k + 1))
    done
    wait
    k=0
    while [ "$k" -lt "$lanes" ]; do
        f="$CSIFS_TEST_RUNDIR/lane$k"
        if [ -f "$f" ]; then
            sed '/^[0-9]* passed, [0-9]* failed$/d; /^failed:/d' "$f"
            l=$(grep -a '^[0-9]* passed, [0-9]* failed$' "$f" | tail -n 1)
            if [ -z "$l" ]; then failed=$((failed + 1)); bad="$bad lane$k"
            else
                passed=$((passed + ${l%% *})); l=${l#*, }; failed=$((failed + ${l%% *}))
            fi
            b=$(sed -n 's/^failed://p' "$f"); bad="$bad$b"
        fi
        k=$((k + 1))
    done
    par=""
fi
# shellcheck disable=SC2086
set -- $par $ser
for t in "$@"; do
    name=${t#"${BUILD:-build}"/tests/}
    echo "== $name"
    t0=$(date +%s)
    run_own "$t" --jobs=1; rc=$?
    cat "$log"
    echo "-- $name: $(($(date +%s) - t0)) s"
    count "$name" "$rc"
    case " ${VALGRIND_TESTS:-} " in *" $t "*)
        echo "== $name (valgrind)"
        run_own valgrind -q --error-exitcode=99 --leak-check=full \
            --errors-for-leak-kinds=definite,possible \
            --trace-children=yes --child-silent-after-fork=yes \
            "$t" --jobs=1; rc=$?
        cat "$log"
        count "$name(valgrind)" "$rc"
    esac
done

[ -z "$bad" ] || echo "failed:$bad"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
