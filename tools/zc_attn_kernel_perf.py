#!/usr/bin/python3
"""zc_attn_kernel_perf: zcomm.torch.varlen_attn, forward and backward, with
libzcomm's own block kernels and with a kernel table (kernel=) side by
side in one run, every method, on the same batch, interleaved iteration
by iteration (a slow spell hits both alike).

On CUDA (--device cuda, the default) the kernel is PyTorch's flash-attention
(zcomm.torch.kernels.TorchFlash) and libzcomm's kernels are those of
ZC_ATTN_BACKEND (cudnn by default here): flash through the table against
libzcomm's cuDNN backend.  Without a CUDA device it says "no CUDA device:
skipped"; where torch has no flash operators, says so and exits 2.  On the
CPU (--device cpu) the kernel is zcomm.torch.kernels.Reference, for a check
of the plumbing rather than a measurement.  --kernel MODULE:CLASS times any
other kernel class (its constructor without arguments).

Ranks: --fork N processes forked here (CUDA starts only in them; on GPU
local_rank % GPUs, ranks sharing a GPU each their own NCCL host), or one
rank per process of a launcher (torchrun, mpirun, ZC_RANK/ZC_SIZE).
Rank 0 prints, per
method: the slowest rank's median time of a forward + backward with each,
their ratio (own / kernel: above 1 the kernel is faster), the blocks per
iteration and the largest difference of the two outputs relative to the
largest output value.

Debian: apt-get install python3-torch; run with /usr/bin/python3 and
PYTHONPATH=python ZC_LIBRARY=build/.libs/libzcomm.so.  Not installed.
"""
import argparse
import importlib
import os
import sys
import time


def parse():
    p = argparse.ArgumentParser(prog="zc_attn_kernel_perf", description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--kernel", default=None,
                   help="MODULE:CLASS of the kernel (default: TorchFlash on CUDA, "
                        "Reference on the CPU)")
    p.add_argument("--fork", type=int, default=0, help="ranks forked here (0: a launcher's)")
    p.add_argument("--nodes", type=int, default=1, help="emulated nodes of the forked ranks")
    p.add_argument("--lengths", default="8192,4096,2048,1024,512,512,256,128",
                   help="sequence lengths of the batch, comma-separated")
    p.add_argument("-H", "--heads", type=int, default=16)
    p.add_argument("-K", "--kv-heads", type=int, default=4)
    p.add_argument("-D", "--dim", type=int, default=128)
    p.add_argument("-d", "--dtype", choices=("bfloat16", "float16", "float32"),
                   default="bfloat16")
    p.add_argument("-m", "--methods", default="te_cp,llama_cp,zeppelin")
    p.add_argument("-n", "--iters", type=int, default=5)
    p.add_argument("-w", "--warmup", type=int, default=2)
    return p.parse_args()


def kernel_of(args):
    from zcomm.torch import kernels
    if args.kernel:
        module, _, name = args.kernel.partition(":")
        return getattr(importlib.import_module(module), name)()
    return kernels.TorchFlash() if args.device == "cuda" else kernels.Reference()


def sync(args):
    import torch
    if args.device == "cuda":
        torch.cuda.synchronize()


def slowest(comm, value):
    """max over the ranks (the all-reduce of zcomm.torch is a sum: one slot each)."""
    import torch
    import zcomm.torch as zt
    v = torch.zeros(comm.size, dtype=torch.float64)
    v[comm.rank] = value
    return zt.all_reduce_sum(v, comm).max().item()


def run(comm, args):
    import torch
    import zcomm.torch as zt
    dtype = getattr(torch, args.dtype)
    if args.device == "cuda":
        if comm.local_size > torch.cuda.device_count():
            os.environ["NCCL_HOSTID"] = "zc-kernel-perf-rank-%d" % comm.rank
        torch.cuda.set_device(comm.local_rank % torch.cuda.device_count())
    device = torch.device(args.device, torch.cuda.current_device()) if args.device == "cuda" \
        else torch.device("cpu")
    lengths = [int(x) for x in args.lengths.split(",")]
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32)
    kernel = kernel_of(args)
    rows = []
    for method in args.methods.split(","):
        plan = zt.VarlenPlan(cu, comm, method=method)
        g = torch.Generator().manual_seed(1)
        n = plan.tokens
        q = torch.randn(n, args.heads, args.dim, generator=g).to(device, dtype)
        k = torch.randn(n, args.kv_heads, args.dim, generator=g).to(device, dtype)
        v = torch.randn(n, args.kv_heads, args.dim, generator=g).to(device, dtype)
        dout = torch.randn(n, args.heads, args.dim, generator=g).to(device, dtype)
        times = {None: [], "kernel": []}
        outs = {}
        calls = [0]

        class Counted:
            def forward(self, *a):
                calls[0] += 1
                return kernel.forward(*a)

            def backward(self, *a):
                calls[0] += 1
                return kernel.backward(*a)

        counted = Counted()
        for it in range(-args.warmup, args.iters):
            for which in (None, "kernel"):
                qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
                sync(args)
                zt.all_reduce_sum(torch.zeros(1), comm)  # a barrier
                t0 = time.perf_counter()
                out = zt.varlen_attn(qq, kk, vv, plan, kernel=counted if which else None)
                out.backward(dout)
                sync(args)
                dt = time.perf_counter() - t0
                if it >= 0:
                    times[which].append(slowest(comm, dt))
                outs[which] = out.detach().float()
        own = sorted(times[None])[len(times[None]) // 2]
        mine = sorted(times["kernel"])[len(times["kernel"]) // 2]
        scale = outs[None].abs().max().clamp_min(1e-30)
        diff = ((outs["kernel"] - outs[None]).abs().max() / scale).item() if n else 0.0
        diff = slowest(comm, diff)
        per_iter = slowest(comm, calls[0] / (args.iters + args.warmup))
        rows.append((method, own * 1e3, mine * 1e3, own / mine, per_iter, diff))
        plan.close()
    return rows


def report(args, comm, rows, backend):
    if comm.rank:
        return
    print("# zc_attn_kernel_perf: %d ranks, %s, %s, heads %d/%d, head dim %d, lengths %s, "
          "iters %d, warmup %d" % (comm.size, args.device, args.dtype, args.heads,
                                   args.kv_heads, args.dim, args.lengths, args.iters,
                                   args.warmup))
    print("# own: libzcomm's kernels (ZC_ATTN_BACKEND=%s); kernel: %s through the kernel table"
          % (backend, args.kernel or ("TorchFlash" if args.device == "cuda" else "Reference")))
    print("# %-9s %12s %12s %9s %13s %10s" % ("method", "own(ms)", "kernel(ms)", "own/kern",
                                             "calls/iter", "max|diff|"))
    for method, own, mine, ratio, calls, diff in rows:
        print("  %-9s %12.2f %12.2f %9.2f %13.0f %10.2e" % (method, own, mine, ratio, calls,
                                                           diff))
    sys.stdout.flush()


def rank_main(comm, args):
    rows = run(comm, args)
    report(args, comm, rows, os.environ.get("ZC_ATTN_BACKEND", "native"))
    return rows


def main():
    args = parse()
    os.environ.setdefault("ZC_ATTN_BACKEND", "cudnn" if args.device == "cuda" else "native")
    import torch
    from zcomm.torch import kernels
    if args.device == "cuda":
        # asked of the driver: forked ranks must be the first to start CUDA
        if not os.path.isdir("/proc/driver/nvidia/gpus") or \
                not os.listdir("/proc/driver/nvidia/gpus"):
            print("zc_attn_kernel_perf: no CUDA device: skipped")
            return 0
        if not args.kernel and not kernels.torch_flash_available():
            print("zc_attn_kernel_perf: torch %s has no flash-attention varlen operators "
                  "(zcomm.torch.kernels.TorchFlash); --kernel MODULE:CLASS for another"
                  % torch.__version__)
            return 2
    if args.fork:
        from zcomm.launch import run_forked
        results = run_forked(lambda comm: rank_main(comm, args), args.fork, args.nodes,
                             timeout=600)
        bad = [(r, v) for r, (ok, v) in enumerate(results) if not ok]
        for r, v in bad:
            print("# rank %d: %s" % (r, v))
        return 1 if bad else 0
    import zcomm
    with zcomm.Communicator.from_env() as comm:
        rank_main(comm, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
