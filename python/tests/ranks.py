"""TAP over zcomm.launch.run_forked: fn(comm) returns a list of (name, ok,
diag) with the same names on every rank; run() prints one TAP line per
name, failed when any rank failed it."""
import tap
from zcomm.launch import run_forked


def _plain(fn):
    def wrapped(comm):
        return [(str(n), bool(c), str(d)) for n, c, d in fn(comm)]
    return wrapped


def run(fn, size, nodes=1, what="", timeout=120):
    by_rank = run_forked(_plain(fn), size, nodes, timeout)
    prefix = "%s%d ranks on %d node%s: " % (what, size, nodes, "s" if nodes > 1 else "")
    failed = [(r, v) for r, (ok, v) in enumerate(by_rank) if not ok]
    if failed:
        tap.ok(False, prefix + "every rank ran to the end",
               "\n".join("rank %d: %s" % f for f in failed))
        return
    names = [name for name, _, _ in by_rank[0][1]]
    for r, (_, results) in enumerate(by_rank):
        if [name for name, _, _ in results] != names:
            tap.ok(False, prefix + "rank %d ran the same cases" % r)
            return
    for i, name in enumerate(names):
        bad = [(r, res[i][2]) for r, (_, res) in enumerate(by_rank) if not res[i][1]]
        tap.ok(not bad, prefix + name, "\n".join("rank %d: %s" % b for b in bad))
