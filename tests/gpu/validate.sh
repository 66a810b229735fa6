#!/usr/bin/env bash
# The GPU validation run, in one command, on a machine with an NVIDIA GPU,
# within ZC_GPU_BUDGET seconds (default 450: well inside 8 minutes, so
# that a short loan of a GPU is enough to build, check, measure, fix and
# run again):
#
#   bash tests/gpu/validate.sh [REPORT]
#
#  1. builds out of tree in build-gpu/ (ZC_GPU_BUILD overrides) with CUDA and
#     NCCL required, and cuDNN too when this tree has the cuDNN backend
#     (kernels/cudnn): configure fails rather than build without them;
#     ZC_GPU_PREBUILT=1 skips the build and uses what is there (built on a
#     machine with the compilers, run on one with the GPU);
#  2. tests/test_attn_cudnn: the cuDNN backend's forward and backward
#     (bf16, GQA/MQA, top-left, bottom-right and full blocks, segments
#     without keys) against the CPU kernels, with the error of each, and
#     the engine checks on this GPU's own cuDNN;
#  3. zc_attn_perf -G: on the same shapes in one run, one cuDNN SDPA call
#     over the whole batch (the baseline), libzcomm's cuDNN backend, its
#     tensor-core kernels and its scalar kernels, forward and backward,
#     causal and full, head dims 64 and 128, 16k tokens a call as 4k and
#     16k sequences and a THD batch of GitHub's lengths (the widest of the
#     paper's three distributions; `zc_attn_perf -G` alone runs all three),
#     each way's error against a float64 reference; again
#     under a causal sliding window of 1024 (4k and arxiv) and the full mask
#     given as a window (-1, -1; 4k, d128); then
#     tests/test_cuda_sass.sh on this build (the tensor-core kernels' HMMA,
#     LDSM and LDGSTS, no spills); PyTorch's SDPA (flash and cuDNN
#     backends) on the fixed lengths where a python3 has torch with CUDA;
#  4. zc_ring_attn_perf -G (bf16, d128, every mode) on 1 rank and on 4
#     ranks sharing the GPUs, ZC_ATTN_BACKEND=cudnn, with its per-backend
#     block counts and vs_sdpa (one cuDNN call over the same tokens divided
#     by the ring's time); 1 rank again on the native kernels;
#  5. tests/test_gpu: the CUDA kernels against the CPU kernels, the NCCL
#     transfers and the stream ring attention against single-process
#     attention (4 ranks sharing one GPU over NCCL's sockets), once per
#     attention backend (cudnn first);
#  6. python/tests/test_cuda.py (zcomm.torch and torch_ops on CUDA tensors)
#     and python/tests/test_kernels.py --cuda (kernel= on CUDA tensors:
#     zcomm.torch.kernels' Reference and, where torch has it, TorchFlash);
#     tools/zc_attn_kernel_perf.py: PyTorch's flash-attention through the
#     kernel table against libzcomm's cuDNN backend, in one run, 2 ranks;
#  7. one report (REPORT, default build-gpu/gpu-validation.txt): GPU,
#     driver, CUDA, cuDNN, each test's TAP lines with their errors, each
#     perf table.
#  8. the cost of a call: zc_ring_attn_perf -G on a batch of 1K tokens, 1
#     and 4 ranks, each call's time and (-v) each rank's enqueueing time.
# Each step runs under min(ZC_GPU_TIMEOUT, what is left of the budget); a
# step that no longer fits is reported as skipped, which fails the run.
#
# Without a GPU it says "no CUDA device: skipped" and exits 0 before
# building anything.  Exit status: 0 when every step passed.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${ZC_GPU_BUILD:-$top/build-gpu}
report=${1:-$build/gpu-validation.txt}

# ---- is there a GPU? ---------------------------------------------------------
# Asked of the driver, not of CUDA: nothing is built yet.  A driver that is
# there but too old for CUDA 13 shows up here as a GPU and then fails
# test_gpu, which names it.
ngpu=0
if [[ -d /proc/driver/nvidia/gpus ]]; then
  ngpu=$(find /proc/driver/nvidia/gpus -mindepth 1 -maxdepth 1 -type d | wc -l)
elif command -v nvidia-smi >/dev/null 2>&1; then
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
if ((ngpu == 0)); then
  echo "validate: no CUDA device: skipped"
  exit 0
fi

status=0
start=$SECONDS
budget=${ZC_GPU_BUDGET:-450}
fail() { echo "validate: FAILED: $*" | tee -a "$report"; status=1; }
# Seconds a step may take: ZC_GPU_TIMEOUT, or what is left of the budget.
left() {
  local rest=$((budget - (SECONDS - start))) cap=${ZC_GPU_TIMEOUT:-240}
  ((rest < cap)) && echo "$rest" || echo "$cap"
}
section() { printf '\n==== %s\n' "$*" >>"$report"; echo "validate: $*"; }
# A known failure marked TODO ("not ok ... # TODO why") is reported, not
# failed; a TODO that passes ("ok ... # TODO") fails, so that it is taken out.
tap_step() { # name command...: runs it in $build; fails on a bad exit, Bail out! or not ok
  local name=$1 log=$build/validate-step.log rc bad todo xpass t
  shift
  t=$(left)
  if ((t <= 5)); then
    fail "$name: skipped, the ${budget} s budget is spent"
    return
  fi
  (cd "$build" && timeout "$t" "$@") 2>&1 | tee "$log" >>"$report"
  rc=${PIPESTATUS[0]}
  grep -q '^Bail out!' "$log" && rc=1
  bad=$(grep '^not ok' "$log" | grep -vc '# TODO')
  todo=$(grep '^not ok' "$log" | grep -c '# TODO')
  xpass=$(grep '^ok' "$log" | grep -c '# TODO')
  ((todo)) && echo "validate: $name: $todo known failure(s) marked TODO" | tee -a "$report"
  if ((rc != 0 || bad || xpass)); then
    fail "$name ($bad not ok, $xpass unexpected TODO pass, exit $rc)"
  fi
}

# ---- build ---------------------------------------------------------------------
cudnn=
[[ -d $top/kernels/cudnn ]] && cudnn=--with-cudnn
mkdir -p "$build" "$(dirname "$report")"
: >"$report"
if [[ ${ZC_GPU_PREBUILT:-0} == 1 ]]; then
  # Built elsewhere (a machine with the compilers and UCX headers that the
  # GPU machine lacks), with this same configuration: only check it is there.
  section "build: $build, prebuilt (ZC_GPU_PREBUILT=1)"
  for t in tools/zc_info tools/zc_attn_perf tools/zc_ring_attn_perf tests/test_gpu \
    ${cudnn:+tests/test_attn_cudnn}; do
    [[ -x $build/$t ]] || { fail "ZC_GPU_PREBUILT=1 but $build/$t is not built"; exit 1; }
  done
else
  section "build: $build (--with-cuda --with-nccl $cudnn)"
  (
    cd "$top" && { [[ -x configure && configure -nt configure.ac ]] || autoreconf -fi; } &&
    cd "$build" && { [[ -f Makefile ]] || "$top/configure" -q --with-cuda --with-nccl $cudnn; } &&
    make -j"$(nproc)" && make -j"$(nproc)" tests/test_gpu ${cudnn:+tests/test_attn_cudnn}
  ) >"$build/validate-build.log" 2>&1 || {
    tail -30 "$build/validate-build.log" >>"$report"
    fail "the build (log: $build/validate-build.log)"
    exit 1
  }
fi

section "machine"
{
  echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit:  $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "host:    $(hostname)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv 2>&1
  "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/nvcc" --version 2>&1 |
    tail -2
  "$build/tools/zc_info" 2>&1 | head -40
} >>"$report"


# ---- the cuDNN backend against the CPU kernels ------------------------------------
if [[ -n $cudnn ]]; then
  section "tests/test_attn_cudnn (cuDNN SDPA against the CPU kernels)"
  tap_step "tests/test_attn_cudnn" env ZC_LOG_LEVEL=INFO ZC_TEST_SRCDIR="$top/tests" \
    ./tests/test_attn_cudnn
fi

# ---- zc_attn_perf -G: one cuDNN call, the cuDNN backend, both native kernels ------
# bf16, 16k tokens a call (4 x 4k, 1 x 16k, and GitHub's lengths), head
# dims 64 and 128 with 2048 / dim heads, causal and full, forward and
# backward; most of its time is the scalar kernels (4-6 TFLOP/s on an
# H100), so three of its five default rows keep the run well inside the
# budget.
py=${ZC_PYTHON3:-python3}
perf_step() { # name command...: a benchmark; fails on a bad exit or a timeout
  local name=$1 t rc
  shift
  t=$(left)
  if ((t <= 5)); then
    fail "$name: skipped, the ${budget} s budget is spent"
    return
  fi
  (cd "$build" && timeout "$t" "$@") >>"$report" 2>&1
  rc=$?
  ((rc == 0)) || fail "$name (exit $rc)"
}
section "zc_attn_perf -G (sdpa, cudnn, mma, scalar; bf16, d64 and d128)"
perf_step "zc_attn_perf -G" ./tools/zc_attn_perf -G -S 4k,16k,github
# the masks beyond causal, each way against the float64 reference (exit 1
# on an error out of bounds): a causal sliding window of 1024 (the band's
# tiles), and the full mask given as the window (-1, -1)
section "zc_attn_perf -G -W (windows: causal 1024, and full as (-1, -1))"
perf_step "zc_attn_perf -G -W 1023,0 -C 1" ./tools/zc_attn_perf -G -W 1023,0 -C 1 -S 4k,arxiv \
  -n 2
perf_step "zc_attn_perf -G -W -1,-1" ./tools/zc_attn_perf -G -W -1,-1 -C 0 -D 128 -S 4k -n 2
section "tests/test_cuda_sass.sh (the tensor-core kernels' machine code)"
# its skip (77: no cuobjdump) is not a failure
tap_step "tests/test_cuda_sass.sh" \
  bash -c 'bash "$0"; rc=$?; exit $((rc == 77 ? 0 : rc))' "$top/tests/test_cuda_sass.sh"
if "$py" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
  for b in flash cudnn; do
    section "PyTorch SDPA ($b backend) on the fixed lengths"
    perf_step "torch SDPA $b, 4k" "$py" "$top/tools/zc_attn_torch_baseline.py" --device cuda \
      --backend "$b" -d bfloat16 -H 16 -D 128 -b 4096 -N 4 -n 5 -w 2
    perf_step "torch SDPA $b, 16k" "$py" "$top/tools/zc_attn_torch_baseline.py" --device cuda \
      --backend "$b" -d bfloat16 -H 16 -D 128 -b 16384 -N 1 -n 5 -w 2
  done
else
  section "PyTorch SDPA: skipped, $py has no torch with CUDA"
fi

# ---- zc_ring_attn_perf -G on 1 rank and on 4 -----------------------------------
# One process per rank through zc_comm_init_env's ZC_* variables (no mpirun
# needed on one machine); with fewer GPUs than ranks they share them, each
# its own NCCL host.
ring_perf() { # ranks backend zc_ring_attn_perf-options...
  local n=$1 b=$2 port=$((29500 + RANDOM % 1000)) pids=() rc=0 t
  shift 2
  t=$(left)
  if ((t <= 5)); then
    fail "zc_ring_attn_perf -G, $n rank(s), $b: skipped, the ${budget} s budget is spent"
    return
  fi
  for ((r = 0; r < n; r++)); do
    # ranks sharing a GPU: each its own NCCL host (NCCL refuses two ranks of
    # one host on one GPU), so that NCCL goes over its sockets between them
    ( ((ngpu < n)) && export NCCL_HOSTID="zc-validate-$r"
      ZC_RANK=$r ZC_SIZE=$n ZC_LOCAL_RANK=$r ZC_MASTER_ADDR=127.0.0.1 ZC_MASTER_PORT=$port \
      ZC_ATTN_BACKEND=$b ZC_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" \
      exec timeout "$t" "$build/tools/zc_ring_attn_perf" -G -d bfloat16 -H 16 -K 4 -A 128 \
      "$@" ) >"$build/validate-perf.$r.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$build/validate-perf.0.out" >>"$report"
  ((rc == 0)) || { tail -5 "$build"/validate-perf.*.out >>"$report";
                   fail "zc_ring_attn_perf -G on $n rank(s), backend $b"; }
}
ring_backends=(native)
[[ -n $cudnn ]] && ring_backends=(cudnn native)
for b in "${ring_backends[@]}"; do
  for n in 1 4; do
    [[ $b == native && $n == 4 ]] && continue # the native kernels: 1 rank for the ratio
    section "zc_ring_attn_perf -G -d bfloat16, $n rank(s), ZC_ATTN_BACKEND=$b"
    ring_perf "$n" "$b" -s 4 -b 16K -e 16K -n 3 -w 1
  done
done

# ---- tests/test_gpu, per backend -------------------------------------------------
# Run directly (not through make check) so its TAP lines, with the error of
# every comparison, go to the report; they are appended as they come, so a
# step cut off by its timeout still leaves what it printed.
for b in "${ring_backends[@]}"; do
  section "tests/test_gpu, ZC_ATTN_BACKEND=$b"
  tap_step "tests/test_gpu with ZC_ATTN_BACKEND=$b" \
    env ZC_ATTN_BACKEND="$b" ZC_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" \
    ZC_TEST_SRCDIR="$top/tests" ./tests/test_gpu
done

# ---- zcomm.torch on CUDA tensors -------------------------------------------------
# The Python package over this build's libzcomm, with a python3 that has
# torch with CUDA (ZC_PYTHON3 overrides).
if torch_version=$("$py" -c 'import numpy, torch; print(torch.__version__)' 2>/dev/null); then
  section "python/tests/test_cuda.py (zcomm.torch on CUDA tensors, torch $torch_version)"
  tap_step "python/tests/test_cuda.py" \
    env ZC_LIBRARY="$build/.libs/libzcomm.so.0" PYTHONPATH="$top/python:$top/python/tests" \
    ZC_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" \
    "$py" "$top/python/tests/test_cuda.py"
  section "python/tests/test_kernels.py --cuda (kernel= on CUDA tensors)"
  tap_step "python/tests/test_kernels.py --cuda" \
    env ZC_LIBRARY="$build/.libs/libzcomm.so.0" PYTHONPATH="$top/python:$top/python/tests" \
    ZC_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" \
    "$py" "$top/python/tests/test_kernels.py" --cuda
  if "$py" -c 'import sys, torch; sys.exit(not hasattr(torch.ops.aten, "_flash_attention_forward"))' \
    2>/dev/null; then
    section "zc_attn_kernel_perf: torch's flash through the kernel table vs the cuDNN backend"
    perf_step "zc_attn_kernel_perf, flash vs cuDNN" \
      env ZC_LIBRARY="$build/.libs/libzcomm.so.0" PYTHONPATH="$top/python" ZC_ATTN_BACKEND=cudnn \
      ZC_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" \
      "$py" "$top/tools/zc_attn_kernel_perf.py" --device cuda --fork 2 -d bfloat16 -H 16 -K 4 \
      -D 128 -n 3 -w 1
  else
    section "zc_attn_kernel_perf: skipped, torch $torch_version has no flash varlen operators"
  fi
else
  section "python/tests/test_cuda.py: skipped, $py has no numpy or torch"
fi

# ---- the cost of a call ------------------------------------------------------------
# A batch of 1K tokens, where a call's own cost (enqueueing, the kernels'
# launches, the transfers' latency) is most of its time: fwd(ms) and
# bwd(ms) per call, and with -v each rank's time inside the calls
# (enqueueing only: the work runs later).  After the first calls the
# communicator makes no stream, event or allocation (zc_ring_attn_fwd_stream(3)).
for n in 1 4; do
  section "per-call cost: zc_ring_attn_perf -G, 1K tokens, $n rank(s), ZC_ATTN_BACKEND=${ring_backends[0]}"
  ring_perf "$n" "${ring_backends[0]}" -D arxiv -b 1K -e 1K -n 20 -w 3 -v
done

section "result: $( ((status)) && echo FAILED || echo passed), $((SECONDS - start)) s"
echo "validate: report in $report"
exit $status
