#!/usr/bin/env bash
# Intra-node 2-rank point-to-point against ucx_perftest in the same run,
# interleaved ROUNDS times, both with libzcomm's transports
# (UCX_TLS=self,sm,tcp); the baseline is ucx_perftest's busy polling or
# its sleeping wait (-E sleep), whichever has the better median over the
# rounds.  Prints each measurement, the median ratio per size (above 1:
# libzcomm better) and the load average.  (Taking the better mode round by
# round instead, as this script did before, compares one libzcomm sample
# with the best of two noisy ones; that median is printed too.)
#
#   tools/bench_sendrecv_vs_ucx.sh [BUILD_DIR] [ROUNDS] [WINDOW] [bw|lat] [malloc|huge] [cores|free]
#
# The buffers: malloc (default; ucx_perftest's default allocation, SysV
# shared memory segments from UCX, has 4 KiB pages too and moves at the
# same speed as UCX_ALLOC_PRIO=heap, copied in the kernel as libzcomm's
# are: BENCHMARKS.md, "Point-to-point") or huge: zc_sendrecv_perf -H
# (zc_host_alloc) against ucx_perftest with UCX_ALLOC_PRIO=thp, both backed
# by huge pages.
#
# bw (default), 4 MiB to 64 MiB: zc_sendrecv_perf -u (one way) against
#   -t tag_bw, in MiB/s.  Both stream: tag_bw posts its sends without
#   waiting, zc_sendrecv_perf keeps WINDOW messages in flight (-W; 1 waits
#   for each, as nccl-tests does).
# lat, 8 B to 64 KiB: zc_sendrecv_perf -P (a ping-pong of zc_send/zc_recv,
#   half a round trip) against -t tag_lat (half a round trip), in
#   microseconds.
#
# The placement, the same for both: cores (default: each process bound to a
# core of its own, mpirun's default --bind-to core, ucx_perftest's server
# and client under taskset on the first two CPUs this shell may use) or
# free (mpirun --bind-to none and ucx_perftest unbound: the kernel places
# both).  Earlier runs bound libzcomm's ranks and left ucx_perftest free.
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
window=${3:-16}
mode=${4:-bw}
alloc=${5:-malloc}
place=${6:-cores}
port=$((20000 + $$ % 20000))
case $mode in
bw) sizes=(4194304 16777216 67108864) test=tag_bw column=7 unit=MiB/s ;;
lat) sizes=(8 64 512 4096 32768 65536) test=tag_lat column=5 unit=us ;;
*) echo "usage: $0 [BUILD_DIR] [ROUNDS] [WINDOW] [bw|lat] [malloc|huge] [cores|free]" >&2; exit 2 ;;
esac
case $alloc in
malloc) zc_alloc=() ucx_alloc=() ;;
huge) zc_alloc=(-H) ucx_alloc=(UCX_ALLOC_PRIO=thp) ;;
*) echo "usage: $0 [BUILD_DIR] [ROUNDS] [WINDOW] [bw|lat] [malloc|huge] [cores|free]" >&2; exit 2 ;;
esac
case $place in
free) zc_bind=(--bind-to none) ucx_server=() ucx_client=() ;;
cores)
    # The first two CPUs of this shell's affinity list ("0-3,8" -> 0 1).
    read -r cpu0 cpu1 < <(awk '/^Cpus_allowed_list/ { n = split($2, r, ",")
        for (i = 1; i <= n; i++) { split(r[i], b, "-"); hi = b[2] == "" ? b[1] : b[2]
            for (c = b[1]; c <= hi; c++) printf "%d ", c }; print "" }' /proc/self/status)
    if [ -z "${cpu1:-}" ]; then echo "$0: cores needs 2 CPUs" >&2; exit 2; fi
    zc_bind=(--bind-to core) ucx_server=(taskset -c "$cpu0") ucx_client=(taskset -c "$cpu1") ;;
*) echo "usage: $0 [BUILD_DIR] [ROUNDS] [WINDOW] [bw|lat] [malloc|huge] [cores|free]" >&2; exit 2 ;;
esac

# Messages timed per measurement, and for warm-up: bw moves 2 GiB (and a
# quarter of that first), so that a measurement under load spans many of
# the scheduler's slices (100 messages of 4 MiB, as before, took 40 ms).
iters() { if [ "$mode" = lat ]; then echo 20000; else echo $(((1 << 31) / $1)); fi; }
warmup() { if [ "$mode" = lat ]; then echo 100; else echo $(($(iters "$1") / 4)); fi; }
windows() { local n=$(($1 / window)); echo $((n > 0 ? n : 1)); }  # messages -> iterations of -W

ucx_once() {  # size, extra flags -> the "Final:" line's overall bandwidth or latency
    "${ucx_server[@]}" env UCX_TLS=self,sm,tcp "${ucx_alloc[@]}" ucx_perftest -t $test -s "$1" -n "$(iters "$1")" -w "$(warmup "$1")" -p "$port" $2 \
        >/dev/null 2>&1 &
    local server=$!
    sleep 0.3
    "${ucx_client[@]}" env UCX_TLS=self,sm,tcp "${ucx_alloc[@]}" ucx_perftest 127.0.0.1 -t $test -s "$1" -n "$(iters "$1")" -w "$(warmup "$1")" -p "$port" $2 \
        2>/dev/null | awk -v c=$column '/^Final:/ { print $c }'
    wait "$server" || true
}

zc_once() {  # size -> MiB/s from zc_sendrecv_perf's algbw (GB/s, 1e9 bytes), or its time
    if [ $mode = bw ]; then
        mpirun --allow-run-as-root "${zc_bind[@]}" -np 2 "$build/tools/zc_sendrecv_perf" -u -W "$window" "${zc_alloc[@]}" \
            -b "$1" -e "$1" -n "$(windows "$(iters "$1")")" -w "$(windows "$(warmup "$1")")" -c 0 2>/dev/null |
            awk -v s="$1" '$1 == s { printf "%.1f\n", $5 * 1e9 / 1048576 }'
    else
        mpirun --allow-run-as-root "${zc_bind[@]}" -np 2 "$build/tools/zc_sendrecv_perf" -P "${zc_alloc[@]}" \
            -b "$1" -e "$1" -n "$(iters "$1")" -w "$(warmup "$1")" -c 0 2>/dev/null |
            awk -v s="$1" '$1 == s { print $4 }'
    fi
}

declare -A zc poll sleep
echo "# $mode${window:+, zc window $window}, $alloc buffers, $place placement; load average at start: $(cut -d" " -f1-3 /proc/loadavg)"
printf "%-6s %10s %14s %14s %14s\n" round size "zc $unit" "ucx poll" "ucx sleep"
for ((r = 1; r <= rounds; r++)); do
    for s in "${sizes[@]}"; do
        p=$(ucx_once "$s" ""); q=$(ucx_once "$s" "-E sleep"); z=$(zc_once "$s")
        poll[$s]+="${p:-nan} " sleep[$s]+="${q:-nan} " zc[$s]+="${z:-nan} "
        printf "%-6s %10s %14s %14s %14s\n" "$r" "$s" "$z" "$p" "$q"
    done
done
for s in "${sizes[@]}"; do
    awk -v s="$s" -v m="$mode" -v zs="${zc[$s]}" -v ps="${poll[$s]}" -v qs="${sleep[$s]}" '
        function median(a, n,   i, j, t) {  # sorts a[1..n]
            for (i = 2; i <= n; i++)
                for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return a[int((n + 1) / 2)]
        }
        function better(a, b) { return m == "lat" ? (a < b ? a : b) : (a > b ? a : b) }
        function ratio(z, u) { return m == "lat" ? u / z : z / u }
        BEGIN {
            n = split(zs, z, " "); split(ps, p, " "); split(qs, q, " ")
            for (i = 1; i <= n; i++) { a[i] = p[i]; b[i] = q[i] }
            mp = median(a, n); mq = median(b, n)
            mode = better(mp, mq) == mp ? "polling" : "sleep"
            for (i = 1; i <= n; i++) {
                r1[i] = ratio(z[i], mode == "polling" ? p[i] : q[i])
                r2[i] = ratio(z[i], better(p[i], q[i]))
            }
            printf "median ratio at %s bytes: %.2f (ucx_perftest %s, median %s %s); against the better mode of each round: %.2f\n",
                   s, median(r1, n), mode, mode == "polling" ? mp : mq, m == "lat" ? "us" : "MiB/s", median(r2, n)
        }'
done
echo "# load average at end: $(cut -d" " -f1-3 /proc/loadavg)"
