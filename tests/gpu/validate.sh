#!/usr/bin/env bash
# The GPU validation run, in one command, on a machine with an NVIDIA GPU:
#
#   bash tests/gpu/validate.sh [REPORT]
#
#  1. builds out of tree in build-gpu/ (ZC_GPU_BUILD overrides) with CUDA and
#     NCCL required, and cuDNN too when this tree has the cuDNN backend
#     (kernels/cudnn): configure fails rather than build without them;
#     ZC_GPU_PREBUILT=1 skips the build and uses what is there (built on a
#     machine with the compilers, run on one with the GPU);
#  2. runs tests/test_gpu: the CUDA kernels against the CPU kernels (fp32,
#     bf16, fp16 on test_gpu's shapes, which include test_attn_kernels'
#     long and ring-step geometries), the NCCL transfers against the host
#     path and the stream-ordered ring attention against single-process
#     attention (one rank per GPU, or 4 ranks sharing one GPU, NCCL going
#     over its socket transport between them); once per attention backend
#     (ZC_ATTN_BACKEND=native, and cudnn where it is built in);
#     with cuDNN, also tests/test_attn_cudnn: the cuDNN backend's forward
#     and backward (bf16, GQA/MQA, causal diagonal and sliced, full) against
#     the CPU kernels, with the error of each;
#  3. runs python/tests/test_cuda.py (zcomm.torch on CUDA tensors) with a
#     python3 that has torch (ZC_PYTHON3 overrides);
#  4. runs zc_ring_attn_perf -G (every mode, fp32 and bf16) on 1 GPU and on
#     every GPU present, per backend, one process per GPU;
#     then zc_attn_perf -G (the tensor-core, scalar and cuDNN attention
#     kernels on the same shapes) and tests/test_cuda_sass.sh (their SASS);
#  5. writes everything to one report (REPORT, default
#     build-gpu/gpu-validation.txt): GPU, driver, CUDA, each test's TAP
#     lines with their errors, each perf table with its TFLOP/s.
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
fail() { echo "validate: FAILED: $*" | tee -a "$report"; status=1; }
section() { printf '\n==== %s\n' "$*" >>"$report"; echo "validate: $*"; }

# ---- build ---------------------------------------------------------------------
cudnn=
backends=(native)
if [[ -d $top/kernels/cudnn ]]; then
  cudnn=--with-cudnn
  backends+=(cudnn)
fi
mkdir -p "$build" "$(dirname "$report")"
: >"$report"
if [[ ${ZC_GPU_PREBUILT:-0} == 1 ]]; then
  # Built elsewhere (a machine with the compilers and UCX headers that the
  # GPU machine lacks), with this same configuration: only check it is there.
  section "build: $build, prebuilt (ZC_GPU_PREBUILT=1)"
  for t in tools/zc_info tools/zc_ring_attn_perf tools/zc_attn_perf tests/test_gpu \
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

# ---- tests/test_gpu, per backend -------------------------------------------------
# Run directly (not through make check) so its TAP lines, with the error of
# every comparison, go to the report; they are appended as they come, so a
# step cut off by its timeout (ZC_GPU_TIMEOUT seconds, default 1800) still
# leaves what it printed.
step_timeout=${ZC_GPU_TIMEOUT:-1800}
# A known failure marked TODO ("not ok ... # TODO why") is reported, not
# failed; a TODO that passes ("ok ... # TODO") fails, so that it is taken out.
tap_step() { # name command...: runs it in $build; fails on a bad exit, Bail out! or not ok
  local name=$1 log=$build/validate-step.log rc bad todo xpass
  shift
  (cd "$build" && timeout "$step_timeout" "$@") 2>&1 | tee "$log" >>"$report"
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
for b in "${backends[@]}"; do
  section "tests/test_gpu, ZC_ATTN_BACKEND=$b"
  tap_step "tests/test_gpu with ZC_ATTN_BACKEND=$b" \
    env ZC_ATTN_BACKEND="$b" ZC_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" \
    ZC_TEST_SRCDIR="$top/tests" ./tests/test_gpu
done

# ---- the cuDNN backend against the CPU kernels ------------------------------------
if [[ -n $cudnn ]]; then
  section "tests/test_attn_cudnn (cuDNN SDPA against the CPU kernels)"
  tap_step "tests/test_attn_cudnn" env ZC_LOG_LEVEL=INFO ./tests/test_attn_cudnn
fi

# ---- zcomm.torch on CUDA tensors -------------------------------------------------
# The Python package over this build's libzcomm, with a python3 that has
# torch with CUDA (ZC_PYTHON3 overrides).
py=${ZC_PYTHON3:-python3}
if torch_version=$("$py" -c 'import numpy, torch; print(torch.__version__)' 2>/dev/null); then
  section "python/tests/test_cuda.py (zcomm.torch on CUDA tensors, torch $torch_version)"
  tap_step "python/tests/test_cuda.py" \
    env ZC_LIBRARY="$build/.libs/libzcomm.so.0" PYTHONPATH="$top/python:$top/python/tests" \
    ZC_SOCKET_IFNAME=lo NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-lo}" \
    "$py" "$top/python/tests/test_cuda.py"
else
  section "python/tests/test_cuda.py: skipped, $py has no numpy or torch"
fi

# ---- zc_ring_attn_perf -G on 1 GPU and on all of them -----------------------------
# One process per GPU through zc_comm_init_env's ZC_* variables (no mpirun
# needed on one machine); TE CP is the baseline inside each table.
perf() { # ranks backend dtype
  local n=$1 b=$2 d=$3 port=$((29500 + RANDOM % 1000)) pids=() rc=0
  for ((r = 0; r < n; r++)); do
    ZC_RANK=$r ZC_SIZE=$n ZC_LOCAL_RANK=$r ZC_MASTER_ADDR=127.0.0.1 ZC_MASTER_PORT=$port \
      ZC_ATTN_BACKEND=$b ZC_SOCKET_IFNAME=lo \
      timeout "$step_timeout" "$build/tools/zc_ring_attn_perf" -G -d "$d" -b 16K -e 64K -n 5 -w 1 \
      >"$build/validate-perf.$r.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$build/validate-perf.0.out" >>"$report"
  ((rc == 0)) || tail -5 "$build"/validate-perf.*.out >>"$report"
  return $rc
}
counts=(1)
((ngpu > 1)) && counts+=("$ngpu")
for b in "${backends[@]}"; do
  for n in "${counts[@]}"; do
    for d in bfloat16 float; do
      section "zc_ring_attn_perf -G -d $d, $n GPU(s), ZC_ATTN_BACKEND=$b"
      perf "$n" "$b" "$d" || fail "zc_ring_attn_perf -G -d $d on $n GPU(s), backend $b"
    done
  done
done

# ---- the native kernels on tensor cores (issue 37) --------------------------------
# zc_attn_perf -G: libzcomm's tensor-core kernels, its scalar ones and
# cuDNN's SDPA on the same shapes in one run (bf16, forward and backward,
# causal and full, head dims 64 and 128, 4k and 16k sequences and varlen
# packs of the paper's three length distributions, 16k tokens a call),
# with each one's error against the scalar kernels; then the kernels'
# SASS (tests/test_cuda_sass.sh: HMMA, LDSM, LDGSTS, no spills).  About
# two minutes on an H100, most of it the scalar kernels.
native_kernels() {
  local log=$build/validate-attn-perf.log rc
  section "zc_attn_perf -G: tensor-core vs scalar kernels vs cuDNN SDPA"
  (cd "$build" && timeout "${ZC_ATTN_PERF_TIMEOUT:-400}" ./tools/zc_attn_perf -G) >"$log" 2>&1
  rc=$?
  cat "$log" >>"$report"
  ((rc == 0)) || fail "zc_attn_perf -G (exit $rc: 1 = results out of tolerance, 2 = a failure)"
  section "tests/test_cuda_sass.sh (the tensor-core kernels' machine code)"
  # its skip (77: no cuobjdump) is not a failure
  tap_step "tests/test_cuda_sass.sh" \
    bash -c 'bash "$0"; rc=$?; exit $((rc == 77 ? 0 : rc))' "$top/tests/test_cuda_sass.sh"
}
native_kernels

section "result: $( ((status)) && echo FAILED || echo passed)"
echo "validate: report in $report"
exit $status
