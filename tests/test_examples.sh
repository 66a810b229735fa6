#!/bin/bash
# The C examples (examples/) run as the user would run them: as one
# process, and as two ranks with ZC_RANK, ZC_SIZE and ZC_MASTER_PORT; each
# exits 0 and says what it checked.
set -u
srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
. "$srcdir/two_ranks.sh" || { echo "Bail out! no two_ranks.sh"; exit 1; }
example=./examples/attn_kernels
[ -x "$example" ] || { echo "1..0 # SKIP $example is not built"; exit 0; }

n=0
check() { # status description output
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        echo "$3" | sed 's/^/# /'
    fi
}

out=$(timeout 120 "$example" 2>&1)
rc=$?
echo "$out" | grep -q "results as libzcomm's own kernels give$" &&
    echo "$out" | grep -q "the kernel refused all" || rc=1
check "$rc" "attn_kernels, one process: the ring through its kernel table as libzcomm's own kernels, bfloat16 refused to libzcomm" "$out"

run2 "$example"
status=$((rc0 + rc1))
[ "$(echo "$out" | grep -c "results as libzcomm's own kernels give$")" = 2 ] || status=1
[ "$(echo "$out" | grep -c "the kernel refused all")" = 2 ] || status=1
check "$status" "attn_kernels, two ranks: the same on each" "$out"
echo "1..$n"
