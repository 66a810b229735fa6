#!/bin/bash
# zc_cluster_mpirun.sh: run an Open MPI job across the nodes of an emulated
# cluster (tests/cluster/zc_cluster), for MPI baselines measured on the same
# NICs as libzcomm.  Give it to zc_cluster as the command, with one zc_cluster
# rank per node:
#
#   zc_cluster -N 2 -K 4 -R 1 -- tools/zc_cluster_mpirun.sh -n 4 \
#       [mpirun options] -- program [args]
#
# The zc_cluster rank of node 0 runs mpirun with -n ranks on every node; the
# other zc_cluster ranks exit at once (their node stays up until mpirun
# ends).  mpirun reaches the other nodes through this script as its rsh
# agent: it starts orted inside that node's network namespace, with a
# private /dev/shm, IPC namespace and host name like zc_cluster's own ranks.
# The MPI ranks see the same ZC_* variables as zc_cluster's ranks (ZC_NODE_ID
# per node), so a program may also use libzcomm (zc_comm_init_env reads
# Open MPI's rank variables).  TCP traffic between nodes is restricted to the
# emulated NICs (btl_tcp_if_include: every rail, so ob1 stripes over them).
set -u

if [ "${1:-}" = __agent ]; then
    # mpirun's rsh agent: [options] HOST command...  HOST is a node's
    # address on rail 0 (10.77.0.N+1, as zc_cluster numbers them).
    shift
    while [[ ${1:-} == -* ]]; do shift; done
    host=$1
    shift
    node=$((${host##*.} - 1))
    exec ip netns exec "$ZC_CLUSTER_ID-n$node" \
        unshare --uts --ipc --mount --propagation private \
        bash -c 'mount -t tmpfs -o mode=1777 tmpfs /dev/shm && hostname "node$1" &&
                 export ZC_NODE_ID="node$1" && shift && eval "exec $*"' _ "$node" "$@"
fi

ppn=1
if [ "${1:-}" = -n ]; then
    ppn=$2
    shift 2
fi
mpirun_args=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    mpirun_args+=("$1")
    shift
done
[ "${1:-}" = -- ] && shift
if [ $# -eq 0 ] || [ -z "${ZC_CLUSTER_ID:-}" ]; then
    echo "usage (as the command of zc_cluster -R 1): $0 [-n RANKS_PER_NODE] [mpirun options] -- program [args]" >&2
    exit 2
fi
[ "$ZC_RANK" = 0 ] || exit 0

nodes=$((ZC_SIZE / ZC_LOCAL_SIZE))
hosts=
for ((n = 0; n < nodes; n++)); do
    hosts+="${hosts:+,}${ZC_MASTER_ADDR%.*}.$((n + 1)):$ppn"
done
# The MPI job numbers its own ranks: zc_cluster's must not leak into it.
unset ZC_RANK ZC_SIZE ZC_LOCAL_RANK ZC_LOCAL_SIZE
# Every node's ranks share this machine's cores: without yielding, Open MPI's
# busy polling starves the other ranks (80 ms for a 64-byte alltoallv of 8
# ranks on 2 cores instead of 2 ms).
exec mpirun --allow-run-as-root --bind-to none -n $((nodes * ppn)) --host "$hosts" \
    --mca mpi_yield_when_idle 1 \
    --mca plm_rsh_agent "bash $(readlink -f "$0") __agent" \
    --mca btl_tcp_if_include "$UCX_NET_DEVICES" --mca oob_tcp_if_include "${UCX_NET_DEVICES%%,*}" \
    "${mpirun_args[@]}" "$@"
