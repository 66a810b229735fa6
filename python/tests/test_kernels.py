"""varlen_attn(..., kernel=K) and ZeppelinAttention(kernel=K) on CPU ranks:
forked (2 ranks; 4 ranks on 2 emulated nodes) or, with --torchrun NODES
TAP_FILE, as a torchrun worker (Communicator.from_torch over gloo).

For every method, float32 and bfloat16 with GQA, lengths from 1 to 2500
and an empty sequence: zcomm.torch.kernels.Reference through kernel=
matches the built-in path and float64 single-process attention, forward
and gradients; each call keeps the contract (cu_seqlens int32 on the
tensors' device, lse float32 [heads, tokens], causal segments with as many
keys as queries); the calls of all ranks cover every visible (query, key)
pair of the batch once in each pass, and for one sequence in TE CP each
rank makes the G calls of its ring (one causal, G - 1 full) per pass.  A
kernel that returns NotImplemented leaves every block to libzcomm's
kernels; ranks without tokens; a kernel returning a wrong shape or dtype
is a ZcommError naming the kernel and the argument, and one that raises
fails the call on every rank (the raising rank's error chained to its
exception, the others naming it), in bounded time, the communicator
usable afterwards; torch's flash operators detected (torch 1.13: none)."""
import os
import sys
import time
import traceback

import torch

import common
import zcomm
import zcomm.torch as zt
from zcomm.torch import kernels

LENGTHS = [2500, 1, 0, 37, 300, 5, 64, 2]


class Watch:
    """K, counted and checked: calls per pass, the (query, key) pairs its
    calls compute, and the first breach of the contract."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = [0, 0]
        self.pairs = [0, 0]
        self.bad = None

    def _look(self, p, q, k, cu_q, cu_k, max_q, max_k, causal, lse=None):
        self.calls[p] += 1
        cq, ck = cu_q.tolist(), cu_k.tolist()
        problems = []
        if cu_q.dtype != torch.int32 or cu_k.dtype != torch.int32 or cu_q.device != q.device:
            problems.append("cu_seqlens %s on %s" % (cu_q.dtype, cu_q.device))
        if cq[0] != 0 or cq[-1] != q.shape[0] or ck[-1] != k.shape[0]:
            problems.append("cu_seqlens %s, %s for %d, %d rows" % (cq, ck, q.shape[0],
                                                                   k.shape[0]))
        lq = [b - a for a, b in zip(cq, cq[1:])]
        lk = [b - a for a, b in zip(ck, ck[1:])]
        if min(lq + lk) < 1 or max_q != max(lq) or max_k != max(lk):
            problems.append("segments %s x %s, max %d, %d" % (lq, lk, max_q, max_k))
        if causal and lq != lk:
            problems.append("causal segments of %s queries and %s keys" % (lq, lk))
        if lse is not None and (lse.dtype != torch.float32 or tuple(lse.shape) !=
                                (q.shape[1], q.shape[0])):
            problems.append("lse %s %s" % (lse.dtype, tuple(lse.shape)))
        if problems and self.bad is None:
            self.bad = "; ".join(problems)
        self.pairs[p] += sum(a * (a + 1) // 2 if causal else a * b for a, b in zip(lq, lk))

    def forward(self, q, k, v, cu_q, cu_k, max_q, max_k, causal, scale):
        self._look(0, q, k, cu_q, cu_k, max_q, max_k, causal)
        return self.inner.forward(q, k, v, cu_q, cu_k, max_q, max_k, causal, scale)

    def backward(self, dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, causal, scale):
        self._look(1, q, k, cu_q, cu_k, max_q, max_k, causal, lse)
        return self.inner.backward(dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, causal,
                                   scale)


class Declines:
    """Takes no block."""

    def forward(self, *args):
        return NotImplemented

    def backward(self, *args):
        return NotImplemented


class WrongShape(Watch):
    def forward(self, *args):
        out, lse = self.inner.forward(*args)
        return out[:, :, 1:], lse


class WrongDtype(Watch):
    def backward(self, *args):
        dq, dk, dv = self.inner.backward(*args)
        return dq, dk.double(), dv


class Raises(Watch):
    def backward(self, *args):
        raise RuntimeError("boom in the backward")


def run_attn(comm, plan, q, k, v, w, dtype, kernel=None, module=False, device="cpu", **mask):
    """This rank's out and (dq, dk, dv) of sum(out * w) in the loader layout;
    mask: varlen_attn's causal and window_size."""
    lo, hi = plan.loader_range
    mine = [t[lo:hi].to(device=device, dtype=dtype).clone().requires_grad_() for t in (q, k, v)]
    qa, ka, va = (plan.dispatch(t) for t in mine)
    if module:
        out = zt.ZeppelinAttention(kernel=kernel, **mask)(qa, ka, va, plan)
    else:
        out = zt.varlen_attn(qa, ka, va, plan, kernel=kernel, **mask)
    y = plan.undispatch(out)
    (y.float() * w[lo:hi].to(device)).sum().backward()
    return y.detach().float().cpu(), [t.grad.float().cpu() for t in mine]


def rel(a, b):
    return ((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30)).item()


def total_pairs(comm, watch):
    got = zt.all_reduce_sum(torch.tensor(watch.pairs, dtype=torch.float64), comm)
    return got.tolist()


def attention_cases(comm):
    res = []
    q, k, v, w, ref, out_ref = common.varlen_reference(LENGTHS, 4, 2, 16)
    want_pairs = float(sum(n * (n + 1) // 2 for n in LENGTHS))
    cu = common.cu_of(LENGTHS)
    for method in zt.METHODS:
        plan = zt.VarlenPlan(cu, comm, method=method)
        lo, hi = plan.loader_range
        full = [out_ref.detach()[lo:hi]] + [r.grad[lo:hi] for r in ref]
        for dtype, tol_ref, tol_own in ((torch.float32, 2e-5, 2e-5),
                                        (torch.bfloat16, 3e-2, 2e-2)):
            own = run_attn(comm, plan, q, k, v, w, dtype)
            watch = Watch(kernels.Reference())
            got = run_attn(comm, plan, q, k, v, w, dtype, kernel=watch,
                           module=dtype == torch.bfloat16)
            errs_ref = [rel(a, b) for a, b in zip([got[0]] + got[1], full)]
            errs_own = [rel(a, b) for a, b in zip([got[0]] + got[1], [own[0]] + own[1])]
            name = "%s, %s: Reference through %s" % (
                method, str(dtype)[6:],
                "ZeppelinAttention(kernel=)" if dtype == torch.bfloat16 else "kernel=")
            res.append(("%s matches float64 attention and the built-in path, out and "
                        "gradients" % name, max(errs_ref) < tol_ref and max(errs_own) < tol_own,
                        "vs float64 %s, vs built-in %s" % (errs_ref, errs_own)))
            res.append(("%s: every call keeps the contract" % name, watch.bad is None,
                        watch.bad))
            pairs = total_pairs(comm, watch)
            res.append(("%s: the calls of all ranks cover the batch's %d visible pairs once, "
                        "forward and backward" % (name, want_pairs),
                        pairs == [want_pairs, want_pairs], pairs))
        declines = run_attn(comm, plan, q, k, v, w, torch.float32, kernel=Declines())
        errs = [rel(a, b) for a, b in zip([declines[0]] + declines[1], full)]
        res.append(("%s: a kernel returning NotImplemented leaves every block to libzcomm"
                    % method, max(errs) < 2e-5, errs))
        plan.close()
    return res


def window_cases(comm):
    """kernel= under masks beyond causal: the kernel gets the causal and
    full blocks (within its contract), libzcomm's kernels the banded ones;
    the result is the masked attention's."""
    res = []
    cu = common.cu_of(LENGTHS)
    for method, causal, window in (("te_cp", False, (-1, -1)), ("zeppelin", True, (5, 0)),
                                   ("llama_cp", False, (3, 2))):
        mask = (window[0], 0 if causal else window[1])
        q, k, v, w, ref, out_ref = common.varlen_reference(LENGTHS, 4, 2, 16, mask)
        plan = zt.VarlenPlan(cu, comm, method=method, causal=causal, window_size=window)
        lo, hi = plan.loader_range
        full = [out_ref.detach()[lo:hi]] + [r.grad[lo:hi] for r in ref]
        watch = Watch(kernels.Reference())
        got = run_attn(comm, plan, q, k, v, w, torch.float32, kernel=watch, causal=causal,
                       window_size=window)
        errs = [rel(a, b) for a, b in zip([got[0]] + got[1], full)]
        res.append(("%s, causal=%s window_size=%s: Reference through kernel= matches "
                    "float64 attention under the mask; every call keeps the contract"
                    % (method, causal, window), max(errs) < 2e-5 and watch.bad is None,
                    (errs, watch.bad)))
        plan.close()
    return res


def call_count_cases(comm):
    """Calls the plan implies: one sequence in TE CP is G ring steps per
    rank, the own chunks causal, the others full; short sequences kept
    whole on their rank (the local zone) are one call."""
    res = []
    n = 8 * comm.size + 3
    q, k, v, w, _, _ = common.varlen_reference([n], 2, 1, 8)
    plan = zt.VarlenPlan(common.cu_of([n]), comm, method="te_cp")
    watch = Watch(kernels.Reference())
    run_attn(comm, plan, q, k, v, w, torch.float32, kernel=watch)
    res.append(("te_cp, one sequence: %d calls per pass on every rank" % comm.size,
                watch.calls == [comm.size, comm.size], watch.calls))
    plan.close()
    short = [5] * (2 * comm.size)
    q, k, v, w, _, _ = common.varlen_reference(short, 2, 1, 8)
    plan = zt.VarlenPlan(common.cu_of(short), comm, method="zeppelin")
    watch = Watch(kernels.Reference())
    run_attn(comm, plan, q, k, v, w, torch.float32, kernel=watch)
    local = all(p["zone"] == "local" for p in plan.pieces)
    res.append(("zeppelin, sequences a rank holds whole: one call per pass",
                not local or watch.calls == [1, 1], (local, watch.calls)))
    plan.close()
    # ranks without tokens call too, with nothing to compute
    plan = zt.VarlenPlan(common.cu_of([1, 2]), comm, method="te_cp")
    q, k, v, w, ref, out_ref = common.varlen_reference([1, 2], 2, 1, 8)
    got = run_attn(comm, plan, q, k, v, w, torch.float32, kernel=kernels.Reference())
    lo, hi = plan.loader_range
    full = [out_ref.detach()[lo:hi]] + [r.grad[lo:hi] for r in ref]
    ok = all(a.shape == b.shape and (a.numel() == 0 or rel(a, b) < 2e-5)
             for a, b in zip([got[0]] + got[1], full))
    res.append(("3 tokens over %d ranks, ranks without tokens: kernel= matches" % comm.size,
                ok, ""))
    plan.close()
    return res


def expect_error(comm, fn, mine_has, others_has):
    """(ok, diag): fn raises ZcommError on every rank, this rank's detail
    containing mine_has (the failing rank) or others_has."""
    t0 = time.time()
    try:
        fn()
    except zcomm.ZcommError as e:
        want = mine_has if mine_has is not None else others_has
        return (all(w in str(e) for w in want) and time.time() - t0 < 60,
                "%s (%.1f s)" % (e, time.time() - t0)), e
    return (False, "no error"), None


def failure_cases(comm):
    res = []
    lengths = [40, 7, 90, 1]
    q, k, v, w, _, _ = common.varlen_reference(lengths, 4, 2, 8)
    plan = zt.VarlenPlan(common.cu_of(lengths), comm, method="te_cp")
    bad = 1 % comm.size

    kernel = WrongShape(kernels.Reference()) if comm.rank == bad else kernels.Reference()
    (ok, diag), _ = expect_error(
        comm, lambda: run_attn(comm, plan, q, k, v, w, torch.float32, kernel=kernel),
        ["WrongShape.forward", "out", "shape", "expected"] if comm.rank == bad else None,
        ["rank %d" % bad])
    res.append(("a kernel returning out of the wrong shape: ZcommError on every rank, naming "
                "the kernel and out on its rank", ok, diag))
    kernel = WrongDtype(kernels.Reference()) if comm.rank == bad else kernels.Reference()
    (ok, diag), _ = expect_error(
        comm, lambda: run_attn(comm, plan, q, k, v, w, torch.float32, kernel=kernel),
        ["WrongDtype.backward", "dk", "torch.float64"] if comm.rank == bad else None,
        ["rank %d" % bad])
    res.append(("a kernel returning dk in float64: ZcommError on every rank, naming the "
                "kernel and dk on its rank", ok, diag))
    kernel = Raises(kernels.Reference()) if comm.rank == 0 else kernels.Reference()
    (ok, diag), err = expect_error(
        comm, lambda: run_attn(comm, plan, q, k, v, w, torch.float32, kernel=kernel),
        ["Raises.backward raised RuntimeError", "boom"] if comm.rank == 0 else None,
        ["rank 0"])
    chained = comm.rank != 0 or (err is not None and isinstance(err.__cause__, RuntimeError))
    res.append(("a kernel raising in the backward on rank 0: every rank raises within 60 s, "
                "rank 0's error chained to the RuntimeError", ok and chained, diag))
    _, _, _, _, ref, out_ref = common.varlen_reference(lengths, 4, 2, 8)
    good = run_attn(comm, plan, q, k, v, w, torch.float32, kernel=kernels.Reference())
    lo, hi = plan.loader_range
    errs = [rel(a, b) for a, b in zip([good[0]] + good[1],
                                      [out_ref.detach()[lo:hi]] + [r.grad[lo:hi] for r in ref])]
    res.append(("after the failures the same call through kernel= is right",
                max(errs) < 2e-5, errs))
    try:
        zt.varlen_attn(q[:0], k[:0], v[:0], plan, kernel=object())
        res.append(("a kernel without forward and backward is refused", False, "no error"))
    except zcomm.ZcommError as e:
        res.append(("a kernel without forward and backward is refused, named",
                    e.name == "ZC_ERR_INVALID_ARG" and "kernel: object has no forward" in
                    e.detail, str(e)))
    plan.close()
    if kernels.torch_flash_available():
        res.append(("torch has flash varlen operators: TorchFlash constructs",
                    kernels.TorchFlash() is not None, torch.__version__))
    else:
        try:
            kernels.TorchFlash()
            res.append(("TorchFlash without torch's flash operators is refused", False, ""))
        except zcomm.ZcommError as e:
            res.append(("TorchFlash without torch's flash operators (torch %s): "
                        "ZC_ERR_UNSUPPORTED" % torch.__version__,
                        e.name == "ZC_ERR_UNSUPPORTED" and "flash" in e.detail, str(e)))
    return res


def cases(comm):
    return (attention_cases(comm) + window_cases(comm) + call_count_cases(comm) +
            failure_cases(comm))


def cuda_cases(comm):
    """kernel= on CUDA tensors (the _stream forms: the kernel runs on the
    call's stream): Reference, and TorchFlash where torch has it, against
    float64 attention and the built-in path, every method."""
    res = []
    q, k, v, w, ref, out_ref = common.varlen_reference(LENGTHS, 4, 2, 16)
    cu = common.cu_of(LENGTHS)
    named = [("Reference", kernels.Reference())]
    if kernels.torch_flash_available():
        named.append(("TorchFlash", kernels.TorchFlash()))
    for method in zt.METHODS:
        plan = zt.VarlenPlan(cu, comm, method=method)
        lo, hi = plan.loader_range
        full = [out_ref.detach()[lo:hi]] + [r.grad[lo:hi] for r in ref]
        for dtype in (torch.bfloat16, torch.float16):
            own = run_attn(comm, plan, q, k, v, w, dtype, device="cuda")
            for name, kernel in named:
                watch = Watch(kernel)
                got = run_attn(comm, plan, q, k, v, w, dtype, kernel=watch, device="cuda")
                errs_ref = [rel(a, b) for a, b in zip([got[0]] + got[1], full)]
                errs_own = [rel(a, b) for a, b in zip([got[0]] + got[1], [own[0]] + own[1])]
                res.append(("CUDA, %s, %s: %s through kernel= matches float64 attention and the "
                            "built-in path; every call keeps the contract"
                            % (method, str(dtype)[6:], name),
                            max(errs_ref) < 3e-2 and max(errs_own) < 3e-2 and watch.bad is None,
                            "vs float64 %s, vs built-in %s, %s" % (errs_ref, errs_own,
                                                                    watch.bad)))
        plan.close()
    return res


def gpu_count():
    """Asked of the driver: the ranks are forked, CUDA must not start here."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def on_gpu(fn):
    def run(comm):
        ndev = torch.cuda.device_count()
        if comm.size > ndev:  # ranks sharing a GPU: each its own NCCL host
            os.environ["NCCL_HOSTID"] = "zc-test-kernels-rank-%d" % comm.rank
        torch.cuda.set_device(comm.rank % ndev)
        return fn(comm)
    return run


def torchrun_main(nodes, tap_file):
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        with zcomm.Communicator.from_torch() as comm:
            res = [(n, bool(c), str(d)) for n, c, d in cases(comm)]
    except Exception:
        res = [("the worker ran to the end", False, traceback.format_exc())]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, res)
    if dist.get_rank() == 0:
        with open(tap_file, "w") as out:
            names = [r[0] for r in gathered[0]]
            for i, name in enumerate(names):
                bad = [(r, rows[i][2]) for r, rows in enumerate(gathered)
                       if i >= len(rows) or rows[i][0] != name or not rows[i][1]]
                out.write("%s %d - torchrun %d ranks on %d nodes: %s\n"
                          % ("not ok" if bad else "ok", i + 1, len(gathered), nodes, name))
                for r, diag in bad:
                    out.write("# rank %d: %s\n" % (r, diag.replace("\n", "\n# ")))
            out.write("1..%d\n" % len(names))
    failed = any(not ok for rows in gathered for _, ok, _ in rows)
    dist.destroy_process_group()
    os._exit(1 if failed else 0)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--torchrun":
        torchrun_main(int(sys.argv[2]), sys.argv[3])
    import ranks
    import tap
    if len(sys.argv) > 1 and sys.argv[1] == "--cuda":
        from zcomm import _lib
        if gpu_count() == 0 or not _lib.lib.zc_get_features() & _lib.FEATURE_NCCL:
            print("ok 1 - # SKIP kernel= on CUDA tensors: no GPU, or libzcomm without CUDA "
                  "and NCCL")
            print("1..1")
            sys.exit(0)
        ranks.run(on_gpu(cuda_cases), 2, what="kernel= on CUDA: ", timeout=300)
        sys.exit(tap.done())
    ranks.run(cases, 2, what="kernel=: ", timeout=300)
    ranks.run(cases, 4, nodes=2, what="kernel=: ", timeout=300)
    sys.exit(tap.done())
