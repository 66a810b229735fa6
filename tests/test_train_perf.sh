#!/bin/bash
# zc_train_perf (python/examples/zc_train_perf.py) at a tiny size (--preset
# tiny: 2 layers, hidden 32, 768 tokens, one iteration, fp32): on 4 forked
# ranks making 2 emulated nodes, every method (te_cp, llama_cp, routing,
# zeppelin_noremap, zeppelin) on a batch of each dataset gives the loss and
# every parameter gradient of one single-process iteration within 1e-4 x
# max|reference|.  Then its calibration to the paper's Cluster A: the
# arithmetic (python/tests/test_calibrate.py), --nic-rate refused without
# the emulated cluster's NICs, and, as root, a calibrated run on the
# emulated cluster (2 nodes x 2 NICs x 2 ranks) whose every batch set and
# read back a NIC rate and measured the three ratios.  Skips when
# /usr/bin/python3 lacks torch or libzcomm is a sanitizer build.
set -u
srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
. "$srcdir/python_env.sh"
zc_torch_env
perf=$pydir/examples/zc_train_perf.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_train_perf.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0

"$python" "$perf" --preset tiny --tap --fork 4 --nodes 2 >"$tmp/fork" 2>&1
status=$?
zc_tap_lines "fork: " "$tmp/fork"
zc_result $status "zc_train_perf.py --preset tiny --fork 4 --nodes 2 exits 0" "$tmp/fork"

"$python" "$pydir/tests/test_calibrate.py" >"$tmp/cal" 2>&1
status=$?
zc_tap_lines "calibration: " "$tmp/cal"
zc_result $status "test_calibrate.py exits 0" "$tmp/cal"

"$python" "$perf" --preset tiny --fork 2 --nic-rate auto >"$tmp/refused" 2>&1
status=$?
zc_result "$([ $status = 2 ] && grep -q -- '--nic-rate: the emulated cluster' "$tmp/refused"; echo $?)" \
    "--nic-rate auto with --fork is refused (exit 2, naming --nic-rate)" "$tmp/refused"

probe=zc-tp-probe-$$
if [ "$(id -u)" = 0 ] && ip netns add "$probe" 2>/dev/null; then
    ip netns del "$probe"
    bash "$srcdir/cluster/zc_cluster" -N 2 -K 2 -R 2 -t 400 -q -o "$tmp/cluster" \
        -x "PYTHONPATH=$PYTHONPATH" -x "ZC_LIBRARY=$ZC_LIBRARY" -x PYTHONDONTWRITEBYTECODE=1 \
        -x OMP_NUM_THREADS=1 -x ZC_NUM_THREADS=1 -- "$python" "$perf" --preset tiny --tap \
        --methods te_cp,zeppelin --json "$tmp/cal.json" >"$tmp/cluster.out" 2>&1
    status=$?
    mkdir -p "$tmp/cluster" && touch "$tmp/cluster/rank0.log"
    zc_tap_lines "cluster: " "$tmp/cluster/rank0.log"
    zc_result $status "--preset tiny --nic-rate auto on zc_cluster 2 nodes x 2 NICs x 2 ranks exits 0" \
        "$tmp/cluster.out"
    "$python" - "$tmp/cal.json" >"$tmp/check" 2>&1 <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
cal = run["calibration"]
assert set(cal) == set(run["config"]["datasets"]), ("a batch without calibration", list(cal))
for ds, rec in cal.items():
    assert rec["modeled_kbit"] >= 1 and rec["kbits"] and min(rec["kbits"]) >= 1, (ds, rec)
    for part in ("paper", "modeled", "achieved"):
        assert all(rec[part][k] > 0 for k in ("flop_per_byte", "attn_per_linear",
                                               "allreduce_per_linear")), (ds, part, rec[part])
print("rates", {ds: rec["kbits"] for ds, rec in cal.items()}, "ffn", run["config"]["ffn"])
PY
    zc_result $? "every batch chose, set and read back NIC rates, and measured the three ratios" \
        "$tmp/check"
    grep '^rates' "$tmp/check" | sed 's/^/# /'
else
    echo "# not root or no netns: the calibrated run on the emulated cluster is left out"
fi
echo "1..$n"
[ "$failed" = 0 ]
