#!/bin/bash
# zc_sendrecv_perf's modes on 2 plain processes (ZC_RANK/ZC_SIZE): the ring
# exchange, one way with a window, and the ping-pong of -P each move the
# data they claim (-c 1: zero wrong elements, one row per size, exit 0),
# and so does one way from and into zc_host_alloc's huge-page buffers (-H,
# 512 KiB to 8 MiB); -P with -u is refused with exit status 2.
set -u
tool=${ZC_SENDRECV_PERF:-tools/zc_sendrecv_perf}
. "${ZC_TEST_SRCDIR:-$(dirname "$0")}/two_ranks.sh" || { echo "Bail out! no two_ranks.sh"; exit 1; }
echo "1..5"
n=0

check_mode() {  # name, args...
    local name=$1
    shift
    n=$((n + 1))
    run2 "$tool" -b 8 -e 64K -f 8 -n 50 -w 5 -c 1 "$@"
    local rows wrong
    rows=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 7' | wc -l)
    wrong=$(echo "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 7 { s += $7 } END { print s + 0 }')
    if [ "$rc0" = 0 ] && [ "$rc1" = 0 ] && [ "$rows" = 5 ] && [ "$wrong" = 0 ] &&
        echo "$out" | grep -q "Out of bounds values : 0 OK"; then
        echo "ok $n - $name: 5 sizes, 0 wrong elements"
    else
        echo "not ok $n - $name: exit $rc0/$rc1, $rows rows, $wrong wrong"
        echo "$out" | sed 's/^/# /'
    fi
}

check_mode "ring exchange (zc_sendrecv)"
check_mode "one way, window 4" -u -W 4
check_mode "ping-pong (-P)" -P
check_mode "one way, window 4, huge-page buffers (-H)" -u -W 4 -H -b 512K -e 8M -f 2 -n 5

n=$((n + 1))
"$tool" -P -u >/dev/null 2>"${TMPDIR:-/tmp}/zc_srp.$$"
rc=$?
if [ $rc = 2 ] && grep -q -- "-P and -u" "${TMPDIR:-/tmp}/zc_srp.$$"; then
    echo "ok $n - -P with -u is refused (exit 2)"
else
    echo "not ok $n - -P with -u: exit $rc, $(cat "${TMPDIR:-/tmp}/zc_srp.$$")"
fi
rm -f "${TMPDIR:-/tmp}/zc_srp.$$"
