#!/usr/bin/env bash
# Install what libzcomm needs to build, test and benchmark on Debian 12
# (as root).  Idempotent: it only calls apt-get when something is missing.
set -euo pipefail

packages=(
  build-essential autoconf automake libtool pkg-config
  libucx-dev ucx-utils libhwloc-dev hwloc-nox libibverbs-dev
  openmpi-bin libopenmpi-dev libglpk-dev
  iproute2 procps psmisc
  man-db groff-base
  python3-numpy python3-scipy python3-torch libopenblas0-pthread
  python3-pip python3-setuptools python3-wheel python3-venv python3-matplotlib
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# cuobjdump and nvdisasm for tests/test_cuda_sass.sh (the SASS of the CUDA
# attention kernels), from PyPI where the CUDA toolkit here lacks them.
cuda=${CUDA_HOME:-/usr/local/cuda}
if [[ -x $cuda/bin/nvcc && ! -x $cuda/bin/cuobjdump ]] &&
  ! /usr/bin/python3 -c 'import glob, nvidia, sys
sys.exit(not any(glob.glob(p + "/cu*/bin/nvdisasm") for p in nvidia.__path__))' 2>/dev/null; then
  echo "deps.sh: installing nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm (pip)"
  /usr/bin/python3 -m pip install -q --break-system-packages nvidia-cuda-cuobjdump \
    nvidia-cuda-nvdisasm >/dev/null 2>&1 ||
    echo "deps.sh: no cuobjdump: tests/test_cuda_sass.sh will skip"
fi
