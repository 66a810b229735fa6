#!/bin/sh
# zc_topo_bench.sh: discovery cost of zc_topo per topology file, against
# lstopo-no-graphics loading the same file with every I/O object (what
# zc_topo asks hwloc for) in the same run.
#
#   zc_topo_bench.sh [-n RUNS] ZC_TOPO FILE...
#
# ZC_TOPO is the zc_topo binary (in a build tree: tools/.libs/zc_topo with
# LD_LIBRARY_PATH=.libs, to leave out libtool's wrapper script).  Each run of
# each program is one process, so times include process start-up and dynamic
# linking for both.  The two programs alternate inside one loop so that they
# share the machine's noise.  Prints the median and minimum wall time per run
# in milliseconds and the ratio of the medians.
set -eu

runs=21
if [ "${1:-}" = -n ]; then
    runs=$2
    shift 2
fi
[ $# -ge 2 ] || { echo "usage: $0 [-n RUNS] ZC_TOPO FILE..." >&2; exit 2; }
tool=$1
shift
command -v lstopo-no-graphics > /dev/null || { echo "$0: lstopo-no-graphics not found" >&2; exit 2; }

now_ns() { date +%s%N; }

# stats FILE: "median min" of the numbers in FILE, in ms with 2 decimals.
stats() {
    sort -n "$1" | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.2f %.2f", m / 1e6, v[1] / 1e6 }'
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-22s %12s %12s %12s %12s %8s\n' file zc_topo_med zc_topo_min lstopo_med lstopo_min ratio
for f in "$@"; do
    : > "$tmp/zc"
    : > "$tmp/ls"
    i=0
    while [ $i -lt "$runs" ]; do
        t0=$(now_ns)
        "$tool" --json --xml "$f" > /dev/null
        t1=$(now_ns)
        lstopo-no-graphics -i "$f" --whole-io > /dev/null
        t2=$(now_ns)
        echo $((t1 - t0)) >> "$tmp/zc"
        echo $((t2 - t1)) >> "$tmp/ls"
        i=$((i + 1))
    done
    set -- $(stats "$tmp/zc") $(stats "$tmp/ls")
    printf '%-22s %12s %12s %12s %12s %8s\n' "$(basename "$f")" "$1" "$2" "$3" "$4" \
        "$(awk -v a="$1" -v b="$3" 'BEGIN { printf "%.2f", a / b }')"
    set -- "$@"
done
