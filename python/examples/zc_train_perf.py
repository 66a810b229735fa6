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

import _calibrate as cal
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
    normalised by the global batch's tokens, and the size of what it sums
    (the same sum of magnitudes: a loss against a random target cancels,
    so its own value is no scale for its rounding)."""
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
    terms = rmsnorm(h, p["norm_f"]) * y
    return terms.sum() / total, float(terms.detach().abs().sum()) / total


def node_groups(comm):
    """The ranks of each node, by node, each in rank order; None unless
    every node has as many ranks."""
    groups = {}
    for r in range(comm.size):
        groups.setdefault(comm.rank_node(r), []).append(r)
    nodes = [groups[m] for m in sorted(groups)]
    return nodes if len({len(g) for g in nodes}) == 1 else None


def _exchange(comm, send, sends, recvs, count):
    """One zc_remap_alltoallv over every rank: `count` elements from
    send[i * count:] to each peer sends[i], and from each peer recvs[j]
    into row j of the result [len(recvs), count]; no other rank hears
    from this one."""
    import zcomm.torch as zt
    n = comm.size
    scounts, sdispls, rcounts, rdispls = [0] * n, [0] * n, [0] * n, [0] * n
    for i, peer in enumerate(sends):
        scounts[peer], sdispls[peer] = count, i * count
    for j, peer in enumerate(recvs):
        rcounts[peer], rdispls[peer] = count, j * count
    got = send.new_empty(len(recvs) * count)
    zt._alltoallv_rows(comm, send.view(-1, 1), scounts, got.view(-1, 1), rcounts, sdispls,
                       rdispls)
    return got.view(len(recvs), count)


def all_reduce(flat, comm, dtype=None):
    """Sum over the ranks, `flat` sent as `dtype` (default: flat's; the
    step sends fp32 gradients, as Megatron-LM all-reduces a bf16 model's),
    the same bits on every rank; returns flat's dtype.  Hierarchical where
    every node has as many ranks: a reduce-scatter inside each node, a
    reduce-scatter and an all-gather between the ranks of the same local
    index on every node, an all-gather inside each node, so that a node
    sends 2 P (nodes - 1) / nodes elements to the others whatever its ranks
    (_calibrate.allreduce_s; NCCL's ring, the paper's, sends about twice
    that).  Each element is summed by one rank, in fp32, in rank order
    within a node, then in node order."""
    n = comm.size
    if n == 1:
        return flat
    wire = dtype or flat.dtype
    nodes = node_groups(comm) or [[r] for r in range(n)]  # uneven nodes: one rank each
    per, m = len(nodes[0]), len(nodes)
    me_node = next(i for i, g in enumerate(nodes) if comm.rank in g)
    me = nodes[me_node].index(comm.rank)
    local = nodes[me_node]
    peers = [g[me] for g in nodes]           # my local index on every node
    c = -(-flat.numel() // n)
    buf = flat.new_zeros(n * c, dtype=wire)  # [local index][node][c]
    buf[:flat.numel()] = flat
    part = _exchange(comm, buf, local, local, m * c).to(flat.dtype).sum(0)
    mine = _exchange(comm, part.to(wire), peers, peers, c).to(flat.dtype).sum(0).to(wire)
    row = _exchange(comm, mine.repeat(m), peers, peers, c)
    out = _exchange(comm, row.flatten().repeat(per), local, local, m * c)
    return out.flatten()[:flat.numel()].to(flat.dtype)


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
        loss, self.loss_size = forward(cfg, p, self.x, self.y, self.positions, attn, to_attn,
                                       to_linear, self.total)
        loss.backward()
        t1 = time.perf_counter()
        total = all_reduce(flat_grads(loss, p, names), comm)  # fp32, as Megatron-LM
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
    whole batch local): flat [loss, gradients], and the loss's size
    (forward)."""
    import zcomm
    with zcomm.Communicator(zcomm.get_unique_id(), 0, 1) as one:
        m = Method(cfg, "zeppelin", one, cu, x, y)
        out = m.step(cfg, params, Timer())
        m.close()
    return out, m.loss_size


def wrong(cfg, got, ref, params):
    """Tensors (the loss, then each gradient) off the reference (flat, the
    loss's size) by more than tolerance x the largest |value| (the loss:
    x its size); and the worst relative error."""
    bad, worst, at = 0, 0.0, 0
    ref, loss_size = ref
    spans = [("loss", 1)] + [(k, t.numel()) for k, t in params.items()]
    for name, n in spans:
        a, b = got[at:at + n], ref[at:at + n]
        at += n
        scale = loss_size if name == "loss" else float(b.abs().max())
        err = float((a - b).abs().max() / max(scale, 1e-30))
        worst = max(worst, err)
        if not err <= cfg.tolerance:
            bad += 1
    return bad, worst


def measure(cfg, comm, params, reps=1):
    """(attention forward FLOP/s, backward FLOP/s, seconds of the linear
    layers' forward and backward) of a rank at its share of the batch,
    cfg.tokens / ranks, measured on every rank at once so that the ranks
    load the cores as a step does: one causal sequence of that many tokens
    through libzcomm's attention on a one-rank communicator, and the
    model's forward and backward with attention left out, alternating,
    `reps` rounds after one to warm up.  The median round of each rank,
    then the median over the ranks."""
    import zcomm
    import zcomm.torch as zt
    t = cfg.tokens // comm.size
    g = torch.Generator().manual_seed(cfg.seed + 7)
    q, k, v = (torch.randn(t, h, cfg.head_dim, generator=g).to(cfg.attn_dtype)
               .requires_grad_() for h in (cfg.heads, cfg.kv_heads, cfg.kv_heads))
    x, y = batch_data(cfg, t, cfg.seed + 7)
    positions = torch.arange(t)
    rounds = []
    with zcomm.Communicator(zcomm.get_unique_id(), 0, 1) as one:
        plan = zt.VarlenPlan([0, t], one)
        gather(comm, [0.0])  # start together
        for rep in range(reps + 1):
            timer = Timer()
            _Attn.apply(q, k, v, plan, "zeppelin", timer).float().sum().backward()
            p = {name: w.clone().requires_grad_() for name, w in params.items()}
            t0 = time.perf_counter()
            forward(cfg, p, x, y, positions, lambda q, k, v: q, lambda a: a, lambda a: a,
                    t)[0].backward()
            if rep:
                rounds.append((timer.t["attn_fwd"], timer.t["attn_bwd"],
                               time.perf_counter() - t0))
        plan.close()
    mine = [sorted(col)[len(col) // 2] for col in zip(*rounds)]
    ranks = gather(comm, mine)
    fwd_s, bwd_s, linear_s = (float(ranks[:, i].median()) for i in range(3))
    f = cal.attn_fwd_flop(t, cfg.heads, cfg.head_dim)
    return f / fwd_s, 2.5 * f / bwd_s, linear_s


def set_nic_rate(comm, kbit):
    """Every NIC of every node at `kbit` kbit/s, set by the node's first
    rank; a failure anywhere fails every rank."""
    err = ""
    if comm.local_rank == 0:
        err = cal.set_nic_rate(cal.nic_devices(), kbit)
        if err:
            print("# rank %d: %s" % (comm.rank, err), file=sys.stderr, flush=True)
    if float(gather(comm, [1.0 if err else 0.0]).sum()):
        raise RuntimeError("--nic-rate: setting the emulated NICs' rate failed (above)")


def calibrate(cfg, comm, params, lengths, te_cp=None, over=cal.RATIOS):
    """Before a batch: the ranks' rates (measure) and the NIC rate
    _calibrate.choose_rate finds for them, or --nic-rate's, set.  With
    te_cp (its Method) and --nic-rate auto, one TE CP step at that rate,
    whose measured ratios correct it (_calibrate.correct, centring those
    named in `over`) and say how the linear layers should scale.  The
    record that the table and the JSON show, and the Step."""
    fwd, bwd, linear_s = measure(cfg, comm, params)
    elt = torch.tensor([], dtype=cfg.attn_dtype).element_size()
    step = cal.Step(lengths, comm.size, comm.node_count, max(1, comm.rail_count), cfg.layers,
                    cfg.heads, cfg.kv_heads, cfg.head_dim, elt,
                    1 + sum(w.numel() for w in params.values()), 4, fwd, bwd, linear_s)
    paper = cal.paper_ratios(comm.size)
    kbit = cal.choose_rate(step, paper) if cfg.nic_rate == "auto" else cfg.nic_rate
    rec = {"attn_fwd_flops": fwd, "attn_bwd_flops": bwd, "linear_s": linear_s,
           "paper": paper, "modeled": cal.model(step, kbit * 125.0), "modeled_kbit": kbit,
           "linear_factor": 1.0}
    set_nic_rate(comm, kbit)
    if te_cp is not None and cfg.nic_rate == "auto":
        _, allv = one_step(cfg, comm, te_cp, params)
        rec["probe"] = achieved(step, kbit, parts_of(allv))
        kbit, rec["linear_factor"] = cal.correct(kbit, rec["probe"], paper, over)
        set_nic_rate(comm, kbit)
    rec["kbit"] = kbit
    return rec, step


def follow(comm, rec, step, allv, kbit):
    """After a TE CP step at `kbit`: the rate for the next iteration, half
    way (geometrically) to the one that centres the step's three ratios on
    the paper's (_calibrate.correct; the FFN width is fixed by then), so
    that the calibration follows a load that drifts without chasing one
    step's noise; set on the NICs when it changed."""
    new, _ = cal.correct(kbit, achieved(step, kbit, parts_of(allv)), rec["paper"],
                         cal.RATIOS)
    new = max(1, round(math.sqrt(new * kbit)))
    if new != kbit:
        set_nic_rate(comm, new)
    return new


def achieved(step, kbit, t):
    """The three ratios as TE CP's parts `t` (ms, parts_of) measured them:
    the attention rate from its compute time (the engine's wait taken out)
    per NIC byte, its attention time and the all-reduce's own time (the
    last rank's to enter it: the others wait for it there too) per linear
    time."""
    wait = t["exposed"] - t["allreduce"] - t["remap_fwd"] - t["remap_inv"]
    compute = (t["attn_fwd"] + t["attn_bwd"] - wait) / 1e3
    flop = step.layers * 3.5 * sum(cal.attn_fwd_flop(n, step.heads, step.head_dim)
                                   for n in step.lengths) / step.ranks
    out = {"attn_per_linear": (t["attn_fwd"] + t["attn_bwd"]) / t["linear"],
           "allreduce_per_linear": t["allreduce_last"] / t["linear"]}
    if compute > 0:
        out["flop_per_byte"] = flop / compute / (kbit * 125.0)
    return out


def linear_ffn(cfg, factor):
    """The FFN width that makes the linear layers' FLOPs per token
    `factor` times cfg's (multiples of 8, at least 8)."""
    h, d = cfg.hidden, cfg.head_dim
    fixed = h * (cfg.heads + 2 * cfg.kv_heads) * d + cfg.heads * d * h
    ffn = (factor * (fixed + 3 * h * cfg.ffn) - fixed) / (3 * h)
    return max(8, int(round(ffn / 8)) * 8)


def one_step(cfg, comm, m, params):
    """One iteration of method m on every rank: this rank's flat
    gradients, and every rank's step and parts in seconds [size][...]."""
    timer = Timer()
    gather(comm, [0.0])  # line the ranks up
    got = m.step(cfg, params, timer)
    return got, gather(comm, finish(timer))


def parts_of(allv):
    """One iteration's parts in ms, the mean over the ranks, with the
    all-reduce of the last rank to enter it (allreduce_last)."""
    parts = dict(zip(PARTS, [v * 1e3 for v in allv.mean(0).tolist()[1:]]))
    parts["allreduce_last"] = float(allv[:, 1 + PARTS.index("allreduce")].min()) * 1e3
    return parts


def batch_of(cfg, di, dataset):
    """The dataset's exactly-full batch: lengths, cu_seqlens, inputs, targets."""
    lengths = sample_lengths(dataset, cfg.tokens, cfg.scale, cfg.seed * 1000 + di)
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    x, y = batch_data(cfg, cu[-1], cfg.seed * 1000 + di)
    return lengths, cu, x, y


def fit_ffn(cfg, comm, params, say):
    """--nic-rate auto without --ffn: calibrate on the first batch, then
    widen or narrow the FFN so that TE CP's attention per linear time
    comes out as the paper's where the NIC rate balances the other two
    ratios (_calibrate.correct); new parameters for the new width."""
    lengths, cu, x, y = batch_of(cfg, 0, cfg.datasets[0])
    te = Method(cfg, "te_cp", comm, cu, x, y)
    rec, _ = calibrate(cfg, comm, params, lengths, te, cal.WIRE)
    te.close()
    old, cfg.ffn = cfg.ffn, linear_ffn(cfg, rec["linear_factor"])
    say("# calibration: FFN %d -> %d (linear time x %.2f: TE CP attention per linear time "
        "%.3g at %.2f Mbit/s, paper %.3g)" % (
            old, cfg.ffn, rec["linear_factor"], rec["probe"]["attn_per_linear"],
            rec["modeled_kbit"] / 1e3, rec["paper"]["attn_per_linear"]))
    return init_params(cfg)


def run(cfg, comm):
    rank0 = comm.rank == 0
    if cfg.tokens is None:
        cfg.tokens = cfg.tokens_per_rank * comm.size
    rows, fails, calibration = [], [], {}
    say = (lambda *a: print(*a, flush=True)) if rank0 and not cfg.tap else (lambda *a: None)
    params = init_params(cfg)
    if cfg.fit_ffn:
        params = fit_ffn(cfg, comm, params, say)
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
    for di, dataset in enumerate(cfg.datasets):
        lengths, cu, x, y = batch_of(cfg, di, dataset)
        ref = reference(cfg, cu, x, y, params) if rank0 and cfg.check else None
        methods = [Method(cfg, name, comm, cu, x, y) for name in cfg.methods]
        if "zeppelin" in cfg.methods or "zeppelin_noremap" in cfg.methods:
            z = methods[cfg.methods.index("zeppelin" if "zeppelin" in cfg.methods
                                          else "zeppelin_noremap")]
            say("#   zeppelin plan: %s, remap moves %d tokens; %s" % (z.describe(), z.remap_moves,
                "lengths " + " ".join(
                str(n) for n in lengths) if len(lengths) <= 24 else
                "%d sequences, longest %d" % (len(lengths), max(lengths))))
        rec = cstep = None
        if cfg.nic_rate != "off":
            te = [m for m in methods if m.name == "te_cp"]
            rec, cstep = calibrate(cfg, comm, params, lengths, te[0] if te else None)
            calibration[dataset] = rec
            say("#   calibration: attention %.2f / %.2f GFLOP/s (forward / backward), linear "
                "%.0f ms per rank (median of %d ranks); NIC rate %.2f Mbit/s%s" % (
                    rec["attn_fwd_flops"] / 1e9, rec["attn_bwd_flops"] / 1e9,
                    rec["linear_s"] * 1e3, comm.size, rec["kbit"] / 1e3,
                    " (--nic-rate)" if cfg.nic_rate != "auto" else
                    " (%.2f modeled, corrected by a TE CP step; then after each)" % (
                        rec["modeled_kbit"] / 1e3) if "probe" in rec else
                    " (modeled; then after each TE CP step)"))
        times = {m.name: [] for m in methods}
        bad = {m.name: (0, 0.0) for m in methods}
        kbits, kbit = [], rec["kbit"] if rec else None
        for it in range(cfg.warmup + cfg.iters):
            nxt = kbit
            for m in methods:
                got, allv = one_step(cfg, comm, m, params)
                if it >= cfg.warmup:
                    times[m.name].append(allv)
                if rank0 and ref is not None and it == 0:
                    bad[m.name] = wrong(cfg, got, ref, params)
                if m.name == "te_cp" and cfg.nic_rate == "auto":
                    nxt = follow(comm, rec, cstep, allv, kbit)
            if it >= cfg.warmup:
                kbits.append(kbit)
            kbit = nxt
        base = None
        for m in methods:
            runs = times[m.name]
            # the iteration's time is its slowest rank's; parts are the mean over ranks
            steps = sorted(range(len(runs)), key=lambda i: float(runs[i][:, 0].max()))
            med = runs[steps[len(steps) // 2]]
            nic = kbits[steps[len(steps) // 2]] if kbits else None
            step = float(med[:, 0].max())
            parts = parts_of(med)
            if m.name == "te_cp":
                base = step
            row = {"dataset": dataset, "tokens": cu[-1], "seqs": len(lengths),
                   "method": m.name, "step_ms": step * 1e3, "tokens_per_s": cu[-1] / step,
                   "parts_ms": parts,
                   "wrong": bad[m.name][0], "worst_rel_err": bad[m.name][1],
                   "checked": ref is not None, "plan_ms": m.plan_seconds * 1e3,
                   "remap": m.remap, "remap_moves": m.remap_moves, "kbit": nic,
                   "vs_te": (base / step) if base else None}
            rows.append(row)
            say("  %-11s %6d %4d %-16s %9.1f %9.0f %s %6s %5s" % (
                dataset, cu[-1], len(lengths), m.name, step * 1e3, cu[-1] / step,
                " ".join("%8.1f" % parts[k] for k in PARTS),
                bad[m.name][0] if ref is not None else "-",
                "%.2f" % row["vs_te"] if row["vs_te"] else "-"))
            if rank0 and ref is not None and bad[m.name][0]:
                fails.append("%s %s: %d tensors off (worst relative %.3g)" % (
                    dataset, m.name, bad[m.name][0], bad[m.name][1]))
        te_row = [r for r in rows if r["dataset"] == dataset and r["method"] == "te_cp"]
        if rec and te_row:
            rec["kbits"] = kbits
            rec["achieved"] = achieved(cstep, te_row[0]["kbit"], te_row[0]["parts_ms"])
            for line in cal.table(rec["paper"], rec["modeled"], rec["achieved"]):
                say(line)
            say("#   NIC rate of the timed iterations: %s Mbit/s" % ", ".join(
                "%.2f" % (k / 1e3) for k in kbits))
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
    if "te_cp" in cfg.methods and len(cfg.methods) > 1:
        say("# paper (Cluster A): zeppelin 2.80x te_cp (mean of its 7B runs), routing about "
            "1.6x (Fig. 10)")
    by = {(r["dataset"], r["method"]): r for r in rows}
    for ds in cfg.datasets:
        a, b = by.get((ds, "zeppelin_noremap")), by.get((ds, "zeppelin"))
        if a and b:
            say("# remap gain %s: %.2fx -> %.2fx (%+.1f%%)" % (
                ds, a["vs_te"] or 0, b["vs_te"] or 0, 100 * (a["step_ms"] / b["step_ms"] - 1)))
    if cfg.check:
        say("# #wrong: loss and %d gradient tensors against one process, tolerance %g x "
            "max|ref| (the loss: x its terms' sum of magnitudes); worst relative error %.3g" % (
                len(params), cfg.tolerance, max(r["worst_rel_err"] for r in rows)))
    if cfg.json:
        with open(cfg.json, "w") as f:
            json.dump({"config": {k: v for k, v in vars(cfg).items() if k != "attn_dtype"},
                       "ranks": comm.size, "nodes": comm.node_count,
                       "loadavg": list(os.getloadavg()), "rows": rows,
                       "avg_speedup": summary, "calibration": calibration}, f, indent=1)
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
    # the paper's 4K tokens per GPU, lengths / 8; under zc_cluster the NIC
    # rate and the FFN width are fitted at run time (_calibrate.py)
    "default": dict(tokens_per_rank=4096, scale=8, layers=1, heads=4, kv_heads=2, head_dim=64,
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
    ap.add_argument("--tokens", type=int,
                    help="tokens per global batch, exactly full (default 4096 per rank)")
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
    ap.add_argument("--nic-rate", type=cal.parse_rate,
                    help="auto: before each batch, measure the ranks' rates and set the emulated "
                    "NICs to the rate that matches the paper's Cluster A (root, under "
                    "zc_cluster; the default there); a rate such as 20mbit: set that; off: "
                    "leave the NICs alone (the default without ZC_NIC_NETDEV or with --fork)")
    ap.add_argument("--no-check", dest="check", action="store_false",
                    help="skip the single-process reference (#wrong '-')")
    ap.add_argument("--tap", action="store_true", help="print TAP (rank 0) instead of the table")
    ap.add_argument("--json", help="write the results as JSON (rank 0)")
    add_fork_arguments(ap)
    cfg = ap.parse_args(argv)
    ffn_given = cfg.ffn is not None
    preset = dict(warmup=1, iters=3, dtype="bfloat16", tolerance=None, capacity=1.0,
                  tokens_per_rank=None)
    preset.update(PRESETS[cfg.preset])
    for k, v in preset.items():
        if getattr(cfg, k, None) is None:
            setattr(cfg, k, v)
    if cfg.nic_rate is None:
        cfg.nic_rate = "auto" if os.environ.get("ZC_NIC_NETDEV") and not cfg.fork else "off"
    cfg.fit_ffn = cfg.nic_rate == "auto" and not ffn_given and "te_cp" in cfg.methods
    try:
        devices = cal.nic_devices()
    except ValueError as e:
        ap.error(str(e))
    if cfg.nic_rate != "off" and (cfg.fork or not devices):
        ap.error("--nic-rate: the emulated cluster's NICs are not here (ZC_NIC_NETDEV unset, "
                 "or --fork): run under tests/cluster/zc_cluster as root, or --nic-rate off")
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
