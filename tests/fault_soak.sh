#!/bin/bash
# Random kills on the emulated cluster (2 nodes x 2 NICs x 2 ranks), with
# `tests/mn_faults random SEED cycle`: per seed, a fresh communicator in
# fresh processes; the seed picks the rank that SIGKILLs itself and the
# moment (0-3 s into repeated 32 MiB zc_routed_sendrecv /
# zc_remap_alltoallv calls; routed, alltoallv or both mixed by seed % 3).
# A kill passes when the victim died of SIGKILL and every survivor exited 0:
# it got ZC_ERR_PEER_FAILED or ZC_ERR_TIMEOUT, no wrong byte in the calls
# that returned ZC_OK, no abort (UCX assertion), no hang.
#
#   tests/fault_soak.sh [-n KILLS] [-e KILLS_PER_RUN] [-s FIRST_SEED] [-b BUILDDIR]
#                       [-l LOGDIR] [-T ZC_TIMEOUT_MS] [-x VAR=VALUE]...
#
# -e: kills per cluster run (the cluster's setup costs more than a kill);
# -x passes a variable to every rank (e.g. -x UCX_ZCOPY_THRESH=auto turns
# off libzcomm's workaround for UCX 1.13's tcp, to see the abort it avoids).
# One line per kill, then a summary; exit 0 when every kill passed.  Needs
# root (network namespaces); prints "SKIP" and exits 77 otherwise.
set -u
srcdir=$(cd "$(dirname "$0")" && pwd)
kills=10 per=5 seed0=1 builddir=. logroot="" timeout_ms=30000
extra=()
while getopts "n:e:s:b:l:T:x:" o; do
    case $o in
    n) kills=$OPTARG ;;
    e) per=$OPTARG ;;
    s) seed0=$OPTARG ;;
    b) builddir=$OPTARG ;;
    l) logroot=$OPTARG ;;
    T) timeout_ms=$OPTARG ;;
    x) extra+=(-x "$OPTARG") ;;
    *) echo "usage: $0 [-n KILLS] [-e PER_RUN] [-s SEED] [-b BUILDDIR] [-l LOGDIR] [-T MS] [-x V=X]" >&2
       exit 2 ;;
    esac
done
prog=$builddir/tests/mn_faults
. "$srcdir/cluster/fault_common.sh" fault_soak
modes=(routed alltoallv mixed)
done_kills=0 pass=0 fail=0 notrun=0
declare -A outcome_count=()
while [ "$done_kills" -lt "$kills" ]; do
    first=$((seed0 + done_kills))
    e=$((kills - done_kills < per ? kills - done_kills : per))
    out=$logroot/run$first
    rm -rf "$out" "$out.sync"
    # No leak report: after a fault, operations UCX cannot cancel keep
    # their lanes until exit on purpose.
    # The ranks start each kill's epoch together through files in $out.sync.
    mkdir -p "$out.sync"
    bash "$srcdir/cluster/zc_cluster" -N 2 -K 2 -R 2 -t $((e * 550 + 60)) -q \
        -x ZC_TIMEOUT="$timeout_ms" -x ZC_FAULT_EPOCHS="$e" -x ZC_FAULT_SYNC="$out.sync" \
        -x LSAN_OPTIONS=detect_leaks=0 \
        "${extra[@]}" -o "$out" -- "$prog" random "$first" cycle >"$out.cluster" 2>&1
    # The program did not start (exit 127 everywhere: e.g. relinked under
    # it): no kill happened; run these seeds again.
    if [ "$(cat "$out"/rank*.exit 2>/dev/null | sort -u)" = 127 ]; then
        echo "# run of seeds $first.. did not start (exit 127): again"
        notrun=$((notrun + 1))
        [ "$notrun" -lt 3 ] && continue
        echo "# the program does not start: giving up"
        exit 1
    fi
    for ((seed = first; seed < first + e; seed++)); do
        done_kills=$((done_kills + 1))
        mode=${modes[seed % 3]}
        line=$(grep -h "^# seed $seed:" "$out"/rank*.log 2>/dev/null | head -1)
        victim=$(echo "$line" | sed -n 's/.*victim rank \([0-9]*\).*/\1/p')
        at=$(echo "$line" | sed -n 's/.* after \([0-9]*\) ms$/\1/p')
        bad="" statuses=""
        for r in 0 1 2 3; do
            code=$(sed -n "s/^CHILD seed=$seed rank=$r exit=\([0-9]*\)$/\1/p" "$out/rank$r.log" 2>/dev/null)
            code=${code:-missing}
            st=$(sed -n "s/^RESULT seed=$seed rank=$r status=\([A-Z_]*\) .*/\1/p" "$out/rank$r.log" 2>/dev/null)
            if [ "$r" = "${victim:-x}" ]; then
                [ "$code" = 137 ] || bad="$bad victim$r=$code"
                statuses="$statuses r$r:killed"
                continue
            fi
            statuses="$statuses r$r:${st:-none}($code)"
            [ "$code" = 0 ] || bad="$bad rank$r=$code"
            outcome_count["${st:-none}/$code"]=$(( ${outcome_count["${st:-none}/$code"]:-0} + 1 ))
        done
        [ -n "$victim" ] || bad="$bad no-victim-line"
        if [ -z "$bad" ]; then
            pass=$((pass + 1))
            echo "ok $done_kills seed=$seed $mode victim=$victim at=${at}ms:$statuses"
        else
            fail=$((fail + 1))
            keep=1
            echo "FAIL $done_kills seed=$seed $mode victim=$victim at=${at}ms:$statuses:$bad (logs: $out)"
        fi
    done
    if grep -qh "Assertion" "$out"/rank*.log 2>/dev/null; then
        grep -h "Assertion" "$out"/rank*.log | head -3 | sed 's/^/#   /'
    fi
done
echo "# kills: $done_kills, passed: $pass, failed: $fail; survivors (status/exit):"
for k in "${!outcome_count[@]}"; do echo "#   $k: ${outcome_count[$k]}"; done
[ "$keep" = 1 ] || rm -rf "$logroot"
[ "$fail" = 0 ]
