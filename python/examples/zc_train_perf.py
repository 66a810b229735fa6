#!/usr/bin/env python3
"""zc_train_perf: one full training iteration of a LLaMA-style model on
variable-length, exactly-full batches, per method, timed part by part and
checked against the same iteration in one process.

The model is an embedding-free stack of blocks (RMSNorm, rotary GQA
attention, SwiGLU MLP) with a final RMSNorm and a linear loss against a
fixed random target; one iteration is the forward, the backward, the
gradient all-reduce over the ranks (reduce-scatter + all-gather through
zc_remap_alltoallv, fp32) and an Adam step.  The dense layers are torch's;
the attention (zc_ring_attn_fwd/bwd), the remap (zc_remap_alltoallv_plan)
and every collective are libzcomm's.

Methods (the paper's Figs. 8 and 10), interleaved iteration by iteration:
  te_cp             TransformerEngine CP: every sequence zigzag over all ranks
                    (ZC_PLAN_EVEN_SPLIT), one global ring, direct hops
  llama_cp          the same layout, KV all-gathered (LLaMA 3 CP)
  routing           TE CP's layout and rings, inter-node hops routed over
                    every NIC (ZC_RING_ATTN_ZEPPELIN on the even-split plan)
  zeppelin_noremap  Zeppelin's plan and engine, the linear modules on the
                    attention layout (no remap)
  zeppelin          Zeppelin: plan, engine, routing and the remap to the
                    token-balanced linear layout around every attention

Batches: lengths from the paper's Table 2 (shared/data/length-distributions.tsv,
the sampler of tools/zc_plan_dataset.c) divided by --scale, packed until the
batch holds exactly --tokens tokens (the last sequence cut), capacity
--capacity x tokens/ranks per rank (1.0: every rank exactly full).

Run one rank per process of a job (the communicator comes from the
environment), e.g. on the emulated cluster
  zc_cluster -N 2 -K 4 -R 2 -x PYTHONPATH=python -x ZC_NUM_THREADS=1 -- \\
      /usr/bin/python3 python/examples/zc_train_perf.py
or with forked ranks on this machine: zc_train_perf.py --fork 4 --nodes 2.
Rank 0 prints the table (or TAP with --tap) and, with --json, the numbers.
See zc_train_perf(1)."""
import argparse
import json
import math
import os
import sys
import time

import torch

from _llama import (SHARES, add_fork_arguments, flat_grads, rmsnorm, rope, run_ranks,
                    sample_lengths, split_grads)

METHODS = ("te_cp", "llama_cp", "routing", "zeppelin_noremap", "zeppelin")
# method -> (VarlenPlan method, ring attention mode, remap around attention)
SETUP = {"te_cp": ("te_cp", "te_cp", False),
         "llama_cp": ("te_cp", "llama_cp", False),
         "routing": ("te_cp", "zeppelin", False),
         "zeppelin_noremap": ("zeppelin", "zeppelin", False),
         "zeppelin": ("zeppelin", "zeppelin", True)}
PARTS = ("attn_fwd", "attn_bwd", "linear", "remap_fwd", "remap_inv", "allreduce", "optim",
         "exposed")

# ---- the model -----------------------------------------------------------

def init_params(cfg):
    g = torch.Generator().manual_seed(cfg.seed)
    h, d = cfg.hidden, cfg.head_dim

    def w(rows, cols):
        return torch.randn(rows, cols, generator=g) / math.sqrt(rows)
    p = {}
    for layer in range(cfg.layers):
        p.update({"%d.norm1" % layer: 1 + 0.1 * torch.randn(h, generator=g),
                  "%d.wqkv" % layer: w(h, (cfg.heads + 2 * cfg.kv_heads) * d),
                  "%d.wo" % layer: w(cfg.heads * d, h),
                  "%d.norm2" % layer: 1 + 0.1 * torch.randn(h, generator=g),
                  "%d.w13" % layer: w(h, 2 * cfg.ffn), "%d.w2" % layer: w(cfg.ffn, h)})
    p["norm_f"] = torch.ones(h)
    return p


def batch_data(cfg, total, seed):
    """Input hidden states and the loss's target, [total, hidden] each."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(total, cfg.hidden, generator=g),
            torch.randn(total, cfg.hidden, generator=g))


class Timer:
    """Seconds per part of this rank's iteration."""

    def __init__(self):
        self.t = dict.fromkeys(PARTS + ("attn_wait", "step", "fwd_bwd"), 0.0)

    def add(self, part, seconds):
        self.t[part] += seconds


class _Attn(torch.autograd.Function):
    """libzcomm ring attention in the given mode, timed, with the engine's
    wait (exposed transfer) time."""

    @staticmethod
    def forward(ctx, q, k, v, plan, mode, timer):
        from zcomm import _lib
        t0 = time.perf_counter()
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32)
        stats = _lib.RingAttnStats()
        plan.comm.ring_attn_fwd(plan.plan, q, k, v, out, lse, mode=mode, stats=stats)
        timer.add("attn_fwd", time.perf_counter() - t0)
        timer.add("attn_wait", _wait_of(stats))
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.plan, ctx.mode, ctx.timer = plan, mode, timer
        return out

    @staticmethod
    def backward(ctx, dout):
        from zcomm import _lib
        t0 = time.perf_counter()
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        stats = _lib.RingAttnStats()
        ctx.plan.comm.ring_attn_bwd(ctx.plan.plan, q, k, v, out, lse, dout.contiguous(), dq, dk,
                                    dv, mode=ctx.mode, stats=stats)
        ctx.timer.add("attn_bwd", time.perf_counter() - t0)
        ctx.timer.add("attn_wait", _wait_of(stats))
        return dq, dk, dv, None, None, None


def _wait_of(stats):
    w = stats.wait_seconds
    return w if 0.0 <= w < 1e5 else 0.0  # a struct of another layout: not counted


class _Remap(torch.autograd.Function):
    """The plan's remap in `direction` (VarlenPlan.to_linear or
    from_linear), timed; the gradient takes the other direction."""

    @staticmethod
    def forward(ctx, x, plan, direction, timer):
        ctx.plan, ctx.direction, ctx.timer = plan, direction, timer
        return _remap_timed(plan, x, direction, timer)

    @staticmethod
    def backward(ctx, dy):
        from zcomm.plan import FORWARD, INVERSE
        back = INVERSE if ctx.direction == FORWARD else FORWARD
        return _remap_timed(ctx.plan, dy.contiguous(), back, ctx.timer), None, None, None


def _remap_timed(plan, x, direction, timer):
    from zcomm.plan import FORWARD
    t0 = time.perf_counter()
    out = plan.to_linear(x) if direction == FORWARD else plan.from_linear(x)
    timer.add("remap_fwd" if direction == FORWARD else "remap_inv", time.perf_counter() - t0)
    return out


def forward(cfg, p, x, y, positions, attention, to_attn, to_linear, total):
    """The loss of this rank's tokens (x, y in the linear modules' layout),
    normalised by the global batch's tokens."""
    h, d, dt = x, cfg.head_dim, cfg.attn_dtype
    for layer in range(cfg.layers):
        qkv = to_attn((rmsnorm(h, p["%d.norm1" % layer]) @ p["%d.wqkv" % layer]).to(dt))
        t = qkv.shape[0]
        q, k, v = qkv.float().split([cfg.heads * d, cfg.kv_heads * d, cfg.kv_heads * d], 1)
        q = rope(q.reshape(t, cfg.heads, d), positions).to(dt)
        k = rope(k.reshape(t, cfg.kv_heads, d), positions).to(dt)
        o = attention(q, k, v.reshape(t, cfg.kv_heads, d).to(dt))
        o = to_linear(o.reshape(t, -1)).float()
        h = h + o @ p["%d.wo" % layer]
        a, b = (rmsnorm(h, p["%d.norm2" % layer]) @ p["%d.w13" % layer]).chunk(2, -1)
        h = h + (torch.nn.functional.silu(a) * b) @ p["%d.w2" % layer]
    return (rmsnorm(h, p["norm_f"]) * y).sum() / total


def all_reduce(flat, comm, dtype=None):
    """Sum over the ranks: reduce-scatter then all-gather (zc_remap_alltoallv)
    of `flat` sent as `dtype` (bf16 gradients as Megatron reduces them by
    default), each rank summing its slice in fp32 in rank order: the same
    bits on every rank.  Returns flat's dtype."""
    import zcomm.torch as zt
    n = comm.size
    if n == 1:
        return flat
    wire = dtype or flat.dtype
    c = -(-flat.numel() // n)
    buf = flat.new_zeros(n * c, dtype=wire)
    buf[:flat.numel()] = flat
    got = buf.new_empty(n * c)
    zt._alltoallv_rows(comm, buf.view(n, c), [1] * n, got.view(n, c), [1] * n)
    mine = got.view(n, c).to(flat.dtype).sum(0).to(wire)
    out = buf.new_empty(n * c)
    zt._alltoallv_rows(comm, mine.expand(n, c).contiguous(), [1] * n, out.view(n, c), [1] * n)
    return out[:flat.numel()].to(flat.dtype)


def adam(cfg, p, grads, state):
    with torch.no_grad():
        for name, t in p.items():
            m, v = state.setdefault(name, (torch.zeros_like(t), torch.zeros_like(t)))
            m.mul_(0.9).add_(grads[name], alpha=0.1)
            v.mul_(0.999).addcmul_(grads[name], grads[name], value=0.001)
            t.addcdiv_(m / 0.1, (v / 0.001).sqrt_().add_(1e-8), value=-cfg.lr)


class Method:
    """One method's plan and data on this rank for one batch."""

    def __init__(self, cfg, name, comm, cu, x, y):
        import zcomm.torch as zt
        plan_method, self.mode, self.remap = SETUP[name]
        self.name = name
        total = cu[-1]
        per_rank = total // comm.size
        capacity = None
        if plan_method == "zeppelin":
            capacity = max(math.ceil(cfg.capacity * total / comm.size), math.ceil(total / comm.size))
        t0 = time.perf_counter()
        self.plan = zt.VarlenPlan(cu, comm, capacity=capacity, method=plan_method)
        self.plan_seconds = time.perf_counter() - t0
        # A plan whose linear layout is its attention layout on every rank
        # (exactly-full batches: the fill partitioner already balances the
        # tokens) has an identity remap: Zeppelin skips it, as a framework
        # would, instead of paying an alltoallv that moves nothing.
        self.remap_moves = sum(
            c for r in range(comm.size)
            for d, c in enumerate(self.plan.plan.remap_counts(r)[0]) if d != r)
        if self.remap and self.remap_moves == 0 and all(
                self.plan.plan.rank_pieces(r) == self.plan.plan.rank_linear_pieces(r)
                for r in range(comm.size)):
            self.remap = False
        layout = "linear" if self.remap else "attention"
        lo, hi = self.plan.loader_range
        self.x = self.plan.dispatch(x[lo:hi], layout=layout)
        self.y = self.plan.dispatch(y[lo:hi], layout=layout)
        self.positions = self.plan.position_ids()
        self.total = total
        self.per_rank = per_rank

    def describe(self):
        zones = {}
        for r in range(self.plan.comm.size):
            for piece in self.plan.plan.rank_pieces(r):
                key = piece["ring"] if piece["zone"] != "local" else None
                zones.setdefault(piece["zone"], set()).add(
                    key if key is not None and key >= 0 else (piece["seq"], r))
        return "%d inter-node rings, %d intra-node rings, %d local sequences%s" % (
            len(zones.get("inter", ())), len(zones.get("intra", ())),
            len({s for s, _ in zones.get("local", ())}),
            " (some cut to fill)" if self.plan.plan.cut else "")

    def step(self, cfg, params, timer):
        """One iteration from `params` (copied): (loss, flat gradients)."""
        from zcomm.plan import FORWARD, INVERSE
        comm, plan = self.plan.comm, self.plan
        p = {k: t.clone().requires_grad_() for k, t in params.items()}
        names = list(p)
        t0 = time.perf_counter()
        if self.remap:
            to_attn = lambda t: _Remap.apply(t, plan, INVERSE, timer)  # noqa: E731
            to_linear = lambda t: _Remap.apply(t, plan, FORWARD, timer)  # noqa: E731
        else:
            to_attn = to_linear = lambda t: t  # noqa: E731

        def attn(q, k, v):
            return _Attn.apply(q.contiguous(), k.contiguous(), v.contiguous(), plan, self.mode,
                               timer)
        loss = forward(cfg, p, self.x, self.y, self.positions, attn, to_attn, to_linear,
                       self.total)
        loss.backward()
        t1 = time.perf_counter()
        total = all_reduce(flat_grads(loss, p, names), comm, cfg.attn_dtype)
        t2 = time.perf_counter()
        adam(cfg, {k: t.detach() for k, t in p.items()}, split_grads(total, p, names), {})
        t3 = time.perf_counter()
        timer.add("fwd_bwd", t1 - t0)
        timer.add("allreduce", t2 - t1)
        timer.add("optim", t3 - t2)
        timer.add("step", t3 - t0)
        return total

    def close(self):
        self.plan.close()


def finish(timer):
    t = timer.t
    t["linear"] = max(0.0, t["fwd_bwd"] - t["attn_fwd"] - t["attn_bwd"] - t["remap_fwd"]
                      - t["remap_inv"])
    t["exposed"] = t["attn_wait"] + t["remap_fwd"] + t["remap_inv"] + t["allreduce"]
    return [t[k] for k in ("step",) + PARTS]


def gather(comm, values):
    """Every rank's list of floats: [size][len]."""
    n = len(values)
    mine = torch.zeros(comm.size * n, dtype=torch.float64)
    mine[comm.rank * n:(comm.rank + 1) * n] = torch.tensor(values, dtype=torch.float64)
    return all_reduce(mine, comm).view(comm.size, n)


def reference(cfg, cu, x, y, params):
    """The same iteration in one process (a one-rank communicator: the
    whole batch local): flat [loss, gradients]."""
    import zcomm
    with zcomm.Communicator(zcomm.get_unique_id(), 0, 1) as one:
        m = Method(cfg, "zeppelin", one, cu, x, y)
        out = m.step(cfg, params, Timer())
        m.close()
    return out


def wrong(cfg, got, ref, params):
    """Tensors (the loss, then each gradient) off the reference by more than
    tolerance x max|ref|; and the worst relative error."""
    bad, worst, at = 0, 0.0, 0
    spans = [("loss", 1)] + [(k, t.numel()) for k, t in params.items()]
    for name, n in spans:
        a, b = got[at:at + n], ref[at:at + n]
        at += n
        err = float((a - b).abs().max() / max(float(b.abs().max()), 1e-30))
        worst = max(worst, err)
        if not err <= cfg.tolerance:
            bad += 1
    return bad, worst


def run(cfg, comm):
    rank0 = comm.rank == 0
    out = [] if rank0 else None
    rows, plans, fails = [], {}, []
    say = (lambda *a: print(*a, flush=True)) if rank0 and not cfg.tap else (lambda *a: None)
    say("# zc_train_perf: %d ranks on %d nodes, %d layer(s), hidden %d, heads %d/%d x %d, "
        "ffn %d, %s attention, %d tokens per batch (lengths / %d), capacity %.2f x tokens/rank, "
        "%d+%d iterations" % (comm.size, comm.node_count, cfg.layers, cfg.hidden, cfg.heads,
                              cfg.kv_heads, cfg.head_dim, cfg.ffn, cfg.dtype, cfg.tokens,
                              cfg.scale, cfg.capacity, cfg.warmup, cfg.iters))
    if rank0 and not cfg.tap:
        try:
            say("# load average %s" % " ".join("%.2f" % v for v in os.getloadavg()))
        except OSError:
            pass
    say("# %-11s %6s %4s %-16s %9s %9s %8s %8s %8s %8s %8s %8s %8s %8s %6s %5s" % (
        "dataset", "tokens", "seqs", "method", "step(ms)", "tokens/s", "attnF", "attnB",
        "linear", "remapF", "remapI", "allred", "optim", "exposed", "#wrong", "vs_te"))
    params = init_params(cfg)
    for di, dataset in enumerate(cfg.datasets):
        lengths = sample_lengths(dataset, cfg.tokens, cfg.scale, cfg.seed * 1000 + di)
        cu = [0]
        for n in lengths:
            cu.append(cu[-1] + n)
        x, y = batch_data(cfg, cu[-1], cfg.seed * 1000 + di)
        ref = reference(cfg, cu, x, y, params) if rank0 and cfg.check else None
        methods = [Method(cfg, name, comm, cu, x, y) for name in cfg.methods]
        if "zeppelin" in cfg.methods or "zeppelin_noremap" in cfg.methods:
            z = methods[cfg.methods.index("zeppelin" if "zeppelin" in cfg.methods
                                          else "zeppelin_noremap")]
            say("#   zeppelin plan: %s, remap moves %d tokens; %s" % (z.describe(), z.remap_moves,
                "lengths " + " ".join(
                str(n) for n in lengths) if len(lengths) <= 24 else
                "%d sequences, longest %d" % (len(lengths), max(lengths))))
        times = {m.name: [] for m in methods}
        bad = {m.name: (0, 0.0) for m in methods}
        for it in range(cfg.warmup + cfg.iters):
            for m in methods:
                timer = Timer()
                gather(comm, [0.0])  # line the ranks up
                got = m.step(cfg, params, timer)
                vals = finish(timer)
                allv = gather(comm, vals)
                if it >= cfg.warmup:
                    times[m.name].append(allv)
                if rank0 and ref is not None and it == 0:
                    bad[m.name] = wrong(cfg, got, ref, params)
        base = None
        for m in methods:
            runs = times[m.name]
            # the iteration's time is its slowest rank's; parts are the mean over ranks
            steps = sorted(range(len(runs)), key=lambda i: float(runs[i][:, 0].max()))
            med = runs[steps[len(steps) // 2]]
            step = float(med[:, 0].max())
            parts = med.mean(0).tolist()[1:]
            if m.name == "te_cp":
                base = step
            row = {"dataset": dataset, "tokens": cu[-1], "seqs": len(lengths),
                   "method": m.name, "step_ms": step * 1e3, "tokens_per_s": cu[-1] / step,
                   "parts_ms": dict(zip(PARTS, [v * 1e3 for v in parts])),
                   "wrong": bad[m.name][0], "worst_rel_err": bad[m.name][1],
                   "checked": ref is not None, "plan_ms": m.plan_seconds * 1e3,
                   "remap": m.remap, "remap_moves": m.remap_moves,
                   "vs_te": (base / step) if base else None}
            rows.append(row)
            say("  %-11s %6d %4d %-16s %9.1f %9.0f %s %6s %5s" % (
                dataset, cu[-1], len(lengths), m.name, step * 1e3, cu[-1] / step,
                " ".join("%8.1f" % (v * 1e3) for v in parts),
                bad[m.name][0] if ref is not None else "-",
                "%.2f" % row["vs_te"] if row["vs_te"] else "-"))
            if rank0 and ref is not None and bad[m.name][0]:
                fails.append("%s %s: %d tensors off (worst relative %.3g)" % (
                    dataset, m.name, bad[m.name][0], bad[m.name][1]))
        for m in methods:
            m.close()
    if not rank0:
        return 0
    summary = {}
    for name in cfg.methods:
        ratios = [r["vs_te"] for r in rows if r["method"] == name and r["vs_te"]]
        if ratios:
            summary[name] = sum(ratios) / len(ratios)
    say("# Avg speedup over te_cp: " + " ".join("%s %.2fx" % (k, v) for k, v in summary.items()
                                                 if k != "te_cp"))
    by = {(r["dataset"], r["method"]): r for r in rows}
    for ds in cfg.datasets:
        a, b = by.get((ds, "zeppelin_noremap")), by.get((ds, "zeppelin"))
        if a and b:
            say("# remap gain %s: %.2fx -> %.2fx (%+.1f%%)" % (
                ds, a["vs_te"] or 0, b["vs_te"] or 0, 100 * (a["step_ms"] / b["step_ms"] - 1)))
    if cfg.check:
        say("# #wrong: loss and %d gradient tensors against one process, tolerance %g x "
            "max|ref|; worst relative error %.3g" % (len(params), cfg.tolerance,
                                                    max(r["worst_rel_err"] for r in rows)))
    if cfg.json:
        with open(cfg.json, "w") as f:
            json.dump({"config": {k: v for k, v in vars(cfg).items() if k != "attn_dtype"},
                       "ranks": comm.size, "nodes": comm.node_count,
                       "loadavg": list(os.getloadavg()), "rows": rows,
                       "avg_speedup": summary}, f, indent=1)
    if cfg.tap:
        n = 0
        for r in rows:
            n += 1
            ok = r["wrong"] == 0 and r["checked"]
            print("%s %d - %s %s on %d ranks x %d nodes: loss and %d gradients equal one "
                  "process's within %g" % ("ok" if ok else "not ok", n, r["dataset"],
                                           r["method"], comm.size // comm.node_count,
                                           comm.node_count, len(params), cfg.tolerance))
            print("# worst relative error %.3g, step %.1f ms%s" % (
                r["worst_rel_err"], r["step_ms"],
                ", remap moves %d tokens" % r["remap_moves"] if r["remap"] else ""))
        print("1..%d" % n)
    sys.stdout.flush()
    return 1 if fails or (cfg.tap and not all(r["checked"] for r in rows)) else 0


PRESETS = {
    # calibrated (BENCHMARKS.md, "Training step (end to end)")
    "default": dict(tokens=8192, scale=8, layers=1, heads=4, kv_heads=2, head_dim=64,
                    ffn=320),
    # the CI correctness run: seconds on one core
    "tiny": dict(tokens=768, scale=64, layers=2, heads=4, kv_heads=2, head_dim=8, ffn=64,
                 warmup=0, iters=1, dtype="float32", tolerance=1e-4, capacity=1.25),
}


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=sorted(PRESETS), default="default")
    ap.add_argument("--datasets", default="arxiv,github,prolong64k")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--tokens", type=int, help="tokens per global batch (exactly full)")
    ap.add_argument("--scale", type=int, help="divide every sampled length by this")
    ap.add_argument("--capacity", type=float,
                    help="zeppelin's capacity per rank, x tokens/ranks (default 1.0: exactly "
                    "full; the tiny preset 1.25, so that its remap moves tokens)")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--ffn", type=int)
    ap.add_argument("--dtype", choices=("bfloat16", "float32"),
                    help="attention and remap dtype (default bfloat16; linear layers fp32)")
    ap.add_argument("--warmup", type=int)
    ap.add_argument("--iters", type=int)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tolerance", type=float,
                    help="per tensor, x max|reference| (default 2e-2 bf16, 1e-4 fp32)")
    ap.add_argument("--no-check", dest="check", action="store_false",
                    help="skip the single-process reference (#wrong '-')")
    ap.add_argument("--tap", action="store_true", help="print TAP (rank 0) instead of the table")
    ap.add_argument("--json", help="write the results as JSON (rank 0)")
    add_fork_arguments(ap)
    cfg = ap.parse_args(argv)
    preset = dict(warmup=1, iters=3, dtype="bfloat16", tolerance=None, capacity=1.0)
    preset.update(PRESETS[cfg.preset])
    for k, v in preset.items():
        if getattr(cfg, k, None) is None:
            setattr(cfg, k, v)
    if cfg.tolerance is None:
        cfg.tolerance = 2e-2 if cfg.dtype == "bfloat16" else 1e-4
    cfg.datasets = [d for d in cfg.datasets.split(",") if d]
    cfg.methods = [m for m in cfg.methods.split(",") if m]
    for d in cfg.datasets:
        if d not in SHARES:
            ap.error("--datasets: %r, expected some of %s" % (d, ", ".join(SHARES)))
    for m in cfg.methods:
        if m not in METHODS:
            ap.error("--methods: %r, expected some of %s" % (m, ", ".join(METHODS)))
    if cfg.heads % cfg.kv_heads:
        ap.error("--kv-heads must divide --heads")
    cfg.hidden = cfg.heads * cfg.head_dim
    cfg.attn_dtype = torch.bfloat16 if cfg.dtype == "bfloat16" else torch.float32
    return cfg


def main(argv):
    cfg = parse(argv)
    torch.set_num_threads(1)
    # The single-process reference runs on rank 0 while the others wait.
    os.environ.setdefault("ZC_TIMEOUT", "900000")
    return run_ranks(lambda comm: run(cfg, comm), cfg)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
