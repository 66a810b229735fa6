#!/usr/bin/env python3
"""The layers of libzcomm (README, "Layers"), checked two ways, as TAP.

1. Includes: a file may include only from its own layer and the layers
   below it (a grep of `#include "..."` over the library's sources).
2. Calls: from the built objects (nm), every call between two files of the
   library goes to the caller's layer or below, and no files call each
   other in a circle.

Usage: check_layers.py SRCDIR BUILDDIR
"""
import glob
import os
import re
import subprocess
import sys

# Bottom first.  A folder may use its own layer and every layer named
# before it in its `uses` list; nothing else.
LAYERS = [
    ("src/common", []),
    ("kernels", ["src/common"]),
    ("topology", ["src/common"]),
    ("transport", ["src/common"]),
    ("src/core", ["src/common", "kernels", "topology", "transport"]),
    ("src/plan", ["src/common", "kernels", "topology"]),
    ("src/coll/routed", ["src/common", "kernels", "topology", "transport", "src/core",
                         "src/plan"]),
    ("src/coll/alltoallv", ["src/common", "kernels", "topology", "transport", "src/core",
                            "src/plan", "src/coll/routed"]),
    ("src/coll/ring_attn", ["src/common", "kernels", "topology", "transport", "src/core",
                            "src/plan", "src/coll/routed", "src/coll/alltoallv"]),
]
ALLOWED = {name: set(uses) | {name} for name, uses in LAYERS}


def layer_of(path):
    """The layer a source path (relative to the top) belongs to, or None."""
    best = None
    for name, _ in LAYERS:
        if path == name or path.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def sources(top):
    out = []
    for name, _ in LAYERS:
        for ext in ("c", "h", "cu"):
            for f in glob.glob(os.path.join(top, name, "**", "*." + ext), recursive=True):
                rel = os.path.relpath(f, top)
                if layer_of(rel) == name:
                    out.append(rel)
    return sorted(out)


def include_violations(top):
    bad = []
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for rel in sources(top):
        mine = layer_of(rel)
        with open(os.path.join(top, rel)) as fh:
            text = fh.read()
        for target in inc.findall(text):
            if "/" not in target:
                # config.h, zcomm.h, zcomm_version.h: the build's and the API's.
                if target not in ("config.h", "zcomm.h", "zcomm_version.h"):
                    bad.append("%s includes \"%s\": a project header by bare name" % (rel, target))
                continue
            theirs = layer_of(target)
            if theirs is None:
                bad.append("%s includes \"%s\": not in any layer" % (rel, target))
            elif theirs not in ALLOWED[mine]:
                bad.append("%s (%s) includes %s (%s): upward or sideways" % (rel, mine, target, theirs))
    return bad


def object_graph(top, build):
    """file -> set of files it calls, from each object's defined and undefined symbols."""
    objs = glob.glob(os.path.join(build, "**", ".libs", "libzcomm_core_la-*.o"), recursive=True)
    defs, undef = {}, {}
    for o in objs:
        d = os.path.dirname(os.path.dirname(os.path.relpath(o, build)))
        name = os.path.join(d, os.path.basename(o)[len("libzcomm_core_la-"):-2])
        if not any(os.path.exists(os.path.join(top, name + e)) for e in (".c", ".cu")):
            continue  # an object left from a source that is gone
        out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
        defs[name], undef[name] = set(), set()
        for line in out.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in "TDBRV":
                defs[name].add(p[2])
            elif len(p) == 2 and p[0] == "U":
                undef[name].add(p[1])
    owner = {s: f for f, ds in defs.items() for s in ds}
    graph = {f: {} for f in defs}
    for f, us in undef.items():
        for s in us:
            g = owner.get(s)
            if g and g != f:
                graph[f].setdefault(g, []).append(s)
    return graph


def circles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    top, build = sys.argv[1], sys.argv[2]
    results = []
    bad = include_violations(top)
    results.append(("includes go to the same layer or below (%d files)" % len(sources(top)), bad))
    graph = object_graph(top, build)
    if not graph:
        print("1..0 # SKIP no library objects under %s" % build)
        return 0
    upward = []
    for f, calls in sorted(graph.items()):
        for g, syms in sorted(calls.items()):
            lf, lg = layer_of(f), layer_of(g)
            if lf and lg and lg not in ALLOWED[lf]:
                upward.append("%s (%s) calls %s (%s): %s" % (f, lf, g, lg, ", ".join(sorted(syms)[:3])))
    results.append(("calls go to the same layer or below (%d objects)" % len(graph), upward))
    circ = []
    for comp in circles(graph):
        edges = ["%s -> %s (%s)" % (f, g, graph[f][g][0]) for f in comp for g in graph[f] if g in comp]
        circ.append("call circle: " + "; ".join(edges))
    results.append(("no files call each other in a circle", circ))
    print("1..%d" % len(results))
    failed = 0
    for i, (name, problems) in enumerate(results, 1):
        if problems:
            failed += 1
            print("not ok %d - %s: %s" % (i, name, " | ".join(problems)))
            for p in problems:
                print("# " + p)
        else:
            print("ok %d - %s" % (i, name))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
