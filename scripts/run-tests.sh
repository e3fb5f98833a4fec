#!/bin/sh
# Runs test binaries (Criterion) and prints one closing line "N passed, N failed".
# Those named in $VALGRIND_TESTS run a second time under valgrind (memcheck,
# leaks and errors fatal). Every binary runs even when an earlier one failed.
set -u
passed=0; failed=0; bad=""
log=$(mktemp); trap 'rm -f "$log"' EXIT

count() { # $1 = name; reads the Criterion synthesis line in $log
    line=$(grep -a 'Synthesis:' "$log" | tail -n 1)
    t=$(echo "$line" | sed -n 's/.*Tested: \([0-9]*\).*/\1/p')
    p=$(echo "$line" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    if [ -z "$t" ] || [ "$2" -ne 0 ]; then
        # no synthesis (crash before the end) or non-zero exit: the whole binary failed
        f=$(( ${t:-1} - ${p:-0} )); [ "$f" -gt 0 ] || f=1
    else
        f=$((t - p))
    fi
    passed=$((passed + ${p:-0})); failed=$((failed + f))
    [ "$f" -eq 0 ] || bad="$bad $1"
}

# A test that crashed may leave a dead mount or a process behind: clear them
# so that one failure does not cascade (and CI leaves a clean machine).
sweep() {
    for m in $(awk '$3 == "fuse.csifs" && $2 ~ /^\/tmp\/csifs-/ {print $2}' /proc/mounts); do
        umount -l "$m" 2>/dev/null || true
    done
    pkill -f "${BUILD:-build}/csi-test-plugin" 2>/dev/null || true
}

for t in "$@"; do
    name=${t#"${BUILD:-build}"/tests/}
    echo "== $name"
    "$t" --jobs=1 >"$log" 2>&1; rc=$?
    cat "$log"
    count "$name" "$rc"
    sweep
    case " ${VALGRIND_TESTS:-} " in *" $t "*)
        echo "== $name (valgrind)"
        valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,possible \
            --trace-children=yes --child-silent-after-fork=yes \
            "$t" --jobs=1 >"$log" 2>&1; rc=$?
        cat "$log"
        count "$name(valgrind)" "$rc"
        sweep
    esac
done

[ -z "$bad" ] || echo "failed:$bad"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
