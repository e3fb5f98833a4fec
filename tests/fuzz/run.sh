#!/bin/sh
# Runs each libFuzzer target for SECONDS on a working copy of its committed
# seed corpus (tests/fuzz/corpus/<target>/; new inputs stay under
# BUILD/corpus/). A crash, leak, UB report, timeout (10 s) or oracle failure
# saves its reproducer under BUILD/artifacts/<target>/ and fails the run.
# Last line: "fuzz: N targets passed, M failed".
#   usage: run.sh BUILD SECONDS TARGET...
set -u
build=$1; secs=$2; shift 2
passed=0; failed=0; bad=""
for t in "$@"; do
    seeds="tests/fuzz/corpus/$t"; work="$build/corpus/$t"; art="$build/artifacts/$t"
    tmp="$build/tmp/$t"
    rm -rf "$art" "$tmp"; mkdir -p "$work" "$art" "$tmp"
    case $t in store_image) maxlen=65536 ;; *) maxlen=8192 ;; esac
    echo "== fuzz $t (${secs}s)"
    log="$build/fuzz-$t.log"
    TMPDIR="$tmp" "$build/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$maxlen" \
        -artifact_prefix="$art/" -print_final_stats=1 "$work" "$seeds" >"$log" 2>&1
    rc=$?
    rm -rf "$tmp"
    grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE)' "$log" | tr '\n' ' '
    echo
    if [ "$rc" -ne 0 ]; then
        failed=$((failed + 1)); bad="$bad $t"
        tail -n 40 "$log"
        echo "fuzz $t: FAILED (exit $rc); reproducer: $(find "$art" -type f | head -n 1)"
        echo "  replay: $build/fuzz/$t $art/<file>"
    else
        passed=$((passed + 1))
    fi
done
[ -z "$bad" ] || echo "fuzz failed:$bad"
echo "fuzz: $passed targets passed, $failed failed"
[ "$failed" -eq 0 ]
