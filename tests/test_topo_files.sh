#!/bin/sh
# zc_topo --json on every topology file must print exactly the expected
# output written by hand in tests/fixtures/topo/<name>.expected (hwloc's
# tests/xml style).  <name>.all-ports.expected is the output with
# --all-ports.  Files come from tests/fixtures/topo/ and from
# tests/fixtures/topo/real/ (copies of the real node exports of
# shared/topologies).  How each expectation follows from the PCI tree is written in
# tests/fixtures/topo/README.
#
# Also: broken files fail cleanly, and the emulated-cluster node files equal
# what tools/zc_topo_gen_node.sh generates.
set -u

srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
fixtures=$srcdir/fixtures/topo
# Copies of shared/topologies (data: real node exports), shipped with the tests.
shared=$fixtures/real
gen=$srcdir/../tools/zc_topo_gen_node.sh
tool=${ZC_TOPO:-./tools/zc_topo}
tmp=${TMPDIR:-/tmp}/zc_test_topo_files.$$
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT

# Unset what would change the answers.
unset ZC_TOPO_FILE HWLOC_XMLFILE ZC_IB_HCA ZC_NIC_NETDEV

n=0 failed=0
result() { # status description
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        failed=1
    fi
}
skip() {
    n=$((n + 1))
    echo "ok $n # SKIP $1"
}

# Fixtures: hand-written or generated topology files with their expectations.
for expected in "$fixtures"/*.expected; do
    name=$(basename "$expected" .expected)
    flags=
    case $name in
    *.all-ports) name=${name%.all-ports}; flags=--all-ports ;;
    esac
    case $name in
    topo.*)
        xml=$shared/$name.xml
        if [ ! -d "$shared" ]; then
            skip "$name: no $shared"
            continue
        fi ;;
    *) xml=$fixtures/$name.xml ;;
    esac
    rm -f "$tmp/diff"
    "$tool" --json $flags --xml "$xml" > "$tmp/out" 2> "$tmp/err"
    status=$?
    if [ $status -eq 0 ] && diff -u "$expected" "$tmp/out" > "$tmp/diff"; then
        result 0 "$name $flags: output matches $(basename "$expected")"
    else
        touch "$tmp/diff"
        sed 's/^/# /' "$tmp/err" "$tmp/diff"
        result 1 "$name $flags: output matches $(basename "$expected") (exit $status)"
    fi
done

# Every real export has its expectation (a new file must get one).
if [ -d "$shared" ]; then
    for xml in "$shared"/*.xml; do
        name=$(basename "$xml" .xml)
        test -f "$fixtures/$name.expected"
        result $? "$name has an expected output"
    done
fi

# Broken input: a clear error, exit status 1, no crash.
for bad in missing.xml empty.xml malformed.xml not-topology.xml; do
    "$tool" --xml "$fixtures/$bad" > "$tmp/out" 2> "$tmp/err"
    status=$?
    grep -q "xml_path: .*$bad" "$tmp/err"
    found=$?
    [ $status -eq 1 ] && [ $found -eq 0 ] && [ ! -s "$tmp/out" ]
    result $? "$bad: exit 1 with an error naming the file ($(head -c 120 "$tmp/err"))"
done
"$tool" --bogus > /dev/null 2>&1
[ $? -eq 2 ]
result $? "an unknown option exits 2"

# Default output: the matrix and the legend.
"$tool" --xml "$fixtures/cluster-a.xml" > "$tmp/out" 2>&1
grep -q '^GPU7    SYS     SYS     NODE    PIX     1$' "$tmp/out" &&
    grep -q '^  PIX  = Connection traversing at most a single PCIe bridge$' "$tmp/out" &&
    grep -q '^  GPU0   0000:0c:00.0  NIC0   mlx5_0       PIX   0     yes (2 GPUs)$' "$tmp/out"
result $? "text output: matrix row, legend and assignment line"

# Emulated-cluster nodes are exactly what the generator writes.
for k in 1 2 3 4 5 6 7 8; do
    sh "$gen" -g $k -n $k -s 1 > "$tmp/gen.xml" 2> "$tmp/err"
    cmp -s "$tmp/gen.xml" "$fixtures/emu-node-$k.xml"
    result $? "emu-node-$k.xml equals zc_topo_gen_node.sh -g $k -n $k"
done
for spec in "-g 8 -n 4 -s 2:cluster-a" "-g 8 -n 8 -s 2:cluster-c" "-g 0 -n 2:no-gpu" \
            "-g 4 -n 0 -s 2:no-nic" "-g 2 -n 2 -d 1:port-down"; do
    sh "$gen" ${spec%%:*} > "$tmp/gen.xml" 2> "$tmp/err"
    cmp -s "$tmp/gen.xml" "$fixtures/${spec#*:}.xml"
    result $? "${spec#*:}.xml equals zc_topo_gen_node.sh ${spec%%:*}"
done

echo "1..$n"
exit $failed
