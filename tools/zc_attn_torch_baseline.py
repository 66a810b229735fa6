#!/usr/bin/python3
"""Baseline for zc_attn_perf(1): PyTorch's CPU attention on the same shapes.

Runs torch.nn.functional._scaled_dot_product_attention (torch 1.13; the
public scaled_dot_product_attention in torch >= 2.0) on (batch, heads,
seqlen, dim) tensors and prints rows in zc_attn_perf's format, with the same
FLOP count: forward 4*S^2*D*H per sequence, half of it when causal, backward
2.5x the forward.  The backward is timed alone (autograd of one forward).

--device cuda: the same on the GPU (tests/gpu/validate.sh), with
--backend flash, cudnn or math choosing PyTorch's SDPA backend
(torch.nn.attention.sdpa_kernel), times from CUDA events, TFLOP/s for
GFLOP/s; without CUDA it says "no CUDA device: skipped".

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


def clock(args):
    """now() in seconds, after the device's queued work when on the GPU."""
    if args.device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def backend(args):
    """PyTorch's SDPA backend named by --backend (a no-op context without one)."""
    if args.backend == "default":
        import contextlib
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel({"flash": SDPBackend.FLASH_ATTENTION,
                        "cudnn": SDPBackend.CUDNN_ATTENTION,
                        "math": SDPBackend.MATH}[args.backend])


def run(args, seqlen):
    dtype = {"float": torch.float32, "bfloat16": torch.bfloat16,
             "float16": torch.float16}[args.type]
    shape_q = (args.batch, args.heads, seqlen, args.dim)
    q = torch.randn(shape_q, dtype=dtype, device=args.device)
    k = torch.randn(shape_q, dtype=dtype, device=args.device)
    v = torch.randn(shape_q, dtype=dtype, device=args.device)
    dout = torch.randn(shape_q, dtype=dtype, device=args.device)
    flops = 4.0 * args.batch * args.heads * seqlen * seqlen * args.dim
    if args.causal:
        flops *= 0.5

    with torch.no_grad(), backend(args):
        for _ in range(args.warmup):
            sdpa(q, k, v, args.causal)
        t0 = clock(args)
        for _ in range(args.iters):
            sdpa(q, k, v, args.causal)
        t_fwd = (clock(args) - t0) / args.iters

    t_bwd = 0.0
    for it in range(args.warmup + args.iters):
        qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
        with backend(args):
            out = sdpa(qg, kg, vg, args.causal)
            t0 = clock(args)
            out.backward(dout)
            if it >= args.warmup:
                t_bwd += clock(args) - t0
    t_bwd /= args.iters

    print("%8d %5d %5d %8d %5d %9s %6s %10.2f %9.1f %10.2f %9.1f %6s" % (
        args.batch, args.heads, args.heads, seqlen, args.dim,
        {"float": "float32"}.get(args.type, args.type),
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
    p.add_argument("-d", dest="type", choices=["float", "bfloat16", "float16"], default="float")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--backend", choices=["default", "flash", "cudnn", "math"],
                   default="default", help="PyTorch's SDPA backend (--device cuda)")
    p.add_argument("-C", dest="causal", type=lambda s: bool(int(s)), default=True)
    p.add_argument("-n", dest="iters", type=int, default=5)
    p.add_argument("-w", dest="warmup", type=int, default=1)
    p.add_argument("-T", dest="threads", type=int, default=os.cpu_count(),
                   help="torch threads (default: online cores, as zc_attn_perf)")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("zc_attn_torch_baseline: no CUDA device: skipped")
        return
    torch.set_num_threads(args.threads)
    max_len = max(args.max_len, args.min_len)

    print("# torch %s baseline: scaled_dot_product_attention on %s (backend %s), %d threads, "
          "%d timed + %d warmup iterations; GFLOP/s" % (
              torch.__version__, args.device, args.backend, torch.get_num_threads(),
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
