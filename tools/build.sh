#!/usr/bin/env bash
# Configure and build libzcomm in ./build (out of tree), using every core.
# Extra arguments go to configure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
[[ -x configure && configure -nt configure.ac ]] || autoreconf -fi >/dev/null
mkdir -p build
cd build
[[ -f Makefile ]] || ../configure -q "$@"
make -j"$(nproc)" >/dev/null
