#!/usr/bin/env bash
# The tensor-core attention kernels as nvcc built them (kernels/cuda/
# attn_mma.cu), read back from the object with cuobjdump: for every kernel
# and every architecture in it, the machine code holds HMMA (mma.sync),
# LDSM (ldmatrix) and LDGSTS (cp.async), so the inner loops run on tensor
# cores from shared memory filled asynchronously; and the head dim 64 and
# 128 kernels use no stack (no register spills).  The SASS line counts go
# to the log.
#
# Skips (77) in a build without CUDA, or without cuobjdump and nvdisasm
# (the toolkit's, or PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm,
# which tools/deps.sh installs beside a CUDA toolkit that lacks them).
# Run from the build directory (make check does).
set -uo pipefail
obj=${ZC_SASS_OBJECT:-kernels/cuda/.libs/attn_mma.o}

if [[ ! -f $obj ]]; then
  echo "1..0 # SKIP no $obj: built without CUDA"
  exit 77
fi
pip_bins() { # the bin directories of PyPI's nvidia-cuda-* wheels, for each python3 found
  local py
  for py in python3 /usr/bin/python3; do
    "$py" -c 'import nvidia, glob, os
for p in nvidia.__path__: print("\n".join(glob.glob(os.path.join(p, "cu*", "bin"))))' 2>/dev/null
  done
}
for dir in "${CUDA_HOME:-/usr/local/cuda}/bin" $(pip_bins); do
  [[ -x $dir/cuobjdump && -x $dir/nvdisasm ]] && PATH=$dir:$PATH
done
if ! command -v cuobjdump >/dev/null || ! command -v nvdisasm >/dev/null; then
  echo "1..0 # SKIP cuobjdump or nvdisasm not found"
  exit 77
fi

sass=$(cuobjdump --dump-sass "$obj" 2>&1) ||
  { echo "Bail out! cuobjdump: $sass" | head -3; exit 1; }
usage=$(cuobjdump --dump-resource-usage "$obj" 2>&1) || { echo "Bail out! cuobjdump"; exit 1; }

# "arch function HMMA LDSM LDGSTS" per kernel
counts=$(awk '
  /code for sm_/ { arch = $3 }
  /Function :/ { f = $3; seen[arch " " f] = 1 }
  / HMMA\./ { h[arch " " f]++ }
  / LDSM\./ { l[arch " " f]++ }
  / LDGSTS/ { g[arch " " f]++ }
  END { for (k in seen) print k, h[k] + 0, l[k] + 0, g[k] + 0 }' <<<"$sass" | sort)
# "arch function stack" per kernel
stacks=$(awk '
  /^arch = / { arch = "sm_" substr($3, 4) }
  /Function / { sub(":", "", $2); f = $2 }
  /STACK:/ { for (i = 1; i <= NF; i++) if ($i ~ /^STACK:/) print arch, f, substr($i, 7) }' \
  <<<"$usage" | sort)

n=0
nk=$(wc -l <<<"$counts")
echo "1..$((nk + 1))"
while read -r arch fn hmma ldsm ldgsts; do
  n=$((n + 1))
  if ((hmma > 0 && ldsm > 0 && ldgsts > 0)); then r=ok; else r="not ok"; fi
  echo "$r $n - $arch $fn: $hmma HMMA, $ldsm LDSM, $ldgsts LDGSTS"
done <<<"$counts"
spilled=$(awk '$2 ~ /Li(64|128)E/ && $3 != 0' <<<"$stacks")
n=$((n + 1))
if [[ -z $spilled && -n $stacks ]]; then
  echo "ok $n - the head dim 64 and 128 kernels use no stack (no spills)"
else
  echo "not ok $n - the head dim 64 and 128 kernels spill: ${spilled:-no resource usage read}"
fi
awk '{ print "# stack " $0 }' <<<"$stacks"
