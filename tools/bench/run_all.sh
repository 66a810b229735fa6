#!/usr/bin/env bash
# Every table of BENCHMARKS.md measured again, on this machine, now.
#
#   sudo tools/bench/run_all.sh [-b BUILD] [-o DIR] [SECTION...]
#
# SECTION: topology cluster p2p routed rails alltoallv packed attn ring masks
# train planner model (default: all, in that order).  Each section runs its benchmark
# with the baseline of its ratio in the same run (BENCHMARKS.md, "How the
# numbers are made") and writes its raw output to DIR/SECTION.log, with
# the load average at its start and end; then tools/bench/tables.py turns
# DIR into DIR/results.md: a header (date, commit, machine from lscpu, versions)
# and one markdown table per section, in BENCHMARKS.md's layout, to paste
# over the tables there.  DIR defaults to BUILD/bench-DATE.
#
# Root: the multi-node sections run on the emulated cluster
# (tests/cluster/zc_cluster).  All sections take about two hours on the
# quiet 2-core machine, the training step most of it (five calibrated runs:
# 2 and 4 ranks per node, quiet and beside stress-ng --cpu 2, and with
# headroom; ZC_BENCH_TRAIN=quick runs the first only, about 20 minutes,
# ZC_BENCH_TRAIN="2:headroom 4:none" the runs named: ranks per node and
# none, stress or headroom);
# every other section takes 1 to 15 minutes.  At a load average of 25 the
# training step alone takes hours.  The machine should be otherwise quiet: the load average
# is recorded beside every table, and the training step is run again
# under `stress-ng --cpu 2` on purpose.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build
out=
while getopts b:o:h opt; do
    case $opt in
    b) build=$(cd "$OPTARG" && pwd) ;;
    o) out=$OPTARG ;;
    *) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
all=(topology cluster p2p routed rails alltoallv packed attn ring masks train planner model)
sections=("$@")
((${#sections[@]})) || sections=("${all[@]}")
for s in "${sections[@]}"; do
    [[ " ${all[*]} " == *" $s "* ]] || { echo "$0: unknown section '$s' (${all[*]})" >&2; exit 2; }
done
[ -x "$build/tools/zc_info" ] || { echo "$0: no build in $build (tools/build.sh)" >&2; exit 2; }
out=${out:-$build/bench-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
shared=${ZC_SHARED_DIR:-$top/../shared}
[ -d "$shared/topologies" ] || shared=/work/shared
# A rank still running after -t seconds fails its run: hours, for a loaded machine.
cluster=(bash "$top/tests/cluster/zc_cluster" -t 7200)
py=/usr/bin/python3
pyenv=(-x "PYTHONPATH=$top/python" -x "ZC_LIBRARY=$build/.libs/libzcomm.so"
       -x ZC_NUM_THREADS=1 -x OMP_NUM_THREADS=1 -x PYTHONDONTWRITEBYTECODE=1)

load() { cut -d' ' -f1-3 /proc/loadavg; }

# What the numbers were measured with: read by tables.py for the header.
{
    echo "date $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "commit $(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "cpu $(lscpu | sed -n 's/^Model name: *//p') family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) cores, $(grep -c avx512f /proc/cpuinfo | sed 's/^0$/no/;s/^[1-9].*/with/') AVX-512"
    echo "memory $(free -g | awk '/^Mem:/ { print $2 }') GiB"
    echo "os $(. /etc/os-release && echo "$PRETTY_NAME"), Linux $(uname -r)"
    echo "ucx $(ucx_info -v 2>/dev/null | sed -n "s/^# Version //p")"
    echo "mpi $(mpirun --version 2>/dev/null | head -1)"
    echo "torch $($py -c 'import torch; print(torch.__version__)' 2>/dev/null)"
    echo "gcc $(gcc -dumpfullversion)"
} >"$out/machine"

# run SECTION: its function's output to SECTION.log, between two load lines.
run() {
    local s=$1 t0=$SECONDS status
    echo "== $s (load average $(load))" >&2
    {
        echo "# load average at start: $(load)"
        "sec_$s"
        status=$?
        echo "# load average at end: $(load)"
        echo "# status $status, $((SECONDS - t0)) s"
    } >"$out/$s.log" 2>&1
    tail -n 1 "$out/$s.log" >&2
}

sec_topology() {
    LD_LIBRARY_PATH=$build/.libs sh "$top/tools/zc_topo_bench.sh" -n 11 \
        "$build/tools/.libs/zc_topo" "$shared"/topologies/*.xml \
        "$top/tests/fixtures/topo/cluster-a.xml" "$top/tests/fixtures/topo/emu-node-8.xml"
}

sec_cluster() {
    "${cluster[@]}" -N 2 -K 4 --check
}

sec_p2p() {
    bash "$top/tools/bench_sendrecv_vs_ucx.sh" "$build" 5 16 bw
    bash "$top/tools/bench_sendrecv_vs_ucx.sh" "$build" 9 1 lat
}

sec_routed() {
    "${cluster[@]}" -N 2 -K 4 -R 4 -q -o "$out/routed.ranks" -- \
        "$build/tools/zc_routed_perf" -b 16M -e 128M -f 2 -n 3 -w 1 &&
        cat "$out/routed.ranks/rank0.log"
}

# Rails at 200, 200, 100 and 50 Mbit/s (tools/bench_rails.sh: striping by
# rate against equal shares, a NIC cut mid-run), then the fault matrix's
# failover rows (a NIC of 2 or of 4, every NIC of a node, down mid-call).
sec_rails() {
    bash "$top/tools/bench_rails.sh" -b "$build" -o "$out/rails" >/dev/null &&
        cat "$out/rails/sweep-routed" "$out/rails/sweep-alltoallv" &&
        bash "$top/tests/fault_matrix.sh" -b "$build" -l "$out/rails/faults" \
            -f "nicdown nicdown4 alldown"
}

# zcomm.torch per batch against the bare alltoallv of the same bytes
# (zc_varlen_perf(1)), 4 and 8 ranks.
sec_packed() {
    local r
    for r in 2 4; do
        echo "# ranks per node $r"
        rm -rf "$out/packed.ranks"
        "${cluster[@]}" -N 2 -K 2 -R $r --rate 4gbit -q -o "$out/packed.ranks" "${pyenv[@]}" -- \
            $py "$top/python/examples/zc_varlen_perf.py" --tokens 262144 --heads 2 &&
            cat "$out/packed.ranks/rank0.log" || return 1
    done
}

# zc_remap_alltoallv against Open MPI's MPI_Alltoallv in the same processes,
# across the emulated nodes (2 x 4 NICs x 4 ranks).
sec_alltoallv() {
    local args
    for args in "-S 1 -b 64 -e 64K -f 4 -n 1000 -w 200" "-S 1 -b 256K -e 64M -f 4 -n 3 -w 1"; do
        rm -rf "$out/alltoallv.ranks"
        # shellcheck disable=SC2086
        "${cluster[@]}" -N 2 -K 4 -R 1 -q -o "$out/alltoallv.ranks" -- \
            "$top/tools/zc_cluster_mpirun.sh" -n 4 -- "$build/tools/zc_alltoallv_mpi_perf" $args &&
            cat "$out/alltoallv.ranks/rank0.log" || return 1
    done
}

# The CPU kernels against PyTorch's attention, alternating, 3 rounds.
sec_attn() {
    local r shape=(-b 4096 -H 8 -D 128 -d float -C 1)
    for r in 1 2 3; do
        echo "# round $r zc_attn_perf"
        "$build/tools/zc_attn_perf" "${shape[@]}" -n 3 -w 1 || return 1
        echo "# round $r torch"
        $py "$top/tools/zc_attn_torch_baseline.py" "${shape[@]}" -n 2 -w 1 || return 1
    done
}

sec_ring() {
    local r
    for r in 2 4; do
        echo "# ranks per node $r"
        rm -rf "$out/ring.ranks"
        "${cluster[@]}" -N 2 -K 4 -R $r -q -o "$out/ring.ranks" -x ZC_NUM_THREADS=1 -- \
            "$build/tools/zc_ring_attn_perf" -b 16K -e 16K -n 5 -w 1 -c 1 -d bfloat16 &&
            cat "$out/ring.ranks/rank0.log" || return 1
    done
}

# Ring attention under a window of 256 and under the full mask, every mode.
sec_masks() {
    local mask
    for mask in "--window 255,0" --full; do
        echo "# mask $mask"
        rm -rf "$out/masks.ranks"
        # shellcheck disable=SC2086
        "${cluster[@]}" -N 2 -K 4 -R 2 -q -o "$out/masks.ranks" -x ZC_NUM_THREADS=1 -- \
            "$build/tools/zc_ring_attn_perf" -b 16K -e 16K -n 3 -w 1 -c 1 -d bfloat16 \
            -D github,prolong64k $mask && cat "$out/masks.ranks/rank0.log" || return 1
    done
}

# train_run NAME RANKS LOAD [zc_train_perf options]: one calibrated
# zc_train_perf run, its JSON to NAME.json; LOAD stress runs it beside
# stress-ng --cpu 2.
train_run() {
    local name=$1 r=$2 with=$3 hog= status
    shift 3
    echo "# run $name: $r ranks per node, $with, $*"
    if [ "$with" = stress ]; then
        stress-ng --cpu 2 --timeout 0 >/dev/null 2>&1 &
        hog=$!
        sleep 20  # let the load average see it
    fi
    rm -rf "$out/$name.ranks"
    "${cluster[@]}" -N 2 -K 4 -R "$r" -q -o "$out/$name.ranks" "${pyenv[@]}" -- \
        $py "$top/python/examples/zc_train_perf.py" --warmup 1 --iters 2 \
        --json "$out/$name.json" "$@"
    status=$?
    [ -n "$hog" ] && kill "$hog" && wait "$hog" 2>/dev/null
    cat "$out/$name.ranks/rank0.log"
    return $status
}

sec_train() {
    local status=0 runs="2:none 2:stress 4:none 2:headroom 4:stress" run r with
    case ${ZC_BENCH_TRAIN:-} in
    quick) runs=2:none ;;
    ?*) runs=$ZC_BENCH_TRAIN ;;
    esac
    for run in $runs; do
        r=${run%%:*} with=${run#*:}
        if [ "$with" = headroom ]; then
            # The capacity trade-off: Zeppelin planned with 25 % headroom, remapped.
            train_run "train-r$r-headroom" "$r" none --capacity 1.25 \
                --methods te_cp,zeppelin_noremap,zeppelin || status=1
        else
            train_run "train-r$r-$with" "$r" "$with" --methods te_cp,routing,zeppelin || status=1
        fi
    done
    return $status
}

sec_planner() {
    local d c
    "$build/tools/zc_plan_quality" -n 20 "$top/tools/zc_plan_clusters/cluster-a.conf" \
        "$top/tools/zc_plan_clusters/cluster-c.conf" || return 1
    for d in arxiv github prolong64k; do
        for c in 100 125; do
            echo "# planning time: dataset $d capacity $c"
            "$build/tools/zc_remap_solver_perf" -n 10 -g 0 -d "$d" -c "$c" || return 1
        done
    done
}

# The cost model against the paper's figures: each row's command.
sec_model() {
    local C=$top/tools/zc_plan_clusters plan=$build/tools/zc_plan g d s
    echo "# fig11a"
    "$plan" --nodes 2 --gpus-per-node 8 --capacity 4096 --cluster "$C/cluster-a.conf" \
        --dkv-bytes 2 --compare 65536 | sed -n '/^# one layer/,$p' || return 1
    echo "# fig11c"
    "$plan" --nodes 2 --gpus-per-node 8 --capacity 4096 --cluster "$C/cluster-a.conf" \
        --dkv-bytes 2 --compare 32768 32768 | sed -n '/^# one layer/,$p' || return 1
    for g in 16 32 64; do
        for d in arxiv github prolong64k; do
            for s in 1 2 3 4 5; do
                echo "# 7b gpus $g dataset $d seed $s"
                "$plan" --nodes $((g / 8)) --gpus-per-node 8 --capacity 5120 --total $((g * 4096)) \
                    --dataset "$d" --seed "$s" --model 7b --cluster "$C/cluster-a.conf" \
                    --dkv-bytes 2 --compare | sed -n '/^# modeled training step/,/^$/p' || return 1
            done
        done
    done
    for d in arxiv github prolong64k; do
        for s in 1 2 3 4 5; do
            echo "# 3b gpus 32 dataset $d seed $s"
            "$plan" --nodes 4 --gpus-per-node 8 --capacity 5120 --total 131072 --dataset "$d" \
                --seed "$s" --cluster "$C/cluster-a.conf" --dkv-bytes 2 --compare |
                sed -n '/^# modeled training step/,/^$/p' || return 1
        done
    done
}

for s in "${sections[@]}"; do
    run "$s"
done
$py "$top/tools/bench/tables.py" "$out" >"$out/results.md" &&
    echo "tables: $out/results.md" >&2
