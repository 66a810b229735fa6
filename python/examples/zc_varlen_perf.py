#!/usr/bin/env python3
"""zc_varlen_perf: what zcomm.torch costs a framework per batch, against the
bare zc_remap_alltoallv of the same bytes measured in the same run.

For each global batch (the paper's datasets, Table 2, and uniform random
lengths of 1 to 16384 tokens, exactly --tokens tokens) and each method, it
times VarlenPlan (the plan of the batch, collective: one round of messages
checks that every rank passed the same batch, against which it is compared:
a bare alltoallv of 40 bytes per pair) and position_ids, then
each move of a [tokens, heads, head_dim] activation: dispatch (loader ->
attention layout), undispatch (back), to_linear and from_linear (attention
<-> linear layout), each through the public call as a training step makes
it.  Every move is followed, in the same iteration, by the bare
Communicator.remap_alltoallv of exactly its bytes between the same pairs of
ranks, from and into buffers allocated once (contiguous blocks: what the
move would cost if the layouts did not interleave); the ratio is move time
over alltoallv time.  Times are per iteration the slowest rank's, then the
median over --iters iterations after --warmup.  #wrong counts the rows, over
all ranks, that are not the token the layout puts there (each row carries
its batch token's index); the exit status is 1 when any is wrong.

Run one rank per process of a job (the communicator comes from the
environment), e.g. on the emulated cluster of 2 nodes
  zc_cluster -N 2 -K 4 -R 2 -x PYTHONPATH=python -- \\
      /usr/bin/python3 python/examples/zc_varlen_perf.py
or with forked ranks on this machine: zc_varlen_perf.py --fork 4 --nodes 2.
Rank 0 prints the table (nccl-tests style); see zc_varlen_perf(1)."""
import argparse
import os
import random
import statistics
import sys
import time

import torch
import zcomm.torch as zt

from _llama import SHARES, add_fork_arguments, run_ranks, sample_lengths

DATASETS = tuple(SHARES) + ("random",)
MOVES = ("dispatch", "undispatch", "to_linear", "from_linear")
# move -> (source layout, destination layout)
LAYOUTS = {"dispatch": ("loader", "attention"), "undispatch": ("attention", "loader"),
           "to_linear": ("attention", "linear"), "from_linear": ("linear", "attention")}


def batch(dataset, tokens, seed):
    """Lengths of an exactly full batch."""
    if dataset != "random":
        return sample_lengths(dataset, tokens, 1, seed)
    rng, out, total = random.Random(seed), [], 0
    while total < tokens:
        n = min(rng.randint(1, 16384), tokens - total)
        out.append(n)
        total += n
    return out


def all_ranks(comm, values):
    """values (floats) of every rank, [rank][i] (an all-gather)."""
    mine = torch.tensor(values, dtype=torch.float64)
    got = torch.empty(comm.size * len(values), dtype=torch.float64)
    n = len(values)
    comm.remap_alltoallv(mine.view(torch.int64), [n] * comm.size, [0] * comm.size,
                         got.view(torch.int64), [n] * comm.size, [r * n for r in range(comm.size)])
    return got.view(comm.size, n).tolist()


def slowest(comm, seconds, warmup):
    """The slowest rank's time of each iteration after warmup: (median,
    least).  On a crowded machine a call waits for the other ranks' turns
    on the cores now and then; the least is the call without such waits."""
    per_rank = all_ranks(comm, seconds)
    times = [max(r[i] for r in per_rank) for i in range(warmup, len(seconds))]
    return statistics.median(times), min(times)


def ids_of(pieces, cu):
    """The batch token index of each row of a layout with these pieces."""
    if not pieces:
        return torch.empty(0, dtype=torch.int64)
    start = torch.tensor([cu[p["seq"]] + p["begin"] for p in pieces], dtype=torch.int64)
    length = torch.tensor([p["end"] - p["begin"] for p in pieces], dtype=torch.int64)
    at = torch.cumsum(length, 0) - length
    return torch.arange(int(length.sum())) + torch.repeat_interleave(start - at, length)


def rows_of(ids, cfg):
    """Rows [n, heads, head_dim] whose element c is id * 8 + c % 8: exact in
    float32 below 2^20 tokens, so a row says which token it is and that it
    is whole."""
    col = torch.arange(cfg.heads * cfg.head_dim, dtype=torch.int64) % 8
    rows = (ids[:, None] * 8 + col[None, :]).float().view(-1, cfg.heads, cfg.head_dim)
    return zt.host_empty(rows.shape).copy_(rows)  # huge pages, as the moves' outputs


def wrong_rows(got, want):
    return int((got != want).flatten(1).any(1).sum())


def pair_counts(plan, rank, move, row_bytes):
    """The bytes this rank sends to and receives from each rank in `move`."""
    src, dst = LAYOUTS[move]
    send, recv = plan.plan.move_runs(rank, src, dst)
    sc, rc = [0] * plan.comm.size, [0] * plan.comm.size
    for peer, _, _, count in send:
        sc[peer] += count * row_bytes
    for peer, _, _, count in recv:
        rc[peer] += count * row_bytes
    return sc, rc


def bare_alltoallv(comm, sc, rc):
    """A call of zc_remap_alltoallv with these counts (bytes, blocks in rank
    order), its buffers allocated once, in huge pages as the moves' outputs
    are, and touched."""
    send = zt.host_empty(sum(sc), dtype=torch.uint8).fill_(1)
    recv = zt.host_empty(sum(rc), dtype=torch.uint8).fill_(0)
    sd = [sum(sc[:p]) for p in range(len(sc))]
    rd = [sum(rc[:p]) for p in range(len(rc))]
    return lambda: comm.remap_alltoallv(send, sc, sd, recv, rc, rd)


def timed(comm, fn):
    comm.barrier()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_plan(cfg, comm, cu, method):
    """VarlenPlan, the round of its agreement alone (a bare alltoallv of 40
    bytes per rank, what its check of the ranks' arguments costs) and
    position_ids: median times (slowest rank), and the last plan."""
    plan_s, round_s, pos_s, plan = [], [], [], None
    one_round = bare_alltoallv(comm, [40] * comm.size, [40] * comm.size)
    for i in range(cfg.warmup + cfg.iters):
        if plan:
            plan.close()
        if i % 2:
            round_s.append(timed(comm, one_round)[0])
        t, plan = timed(comm, lambda: zt.VarlenPlan(cu, comm, method=method))
        plan_s.append(t)
        if i % 2 == 0:
            round_s.append(timed(comm, one_round)[0])
        pos_s.append(timed(comm, plan.position_ids)[0])
    return ([slowest(comm, s, cfg.warmup) for s in (plan_s, round_s, pos_s)], plan)


def run_moves(cfg, comm, plan, cu):
    """Per move: (median move time, median alltoallv time, bytes this rank
    moves, wrong rows of this rank)."""
    ids = {"loader": torch.arange(*plan.loader_range, dtype=torch.int64),
           "attention": ids_of(plan.pieces, cu), "linear": ids_of(plan.linear_pieces, cu)}
    inputs = {k: rows_of(v, cfg) for k, v in ids.items()}
    calls = {"dispatch": plan.dispatch, "undispatch": plan.undispatch,
             "to_linear": plan.to_linear, "from_linear": plan.from_linear}
    row_bytes = cfg.heads * cfg.head_dim * inputs["loader"].element_size()
    out = {}
    for move in cfg.moves:
        src, dst = LAYOUTS[move]
        sc, rc = pair_counts(plan, comm.rank, move, row_bytes)
        bare = bare_alltoallv(comm, sc, rc)
        move_s, bare_s = [], []
        for i in range(cfg.warmup + cfg.iters):
            if i % 2:  # in turn first, so that neither finds the other's warm caches always
                bare_s.append(timed(comm, bare)[0])
            move_s.append(timed(comm, lambda: calls[move](inputs[src]))[0])
            if i % 2 == 0:
                bare_s.append(timed(comm, bare)[0])
        # checked apart, so that the check's memory traffic is in no timed call
        wrong = wrong_rows(calls[move](inputs[src]), inputs[dst])  # the rows of dst's tokens
        out[move] = (slowest(comm, move_s, cfg.warmup), slowest(comm, bare_s, cfg.warmup),
                     sum(sc), wrong)
    return out


HEADER = ("#%-10s %8s %5s %-9s %-12s %12s %10s %10s %6s %6s %8s %7s"
          % ("dataset", "tokens", "seqs", "method", "call", "bytes/rank", "time(ms)",
             "a2av(ms)", "ratio", "r.min", "GB/s", "#wrong"))


def row(dataset, tokens, seqs, method, call, nbytes, t, bare, wrong):
    """t and bare: (median, least) in seconds; bare None: no baseline."""
    ratio = ("%6.2f %6.2f" % (t[0] / bare[0], t[1] / bare[1]) if bare
             else "%6s %6s" % ("-", "-"))
    rate = "%8.2f" % (nbytes / t[0] / 1e9) if nbytes and t[0] else "%8s" % "-"
    return (" %-10s %8d %5d %-9s %-12s %12s %10.3f %10s %s %s %7s"
            % (dataset, tokens, seqs, method, call, nbytes if nbytes else "-", t[0] * 1e3,
               "%.3f" % (bare[0] * 1e3) if bare else "-", ratio, rate,
               wrong if wrong is not None else "-"))


def run(cfg, comm):
    torch.set_num_threads(1)
    if comm.rank == 0 and not cfg.tap:
        print("# zc_varlen_perf: %d ranks on %d nodes, rows [tokens, %d, %d] float32 (%d B), "
              "%d iterations after %d warm-up, load %.2f %.2f %.2f (rank 0, at start)"
              % (comm.size, comm.node_count, cfg.heads, cfg.head_dim,
                 4 * cfg.heads * cfg.head_dim, cfg.iters, cfg.warmup, *os.getloadavg()))
        print("# time: the slowest rank's, median over the iterations; a2av: the bare "
              "zc_remap_alltoallv of the same bytes per pair, same iteration (for VarlenPlan: "
              "of 40 B per pair, its agreement's round); ratio: of the medians; r.min: of the "
              "least times; bytes/rank: what rank 0 sends")
        print(HEADER, flush=True)
    wrong_total, case = 0, 0
    for tokens in cfg.tokens:
        for dataset in cfg.datasets:
            lengths = batch(dataset, tokens, cfg.seed)
            cu = [0]
            for n in lengths:
                cu.append(cu[-1] + n)
            for method in cfg.methods:
                (plan_t, round_t, pos_t), plan = run_plan(cfg, comm, torch.tensor(cu), method)
                moves = run_moves(cfg, comm, plan, cu)
                wrong = [sum(r) for r in zip(*all_ranks(comm, [m[3] for m in moves.values()]))]
                wrong_total += sum(wrong)
                case += 1
                if comm.rank == 0 and cfg.tap:
                    print("%s %d - %s, %d tokens, %s: %s put every row where the layout says"
                          % ("not ok" if sum(wrong) else "ok", case, dataset, tokens, method,
                             ", ".join(cfg.moves)), flush=True)
                elif comm.rank == 0:
                    args = (dataset, tokens, len(lengths), method)
                    print(row(*args, "VarlenPlan", 0, plan_t, round_t, None))
                    print(row(*args, "position_ids", 0, pos_t, None, None))
                    for (move, (t, bare, nbytes, _)), w in zip(moves.items(), wrong):
                        print(row(*args, move, nbytes, t, bare, int(w)), flush=True)
                plan.close()
    if comm.rank == 0:
        print("1..%d" % case if cfg.tap else "# %s" % (
            "every row right" if wrong_total == 0 else "%d wrong rows" % wrong_total),
            flush=True)
    return 1 if wrong_total else 0


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", default="262144,1048576",
                    help="global batch sizes, comma-separated (below 2^20 + 1)")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--methods", default="zeppelin,te_cp,llama_cp")
    ap.add_argument("--moves", default=",".join(MOVES))
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tap", action="store_true",
                    help="print TAP (rank 0): one line per batch and method, ok when every "
                    "row of every move is right")
    add_fork_arguments(ap)
    cfg = ap.parse_args(argv)
    cfg.tokens = [int(t) for t in cfg.tokens.split(",") if t]
    for name, allowed in (("datasets", DATASETS), ("methods", ("zeppelin", "te_cp", "llama_cp")),
                          ("moves", MOVES)):
        values = [v for v in getattr(cfg, name).split(",") if v]
        for v in values:
            if v not in allowed:
                ap.error("--%s: %r, expected some of %s" % (name, v, ", ".join(allowed)))
        setattr(cfg, name, values)
    if any(t < 1 or t > 1 << 20 for t in cfg.tokens):
        ap.error("--tokens: 1 to 2^20 (rows carry their token's index exactly in float32)")
    if cfg.iters < 1 or cfg.warmup < 0:
        ap.error("--iters must be at least 1 and --warmup not negative")
    return cfg


def main(argv):
    cfg = parse(argv)
    return run_ranks(lambda comm: run(cfg, comm), cfg)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
