#!/bin/bash
# The zcomm package installed two ways, each then imported with no
# PYTHONPATH and no ZC_LIBRARY from a clean directory
# (python/tests/check_installed.py):
#  1. `make install` into a virtual environment's prefix (python3 -m venv
#     --system-site-packages): libzcomm.so in <venv>/lib, the package in
#     the venv's site-packages, finding the library through _install.py
#     (`make uninstall` at the end leaves no zcomm behind);
#  2. `pip install --no-build-isolation ./python` (Debian's pip and
#     setuptools, offline) into a second venv, loading the libzcomm.so of
#     the first through the dynamic loader (LD_LIBRARY_PATH, as ldconfig
#     would after a system install); then pip uninstall, and make uninstall.
# Skips without Debian's python3 venv, pip or setuptools.
set -u
srcdir=${ZC_TEST_SRCDIR:-$(dirname "$0")}
. "$srcdir/python_env.sh"
top_srcdir=$(cd "$srcdir/.." && pwd)
builddir=$PWD

# (separately: pip imported before setuptools trips setuptools' distutils check)
{ "$python" -c 'import venv' && "$python" -c 'import setuptools' &&
  "$python" -m pip --version; } >/dev/null 2>&1 ||
    zc_skip "$python lacks venv, pip or setuptools (tools/deps.sh installs them)"
version=$(sed -n 's/^AC_INIT(\[libzcomm\], \[\([^]]*\)\].*/\1/p' "$top_srcdir/configure.ac")
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_python_install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset PYTHONPATH ZC_LIBRARY
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1

n=0
failed=0
step() {  # step NAME COMMAND...: one TAP line, the output on failure
    local name=$1; shift
    n=$((n + 1))
    if "$@" >"$tmp/step.log" 2>&1; then
        echo "ok $n - $name"
    else
        failed=$((failed + 1))
        echo "not ok $n - $name"
        tail -20 "$tmp/step.log" | sed 's/^/# /'
    fi
}
tap() {  # tap LOG STATUS: the check's TAP lines renumbered
    zc_tap_lines "" "$1"
    n=$((n + 1))
    if [ "$2" = 0 ]; then echo "ok $n - the check exited 0"; else
        failed=$((failed + 1)); echo "not ok $n - the check exited $2"; tail -5 "$1" | sed 's/^/# /'
    fi
}
check() {  # check LABEL PYTHON PACKAGE_PREFIX LIBRARY_PREFIX [VAR=VALUE...]
    local label=$1 py=$2 pkg=$3 lib=$4; shift 4
    (cd / && env "$@" "$py" "$top_srcdir/python/tests/check_installed.py" "$label" "$version" \
        "$pkg" "$lib") >"$tmp/check.log" 2>&1
    tap "$tmp/check.log" $?
}

# 1. make install (once: libtool relinks every program, which takes minutes)
venv=$tmp/venv
step "python3 -m venv --system-site-packages" "$python" -m venv --system-site-packages \
    --without-pip "$venv"
step "make install prefix=<venv> puts libzcomm and the package there" \
    ${MAKE:-make} -C "$builddir" install prefix="$venv" ZC_PYTHON3="$venv/bin/python"
check "make install" "$venv/bin/python" "$venv/lib" "$venv/lib"

# 2. pip, into another venv, the library from that make install on the
# loader's path
pvenv=$tmp/pvenv
step "python3 -m venv --system-site-packages (for pip)" "$python" -m venv \
    --system-site-packages --without-pip "$pvenv"
# pip builds in the directory it is given: give it a copy, not the sources.
cp -r "$top_srcdir/python" "$tmp/src"
rm -rf "$tmp/src/zcomm/_install.py" "$tmp/src/zcomm/__pycache__"
step "pip install --no-build-isolation ./python" "$pvenv/bin/python" -m pip install \
    --no-build-isolation --no-deps "$tmp/src"
check "pip install" "$pvenv/bin/python" "$pvenv/lib" "$venv/lib" LD_LIBRARY_PATH="$venv/lib"
step "pip show gives the library's version" sh -c \
    "'$pvenv/bin/python' -m pip show zcomm | grep -qx 'Version: $version'"
step "pip uninstall zcomm" "$pvenv/bin/python" -m pip uninstall -y zcomm

step "make uninstall removes the package" \
    ${MAKE:-make} -C "$builddir" uninstall prefix="$venv" ZC_PYTHON3="$venv/bin/python"
n=$((n + 1))
if ls -d "$venv"/lib/python3*/site-packages/zcomm 2>/dev/null | grep -q .; then
    failed=$((failed + 1)); echo "not ok $n - no zcomm directory is left after make uninstall"
else
    echo "ok $n - no zcomm directory is left after make uninstall"
fi
echo "1..$n"
[ "$failed" = 0 ]
