"""Run by tests/test_python_install.sh from an installed zcomm, with no
PYTHONPATH and no ZC_LIBRARY: prints TAP on where the package and the
library came from and that they work.
usage: check_installed.py LABEL EXPECTED_VERSION PACKAGE_PREFIX LIBRARY_PREFIX"""
import os
import sys

label, version, pkg_prefix, lib_prefix = sys.argv[1:5]
n = 0
failed = 0


def ok(cond, name, diag=""):
    global n, failed
    n += 1
    failed += not cond
    print("%s %d - %s: %s" % ("ok" if cond else "not ok", n, label, name))
    if not cond:
        print("# " + str(diag))


ok("PYTHONPATH" not in os.environ and "ZC_LIBRARY" not in os.environ,
   "runs with neither PYTHONPATH nor ZC_LIBRARY set")
import zcomm  # noqa: E402  (after the environment check, as a user would)
from zcomm import _lib  # noqa: E402

ok(os.path.realpath(zcomm.__file__).startswith(os.path.realpath(pkg_prefix) + "/"),
   "import zcomm finds the installed package", zcomm.__file__)
with open("/proc/self/maps") as f:
    maps = [line.split()[-1] for line in f if "libzcomm.so" in line]
ok(maps and all(os.path.realpath(m).startswith(os.path.realpath(lib_prefix) + "/") for m in maps),
   "it loads the installed libzcomm.so (%s)" % _lib.path, maps)
ok(zcomm.__version__ == version == "%d.%d.%d" % zcomm.version(),
   "zcomm.__version__ %s is configure's and the library's" % zcomm.__version__,
   (zcomm.__version__, version, zcomm.version()))
plan = zcomm.Plan([5, 3], 1, 2, 8)
ok(plan.total_tokens == 8, "a plan works through the installed library")
print("1..%d" % n)
sys.exit(1 if failed else 0)
