#!/bin/bash
# zc_sendrecv_perf's modes on 2 plain processes (ZC_RANK/ZC_SIZE): the ring
# exchange, one way with a window, and the ping-pong of -P each move the
# data they claim (-c 1: zero wrong elements, one row per size, exit 0);
# -P with -u is refused with exit status 2.
set -u
tool=${ZC_SENDRECV_PERF:-tools/zc_sendrecv_perf}
echo "1..4"
n=0

run2() {  # args... -> both ranks' output in $out, exit statuses in $rc0 $rc1
    # A port another job took is not this test's failure: try another.
    for _ in 1 2 3 4 5; do
        run2_once "$@"
        echo "$out" | grep -q "Address already in use" || return
    done
}

run2_once() {
    local port=$((21000 + RANDOM % 20000)) log0 log1
    log0=$(mktemp) log1=$(mktemp)
    ZC_RANK=0 ZC_SIZE=2 ZC_MASTER_PORT=$port "$tool" "$@" >"$log0" 2>&1 &
    local p0=$!
    ZC_RANK=1 ZC_SIZE=2 ZC_MASTER_PORT=$port "$tool" "$@" >"$log1" 2>&1
    rc1=$?
    wait "$p0"
    rc0=$?
    out=$(cat "$log0" "$log1")
    rm -f "$log0" "$log1"
}

check_mode() {  # name, args...
    local name=$1
    shift
    n=$((n + 1))
    run2 -b 8 -e 64K -f 8 -n 50 -w 5 -c 1 "$@"
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

n=$((n + 1))
"$tool" -P -u >/dev/null 2>"${TMPDIR:-/tmp}/zc_srp.$$"
rc=$?
if [ $rc = 2 ] && grep -q -- "-P and -u" "${TMPDIR:-/tmp}/zc_srp.$$"; then
    echo "ok $n - -P with -u is refused (exit 2)"
else
    echo "not ok $n - -P with -u: exit $rc, $(cat "${TMPDIR:-/tmp}/zc_srp.$$")"
fi
rm -f "${TMPDIR:-/tmp}/zc_srp.$$"
