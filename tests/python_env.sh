# Sourced (bash) by the tests of the Python package, tests/test_python.sh,
# tests/test_python_install.sh and tests/test_train_perf.sh, once they have
# set srcdir (ZC_TEST_SRCDIR, else the script's directory); make check runs
# them from the build directory.  Sets
#   python  the interpreter under test: $ZC_PYTHON, else Debian's /usr/bin/python3
#   pydir   the package's sources, python/ beside tests/
# and exports PYTHONDONTWRITEBYTECODE=1 (nothing written into the sources);
# zc_tap_lines from tests/tap_lines.sh.
. "$srcdir/tap_lines.sh"
python=${ZC_PYTHON:-/usr/bin/python3}
pydir=$srcdir/../python
export PYTHONDONTWRITEBYTECODE=1

# zc_skip REASON: the plan of a test that does not run, and exit 0.
zc_skip() {
    echo "1..0 # SKIP $1"
    exit 0
}

# zc_torch_env: the package from the sources (PYTHONPATH=$pydir) on the
# build's library (ZC_LIBRARY, else .libs/libzcomm.so of the current
# directory), one OpenMP thread per process; skips (exit 0) when $python
# lacks numpy or torch, or when libzcomm is a sanitizer build.
zc_torch_env() {
    "$python" -c 'import numpy, torch' 2>/dev/null || zc_skip "$python lacks numpy or torch"
    export ZC_LIBRARY=${ZC_LIBRARY:-$PWD/.libs/libzcomm.so}
    # A sanitizer build's library needs its runtime preloaded into the
    # interpreter, which would then report Python's own allocations.
    if ldd "$ZC_LIBRARY" 2>/dev/null | grep -q 'libasan\|libubsan'; then
        zc_skip "libzcomm is a sanitizer build"
    fi
    export PYTHONPATH=$pydir
    export OMP_NUM_THREADS=1
}

# zc_result STATUS DESCRIPTION [LOG]: one TAP line numbered on from $n, ok
# when STATUS is 0; otherwise not ok, counted in $failed, with the last
# lines of LOG (a file) as comments.
zc_result() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        failed=$((failed + 1))
        echo "not ok $n - $2"
        [ -n "${3:-}" ] && tail -15 "$3" | sed 's/^/# /'
    fi
    return 0
}
