"""The binding's copies of zcomm.h cannot drift: every ctypes struct's size
and field offsets equal the C compiler's (a probe generated from
zcomm._lib.STRUCTS, compiled and run), every declared function exists in
zcomm.h with the declared number of parameters, and every C function the
package calls is declared.

usage: test_structs.py INCLUDE_DIR... (zcomm.h, zcomm_version.h); CC from
the environment (default cc)."""
import ctypes
import os
import re
import shlex
import subprocess
import sys
import tempfile

import tap
import zcomm
from zcomm import _lib

includes = sys.argv[1:]
header = next(os.path.join(d, "zcomm.h") for d in includes
              if os.path.exists(os.path.join(d, "zcomm.h")))

lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <zcomm.h>", "int main(void) {"]
for s in _lib.STRUCTS:
    lines.append('printf("%s sizeof %%zu\\n", sizeof(%s));' % (s._c_name_, s._c_name_))
    for name, _ in s._fields_:
        lines.append('printf("%s %s %%zu\\n", offsetof(%s, %s));'
                     % (s._c_name_, name, s._c_name_, name))
lines += ["return 0;", "}"]
with tempfile.TemporaryDirectory() as tmp:
    src, exe = os.path.join(tmp, "probe.c"), os.path.join(tmp, "probe")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    cc = shlex.split(os.environ.get("CC") or "cc")
    build = subprocess.run(cc + ["-o", exe, src] + ["-I" + d for d in includes],
                           capture_output=True, text=True)
    tap.ok(build.returncode == 0, "the probe of %d structs compiles against zcomm.h"
           % len(_lib.STRUCTS), build.stderr)
    c_values = {}
    if build.returncode == 0:
        for line in subprocess.run([exe], capture_output=True, text=True,
                                   check=True).stdout.splitlines():
            struct, field, value = line.split()
            c_values[(struct, field)] = int(value)

for s in _lib.STRUCTS:
    want = [("sizeof", c_values.get((s._c_name_, "sizeof")), ctypes.sizeof(s))]
    want += [(name, c_values.get((s._c_name_, name)), getattr(s, name).offset)
             for name, _ in s._fields_]
    bad = ["%s: C %s, ctypes %s" % w for w in want if w[1] != w[2]]
    tap.ok(not bad, "%s: size and %d field offsets equal C's" % (s._c_name_, len(s._fields_)),
           "\n".join(bad))

# Prototypes: ZC_API <type> name(params);  (params may span lines)
text = open(header).read()
protos = {}
for m in re.finditer(r"ZC_API\s+[^;(]*?\b(zc_\w+)\s*\(([^)]*)\)\s*;", text):
    params = m.group(2).strip()
    protos[m.group(1)] = 0 if params in ("", "void") else params.count(",") + 1
bad = []
for name, (_, argtypes) in _lib.FUNCTIONS.items():
    if name not in protos:
        bad.append("%s: not in zcomm.h" % name)
    elif protos[name] != len(argtypes):
        bad.append("%s: %d parameters in zcomm.h, %d declared" % (name, protos[name],
                                                                  len(argtypes)))
tap.ok(not bad, "the %d declared functions are zcomm.h's, with its parameter counts"
       % len(_lib.FUNCTIONS), "\n".join(bad))

# Every zc_ name the package's code calls is declared.
pkg = os.path.dirname(zcomm.__file__)
used = set()
for fname in os.listdir(pkg):
    if fname.endswith(".py") and fname != "_lib.py":
        used |= set(re.findall(r"\"(zc_\w+)\"", open(os.path.join(pkg, fname)).read()))
        used |= set(re.findall(r"lib\.(zc_\w+)", open(os.path.join(pkg, fname)).read()))
undeclared = sorted(n for n in used if n not in _lib.FUNCTIONS and n in protos)
tap.ok(not undeclared, "every C function the package names (%d) is in the table" % len(used),
       ", ".join(undeclared))
try:
    _lib.lib.zc_plan_seq  # in zcomm.h, not in the table
    tap.ok(False, "an undeclared function is not reachable through zcomm._lib.lib")
except AttributeError:
    tap.ok(True, "an undeclared function is not reachable through zcomm._lib.lib")
sys.exit(tap.done())
