#!/usr/bin/env python3
"""Train a small LLaMA-style model (token embedding, RMSNorm, rotary GQA
attention, SwiGLU MLP, LM head) on packed variable-length batches with
libzcomm's packed-batch API, and check its loss curve against the same
training in one process.

Every step draws a global batch of sequences of random lengths (1-token
sequences and lengths divisible by nothing included), packed with no
padding and described by cu_seqlens, the same on every rank.  Each rank
holds its loader slice of the token ids; the API does the rest:

    plan = zcomm.torch.VarlenPlan(cu_seqlens, comm)
    h = plan.dispatch(embed(ids), layout="linear")   # residual stream, balanced
    qkv = plan.from_linear(norm(h) @ w_qkv)          # -> attention layout
    o = zcomm.torch.varlen_attn(rope(q, plan.position_ids()), rope(k, ...), v, plan)
    h = h + plan.to_linear(o) @ w_o                  # -> linear layout
    ...
    zcomm.torch.all_reduce_sum(grad, comm)           # gradients summed over ranks

Run one rank per process of a job (the communicator comes from the
environment: zc_cluster, mpirun, srun; under torchrun from the gloo group):
  zc_cluster -N 2 -K 4 -R 4 -- /usr/bin/python3 train.py --plot loss.png
  torchrun --nproc_per_node 4 train.py --torch
or on this machine with forked ranks:  train.py --fork 4 --nodes 2
Rank 0 prints TAP: the loss at every step equal to one process's within
--tolerance, and the loss going down; --plot saves both curves as a PNG
(matplotlib), --losses writes them as TSV."""
import argparse
import math
import random
import sys

import torch

import zcomm
import zcomm.torch as zt
from _llama import (add_fork_arguments, flat_grads, reference_attention, rmsnorm, rope,
                    run_fork, split_grads)


def batch(cfg, step):
    """(cu_seqlens, token ids, targets) of the step's global batch.  Each
    sequence counts up from a random start by a random stride (mod vocab):
    learnable only by attending to earlier tokens of the same sequence.
    Targets are the next token; the last token of a sequence has none
    (-100, ignored)."""
    rng = random.Random(cfg.seed * 1000 + step)
    lengths, total = [], cfg.tokens
    while sum(lengths) < total:
        n = rng.choice([1, rng.randint(2, 9), rng.randint(10, cfg.max_len)])
        lengths.append(min(n, total - sum(lengths)))
    ids, targets = [], []
    for n in lengths:
        start, stride = rng.randrange(cfg.vocab), rng.randrange(1, 5)
        seq = [(start + stride * i) % cfg.vocab for i in range(n)]
        ids += seq
        targets += seq[1:] + [-100]
    cu = torch.tensor([0] + [sum(lengths[:i + 1]) for i in range(len(lengths))],
                      dtype=torch.int32)
    return cu, torch.tensor(ids), torch.tensor(targets), lengths


def init_params(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    h, d = cfg.hidden, cfg.head_dim

    def w(rows, cols):
        return (torch.randn(rows, cols, generator=g) / math.sqrt(rows)).requires_grad_()
    p = {"embed": (torch.randn(cfg.vocab, h, generator=g) * 0.5).requires_grad_(),
         "norm_f": torch.ones(h, requires_grad=True), "head": w(h, cfg.vocab)}
    for layer in range(cfg.layers):
        p.update({"%d.norm1" % layer: torch.ones(h, requires_grad=True),
                  "%d.wqkv" % layer: w(h, (cfg.heads + 2 * cfg.kv_heads) * d),
                  "%d.wo" % layer: w(cfg.heads * d, h),
                  "%d.norm2" % layer: torch.ones(h, requires_grad=True),
                  "%d.w13" % layer: w(h, 2 * cfg.ffn), "%d.w2" % layer: w(cfg.ffn, h)})
    return p


def forward(cfg, p, ids, targets, positions, attention, to_attn, to_linear):
    """The model on tokens in some layout: the linear modules on ids'
    layout, attention through to_attn/to_linear (identities in one
    process).  Returns the summed cross-entropy and the number of targets."""
    h = p["embed"][ids]
    d = cfg.head_dim
    for layer in range(cfg.layers):
        qkv = to_attn(rmsnorm(h, p["%d.norm1" % layer]) @ p["%d.wqkv" % layer])
        t = qkv.shape[0]
        q, k, v = qkv.split([cfg.heads * d, cfg.kv_heads * d, cfg.kv_heads * d], 1)
        q = rope(q.reshape(t, cfg.heads, d), positions)
        k = rope(k.reshape(t, cfg.kv_heads, d), positions)
        o = attention(q, k, v.reshape(t, cfg.kv_heads, d))
        h = h + to_linear(o.reshape(t, -1)) @ p["%d.wo" % layer]
        a, b = (rmsnorm(h, p["%d.norm2" % layer]) @ p["%d.w13" % layer]).chunk(2, -1)
        h = h + (torch.nn.functional.silu(a) * b) @ p["%d.w2" % layer]
    logits = rmsnorm(h, p["norm_f"]) @ p["head"]
    loss = torch.nn.functional.cross_entropy(logits, targets, ignore_index=-100,
                                             reduction="sum")
    return loss, int((targets != -100).sum())


def sgd(cfg, p, grads, momentum):
    with torch.no_grad():
        for name, t in p.items():
            momentum[name] = 0.9 * momentum.get(name, 0) + grads[name]
            t -= cfg.lr * momentum[name]


def train_reference(cfg):
    """The same training in one process, plain PyTorch: the loss per step."""
    p, momentum, losses = init_params(cfg), {}, []
    for step in range(cfg.steps):
        cu, ids, targets, lengths = batch(cfg, step)
        positions = torch.cat([torch.arange(n) for n in lengths])
        loss, count = forward(cfg, p, ids, targets, positions,
                              lambda q, k, v: reference_attention(q, k, v, lengths),
                              lambda x: x, lambda x: x)
        (loss / count).backward()
        sgd(cfg, p, {k: t.grad for k, t in p.items()}, momentum)
        for t in p.values():
            t.grad = None
        losses.append(loss.item() / count)
    return losses


def train_distributed(cfg, comm):
    """This rank's part of the training; the loss per step (every rank)."""
    p, momentum, losses = init_params(cfg), {}, []
    names = list(p)
    for step in range(cfg.steps):
        cu, ids, targets, _ = batch(cfg, step)
        plan = zt.VarlenPlan(cu, comm, method=cfg.method)
        lo, hi = plan.loader_range                     # what a data loader gives this rank
        local_ids = plan.dispatch(ids[lo:hi], layout="linear")
        local_targets = plan.dispatch(targets[lo:hi], layout="linear")
        loss, _ = forward(cfg, p, local_ids, local_targets, plan.position_ids(),
                          lambda q, k, v: zt.varlen_attn(q, k, v, plan),
                          plan.from_linear, plan.to_linear)
        count = int((targets != -100).sum())           # the global batch's targets
        (loss / count).backward()
        total = zt.all_reduce_sum(flat_grads(loss, p, names), comm)
        sgd(cfg, p, split_grads(total, p, names), momentum)
        for t in p.values():
            t.grad = None
        losses.append(total[0].item() / count)
        plan.close()
    return losses


def report(cfg, comm, losses):
    """Rank 0 compares with one process, prints TAP, plots; the exit code."""
    if comm.rank != 0:
        return 0
    ref = train_reference(cfg)
    worst = max(range(cfg.steps), key=lambda i: abs(losses[i] - ref[i]) / abs(ref[i]))
    err = abs(losses[worst] - ref[worst]) / abs(ref[worst])
    where = "%d ranks on %d nodes, method %s" % (comm.size, comm.node_count, cfg.method)
    checks = [(err <= cfg.tolerance,
               "%s: the loss of all %d steps equals one process's within %g" % (
                   where, cfg.steps, cfg.tolerance),
               "worst step %d: %.7f vs %.7f (relative %.3g)" % (worst, losses[worst],
                                                                ref[worst], err)),
              (losses[-1] < 0.5 * losses[0],
               "%s: the loss fell below half its start" % where,
               "%.4f -> %.4f" % (losses[0], losses[-1]))]
    if cfg.losses:
        with open(cfg.losses, "w") as f:
            f.write("step\tzcomm\tone_process\n")
            for i, (a, b) in enumerate(zip(losses, ref)):
                f.write("%d\t%.7f\t%.7f\n" % (i, a, b))
    if cfg.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.6), dpi=100)
        ax.plot(ref, color="0.6", linewidth=4, label="one process (PyTorch)")
        ax.plot(losses, color="C0", linewidth=1.5,
                label="zcomm, %d ranks x %d nodes (%s)" % (comm.size // comm.node_count,
                                                           comm.node_count, cfg.method))
        ax.set_xlabel("step")
        ax.set_ylabel("cross-entropy per target")
        ax.set_title("Packed variable-length batches, no padding (worst step off by %.1e)"
                     % err, fontsize=9)
        ax.legend()
        fig.tight_layout()
        fig.savefig(cfg.plot)
        checks.append((True, "%s: loss curves plotted in %s" % (where, cfg.plot), ""))
    for i, (ok, name, detail) in enumerate(checks):
        print("%s %d - %s" % ("ok" if ok else "not ok", i + 1, name))
        print("# " + detail)
    print("1..%d" % len(checks))
    sys.stdout.flush()
    return 0 if all(ok for ok, _, _ in checks) else 1


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--tokens", type=int, default=384, help="tokens per global batch")
    ap.add_argument("--max-len", type=int, default=150)
    ap.add_argument("--vocab", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--method", default="zeppelin", choices=zt.METHODS)
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="relative, per step (fp32 sums in another order, over all steps)")
    ap.add_argument("--plot", help="save both loss curves to this PNG (rank 0)")
    ap.add_argument("--losses", help="write both loss curves to this TSV (rank 0)")
    add_fork_arguments(ap)
    ap.add_argument("--torch", action="store_true",
                    help="the communicator from torch.distributed's gloo group "
                    "(Communicator.from_torch): torchrun's variables, else ZC_*'s")
    return ap.parse_args(argv)


def main(argv):
    cfg = parse(argv)
    torch.set_num_threads(1)
    if cfg.fork:
        return run_fork(lambda comm: report(cfg, comm, train_distributed(cfg, comm)),
                        cfg.fork, cfg.nodes, timeout=600)
    if cfg.torch:
        import os
        import torch.distributed as dist
        if "MASTER_ADDR" not in os.environ and "ZC_MASTER_ADDR" in os.environ:
            # Not torchrun (zc_cluster, a ZC_* job): torch's rendezvous from
            # libzcomm's variables, gloo on the bootstrap interface.
            os.environ.update({"MASTER_ADDR": os.environ["ZC_MASTER_ADDR"],
                               "MASTER_PORT": str(int(os.environ["ZC_MASTER_PORT"]) + 1),
                               "RANK": os.environ["ZC_RANK"],
                               "WORLD_SIZE": os.environ["ZC_SIZE"]})
            if "ZC_SOCKET_IFNAME" in os.environ:
                os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ["ZC_SOCKET_IFNAME"])
        dist.init_process_group("gloo")
        comm = zcomm.Communicator.from_torch()
    else:
        comm = zcomm.Communicator.from_env()
    with comm:
        return report(cfg, comm, train_distributed(cfg, comm))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
