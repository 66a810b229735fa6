#!/usr/bin/env bash
# Intra-node 2-rank point-to-point against ucx_perftest in the same run,
# interleaved ROUNDS times, both with libzcomm's transports
# (UCX_TLS=self,sm,tcp); the baseline is the better of ucx_perftest's busy
# polling and its sleeping wait (-E sleep).  Prints each measurement, the
# median ratio per size (above 1: libzcomm better) and the load average.
#
#   tools/bench_sendrecv_vs_ucx.sh [BUILD_DIR] [ROUNDS] [WINDOW] [bw|lat] [malloc|huge]
#
# The buffers: malloc (default; ucx_perftest's default allocation is as
# plain) or huge: zc_sendrecv_perf -H (zc_host_alloc) against
# ucx_perftest with UCX_ALLOC_PRIO=thp, both backed by huge pages.
#
# bw (default), 4 MiB to 64 MiB: zc_sendrecv_perf -u (one way) against
#   -t tag_bw, in MiB/s.  Both stream: tag_bw posts its sends without
#   waiting, zc_sendrecv_perf keeps WINDOW messages in flight (-W; 1 waits
#   for each, as nccl-tests does).
# lat, 8 B to 64 KiB: zc_sendrecv_perf -P (a ping-pong of zc_send/zc_recv,
#   half a round trip) against -t tag_lat (half a round trip), in
#   microseconds.
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
window=${3:-16}
mode=${4:-bw}
alloc=${5:-malloc}
port=$((20000 + $$ % 20000))
case $mode in
bw) sizes=(4194304 16777216 67108864) test=tag_bw iters=100 column=7 unit=MiB/s ;;
lat) sizes=(8 64 512 4096 32768 65536) test=tag_lat iters=20000 column=5 unit=us ;;
*) echo "usage: $0 [BUILD_DIR] [ROUNDS] [WINDOW] [bw|lat] [malloc|huge]" >&2; exit 2 ;;
esac
case $alloc in
malloc) zc_alloc=() ucx_alloc=() ;;
huge) zc_alloc=(-H) ucx_alloc=(UCX_ALLOC_PRIO=thp) ;;
*) echo "usage: $0 [BUILD_DIR] [ROUNDS] [WINDOW] [bw|lat] [malloc|huge]" >&2; exit 2 ;;
esac

ucx_once() {  # size, extra flags -> the "Final:" line's overall bandwidth or latency
    env UCX_TLS=self,sm,tcp "${ucx_alloc[@]}" ucx_perftest -t $test -s "$1" -n $iters -w 100 -p "$port" $2 \
        >/dev/null 2>&1 &
    local server=$!
    sleep 0.3
    env UCX_TLS=self,sm,tcp "${ucx_alloc[@]}" ucx_perftest 127.0.0.1 -t $test -s "$1" -n $iters -w 100 -p "$port" $2 \
        2>/dev/null | awk -v c=$column '/^Final:/ { print $c }'
    wait "$server" || true
}

ucx_best() {  # the better of polling and sleeping
    local poll sleep
    poll=$(ucx_once "$1" ""); sleep=$(ucx_once "$1" "-E sleep")
    awk -v a="${poll:-0}" -v b="${sleep:-0}" -v m=$mode \
        'BEGIN { if (m == "lat") print (a < b ? a : b); else print (a > b ? a : b) }'
}

zc_once() {  # size -> MiB/s from zc_sendrecv_perf's algbw (GB/s, 1e9 bytes), or its time
    if [ $mode = bw ]; then
        mpirun --allow-run-as-root -np 2 "$build/tools/zc_sendrecv_perf" -u -W "$window" "${zc_alloc[@]}" \
            -b "$1" -e "$1" -n $((iters / window + 1)) -w 10 -c 0 2>/dev/null |
            awk -v s="$1" '$1 == s { printf "%.1f\n", $5 * 1e9 / 1048576 }'
    else
        mpirun --allow-run-as-root -np 2 "$build/tools/zc_sendrecv_perf" -P "${zc_alloc[@]}" \
            -b "$1" -e "$1" -n $iters -w 100 -c 0 2>/dev/null |
            awk -v s="$1" '$1 == s { print $4 }'
    fi
}

declare -A ratios
echo "# $mode${window:+, zc window $window}, $alloc buffers; load average at start: $(cut -d" " -f1-3 /proc/loadavg)"
printf "%-6s %10s %14s %14s %7s\n" round size "zc $unit" "ucx $unit" ratio
for ((r = 1; r <= rounds; r++)); do
    for s in "${sizes[@]}"; do
        u=$(ucx_best "$s"); z=$(zc_once "$s")
        ratio=$(awk -v z="$z" -v u="$u" -v m=$mode \
            'BEGIN { printf "%.2f", (m == "lat" ? u / z : z / u) }')
        ratios[$s]+="$ratio "
        printf "%-6s %10s %14s %14s %7s\n" "$r" "$s" "$z" "$u" "$ratio"
    done
done
for s in "${sizes[@]}"; do
    echo "${ratios[$s]}" | tr ' ' '\n' | grep . | sort -n |
        awk -v s="$s" '{ v[NR] = $1 } END { printf "median ratio at %s bytes: %.2f\n", s, v[int((NR + 1) / 2)] }'
done
echo "# load average at end: $(cut -d" " -f1-3 /proc/loadavg)"
