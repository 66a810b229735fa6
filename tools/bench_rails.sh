#!/bin/bash
# Striping by rate on the emulated cluster (tests/cluster/zc_cluster): 2
# nodes x 4 NICs at 200, 200, 100 and 50 Mbit/s, RANKS ranks per node.
#   1. zc_cluster --check: each NIC's goodput alone, and their sum
#   2. routed transfer and alltoallv, 16-64 MiB, striped by rate and in
#      equal shares, interleaved call by call (tools/zc_rails_perf)
#   3. timelines of 32 MiB calls while NIC 0 drops to a tenth of its rate
#      (20 Mbit/s) after CUT seconds: both stripings interleaved, then by
#      rate alone (how soon the calls are back near the new sum)
# Needs root (network namespaces).  Output: one file per step in OUTDIR.
#
#   tools/bench_rails.sh [-b BUILDDIR] [-o OUTDIR] [-n ITERS] [-c CUT] [-t SECONDS] [-R RANKS]
set -u
srcdir=$(cd "$(dirname "$0")/.." && pwd)
builddir=. outdir=bench_rails iters=4 cut=6 span=14 ranks=1
while getopts "b:o:n:c:t:R:" o; do
    case $o in
    b) builddir=$OPTARG ;;
    o) outdir=$OPTARG ;;
    n) iters=$OPTARG ;;
    c) cut=$OPTARG ;;
    t) span=$OPTARG ;;
    R) ranks=$OPTARG ;;
    *) echo "usage: $0 [-b BUILDDIR] [-o OUTDIR] [-n ITERS] [-c CUT] [-t SECONDS] [-R RANKS]" >&2
       exit 2 ;;
    esac
done
cluster="$srcdir/tests/cluster/zc_cluster"
perf="$builddir/tools/zc_rails_perf"
rates=200mbit,200mbit,100mbit,50mbit
shape=(-N 2 -K 4 -R "$ranks" --rate "$rates" -q -t 900)
mkdir -p "$outdir"
[ -x "$perf" ] || { echo "$0: no $perf (build first)" >&2; exit 2; }

echo "# $(date -u +%FT%TZ) $(uptime)" >"$outdir/load"
bash "$cluster" -N 2 -K 4 --rate "$rates" --check >"$outdir/check" 2>&1
for op in routed alltoallv; do
    bash "$cluster" "${shape[@]}" -o "$outdir/logs-$op" -- \
        "$perf" -o "$op" -b 16777216 -e 67108864 -f 2 -n "$iters" -w 1 -c 0 >/dev/null 2>&1
    cp "$outdir/logs-$op/rank0.log" "$outdir/sweep-$op"
    for s in both rate; do
        bash "$cluster" "${shape[@]}" --event "$cut:0:20mbit" -o "$outdir/logs-cut-$op-$s" -- \
            "$perf" -o "$op" -S "$s" -e 33554432 -T "$span" -c 0 >/dev/null \
            2>"$outdir/events-$op-$s"
        cp "$outdir/logs-cut-$op-$s/rank0.log" "$outdir/timeline-$op-$s"
    done
    echo "# $(date -u +%FT%TZ) $(uptime)" >>"$outdir/load"
done
echo "results in $outdir: check, sweep-*, timeline-*, events-*, load"
