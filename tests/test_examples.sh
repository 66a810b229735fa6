#!/bin/bash
# The examples run as written, on 1 rank and on several making 2 emulated
# nodes (ZC_NODE_ID), and agree: README's examples/ring_attention (C: the
# 4 ranks' sums of the attention output add up to the one rank's, every
# token placed once) and python/examples/quickstart.py (PyTorch: the loss
# and the gradient norm rank 0 prints equal the one rank's), and
# examples/attn_kernels (C, a kernel table: on 1 and 2 ranks, the ring
# through it gives libzcomm's own kernels' results, bfloat16 refused to
# libzcomm's), each rank a plain process as a launcher starts it
# (ZC_RANK/ZC_SIZE/ZC_MASTER_*, or torchrun's RANK/WORLD_SIZE/MASTER_*).
# The Python part skips without torch.
set -u
srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
. "$srcdir/python_env.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_examples.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0

# ranks N PREFIX CMD...: N processes of CMD, rank r's output in PREFIX.r;
# retried on another port when one was taken; sets $status (0: all exited 0).
ranks() {
    local size=$1 prefix=$2 try r pids port
    shift 2
    for try in 1 2 3 4 5; do
        port=$((21000 + RANDOM % 20000)) pids=() status=0
        for ((r = 0; r < size; r++)); do
            ZC_RANK=$r ZC_SIZE=$size ZC_MASTER_ADDR=127.0.0.1 ZC_MASTER_PORT=$port \
                RANK=$r WORLD_SIZE=$size MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 1)) \
                ZC_NODE_ID=examples-$$-node$((r * 2 / size)) timeout 120 "$@" >"$prefix.$r" 2>&1 &
            pids+=($!)
        done
        for r in "${pids[@]}"; do wait "$r" || status=1; done
        cat "$prefix".* | grep -q "Address already in use" || return 0
    done
}

# C: the sum over ranks of "sum of out", and of the tokens.
prog=./examples/ring_attention
for size in 1 4; do
    ranks $size "$tmp/c$size" "$prog"
    cat "$tmp/c$size".* >"$tmp/c$size"
    zc_result $status "ring_attention on $size rank(s) exits 0" "$tmp/c$size"
    read -r tokens sum < <(awk '/sum of out/ { t += $5; s += $NF; k++ } END { printf "%d %.6f\n", k ? t : -1, s }' "$tmp/c$size")
    eval "c${size}_tokens=$tokens c${size}_sum=$sum"
done
zc_result "$([ "$c4_tokens" = 2048 ] && [ "$c1_tokens" = 2048 ]; echo $?)" \
    "ring_attention: every token of the 2048 on one rank or another ($c1_tokens, $c4_tokens)"
zc_result "$(awk -v a="$c1_sum" -v b="$c4_sum" 'BEGIN { d = a - b; exit !(a != 0 && (d < 0 ? -d : d) <= 1e-5 * (a < 0 ? -a : a)) }'; echo $?)" \
    "ring_attention: 4 ranks' attention output sums to one rank's within 1e-5 ($c4_sum, $c1_sum)"

# C, a kernel table: each rank says what it checked.
prog=./examples/attn_kernels
for size in 1 2; do
    ranks $size "$tmp/k$size" "$prog"
    cat "$tmp/k$size".* >"$tmp/k$size"
    [ "$(grep -c "results as libzcomm's own kernels give$" "$tmp/k$size")" = $size ] &&
        [ "$(grep -c "the kernel refused all" "$tmp/k$size")" = $size ] || status=1
    zc_result $status "attn_kernels on $size rank(s): the ring through its kernel table as libzcomm's own kernels, bfloat16 refused to libzcomm" "$tmp/k$size"
done

# Python: rank 0's "loss L grad-norm G" line.
if "$python" -c 'import numpy, torch' 2>/dev/null; then
    export ZC_LIBRARY=${ZC_LIBRARY:-$PWD/.libs/libzcomm.so} PYTHONPATH=$pydir OMP_NUM_THREADS=1
    for size in 1 4; do
        ranks $size "$tmp/py$size" "$python" "$pydir/examples/quickstart.py"
        zc_result $status "quickstart.py on $size rank(s) exits 0" "$tmp/py$size.0"
        eval "py$size=\"$(sed -n 's/^loss \([^ ]*\) grad-norm \([^ ]*\) .*/\1 \2/p' "$tmp/py$size.0")\""
    done
    zc_result "$(awk -v a="$py1" -v b="$py4" 'BEGIN { split(a, x); split(b, y)
        for (i = 1; i <= 2; i++) { d = x[i] - y[i]; if (x[i] == "" || (d < 0 ? -d : d) > 1e-5 * x[i]) exit 1 }
        exit 0 }'; echo $?)" "quickstart.py: loss and gradient norm on 4 ranks equal one rank's ($py4; $py1)"
else
    n=$((n + 1)); echo "ok $n # SKIP $python lacks numpy or torch"
fi
echo "1..$n"
[ "$failed" = 0 ]
