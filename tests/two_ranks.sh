# Sourced by the tests that run a tool as 2 plain processes (ZC_RANK,
# ZC_SIZE, ZC_MASTER_PORT): run2 TOOL ARGS... leaves both ranks' output in
# $out and their exit statuses in $rc0 and $rc1.

run2_once() {
    local tool=$1 port=$((21000 + RANDOM % 20000)) log0 log1
    shift
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

run2() {
    # A port another job took is not the test's failure: try another.
    for _ in 1 2 3 4 5; do
        run2_once "$@"
        echo "$out" | grep -q "Address already in use" || return 0
    done
}
