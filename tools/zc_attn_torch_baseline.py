#!/usr/bin/python3
"""Baseline for zc_attn_perf(1): PyTorch's CPU attention on the same shapes.

Runs torch.nn.functional._scaled_dot_product_attention (torch 1.13; the
public scaled_dot_product_attention in torch >= 2.0) on (batch, heads,
seqlen, dim) tensors and prints rows in zc_attn_perf's format, with the same
FLOP count: forward 4*S^2*D*H per sequence, half of it when causal, backward
2.5x the forward.  The backward is timed alone (autograd of one forward).

Debian: apt-get install python3-torch libopenblas0-pthread; run with
/usr/bin/python3.  Not installed; shipped in the tarball for BENCHMARKS.md.
"""
import argparse
import os
import time

import torch
import torch.nn.functional as F


def sdpa(q, k, v, causal):
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out, _ = F._scaled_dot_product_attention(q, k, v, is_causal=causal)
    return out


def run(args, seqlen):
    dtype = torch.float32 if args.type == "float" else torch.bfloat16
    shape_q = (args.batch, args.heads, seqlen, args.dim)
    q = torch.randn(shape_q, dtype=dtype)
    k = torch.randn(shape_q, dtype=dtype)
    v = torch.randn(shape_q, dtype=dtype)
    dout = torch.randn(shape_q, dtype=dtype)
    flops = 4.0 * args.batch * args.heads * seqlen * seqlen * args.dim
    if args.causal:
        flops *= 0.5

    with torch.no_grad():
        for _ in range(args.warmup):
            sdpa(q, k, v, args.causal)
        t0 = time.perf_counter()
        for _ in range(args.iters):
            sdpa(q, k, v, args.causal)
        t_fwd = (time.perf_counter() - t0) / args.iters

    t_bwd = 0.0
    for it in range(args.warmup + args.iters):
        qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
        out = sdpa(qg, kg, vg, args.causal)
        t0 = time.perf_counter()
        out.backward(dout)
        if it >= args.warmup:
            t_bwd += time.perf_counter() - t0
    t_bwd /= args.iters

    print("%8d %5d %5d %8d %5d %9s %6s %10.2f %9.1f %10.2f %9.1f %6s" % (
        args.batch, args.heads, args.heads, seqlen, args.dim,
        "float32" if args.type == "float" else "bfloat16",
        "yes" if args.causal else "no", t_fwd * 1e3, flops / t_fwd * 1e-9,
        t_bwd * 1e3, 2.5 * flops / t_bwd * 1e-9, "N/A"), flush=True)
    return flops / t_fwd * 1e-9, 2.5 * flops / t_bwd * 1e-9


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-b", dest="min_len", type=int, default=4096)
    p.add_argument("-e", dest="max_len", type=int, default=0)
    p.add_argument("-f", dest="factor", type=float, default=2)
    p.add_argument("-N", dest="batch", type=int, default=1)
    p.add_argument("-H", dest="heads", type=int, default=8)
    p.add_argument("-D", dest="dim", type=int, default=128)
    p.add_argument("-d", dest="type", choices=["float", "bfloat16"], default="float")
    p.add_argument("-C", dest="causal", type=lambda s: bool(int(s)), default=True)
    p.add_argument("-n", dest="iters", type=int, default=5)
    p.add_argument("-w", dest="warmup", type=int, default=1)
    p.add_argument("-T", dest="threads", type=int, default=os.cpu_count(),
                   help="torch threads (default: online cores, as zc_attn_perf)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    max_len = max(args.max_len, args.min_len)

    print("# torch %s baseline: _scaled_dot_product_attention, %d threads, %d timed + "
          "%d warmup iterations" % (torch.__version__, torch.get_num_threads(),
                                     args.iters, args.warmup))
    print("# %6s %5s %5s %8s %5s %9s %6s %10s %9s %10s %9s %6s" % (
        "batch", "heads", "kvh", "seqlen", "dim", "type", "causal", "fwd(ms)",
        "GFLOP/s", "bwd(ms)", "GFLOP/s", "#wrong"))
    rates = []
    seqlen = float(args.min_len)
    while seqlen <= max_len:
        rates.append(run(args, int(seqlen)))
        seqlen *= args.factor
    print("# Avg GFLOP/s : fwd %.1f  bwd %.1f" % (
        sum(r[0] for r in rates) / len(rates), sum(r[1] for r in rates) / len(rates)))


if __name__ == "__main__":
    main()
