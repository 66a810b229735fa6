#!/bin/bash
# TAP test of the emulated cluster (tests/cluster/zc_cluster): the environment
# of every rank, the NICs of a node, shared memory within a node and not
# across nodes, failing and timed-out ranks, and that every run leaves no
# namespace, interface or process behind, also when interrupted or killed.
set -u

ZC_CLUSTER=${ZC_TEST_SRCDIR:-$(dirname "$0")}/cluster/zc_cluster
TESTS=45
N=0
FAILED=0

ok() {  # condition-status description [diagnostic]
    N=$((N + 1))
    if [ "$1" = 0 ]; then
        echo "ok $N - $2"
    else
        echo "not ok $N - $2"
        FAILED=$((FAILED + 1))
        [ -n "${3:-}" ] && printf '%s\n' "$3" | sed 's/^/# /'
    fi
}

probe=zc-probe-$$
if [ "$(id -u)" != 0 ] || ! ip netns add "$probe" 2>/dev/null; then
    echo "1..0 # SKIP not root or no netns"
    exit 0
fi
ip netns del "$probe"
if ! command -v setpriv >/dev/null || ! command -v tc >/dev/null; then
    echo "1..0 # SKIP setpriv or tc missing"
    exit 0
fi

OUT=$(mktemp -d "${TMPDIR:-/tmp}/test_cluster.XXXXXX")
export TMPDIR=$OUT   # zc_cluster keeps the logs of failed runs there
STRAY=$((700000 + $$ % 100000))   # "sleep $STRAY" marks processes ranks leave behind
trap 'pkill_strays; rm -rf "$OUT"' EXIT

# Written by the ranks: the environment and what a node looks like from inside.
cat >"$OUT/rank.sh" <<'EOF'
# usage: rank.sh MODE (env | shm | stray)
barrier() {  # name: wait until every rank reached it
    local i
    : >"$OUT/$1.$ZC_RANK"
    for ((i = 0; i < 400; i++)); do
        set -- "$1" "$OUT/$1".*
        [ $(($# - 1)) -ge "$ZC_SIZE" ] && return 0
        set -- "$1"
        sleep 0.05
    done
    echo "barrier $1 timed out" >&2
    exit 9
}
r=$ZC_RANK
echo "$ZC_CLUSTER_ID" >"$OUT/run"
case $1 in
env)
    { env | grep -E "^(ZC_($VARS)|UCX_(TLS|NET_DEVICES))=" | sort
      echo "hostname=$(hostname)"
      ip -4 -o addr show dev "$ZC_SOCKET_IFNAME" | awk '{ print "socket_addr=" $4 }'
      for nic in ${ZC_NIC_NETDEV//,/ }; do
          ip -4 -o addr show dev "${nic#*=}" | awk -v n="${nic%%=*}" '{ print n "_addr=" $4 }'
      done
      echo "links=$(ip -o link show | grep -vc ' lo:')"
    } >"$OUT/env.$r"
    [ "$r" = 0 ] && cp "$ZC_TOPO_FILE" "$OUT/topo.xml"
    if [ "$ZC_NODE_ID" = node1 ] && [ "$ZC_LOCAL_RANK" = 0 ]; then
        # A closed port answers "refused" only if the address is reachable.
        for a in 10.77.0.1 10.77.1.1 "$HOSTADDR"; do
            echo "$a: $(timeout 5 bash -c "exec 3<>/dev/tcp/$a/9" 2>&1 |
                        grep -o 'refused\|unreachable' | head -1)"
        done >"$OUT/reach"
    fi ;;
shm)
    echo "$r" >"/dev/shm/zc_test.$r"
    ipcmk -M 4096 >/dev/null
    ipcs -m | awk '$2 ~ /^[0-9]+$/ { print $1 }' >"$OUT/key.$r"
    barrier made
    (cd /dev/shm && ls -d zc_test.*) | sort >"$OUT/files.$r"
    ipcs -m | awk '$2 ~ /^[0-9]+$/ { print $1 }' | sort >"$OUT/keys.$r"
    barrier seen ;;
stray)
    # A daemon the rank leaves behind, then maybe a long wait or a failure.
    sleep "$STRAY" &
    : >"$OUT/started.$r"
    [ "${2:-}" = wait ] && sleep 1000
    [ "${2:-}" = fail ] && [ "$r" = 3 ] && exit 3
    exit 0 ;;
esac
EOF

# The host's own address: a node must not reach it (TEST-NET-1 if it has none).
HOSTADDR=$(ip -4 -o addr show scope global | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
VARS='NODE_ID|RANK|SIZE|LOCAL_RANK|LOCAL_SIZE|MASTER_ADDR|MASTER_PORT|SOCKET_IFNAME|NIC_NETDEV|TOPO_FILE'
ENV=(-x OUT="$OUT" -x STRAY="$STRAY" -x HOSTADDR="${HOSTADDR:-192.0.2.1}" -x VARS="$VARS")
cluster() { bash "$ZC_CLUSTER" "${ENV[@]}" "$@"; }
reset_out() { rm -f "$OUT"/env.* "$OUT"/run "$OUT"/started.* "$OUT"/made.* "$OUT"/seen.*; }
count_strays() { pgrep -cxf "sleep $STRAY"; }
count_files() { [ -e "$1" ] && echo $# || echo 0; }   # of a glob's expansion
pkill_strays() { pkill -KILL -xf "sleep $STRAY" 2>/dev/null; return 0; }

# Nothing of run $1 is left: namespaces, links in the root namespace, state,
# and the processes its ranks started.
check_gone() {  # run-id description
    local left
    left=$(ip netns list | grep "^$1-"; ip -o link show | grep "$1-"; ls -d "/run/zc_cluster/$1" 2>/dev/null)
    ok $(( ! (${#1} == 7 && ${#left} == 0) )) "$2: no namespace, link or state of run '$1' left" "$left"
    ok "$(( $(count_strays) != 0 ))" "$2: no process of its ranks left" "$(pgrep -axf "sleep $STRAY")"
}

echo "1..$TESTS"

# --- arguments
out=$(cluster -N 5 true 2>&1); rc=$?
ok $(( rc != 2 )) "-N 5 is refused with exit 2" "rc=$rc $out"
ok "$(echo "$out" | grep -q -- '--nodes must be an integer from 2 to 4'; echo $?)" \
   "the message names --nodes and its range" "$out"

# --- environment of every rank (2 nodes x 2 NICs x 2 ranks)
reset_out
out=$(cluster -N 2 -K 2 -R 2 -t 30 -q bash "$OUT/rank.sh" env 2>&1); rc=$?
ok $rc "2x2x2 run of a passing command exits 0" "$out"
run=$(cat "$OUT/run" 2>/dev/null)
port=$(sed -n 's/^ZC_MASTER_PORT=//p' "$OUT/env.0" 2>/dev/null)
dev0=$(sed -n 's/^ZC_SOCKET_IFNAME=//p' "$OUT/env.0" 2>/dev/null)
dev1=${dev0%r0}r1
for r in 0 1 2 3; do
    node=$((r / 2))
    expect="UCX_NET_DEVICES=$dev0,$dev1
UCX_TLS=self,sm,tcp
ZC_LOCAL_RANK=$((r % 2))
ZC_LOCAL_SIZE=2
ZC_MASTER_ADDR=10.77.0.1
ZC_MASTER_PORT=$port
ZC_NIC_NETDEV=mlx5_0=$dev0,mlx5_1=$dev1
ZC_NODE_ID=node$node
ZC_RANK=$r
ZC_SIZE=4
ZC_SOCKET_IFNAME=$dev0
ZC_TOPO_FILE=/run/zc_cluster/$run/topo.xml
hostname=node$node
socket_addr=10.77.0.$((node + 1))/24
mlx5_0_addr=10.77.0.$((node + 1))/24
mlx5_1_addr=10.77.1.$((node + 1))/24
links=2"
    got=$(cat "$OUT/env.$r" 2>/dev/null)
    ok "$([ "$got" = "$expect" ] && [[ $port =~ ^[0-9]+$ ]] && [[ $dev0 == "$run-r0" ]]; echo $?)" \
       "rank $r: node, rank, master, NIC and UCX variables; its node's addresses" \
       "$(diff <(echo "$expect") <(echo "$got"))"
done
ok "$(grep -qx '10.77.0.1: refused' "$OUT/reach" && grep -qx '10.77.1.1: refused' "$OUT/reach"; echo $?)" \
   "node1 reaches node0 over rail 0 and rail 1" "$(cat "$OUT/reach" 2>/dev/null)"
ok "$(grep -qx "${HOSTADDR:-192.0.2.1}: unreachable" "$OUT/reach"; echo $?)" \
   "node1 does not reach the host's address ${HOSTADDR:-192.0.2.1}" "$(cat "$OUT/reach" 2>/dev/null)"
if command -v lstopo-no-graphics >/dev/null; then
    topo=$(lstopo-no-graphics -v --input "$OUT/topo.xml" 2>&1)
    ok "$([ "$(echo "$topo" | grep -c 'OpenFabrics')" = 2 ] &&
          [ "$(echo "$topo" | grep -c 'id=10de:[0-9a-f]* class=0302')" = 2 ]; echo $?)" \
       "ZC_TOPO_FILE loads in hwloc with 2 OpenFabrics NICs and 2 GPUs (10de, class 0302)" "$topo"
else
    echo "ok $((N += 1)) # SKIP lstopo-no-graphics not installed"
fi
check_gone "$run" "after a passing run"

# --- shared memory: within a node yes, across nodes no
reset_out
rm -f "$OUT"/files.* "$OUT"/keys.* "$OUT"/key.*
out=$(cluster -N 2 -K 1 -R 2 -t 30 -q bash "$OUT/rank.sh" shm 2>&1); rc=$?
ok $rc "2x1x2 run creating /dev/shm files and SysV segments exits 0" "$out"
for r in 0 1 2 3; do
    node=$((r / 2))
    mates="zc_test.$((2 * node))
zc_test.$((2 * node + 1))"
    ok "$([ "$(cat "$OUT/files.$r" 2>/dev/null)" = "$mates" ]; echo $?)" \
       "rank $r sees in /dev/shm the files of its node's ranks and no others" "$(cat "$OUT/files.$r" 2>/dev/null)"
    keys=$(cat "$OUT/key.$((2 * node))" "$OUT/key.$((2 * node + 1))" 2>/dev/null | sort -u)
    ok "$([ -n "$keys" ] && [ "$(cat "$OUT/keys.$r" 2>/dev/null)" = "$keys" ]; echo $?)" \
       "rank $r sees the SysV segments of its node's ranks and no others" \
       "seen: $(tr '\n' ' ' <"$OUT/keys.$r" 2>/dev/null) node's: $(echo "$keys" | tr '\n' ' ')"
done
ok "$(count_files /dev/shm/zc_test.* | grep -qx 0; echo $?)" "no rank's /dev/shm file appears on the host"
check_gone "$(cat "$OUT/run" 2>/dev/null)" "after the shared-memory run"

# --- a failing rank, a timed-out rank
reset_out
out=$(cluster -N 2 -K 2 -R 2 -t 30 bash "$OUT/rank.sh" stray fail 2>&1); rc=$?
ok $(( rc != 1 )) "a run where rank 3 exits 3 exits 1" "rc=$rc"
ok "$(echo "$out" | grep -q 'rank 3 (node1, local rank 1) failed: exit 3'; echo $?)" \
   "the failing rank is named with its exit status" "$out"
check_gone "$(cat "$OUT/run" 2>/dev/null)" "after a failing run"

reset_out
out=$(cluster -N 2 -K 1 -R 1 -t 1 bash "$OUT/rank.sh" stray wait 2>&1); rc=$?
ok "$([ $rc = 1 ] && echo "$out" | grep -q 'rank 0 (node0, local rank 0) failed: timed out after 1 s'; echo $?)" \
   "--timeout 1 fails the run and names the ranks that timed out" "rc=$rc $out"

# --- Open MPI's mpirun over the nodes (--mpi)
if command -v mpirun >/dev/null; then
    reset_out
    # shellcheck disable=SC2016 # expanded by the MPI ranks
    out=$(cluster --mpi -N 2 -K 2 -R 2 -t 60 -q -- mpirun sh -c \
          'sleep $STRAY >/dev/null 2>&1 & echo $ZC_CLUSTER_ID >"$OUT/run"
           echo "$OMPI_COMM_WORLD_RANK $(hostname) $UCX_NET_DEVICES" >"$OUT/mpi.$OMPI_COMM_WORLD_RANK"' 2>&1)
    rc=$?
    run=$(cat "$OUT/run" 2>/dev/null)
    got=$(cat "$OUT"/mpi.* 2>/dev/null)
    expect=$(for r in 0 1 2 3; do echo "$r node$((r / 2)) $run-r0,$run-r1"; done)
    ok "$([ $rc = 0 ] && [ "$got" = "$expect" ]; echo $?)" \
       "--mpi: mpirun places ranks 0,1 on node0 and 2,3 on node1, with the nodes' NICs" \
       "rc=$rc $out $(diff <(echo "$expect") <(echo "$got"))"
    check_gone "$run" "after the --mpi run"
else
    for i in 1 2 3; do echo "ok $((N += 1)) # SKIP mpirun not installed"; done
fi

# --- interrupted runs: SIGINT (Ctrl-C), SIGTERM, SIGKILL
set -m   # background jobs get their own process group and keep SIGINT
for sig in INT TERM KILL; do
    reset_out
    bash "$ZC_CLUSTER" "${ENV[@]}" -N 2 -K 2 -R 2 -t 60 -q bash "$OUT/rank.sh" stray wait \
        >"$OUT/sig.log" 2>&1 &
    pid=$!   # zc_cluster itself, leading its own process group (set -m)
    for ((i = 0; i < 200; i++)); do
        [ "$(count_files "$OUT"/started.*)" = 4 ] && break
        sleep 0.05
    done
    if [ $sig = INT ]; then
        kill -INT -- -$pid   # Ctrl-C signals the whole foreground process group
    else
        kill -s $sig $pid
    fi
    wait $pid
    rc=$?
    run=$(cat "$OUT/run" 2>/dev/null)
    case $sig in
    INT|TERM)
        if [ $sig = INT ]; then want=130; else want=143; fi
        ok $(( rc != want )) "SIG$sig while ranks run: exits $want" "rc=$rc $(cat "$OUT/sig.log")"
        check_gone "$run" "after SIG$sig" ;;
    KILL)
        for ((i = 0; i < 100; i++)); do
            [ "$(count_strays)" = 0 ] && break
            sleep 0.05
        done
        ok "$(( $(count_strays) != 0 ))" "SIGKILL of zc_cluster takes its ranks and their children along"
        ok "$(ip netns list | grep -q "^$run-"; echo $?)" "SIGKILL leaves run $run's namespaces behind"
        out=$(bash "$ZC_CLUSTER" --cleanup 2>&1)
        # Any run that starts meanwhile (make check runs tests in parallel)
        # also removes dead runs' leftovers first: either did it.
        ok "$(echo "$out" | grep -q "removing leftovers of dead run $run\|nothing to clean"; echo $?)" \
           "--cleanup removes the dead run (or a concurrent run did)" "$out"
        check_gone "$run" "after --cleanup"
        # ... and leaves a live run alone.
        rm -f "$OUT/live"
        # shellcheck disable=SC2016 # expanded by the rank
        cluster -N 2 -q -t 30 sh -c 'echo $ZC_CLUSTER_ID >"$OUT/live"; sleep 2' &
        live_pid=$!
        for ((i = 0; i < 200; i++)); do [ -s "$OUT/live" ] && break; sleep 0.05; done
        live=$(cat "$OUT/live" 2>/dev/null)
        out=$(bash "$ZC_CLUSTER" --cleanup 2>&1)
        ok "$(echo "$out" | grep -q "run ${live:-?} is alive"; echo $?)" \
           "--cleanup leaves the live run ${live:-?} alone" "$out"
        wait $live_pid
        ok $? "the live run passes despite --cleanup" ;;
    esac
done
set +m

pkill_strays
rm -rf "$OUT"
trap - EXIT
[ $N = $TESTS ] || { echo "# ran $N tests, planned $TESTS"; exit 1; }
exit $((FAILED > 0))
