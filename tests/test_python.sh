#!/bin/bash
# The Python binding (python/zcomm) under Debian's /usr/bin/python3 with
# numpy and torch: error mapping and argument checks, then point-to-point,
# routed transfers, alltoallv, remap and ring attention on forked ranks
# against single-process PyTorch, then the example training step
# (python/examples/train_step.py) on 4 forked ranks and, as root, on the
# emulated cluster of 2 nodes x 4 NICs x 4 ranks.  Each program prints TAP;
# this script renumbers it.  Skips when that python lacks numpy or torch.
set -u
srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
python=${ZC_PYTHON:-/usr/bin/python3}
pydir=$srcdir/../python

if ! "$python" -c 'import numpy, torch' 2>/dev/null; then
    echo "1..0 # SKIP $python lacks numpy or torch"
    exit 0
fi
export ZC_LIBRARY=${ZC_LIBRARY:-$PWD/.libs/libzcomm.so}
# A sanitizer build's library needs its runtime preloaded into the
# interpreter, which would then report Python's own allocations.
if ldd "$ZC_LIBRARY" 2>/dev/null | grep -q 'libasan\|libubsan'; then
    echo "1..0 # SKIP libzcomm is a sanitizer build"
    exit 0
fi
export PYTHONPATH=$pydir:$pydir/tests
export PYTHONDONTWRITEBYTECODE=1
export OMP_NUM_THREADS=1

n=0
failed=0
logs=$(mktemp -d "${TMPDIR:-/tmp}/test_python.XXXXXX")
trap 'rm -rf "$logs"' EXIT

# tap LABEL LOG STATUS: pass on LOG's TAP lines renumbered, then one line
# for the program's exit status.
tap() {
    local label=$1 log=$2 status=$3 line verdict
    while IFS= read -r line; do
        case $line in
        "ok "*|"not ok "*)
            n=$((n + 1))
            verdict=${line%% [0-9]*}
            [ "$verdict" = "not ok" ] && failed=$((failed + 1))
            echo "$verdict $n - $label: ${line#* - }" ;;
        "#"*) echo "$line" ;;
        esac
    done <"$log"
    n=$((n + 1))
    if [ "$status" = 0 ]; then
        echo "ok $n - $label exited 0"
    else
        failed=$((failed + 1))
        echo "not ok $n - $label exited $status"
        grep -v "^ok \|^not ok \|^1\.\." "$log" | tail -20 | sed 's/^/# /'
    fi
}

for script in test_binding.py test_distributed.py; do
    timeout 300 "$python" "$pydir/tests/$script" >"$logs/$script" 2>&1
    tap "$script" "$logs/$script" $?
done

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
else
    echo "# not root or no netns: the emulated-cluster run of train_step.py is left out"
fi
echo "1..$n"
[ "$failed" = 0 ]
