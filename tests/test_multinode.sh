#!/bin/bash
# The multi-node rank programs (tests/mn_*) on the emulated cluster: 2 nodes
# x 4 NICs x 4 ranks, each NIC a rate-limited veth.  Rank 0 prints the TAP
# of every case (failures of all ranks summed); this script passes it on,
# one program after another; then faults mid-transfer (tests/mn_faults).
# Skips when namespaces cannot be made.
set -u
srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
cluster=$srcdir/cluster/zc_cluster
. "$srcdir/tap_lines.sh"
programs=(mn_routed mn_alltoallv mn_ring_attn mn_soak)

probe=zc-mn-probe-$$
if [ "$(id -u)" != 0 ] || ! ip netns add "$probe" 2>/dev/null; then
    echo "1..0 # SKIP not root or no netns"
    exit 0
fi
ip netns del "$probe"

n=0
failed=0
logs=$(mktemp -d "${TMPDIR:-/tmp}/test_multinode.XXXXXX")
trap 'rm -rf "$logs"' EXIT
for prog in "${programs[@]}"; do
    out=$logs/$prog
    bash "$cluster" -N 2 -K 4 -R 4 -t 300 -q -o "$out" -- "./tests/$prog" >"$logs/$prog.cluster" 2>&1
    status=$?
    # Renumber rank 0's TAP lines into this script's sequence.
    zc_tap_lines "$prog: " <(cat "$out/rank0.log" 2>/dev/null)
    n=$((n + 1))
    if [ "$status" = 0 ]; then
        echo "ok $n - $prog: every rank exited 0"
    else
        failed=$((failed + 1))
        echo "not ok $n - $prog: the cluster run failed ($status)"
        sed 's/^/# /' "$logs/$prog.cluster" | tail -20
        for f in "$out"/rank*.log; do grep -h "check failed\|error" "$f" | head -5 | sed 's/^/# /'; done
    fi
done

# Rails at 200, 200, 100 and 50 Mbit/s (tests/mn_rails): shares follow the
# rates; rail 1's NIC goes down mid-call and comes back.  ZC_LOG_LEVEL=info
# logs the rail going out and back, with the reason, on every rank.
out=$logs/rails
bash "$cluster" -N 2 -K 4 -R 4 --rate 200mbit,200mbit,100mbit,50mbit -t 600 -q \
    -x ZC_LOG_LEVEL=info -o "$out" -- ./tests/mn_rails >"$out.cluster" 2>&1
status=$?
zc_tap_lines "mn_rails: " <(cat "$out/rank0.log" 2>/dev/null)
n=$((n + 1))
outs=$(cat "$out"/rank*.log 2>/dev/null | grep -c "rail 1 to node [01] out: ")
backs=$(cat "$out"/rank*.log 2>/dev/null | grep -c "rail 1 to node [01] back: ")
if [ "$status" = 0 ] && [ "$outs" -ge 8 ] && [ "$backs" -ge 1 ]; then
    echo "ok $n - mn_rails: every rank exited 0; ZC_LOG_LEVEL=info: $outs ranks logged rail 1 out, $backs back"
else
    failed=$((failed + 1))
    echo "not ok $n - mn_rails: status $status, $outs ranks logged rail 1 out (want 8), $backs back"
    sed 's/^/# /' "$out.cluster" | tail -10
fi

# Faults mid-transfer: every survivor returns (an error or its finished
# part) within ZC_TIMEOUT, the destination never claims success with
# missing data; rank 1 is the one killed.
for mode in kill nicdown; do
    out=$logs/faults-$mode
    # After a fault, operations UCX cannot cancel keep their lanes and
    # staging buffers until exit (on purpose): no leak report for them.
    bash "$cluster" -N 2 -K 4 -R 4 -t 120 -q -x ZC_TIMEOUT=5000 \
        -x LSAN_OPTIONS=detect_leaks=0 -o "$out" -- \
        ./tests/mn_faults "$mode" >"$out.cluster" 2>&1
    bad=""
    for f in "$out"/rank*.exit; do
        r=${f##*/rank}; r=${r%.exit}
        code=$(cat "$f" 2>/dev/null || echo missing)
        if [ "$mode" = kill ] && [ "$r" = 1 ]; then
            [ "$code" = 0 ] && bad="$bad rank1-survived"
        elif [ "$code" != 0 ]; then
            bad="$bad rank$r=$code"
        fi
    done
    [ -e "$out/rank7.exit" ] || bad="$bad no-logs"
    n=$((n + 1))
    if [ -z "$bad" ]; then
        echo "ok $n - routed transfer, $mode mid-transfer: every survivor returns cleanly"
    else
        failed=$((failed + 1))
        echo "not ok $n - routed transfer, $mode mid-transfer:$bad"
        grep -h "zc_wait\|failed" "$out"/rank*.log 2>/dev/null | sed 's/^/# /' | head -20
    fi
done

# Random kills (tests/fault_soak.sh, 2 nodes x 2 NICs x 2 ranks): in each
# of 3 fresh communicators a rank SIGKILLs itself at a moment its seed picks
# during repeated 32 MiB zc_routed_sendrecv / zc_remap_alltoallv calls;
# every survivor must return ZC_ERR_PEER_FAILED or ZC_ERR_TIMEOUT, never
# abort inside UCX (UCX 1.13's tcp completed a zero-copy send twice:
# `comp->count > 0` failed), never hang.  Fixed seeds: which rank and when
# is the same every run; no time is checked.
soak=$(bash "$srcdir/fault_soak.sh" -n 3 -e 3 -s "${ZC_FAULT_SEED:-4}" -b . 2>&1)
while IFS= read -r line; do
    case $line in
    "ok "*|"FAIL "*)
        n=$((n + 1))
        rest=${line#* }; rest=${rest#* }
        if [ "${line%% *}" = ok ]; then
            echo "ok $n - random kill: $rest"
        else
            failed=$((failed + 1))
            echo "not ok $n - random kill: $rest"
        fi ;;
    "#"*) echo "$line" ;;
    esac
done <<<"$soak"
if ! echo "$soak" | grep -q "^ok \|^FAIL "; then
    n=$((n + 1)); failed=$((failed + 1))
    echo "not ok $n - random kills did not run"
    echo "$soak" | sed 's/^/# /' | head -10
fi

# Four cells of the fault matrix (tests/fault_matrix.sh; docs/TESTING.md has
# them all): during ring attention's backward a peer SIGSTOPs (the survivors
# time out), a NIC drops to 10% of its rate (every call still completes,
# byte-exact), one NIC of two goes down (every call still completes,
# byte-exact, over the other), a rank asks for another mode
# (ZC_ERR_MISMATCH everywhere).
matrix=$(bash "$srcdir/fault_matrix.sh" -b . -c ring_bwd -f "stop slow nicdown disagree" 2>&1)
while IFS= read -r line; do
    case $line in
    "| ring_bwd |"*)
        n=$((n + 1))
        cell=$(echo "$line" |
            awk -F' [|] ' '{ print "ring_bwd, " $2 ": survivors " $3 " (slowest " $4 "), the other rank " $6 ", wrong " $7 }')
        case $line in
        *"| pass |") echo "ok $n - fault matrix: $cell" ;;
        *) failed=$((failed + 1)); echo "not ok $n - fault matrix: $cell: ${line##*| FAIL}" ;;
        esac ;;
    esac
done <<<"$matrix"
if ! echo "$matrix" | grep -q "^| ring_bwd |"; then
    n=$((n + 1)); failed=$((failed + 1))
    echo "not ok $n - the fault matrix did not run"
    echo "$matrix" | sed 's/^/# /' | head -10
fi

echo "1..$n"
[ "$failed" = 0 ]
