#!/bin/sh
# Runs test binaries (Criterion) and prints one closing line "N passed, N failed".
# Those named in $VALGRIND_TESTS run a second time under valgrind (memcheck,
# leaks and errors fatal). Every binary runs even when an earlier one failed.
set -u
passed=0; failed=0; bad=""
log=$(mktemp); trap 'rm -f "$log"' EXIT

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
    passed=$((passed + ${c_pass:-0})); failed=$((failed + c_fail))
    [ "$c_fail" -eq 0 ] || bad="$bad $1"
}

for t in "$@"; do
    name=${t#"${BUILD:-build}"/tests/}
    echo "== $name"
    "$t" --jobs=1 >"$log" 2>&1; rc=$?
    cat "$log"
    count "$name" "$rc"
    case " ${VALGRIND_TESTS:-} " in *" $t "*)
        echo "== $name (valgrind)"
        valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,possible \
            --trace-children=yes --child-silent-after-fork=yes \
            "$t" --jobs=1 >"$log" 2>&1; rc=$?
        cat "$log"
        count "$name(valgrind)" "$rc"
    esac
done

[ -z "$bad" ] || echo "failed:$bad"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
