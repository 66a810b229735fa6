#!/bin/bash
# zc_alltoallv_perf -A on 2 plain processes (ZC_RANK/ZC_SIZE): the rows
# with the count agreement and the rows without it (run on a second
# communicator made with ZC_ALLTOALLV_CHECK=0 in its zc_config_t) each move
# the data they claim (-c 1: zero wrong elements, one row per size and
# mode, the agreement's cost printed per size, exit 0).
set -u
tool=${ZC_ALLTOALLV_PERF:-tools/zc_alltoallv_perf}
. "${ZC_TEST_SRCDIR:-$(dirname "$0")}/two_ranks.sh" || { echo "Bail out! no two_ranks.sh"; exit 1; }
echo "1..1"

run2 "$tool" -A -b 64 -e 64K -f 32 -n 20 -w 2 -c 1
with=$(echo "$out" | awk '$1 == "zc" && NF == 8' | wc -l)
without=$(echo "$out" | awk '$1 == "zc-nochk" && NF == 8' | wc -l)
wrong=$(echo "$out" | awk '($1 == "zc" || $1 == "zc-nochk") && NF == 8 { s += $8 } END { print s + 0 }')
costs=$(echo "$out" | grep -c "count agreement:")
if [ "$rc0" = 0 ] && [ "$rc1" = 0 ] && [ "$with" = 3 ] && [ "$without" = 3 ] &&
    [ "$wrong" = 0 ] && [ "$costs" = 3 ] && echo "$out" | grep -q "Out of bounds values : 0 OK"; then
    echo "ok 1 - -A: 3 sizes with and without the count agreement, 0 wrong elements"
else
    echo "not ok 1 - -A: exit $rc0/$rc1, $with + $without rows, $wrong wrong, $costs costs"
    echo "$out" | sed 's/^/# /'
fi
