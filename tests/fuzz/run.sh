#!/usr/bin/env bash
# Build the libFuzzer target for the lengths parser and the planner with
# clang (Debian: clang, libclang-rt-14-dev) and run it.
#   tests/fuzz/run.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
seconds=${2:-60}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
clang -g -O1 -fsanitize=fuzzer,address,undefined -I"$build" -I"$top" -I"$top/include" \
    -I"$build/include" \
    "$top/tests/fuzz/fuzz_lengths.c" "$top/tools/zc_plan_dataset.c" \
    -L"$build/.libs" -Wl,-rpath,"$build/.libs" -lzcomm -o "$work/fuzz_lengths"
mkdir -p "$work/corpus"
printf '1 2 3\n' >"$work/corpus/a"
printf '4096 0 17 65536\n' >"$work/corpus/b"
printf ' 9223372036854775807 -1 x\n' >"$work/corpus/c"
"$work/fuzz_lengths" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 "$work/corpus"
