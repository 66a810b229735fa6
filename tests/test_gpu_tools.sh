#!/bin/sh
# The GPU measurement, ready for a GPU: what of it can run without one.
# tests/gpu/validate.sh parses (bash -n) and, with no GPU here, says
# "no CUDA device: skipped" and exits 0; zc_attn_perf takes -G with -T,
# -S and the CPU mode's options (and refuses float32 on the GPU, -T or -S
# without -G, bad head dims, heads and modes), and without a device says
# "no CUDA device: skipped" and exits 0 (its CPU mode runs two small rows,
# checked against the reference that -G's error columns use); zc_ring_attn_perf -G on one
# rank without a device exits 2 saying so; the PyTorch baseline compiles
# and, where torch is, says the same with --device cuda, as do the kernel
# table's benchmark (tools/zc_attn_kernel_perf.py, which also runs on the
# CPU here) and python/tests/test_kernels.py --cuda.  On a machine
# with a GPU the skips are SKIPs (validate.sh runs the real thing).
set -u
srcdir=${ZC_TEST_SRCDIR:-$(cd "$(dirname "$0")" && pwd)}
top=$(cd "$srcdir/.." && pwd)
tmp=${TMPDIR:-/tmp}/zc_test_gpu_tools.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
result() { # status description
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
skip() {
    n=$((n + 1))
    echo "ok $n # SKIP $1"
}
gpu=0
if [ -d /proc/driver/nvidia/gpus ] && [ -n "$(ls /proc/driver/nvidia/gpus 2>/dev/null)" ]; then
    gpu=1
fi

bash -n "$top/tests/gpu/validate.sh"
result $? "tests/gpu/validate.sh parses (bash -n)"
# bash -n does not see a command that is nowhere: every word that starts
# a command line of validate.sh is a builtin, a program here or one of its
# functions
missing=$(bash -c 'for f in $(grep -oE "^[[:space:]]*[a-z_]+([[:space:]]|\$)" "$1" |
                             tr -d " \t" | sort -u); do
                     type "$f" >/dev/null 2>&1 || grep -qE "^$f\(\) \{" "$1" || printf "%s " "$f"
                   done' _ "$top/tests/gpu/validate.sh")
[ -z "$missing" ]
result $? "validate.sh defines every function it calls (missing: ${missing:-none})"
if [ $gpu -eq 0 ]; then
    out=$(ZC_GPU_BUILD="$tmp/build-gpu" bash "$top/tests/gpu/validate.sh" "$tmp/report" 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ "$out" = "validate: no CUDA device: skipped" ] && [ ! -e "$tmp/build-gpu" ]
    result $? "validate.sh without a GPU: 'no CUDA device: skipped', exit 0, nothing built ($rc: $out)"
else
    skip "a GPU is here: validate.sh would build and run everything"
fi

./tools/zc_attn_perf -h >"$tmp/help" 2>&1
grep -q -- "-G " "$tmp/help" && grep -q -- "-T LIST" "$tmp/help" &&
    grep -q -- "-S LIST" "$tmp/help"
result $? "zc_attn_perf -h names -G, -T and -S"
ZC_NUM_THREADS=1 ./tools/zc_attn_perf -b 64 -e 128 -N 2 -H 4 -K 2 -D 16 -d bfloat16 -n 1 -w 0 \
    >"$tmp/cpu" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$tmp/cpu"
result $? "zc_attn_perf on the CPU, two small rows: every sampled row right, exit 0 ($rc)"
refused() { # description args...: zc_attn_perf refuses the options, exit 1, before any device
    desc=$1
    shift
    ./tools/zc_attn_perf "$@" >"$tmp/refused" 2>&1
    rc=$?
    [ $rc -eq 1 ] && ! grep -q "no CUDA device" "$tmp/refused"
    result $? "zc_attn_perf $*: refused ($desc), exit 1 ($rc)"
}
refused "the GPU ways take bf16 and fp16" -G -d float
refused "-T needs -G" -T all
refused "-S needs -G" -S 4k
refused "head dims 1 to 256" -G -D 300
refused "-K 3 divides neither 32 nor 16 heads" -G -K 3
refused "-m takes fwd, bwd or both" -G -m sideways
if [ $gpu -eq 0 ]; then
    out=$(./tools/zc_attn_perf -G -S 4k,16k,github 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ "$out" = "zc_attn_perf -G: no CUDA device: skipped" ]
    result $? "zc_attn_perf -G as validate.sh runs it, no device: skipped, exit 0 ($rc: $out)"
    out=$(./tools/zc_attn_perf -G -d float16 -b 2048 -e 8192 -f 2 -N 2 -H 16 -K 4 -D 128 -C 0 \
        -m bwd -n 2 -w 0 -c 0 -T arxiv,github -S 4k,arxiv 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ "$out" = "zc_attn_perf -G: no CUDA device: skipped" ]
    result $? "zc_attn_perf -G with every option of -G, no device: skipped, exit 0 ($rc: $out)"
    out=$(./tools/zc_attn_perf -G -W 1023,0 -C 1 -S 4k,arxiv -n 2 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ "$out" = "zc_attn_perf -G: no CUDA device: skipped" ]
    result $? "zc_attn_perf -G -W as validate.sh runs it (windows on the GPU), no device: skipped, exit 0 ($rc: $out)"
    ZC_RANK=0 ZC_SIZE=1 ZC_LOCAL_RANK=0 ZC_MASTER_ADDR=127.0.0.1 ZC_MASTER_PORT=$((29500 + $$ % 1000)) \
        timeout 60 ./tools/zc_ring_attn_perf -G -d bfloat16 -H 16 -K 4 -A 128 -s 4 -b 16K -e 16K \
        -n 3 -w 1 >"$tmp/ring" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q "no CUDA device" "$tmp/ring"
    result $? "zc_ring_attn_perf -G with validate.sh's options, one rank, no device: says so, exit 2 ($rc)"
    ZC_RANK=0 ZC_SIZE=1 ZC_LOCAL_RANK=0 ZC_MASTER_ADDR=127.0.0.1 ZC_MASTER_PORT=$((29500 + $$ % 1000)) \
        timeout 60 ./tools/zc_ring_attn_perf -G -d bfloat16 -H 16 -K 4 -A 128 -D arxiv -b 1K \
        -e 1K -n 20 -w 3 -v >"$tmp/ring" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q "no CUDA device" "$tmp/ring"
    result $? "zc_ring_attn_perf -G with validate.sh's per-call options, one rank, no device: says so, exit 2 ($rc)"
else
    skip "a GPU is here: zc_attn_perf -G would run"
    skip "a GPU is here: zc_attn_perf -G would run"
    skip "a GPU is here: zc_attn_perf -G would run"
    skip "a GPU is here: zc_ring_attn_perf -G would run"
    skip "a GPU is here: zc_ring_attn_perf -G (per call) would run"
fi
ZC_RANK=0 ZC_SIZE=1 ZC_MASTER_ADDR=127.0.0.1 ZC_MASTER_PORT=$((30500 + $$ % 1000)) \
    timeout 60 ./tools/zc_ring_attn_perf -G -T -n 1 -w 0 >"$tmp/ringT" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "host memory" "$tmp/ringT"
result $? "zc_ring_attn_perf -G -T: refused, naming the host memory of -T's table ($rc)"
ZC_RANK=0 ZC_SIZE=1 ZC_MASTER_ADDR=127.0.0.1 ZC_MASTER_PORT=$((31500 + $$ % 1000)) \
    timeout 120 ./tools/zc_ring_attn_perf -T -b 2048 -e 2048 -D arxiv -s 8 -H 4 -K 2 -A 32 \
    -n 1 -w 0 >"$tmp/ringT" 2>&1
rc=$?
[ $rc -eq 0 ] && [ "$(grep -c '+table .* 0  ' "$tmp/ringT")" = 4 ] && grep -q "Out of bounds values : 0 OK" "$tmp/ringT"
result $? "zc_ring_attn_perf -T on one rank: every mode through the kernel table too, nothing wrong ($rc)"
python=${ZC_PYTHON3:-/usr/bin/python3}
if "$python" -c 'import torch' 2>/dev/null; then
    "$python" -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' \
        "$top/tools/zc_attn_torch_baseline.py" 2>/dev/null
    result $? "tools/zc_attn_torch_baseline.py parses"
    if [ $gpu -eq 0 ]; then
        out=$("$python" "$top/tools/zc_attn_torch_baseline.py" --device cuda --backend cudnn \
            -d bfloat16 -H 16 -D 128 -b 4096 -N 4 -n 5 -w 2 2>&1)
        [ "$out" = "zc_attn_torch_baseline: no CUDA device: skipped" ]
        result $? "the PyTorch SDPA baseline with validate.sh's options, no device: skipped ($out)"
    else
        skip "a GPU is here: the PyTorch baseline would run"
    fi
    # the kernel table's benchmark and the CUDA part of its test
    export ZC_LIBRARY=${ZC_LIBRARY:-$PWD/.libs/libzcomm.so} PYTHONPATH=$top/python:$top/python/tests
    export OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
    if [ $gpu -eq 0 ]; then
        out=$("$python" "$top/tools/zc_attn_kernel_perf.py" --device cuda --fork 2 -d bfloat16 \
            -H 16 -K 4 -D 128 -n 3 -w 1 2>&1)
        [ "$out" = "zc_attn_kernel_perf: no CUDA device: skipped" ]
        result $? "zc_attn_kernel_perf with validate.sh's options, no device: skipped ($out)"
        out=$("$python" "$top/python/tests/test_kernels.py" --cuda 2>&1)
        echo "$out" | grep -q "^ok 1 - # SKIP"
        result $? "test_kernels.py --cuda, no device: skipped"
    else
        skip "a GPU is here: zc_attn_kernel_perf would run"
        skip "a GPU is here: test_kernels.py --cuda would run"
    fi
    timeout 120 "$python" "$top/tools/zc_attn_kernel_perf.py" --device cpu --fork 2 \
        --lengths 300,40,1 -H 4 -K 2 -D 16 -d float32 -n 1 -w 0 >"$tmp/kperf" 2>&1
    rc=$?
    [ $rc -eq 0 ] && [ "$(grep -c '^  [a-z_]* ' "$tmp/kperf")" = 3 ]
    result $? "zc_attn_kernel_perf on the CPU (Reference through the table), 2 forked ranks: one row per method ($rc)"
else
    skip "no torch for $python: the PyTorch baseline is not checked"
    skip "no torch for $python: the PyTorch baseline is not checked"
    skip "no torch for $python: zc_attn_kernel_perf is not checked"
    skip "no torch for $python: zc_attn_kernel_perf is not checked"
    skip "no torch for $python: zc_attn_kernel_perf is not checked"
fi
echo "1..$n"
