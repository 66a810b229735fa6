#!/bin/bash
# The Python package (python/zcomm) under Debian's /usr/bin/python3 with
# numpy and torch: error mapping and argument checks, the ctypes structs and
# function table against zcomm.h (a compiled probe), then on forked ranks
# point-to-point, routed transfers, alltoallv, remap and ring attention
# against single-process PyTorch, the packed-batch API (zcomm.torch:
# VarlenPlan, varlen_attn, ZeppelinAttention, from_torch over gloo, bad
# input; kernel= with zcomm.torch.kernels; CUDA tensors where there is a
# GPU), the same under torchrun (two launchers, one per emulated node, of 1
# and of 2 workers; and kernel= on 2 launchers of 2),
# the example training step (python/examples/train_step.py) and the example
# training (python/examples/train.py, 50 steps against one process) on 4
# forked ranks and, as root, on the emulated cluster of 2 nodes x 4 NICs x
# 4 ranks (train.py there with --torch: gloo and from_torch).  Each program
# prints TAP; this script renumbers it.  Skips when
# that python lacks numpy or torch.
set -u
srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
. "$srcdir/python_env.sh"
zc_torch_env
export PYTHONPATH=$PYTHONPATH:$pydir/tests

n=0
failed=0
logs=$(mktemp -d "${TMPDIR:-/tmp}/test_python.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# tap LABEL LOG STATUS: pass on LOG's TAP lines renumbered, then one line
# for the program's exit status.
tap() {
    local label=$1 log=$2 status=$3
    zc_tap_lines "$label: " "$log"
    n=$((n + 1))
    if [ "$status" = 0 ]; then
        echo "ok $n - $label exited 0"
    else
        failed=$((failed + 1))
        echo "not ok $n - $label exited $status"
        grep -v "^ok \|^not ok \|^1\.\." "$log" | tail -20 | sed 's/^/# /'
    fi
}

for script in test_binding.py test_distributed.py test_varlen.py test_kernels.py test_cuda.py; do
    timeout 300 "$python" "$pydir/tests/$script" >"$logs/$script" 2>&1
    tap "$script" "$logs/$script" $?
done
# zcomm_version.h is generated in the build tree's include/.
timeout 120 "$python" "$pydir/tests/test_structs.py" "$srcdir/../include" "$PWD/include" \
    >"$logs/structs" 2>&1
tap "test_structs.py" "$logs/structs" $?

# torchrun: one launcher per emulated node (ZC_NODE_ID), 1 worker each
# (2 ranks) or 2 (4 ranks).
# torch 1.13's torchrun under Python 3.11 cannot leave the workers' output
# alone (its Std flags lose NONE and ALL: --redirects/--tee 0 or 3 crash it),
# so stdout goes to its log files and rank 0 writes the TAP to a file.
# torchrun_2nodes NAME PROCS SCRIPT ARGS...: the script on two launchers
# of PROCS workers each, its TAP (written to $logs/NAME.tap, its path the
# script's last argument) and exit status.
torchrun_2nodes() {
    local name=$1 procs=$2 script=$3 port pids=() node status=0
    shift 3
    port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    : >"$logs/$name.tap"
    for node in 0 1; do
        ZC_NODE_ID=torchrun-$name$node-$$ timeout 300 "$python" -m torch.distributed.run \
            --nnodes 2 --nproc_per_node "$procs" --node_rank $node --master_addr 127.0.0.1 \
            --master_port "$port" --redirects 1 --tee 2 --log_dir "$logs/$name$node" \
            "$pydir/tests/$script" "$@" "$logs/$name.tap" >"$logs/$name$node.out" 2>&1 &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
    tap "$script under torchrun, 2 nodes x $procs" "$logs/$name.tap" $status
    if [ "$status" != 0 ]; then # the workers' own errors, then the launcher's summary
        cat "$logs/$name"?/*/attempt_*/*/stderr.log 2>/dev/null | grep -A12 Traceback |
            tail -40 | sed 's/^/# /'
        tail -20 "$logs/${name}0.out" | sed 's/^/# /'
    fi
}
torchrun_2nodes torchrun1 1 test_torchrun.py 2
torchrun_2nodes torchrun2 2 test_torchrun.py 2
# kernel= under torchrun (the fork launcher runs it on 2 and 4 ranks)
torchrun_2nodes kernels 2 test_kernels.py --torchrun 2

plot=
"$python" -c 'import matplotlib' 2>/dev/null && plot="--plot $logs/train.png"
timeout 300 "$python" "$pydir/examples/train.py" --fork 4 --nodes 2 $plot >"$logs/train" 2>&1
tap "train.py --fork 4 --nodes 2" "$logs/train" $?
if [ -n "$plot" ]; then
    n=$((n + 1))
    if [ "$(head -c 8 "$logs/train.png" 2>/dev/null | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ]; then
        echo "ok $n - train.py --plot wrote a PNG"
    else
        failed=$((failed + 1)); echo "not ok $n - train.py --plot wrote a PNG"
    fi
else
    echo "# no matplotlib: train.py's plot is left out"
fi

timeout 300 "$python" "$pydir/examples/train_step.py" --fork 4 --nodes 2 >"$logs/fork" 2>&1
tap "train_step.py --fork 4 --nodes 2" "$logs/fork" $?

probe=zc-py-probe-$$
if [ "$(id -u)" = 0 ] && ip netns add "$probe" 2>/dev/null; then
    ip netns del "$probe"
    bash "$srcdir/cluster/zc_cluster" -N 2 -K 4 -R 4 -t 300 -q -o "$logs/cluster" \
        -x "PYTHONPATH=$PYTHONPATH" -x "ZC_LIBRARY=$ZC_LIBRARY" -x PYTHONDONTWRITEBYTECODE=1 \
        -x OMP_NUM_THREADS=1 -- "$python" "$pydir/examples/train_step.py" \
        >"$logs/cluster.out" 2>&1
    status=$?
    mkdir -p "$logs/cluster" && touch "$logs/cluster/rank0.log"
    tap "train_step.py on zc_cluster 2 nodes x 4 ranks" "$logs/cluster/rank0.log" $status
    [ "$status" = 0 ] || sed 's/^/# /' "$logs/cluster.out" | tail -20
    bash "$srcdir/cluster/zc_cluster" -N 2 -K 4 -R 4 -t 500 -q -o "$logs/cluster-train" \
        -x "PYTHONPATH=$PYTHONPATH" -x "ZC_LIBRARY=$ZC_LIBRARY" -x PYTHONDONTWRITEBYTECODE=1 \
        -x OMP_NUM_THREADS=1 -- "$python" "$pydir/examples/train.py" --torch \
        >"$logs/cluster-train.out" 2>&1
    status=$?
    mkdir -p "$logs/cluster-train" && touch "$logs/cluster-train/rank0.log"
    tap "train.py --torch (gloo, from_torch) on zc_cluster 2 nodes x 4 ranks" \
        "$logs/cluster-train/rank0.log" $status
    [ "$status" = 0 ] || sed 's/^/# /' "$logs/cluster-train.out" | tail -20
else
    echo "# not root or no netns: the emulated-cluster runs of train_step.py and train.py are left out"
fi
echo "1..$n"
[ "$failed" = 0 ]
