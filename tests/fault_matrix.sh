#!/bin/bash
# The fault matrix: {zc_sendrecv, zc_routed_sendrecv, zc_remap_alltoallv,
# zc_ring_attn_fwd, zc_ring_attn_bwd} x {peer SIGKILL, peer SIGSTOP, one NIC
# of two down (nicdown), one NIC of four down (nicdown4), every NIC of a node
# down (alldown), a NIC's rate cut to 10%, a rank with other arguments},
# each cell one run of tests/mn_fault_matrix on a fresh emulated cluster (2
# nodes x 2 NICs x 2 ranks; 2 x 4 x 4 for nicdown4; ZC_TIMEOUT 3 s; 30 s for
# the rate cut, where TCP's retransmission backoff alone can stall a flow
# for seconds).  Prints a Markdown table row per cell: the statuses the
# survivors returned (and how many of them), the slowest survivor's time
# from the fault to its return, the slowest survivor's call times with
# every NIC up, for the call the fault struck and for the calls after it,
# the victim's status, and the wrong bytes or elements in calls that
# returned ZC_OK.
#
#   tests/fault_matrix.sh [-b BUILDDIR] [-l LOGDIR] [-c "CALLS"] [-f "FAULTS"]
#
# A cell fails when a survivor returns a status the fault does not explain,
# when any rank aborts or hangs (no RESULT line), or when any call that
# returned ZC_OK delivered wrong data.  Exit 0 when every cell passed.  Needs
# root (network namespaces); prints SKIP and exits 77 otherwise.
set -u
srcdir=$(cd "$(dirname "$0")" && pwd)
builddir=. logroot=""
calls="sendrecv routed alltoallv ring_fwd ring_bwd"
faults="kill stop nicdown nicdown4 alldown slow disagree"
while getopts "b:l:c:f:" o; do
    case $o in
    b) builddir=$OPTARG ;;
    l) logroot=$OPTARG ;;
    c) calls=$OPTARG ;;
    f) faults=$OPTARG ;;
    *) echo "usage: $0 [-b BUILDDIR] [-l LOGDIR] [-c CALLS] [-f FAULTS]" >&2; exit 2 ;;
    esac
done
prog=$builddir/tests/mn_fault_matrix
. "$srcdir/cluster/fault_common.sh" fault_matrix
timeout_ms=3000

# What a survivor may return under each fault (anything else fails).
allowed() {  # call fault -> regex of statuses
    case $2 in
    kill | stop) echo 'PEER_FAILED|TIMEOUT' ;;
    nicdown | nicdown4)
        # the collectives fail over to the rails left; point-to-point
        # messages do not (one in flight on the rail is lost)
        if [ "$1" = sendrecv ]; then echo 'OK|PEER_FAILED|TIMEOUT|TRANSPORT'; else echo 'OK'; fi ;;
    alldown) echo 'PEER_FAILED|TIMEOUT|TRANSPORT' ;;
    slow) echo 'OK' ;;
    disagree)
        # point-to-point has no agreement: only the receiver that expects
        # fewer bytes sees it (as in MPI); the collectives refuse everywhere
        if [ "$1" = sendrecv ]; then echo 'OK|MISMATCH'; else echo 'MISMATCH'; fi ;;
    esac
}

echo "| call | fault | survivors (status x count) | slowest survivor after the fault | call ms: NICs up / struck / after | victim | wrong | verdict |"
echo "|---|---|---|---:|---:|---|---:|---|"
bad=0
for c in $calls; do
    for f in $faults; do
        log=$logroot/$c-$f
        t=$timeout_ms shape=(-K 2 -R 2) ranks=4
        [ "$f" = slow ] && t=30000
        [ "$f" = nicdown4 ] && { shape=(-K 4 -R 4); ranks=8; }
        ZC_TIMEOUT=$t bash "$srcdir/cluster/zc_cluster" -N 2 "${shape[@]}" -q -t 120 \
            -o "$log" -- "$prog" "$c" "${f%4}" >"$log.out" 2>&1
        results=$(cat "$log"/rank*.log 2>/dev/null | grep '^RESULT ')
        n=$(echo "$results" | grep -c '^RESULT ')
        surv=$(echo "$results" | grep 'role=survivor' | sed 's/.*status=\([A-Z_]*\).*/\1/' |
            sort | uniq -c | awk '{ printf "%s%s x %d", (NR > 1 ? ", " : ""), $2, $1 }')
        slow=$(echo "$results" | grep 'role=survivor' | sed 's/.* ms=\(-*[0-9]*\).*/\1/' |
            sort -n | tail -1)
        times=""
        for k in up hit after; do
            v=$(echo "$results" | grep 'role=survivor' | sed -n "s/.* ${k}_ms=\([0-9]*\).*/\1/p" |
                sort -n | tail -1)
            times="$times${times:+ / }${v:-?}"
        done
        vict=$(echo "$results" | grep 'role=victim' | sed 's/.*status=\([A-Z_]*\).*/\1/')
        wrong=$(echo "$results" | sed -n 's/.*wrong=\([0-9]*\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
        verdict=pass
        want=$(allowed "$c" "$f")
        expected_ranks=$ranks
        [ "$f" = kill ] && { expected_ranks=$((ranks - 1)); vict="(killed)"; }
        if [ "$n" -ne "$expected_ranks" ]; then
            verdict="FAIL: $n of $expected_ranks ranks reported"
        elif echo "$results" | grep 'role=survivor' | grep -vqE "status=($want) "; then
            verdict="FAIL: a survivor's status is not $want"
        elif [ "$wrong" -ne 0 ]; then
            verdict="FAIL: wrong data"
        fi
        [ "$verdict" = pass ] || bad=$((bad + 1))
        printf "| %s | %s | %s | %s ms | %s | %s | %s | %s |\n" "$c" "$f" "${surv:-none}" \
            "${slow:-?}" "$times" "${vict:-none}" "$wrong" "$verdict"
    done
done
[ "$keep" = 1 ] || rm -rf "$logroot"
echo "# $bad cell(s) failed"
[ "$bad" = 0 ]
