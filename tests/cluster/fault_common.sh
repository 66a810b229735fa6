# Sourced by the fault drivers (tests/fault_soak.sh, tests/fault_matrix.sh)
# after their options: checks that $prog was built, skips (exit 77) without
# root or network namespaces, and sets $logroot (a temporary directory
# unless -l named one; $keep says whether to leave it).  $1: the driver's
# name, for the temporary directory.
[ -x "$prog" ] || { echo "no $prog (make check first)" >&2; exit 2; }
probe=zc-$1-probe-$$
if [ "$(id -u)" != 0 ] || ! ip netns add "$probe" 2>/dev/null; then
    echo "SKIP not root or no netns"
    exit 77
fi
ip netns del "$probe"
keep=1
if [ -z "$logroot" ]; then
    logroot=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    keep=0
fi
mkdir -p "$logroot"
