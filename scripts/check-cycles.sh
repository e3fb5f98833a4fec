#!/bin/sh
# check-cycles.sh [DIR...]: the file-level graph of direct calls between the
# .c files of DIRs (default: base registry csi fs cmd cluster http takeover kubelet) must have
# no cycle.
#
# An edge F -> G is a call written in F of a function defined (not static)
# in G, as GNU cflow's cross reference (cflow -x) places it: a reference to
# a function counts only when the name is followed by "(" on its line (or at
# the start of the next), so an address stored in an operations table,
# assigned to a pointer or passed as a callback is not a call. cflow does not
# run the preprocessor: a call made inside a macro of a header, or inside a
# static inline function of a header, is not seen.
#
# Prints each cycle found (one per strongly connected set of files, with the
# functions behind each arrow) and exits 1; 0 when there is none, 2 when it
# cannot run.
#
# check-cycles.sh --self-test: run on tests/fixtures/cycles/ (one cycle, and
# addresses taken and passed that would make a second one if they counted):
# 0 when it exits 1 with exactly tests/fixtures/cycles/expected, else 1.
# `make check` runs both.
set -u

if [ "${1:-}" = --self-test ]; then
    here=$(cd "$(dirname "$0")/.." && pwd) || exit 2
    fix="$here/tests/fixtures/cycles"
    out=$(cd "$fix" && sh "$here/scripts/check-cycles.sh" a b)
    rc=$?
    if [ $rc -eq 1 ] && [ "$out" = "$(cat "$fix/expected")" ]; then
        echo "check-cycles: self-test passed (the fixture's cycle found, its addresses and callbacks not counted)"
        exit 0
    fi
    echo "check-cycles: self-test FAILED: on $fix, exit $rc (want 1) and:" >&2
    echo "$out" >&2
    exit 1
fi

if ! command -v cflow >/dev/null 2>&1; then
    echo "check-cycles: cflow not found (Debian package cflow: make deps)" >&2
    exit 2
fi
[ $# -gt 0 ] || set -- base registry csi fs cmd cluster http takeover kubelet

files=$(for d in "$@"; do
    [ -d "$d" ] || { echo "check-cycles: $d: no such directory" >&2; exit 2; }
    find "$d" -name '*.c' | LC_ALL=C sort
done) || exit 2
[ -n "$files" ] || { echo "check-cycles: no .c files under $*" >&2; exit 2; }

xref=$(mktemp) || exit 2
trap 'rm -f "$xref"' EXIT
# shellcheck disable=SC2086
if ! cflow -x $files >"$xref" 2>/dev/null; then
    echo "check-cycles: cflow failed on $*" >&2
    exit 2
fi

awk '
function load(f,    n, l) {
    if (f in loaded) return
    loaded[f] = 1
    n = 0
    while ((getline l < f) > 0) src[f, ++n] = l
    close(f)
}
# Is name called at f:ln (followed by "(" there, or the next line starts with "(")?
function called(name, f, ln,    l, pat) {
    load(f)
    l = src[f, ln] " " src[f, ln + 1]
    pat = "(^|[^A-Za-z0-9_])" name "[ \t]*\\("
    return l ~ pat
}
$2 == "*" { split($3, p, ":"); def[$1] = p[1]; next }
{ nref++; rname[nref] = $1; rloc[nref] = $2 }
END {
    n = 0
    for (k = 1; k <= nref; k++) {
        name = rname[k]
        if (!(name in def)) continue
        split(rloc[k], p, ":")
        f = p[1]; g = def[name]
        if (f == g || !called(name, f, p[2] + 0)) continue
        if (!((f, g) in edge)) { edge[f, g] = 1; why[f, g] = name }
        else if (index(" " why[f, g] " ", " " name " ") == 0) why[f, g] = why[f, g] " " name
        if (!(f in id)) { id[f] = ++n; nm[n] = f }
        if (!(g in id)) { id[g] = ++n; nm[n] = g }
        adj[id[f], id[g]] = 1
    }
    # Reachability (Warshall): fine for a few hundred files.
    for (i = 1; i <= n; i++) for (j = 1; j <= n; j++) reach[i, j] = ((i, j) in adj)
    for (m = 1; m <= n; m++)
        for (i = 1; i <= n; i++) {
            if (!reach[i, m]) continue
            for (j = 1; j <= n; j++) if (reach[m, j]) reach[i, j] = 1
        }
    cycles = 0
    for (i = 1; i <= n; i++) {
        if (!reach[i, i] || (i in done)) continue
        # The set of files on a cycle with i; the shortest cycle through i (BFS).
        set = ""
        for (j = 1; j <= n; j++)
            if (reach[i, j] && reach[j, i]) { done[j] = 1; set = set " " nm[j] }
        split("", prev); split("", seen)
        q[1] = i; qh = 1; qt = 1; seen[i] = 1; found = 0
        while (qh <= qt && !found) {
            u = q[qh++]
            for (v = 1; v <= n; v++) {
                if (!((u, v) in adj)) continue
                if (v == i) { last = u; found = 1; break }
                if (!(v in seen)) { seen[v] = 1; prev[v] = u; q[++qt] = v }
            }
        }
        path = nm[i]; u = last; line = ""
        while (u != i) { path = nm[u] " -> " path; u = prev[u] }
        path = nm[i] " -> " path
        cycles++
        printf "check-cycles: cycle: %s\n", path
        np = split(path, hop, " -> ")
        for (h = 1; h < np; h++)
            printf "    %s -> %s: %s\n", hop[h], hop[h + 1], why[hop[h], hop[h + 1]]
        if (split(set, tmp, " ") > np - 1) printf "    (files on cycles with it:%s)\n", set
    }
    if (cycles) { printf "check-cycles: %d cycle(s) in the file-level call graph\n", cycles; exit 1 }
}' "$xref"
rc=$?
[ $rc -eq 0 ] && echo "check-cycles: no cycle in the file-level call graph of $*"
exit $rc
