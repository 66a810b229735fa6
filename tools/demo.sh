#!/usr/bin/env bash
# The main demo: install, build, then run the 4-rank zc_sendrecv_perf
# benchmark on this machine with mpirun.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/tools/deps.sh"
"$top/tools/build.sh"
cd "$top/build"
echo "== 4 ranks, zc_sendrecv_perf (ring), 8 B to 64 MiB"
mpirun --allow-run-as-root --oversubscribe -np 4 \
  ./tools/zc_sendrecv_perf -b 8 -e 64M -f 8 -n 20 -w 5
