#!/usr/bin/env bash
# The whole test suite several times in a row while stress-ng keeps every
# core busy: a test that fails under load is a defect (timing assumptions,
# races), and this is how to find it before CI does.  Run it before every
# change that touches timing.
#
#   bash tests/stress.sh [RUNS] [BUILD_DIR]      (defaults: 5, build)
#
# Ends with "N passed, N failed" counting runs; exits non-zero when a run
# failed, with that run's output and failing test logs kept in
# BUILD_DIR/stress-N.out and BUILD_DIR/stress-N-logs/.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-5}
build=${2:-$top/build}

[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "stress.sh: RUNS must be a positive integer"; exit 2; }
[[ -f $build/Makefile ]] || { echo "stress.sh: no build in $build (run tools/build.sh)"; exit 2; }
if ! command -v stress-ng >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stress-ng >/dev/null ||
    { echo "stress.sh: cannot install stress-ng"; exit 2; }
fi

stress-ng --cpu "$(nproc)" --quiet &
load=$!
trap 'kill "$load" 2>/dev/null; wait "$load" 2>/dev/null' EXIT

passed=0 failed=0
for ((i = 1; i <= runs; i++)); do
  out=$build/stress-$i.out
  start=$SECONDS
  if make -C "$build" check >"$out" 2>&1; then
    passed=$((passed + 1)); verdict=passed
    rm -f "$out"
  else
    failed=$((failed + 1)); verdict="FAILED (logs: $out, $build/stress-$i-logs)"
    grep -E '^(FAIL|ERROR|XPASS)' "$out" | head -20
    mkdir -p "$build/stress-$i-logs"
    grep -lE '^(not ok|Bail out)' "$build"/tests/*.log 2>/dev/null |
      xargs -r cp -t "$build/stress-$i-logs"
  fi
  echo "run $i of $runs: $verdict in $((SECONDS - start)) s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "$passed passed, $failed failed"
((failed == 0))
