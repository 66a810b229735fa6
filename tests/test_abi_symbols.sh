#!/bin/sh
# libzcomm.so exports exactly the public API: the functions include/zcomm.h
# declares ZC_API, no more (no internal function, no C++ template instance
# from the CUDA objects) and no fewer, each in the version node of
# libzcomm.map, which lists the same functions.  Run from the build
# directory (nm -D --defined-only .libs/libzcomm.so).
top=${ZC_TEST_SRCDIR:-$(dirname "$0")}/..
lib=.libs/libzcomm.so
if ! command -v nm >/dev/null 2>&1 || ! command -v python3 >/dev/null 2>&1; then
    echo "1..0 # SKIP nm or python3 missing"
    exit 0
fi
if [ ! -f "$lib" ]; then
    echo "1..0 # SKIP no $lib here (run from the build directory)"
    exit 0
fi
nm -D --defined-only "$lib" >nm.abi.out 2>&1 || { echo "1..1"; echo "not ok 1 - nm -D $lib"; cat nm.abi.out | sed 's/^/# /'; exit 1; }
exec python3 - "$top/include/zcomm.h" "$top/libzcomm.map" nm.abi.out <<'PY'
import re, sys
header, mapfile, nmout = sys.argv[1:]
text = re.sub(r"/\*.*?\*/", "", open(header).read(), flags=re.S)
text = re.sub(r"^\s*#.*$", "", text, flags=re.M)      # the ZC_API definition itself
api = set(re.findall(r"\bZC_API\b[^;{]*?\b(\w+)\s*\(", text))
maptext = re.sub(r"/\*.*?\*/", "", open(mapfile).read(), flags=re.S)
glob = re.search(r"global:(.*?)local:", maptext, re.S)
mapped = set(re.findall(r"(\w+)\s*;", glob.group(1))) if glob else set()
exported, versions = set(), {}
for line in open(nmout):
    f = line.split()
    if len(f) < 2 or f[-2] in ("A",):      # the version node itself
        continue
    name, _, ver = f[-1].partition("@")
    exported.add(name)
    versions[name] = ver.lstrip("@")
n = failed = 0
def ok(cond, what, detail=()):
    global n, failed
    n += 1
    failed += not cond
    print("%s %d - %s" % ("ok" if cond else "not ok", n, what))
    for d in sorted(detail)[:40]:
        print("#   %s" % d)
    return cond
print("1..5")
ok(len(api) > 50, "zcomm.h declares %d ZC_API functions" % len(api))
ok(not (api - exported), "libzcomm.so exports every ZC_API function of zcomm.h",
   ["missing: " + s for s in api - exported])
ok(not (exported - api), "libzcomm.so exports nothing zcomm.h does not declare ZC_API",
   ["extra: " + s for s in exported - api])
ok(mapped == api, "libzcomm.map lists exactly the ZC_API functions",
   ["only in zcomm.h: " + s for s in api - mapped] + ["only in the map: " + s for s in mapped - api])
bad = [s for s in exported & api if versions.get(s, "") not in ("ZCOMM_0", "")]
ok(not bad, "every export is in the version node ZCOMM_0", bad)
sys.exit(1 if failed else 0)
PY
