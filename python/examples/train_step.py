#!/usr/bin/env python3
"""One training step of a small LLaMA-style block (RMSNorm, rotary GQA
attention, SwiGLU MLP) on a variable-length batch, distributed with
libzcomm, checked against the same step in one process with plain PyTorch.

Each rank holds its pieces of the batch in the plan's attention layout.
The linear modules run on the balanced linear layout (zcomm Remap forward
before them, inverse after: the autograd Function sends gradients the other
way), attention runs as zcomm ring attention, parameter gradients are summed
over the ranks, then an SGD step.  Batches come from the three length
distributions of the paper's Table 2 (shared/data/length-distributions.tsv),
plus one sequence too long for a node (an inter-node ring).

Run in every rank of a job (zc_cluster, mpirun, torchrun: the communicator
comes from the environment):
  zc_cluster -N 2 -K 4 -R 4 -x PYTHONPATH=python -- /usr/bin/python3 train_step.py
or on this machine with forked ranks:  train_step.py --fork 8 --nodes 2
Rank 0 prints TAP: per dataset, the loss, every parameter gradient and the
updated parameters against the single-process step."""
import argparse
import math
import random
import sys

import torch

import zcomm
from zcomm.torch_ops import remap, ring_attention
from _llama import (add_fork_arguments, flat_grads, reference_attention, rmsnorm, rope,
                    run_ranks, split_grads)

# Table 2: share of sequences per length bin (bins in units of 1024 tokens).
BINS = [(0, 1), (1, 2), (2, 4), (4, 8), (8, 16), (16, 32), (32, 64), (64, 128), (128, 256)]
DATASETS = {
    "arxiv": [0.032, 0.03, 0.08, 0.219, 0.338, 0.224, 0.077, 0, 0],
    "github": [0, 0.34, 0.095, 0.104, 0.107, 0.102, 0.088, 0.064, 0.045],
    "prolong64k": [0.231, 0.042, 0.021, 0.012, 0.013, 0.008, 0.673, 0, 0],
}
ONE_SEQUENCE = "one-sequence"  # a sequence longer than a node holds: an inter-node ring
PARAMS = ["norm1", "wq", "wk", "wv", "wo", "norm2", "w1", "w3", "w2"]


def sample_lengths(dataset, total, scale, seed):
    """Lengths drawn bin by weight, uniformly inside the bin, divided by
    `scale`, until they fill exactly `total` tokens (the last one cut);
    ONE_SEQUENCE: one sequence of all but 5 tokens, and those 5."""
    if dataset == ONE_SEQUENCE:
        return [total - 5, 5]
    rng = random.Random(seed)
    lengths = []
    while sum(lengths) < total:
        lo, hi = rng.choices(BINS, weights=DATASETS[dataset])[0]
        n = max(rng.randrange(lo * 1024, hi * 1024) // scale, 1)
        lengths.append(min(n, total - sum(lengths)))
    return lengths


def make_params(cfg, seed):
    g = torch.Generator().manual_seed(seed)
    h, d, f = cfg.hidden, cfg.head_dim, cfg.ffn

    def w(rows, cols):
        return torch.randn(rows, cols, generator=g) / math.sqrt(rows)
    return {"norm1": 1 + 0.1 * torch.randn(h, generator=g), "wq": w(h, cfg.heads * d),
            "wk": w(h, cfg.kv_heads * d), "wv": w(h, cfg.kv_heads * d),
            "wo": w(cfg.heads * d, h), "norm2": 1 + 0.1 * torch.randn(h, generator=g),
            "w1": w(h, f), "w3": w(h, f), "w2": w(f, h)}


def mlp(x, p):
    h = rmsnorm(x, p["norm2"])
    return x + (torch.nn.functional.silu(h @ p["w1"]) * (h @ p["w3"])) @ p["w2"]


def qkv(x, p):
    h = rmsnorm(x, p["norm1"])
    return h @ p["wq"], h @ p["wk"], h @ p["wv"]


def reference_step(cfg, lengths, x, target, params):
    """The step in one process: loss, gradients, parameters after SGD."""
    p = {k: t.clone().requires_grad_() for k, t in params.items()}
    positions = torch.cat([torch.arange(n) for n in lengths])
    q, k, v = qkv(x, p)
    t = x.shape[0]
    q = rope(q.view(t, cfg.heads, -1), positions)
    k = rope(k.view(t, cfg.kv_heads, -1), positions)
    o = reference_attention(q, k, v.view(t, cfg.kv_heads, -1), lengths)
    y = mlp(x + o.reshape(t, -1) @ p["wo"], p)
    loss = (y - target).pow(2).sum() / t
    loss.backward()
    grads = {k: p[k].grad for k in PARAMS}
    return loss.item(), grads, {k: params[k] - cfg.lr * grads[k] for k in PARAMS}


def rows(full, lengths, pieces):
    starts = [0]
    for n in lengths:
        starts.append(starts[-1] + n)
    return torch.cat([full[starts[p["seq"]] + p["begin"]:starts[p["seq"]] + p["end"]]
                      for p in pieces])


def allreduce_sum(comm, flat):
    """Sum of `flat` over the ranks, the same bits on every rank: an
    all-gather through remap_alltoallv, added in rank order."""
    n = flat.numel()
    gathered = torch.empty(comm.size * n, dtype=flat.dtype)
    comm.remap_alltoallv(flat.contiguous(), [n] * comm.size, [0] * comm.size, gathered,
                         [n] * comm.size, [i * n for i in range(comm.size)])
    return gathered.view(comm.size, n).sum(0)


def distributed_step(cfg, comm, plan, lengths, x, target, params):
    """This rank's part of the step; loss, gradients and parameters after
    SGD are the same on every rank."""
    p = {k: t.clone().requires_grad_() for k, t in params.items()}
    pieces = plan.rank_pieces(comm.rank)
    t_attn = plan.rank(comm.rank)["tokens"]
    positions = torch.cat([torch.arange(pc["begin"], pc["end"]) for pc in pieces])
    x_lin = remap(rows(x, lengths, pieces), comm, plan)             # -> linear layout
    q, k, v = qkv(x_lin, p)
    qkv_attn = remap(torch.cat((q, k, v), 1), comm, plan, zcomm.INVERSE)
    dq, dkv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    q, k, v = qkv_attn.split([dq, dkv, dkv], 1)
    q = rope(q.reshape(t_attn, cfg.heads, -1), positions)
    k = rope(k.reshape(t_attn, cfg.kv_heads, -1), positions)
    o = ring_attention(q, k, v.reshape(t_attn, cfg.kv_heads, -1), comm, plan)
    o_lin = remap(o.reshape(t_attn, -1), comm, plan)
    y = mlp(x_lin + o_lin @ p["wo"], p)
    target_lin = rows(target, lengths, plan.rank_linear_pieces(comm.rank))
    local = (y - target_lin).pow(2).sum() / x.shape[0]
    local.backward()
    total = allreduce_sum(comm, flat_grads(local, p, PARAMS))
    grads = split_grads(total, params, PARAMS)
    return total[0].item(), grads, {k: params[k] - cfg.lr * grads[k] for k in PARAMS}


def rel(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def run(cfg, comm):
    """[(case name, ok, detail)] of every dataset, on this rank."""
    results = []
    nnodes = comm.node_count
    total = cfg.tokens_per_rank * comm.size
    capacity = (total * 5 // 4 + comm.size - 1) // comm.size + 8
    for i, name in enumerate(cfg.datasets):
        lengths = sample_lengths(name, total, cfg.scale, cfg.seed + i)
        g = torch.Generator().manual_seed(cfg.seed + 100 + i)
        x = torch.randn(total, cfg.hidden, generator=g)
        target = torch.randn(total, cfg.hidden, generator=g)
        params = make_params(cfg, cfg.seed)
        with zcomm.Plan(lengths, nnodes, comm.size // nnodes, capacity) as plan:
            loss, grads, new = distributed_step(cfg, comm, plan, lengths, x, target, params)
        ref_loss, ref_grads, ref_new = reference_step(cfg, lengths, x, target, params)
        errs = {"loss": abs(loss - ref_loss) / abs(ref_loss)}
        errs.update({"d" + k: rel(grads[k], ref_grads[k]) for k in PARAMS})
        errs.update({k: rel(new[k], ref_new[k]) for k in PARAMS})
        worst = max(errs, key=errs.get)
        results.append(("%s (%d seqs, longest %d): loss, %d gradients and the SGD step match "
                        "one process" % (name, len(lengths), max(lengths), len(PARAMS)),
                        errs[worst] <= cfg.tolerance,
                        "loss %.6f vs %.6f; worst %s off by %.3g" % (loss, ref_loss, worst,
                                                                     errs[worst])))
    return results


def report(comm, results):
    """Rank 0 prints TAP with every rank's failures; returns the exit code."""
    flags = torch.tensor([0 if ok else 1 for _, ok, _ in results], dtype=torch.int64)
    failed = allreduce_sum(comm, flags)
    for _, ok, detail in results:
        if not ok:
            print("# rank %d: %s" % (comm.rank, detail), file=sys.stderr)
    if comm.rank == 0:
        for i, (name, _, detail) in enumerate(results):
            print("%s %d - %d ranks, %d nodes: %s" % ("not ok" if failed[i] else "ok", i + 1,
                                                     comm.size, comm.node_count, name))
            print("# " + detail)
        print("1..%d" % len(results))
    return 1 if failed.any() else 0


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    names = list(DATASETS) + [ONE_SEQUENCE]
    ap.add_argument("--datasets", nargs="+", default=names, choices=names)
    ap.add_argument("--tokens-per-rank", type=int, default=96)
    ap.add_argument("--scale", type=int, default=256, help="divide sampled lengths by this")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=128)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--tolerance", type=float, default=1e-5,
                    help="relative to the largest element (fp32, as the attention tests)")
    add_fork_arguments(ap)
    return ap.parse_args(argv)


def main(argv):
    cfg = parse(argv)
    torch.set_num_threads(1)
    return run_ranks(lambda comm: report(comm, run(cfg, comm)), cfg, timeout=300)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
