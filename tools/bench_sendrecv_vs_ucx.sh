#!/usr/bin/env bash
# Intra-node 2-rank bandwidth: zc_sendrecv_perf -u (one way, blocking
# waits) against ucx_perftest -t tag_bw in the same run, interleaved ROUNDS
# times; the baseline is the better of ucx_perftest's busy polling and its
# sleeping wait (-E sleep), both with libzcomm's transports
# (UCX_TLS=self,sm,tcp).  Prints each measurement and the median ratio.
#   tools/bench_sendrecv_vs_ucx.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
sizes=(4194304 16777216 67108864)
port=$((20000 + $$ % 20000))

ucx_once() {  # size, extra flags -> MiB/s from the "Final:" line (overall bandwidth)
    UCX_TLS=self,sm,tcp ucx_perftest -t tag_bw -s "$1" -n 100 -w 10 -p "$port" $2 >/dev/null 2>&1 &
    local server=$!
    sleep 0.3
    UCX_TLS=self,sm,tcp ucx_perftest 127.0.0.1 -t tag_bw -s "$1" -n 100 -w 10 -p "$port" $2 \
        2>/dev/null | awk '/^Final:/ { print $7 }'
    wait "$server" || true
}

ucx_mibs() {  # the better of polling and sleeping
    local poll sleep
    poll=$(ucx_once "$1" ""); sleep=$(ucx_once "$1" "-E sleep")
    awk -v a="${poll:-0}" -v b="${sleep:-0}" 'BEGIN { print (a > b ? a : b) }'
}

zc_mibs() {  # size -> MiB/s from zc_sendrecv_perf's algbw (GB/s, 1e9 bytes)
    mpirun --allow-run-as-root -np 2 "$build/tools/zc_sendrecv_perf" -u -b "$1" -e "$1" \
        -n 100 -w 10 -c 0 2>/dev/null | awk -v s="$1" '$1 == s { printf "%.1f\n", $5 * 1e9 / 1048576 }'
}

declare -A ratios
printf "%-6s %10s %14s %14s %7s\n" round size "zc MiB/s" "ucx MiB/s" ratio
for ((r = 1; r <= rounds; r++)); do
    for s in "${sizes[@]}"; do
        u=$(ucx_mibs "$s"); z=$(zc_mibs "$s")
        ratio=$(awk -v z="$z" -v u="$u" 'BEGIN { printf "%.2f", z / u }')
        ratios[$s]+="$ratio "
        printf "%-6s %10s %14s %14s %7s\n" "$r" "$s" "$z" "$u" "$ratio"
    done
done
for s in "${sizes[@]}"; do
    echo "${ratios[$s]}" | tr ' ' '\n' | grep . | sort -n |
        awk -v s="$s" '{ v[NR] = $1 } END { printf "median ratio at %s bytes: %.2f\n", s, v[int((NR + 1) / 2)] }'
done
