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
