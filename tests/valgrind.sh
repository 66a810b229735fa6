#!/usr/bin/env bash
# valgrind memcheck over the single-process test programs (the multi-rank
# ones fork ranks that UCX's shared memory makes noisy under valgrind; ASan
# covers them: configure --enable-sanitizers).  Every error and every
# definite or indirect leak fails the run.
#
#   tests/valgrind.sh [BUILD_DIR] [PROGRAM...]    (default: build, the list below)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
shift $(( $# > 0 ? 1 : 0 ))
progs=("$@")
((${#progs[@]})) || progs=(test_status test_plan_args test_plan_partition test_plan_remap
                           test_topo test_launch_env test_gpu_args test_attn_kernels test_host_alloc test_cpus)
if ! command -v valgrind >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null ||
    { echo "valgrind.sh: cannot install valgrind"; exit 2; }
fi
export ZC_TEST_SRCDIR="$top/tests" ZC_SHARED_DIR="${ZC_SHARED_DIR:-$top/../shared}"
export ZC_NUM_THREADS=${ZC_NUM_THREADS:-2}
cd "$build"
failed=0
for p in "${progs[@]}"; do
  log="$build/tests/$p.valgrind.log"
  start=$SECONDS
  "$build/libtool" --mode=execute valgrind --tool=memcheck --error-exitcode=99 \
    --leak-check=full --errors-for-leak-kinds=definite,indirect --track-origins=yes \
    --suppressions="$top/tests/valgrind.supp" --log-file="$log" "tests/$p" >"$log.tap" 2>&1
  rc=$?
  errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$log" | tail -1)
  notok=$(grep -c '^not ok' "$log.tap")
  printf '%-22s exit %3d  memcheck errors %s  not ok %s  %4d s\n' "$p" "$rc" "${errors:-?}" "$notok" $((SECONDS - start))
  [[ $rc == 0 && ${errors:-1} == 0 && $notok == 0 ]] || failed=1
done
exit $failed
