"""zcomm and zcomm.torch on CUDA tensors, on forked ranks: the _stream calls
over NCCL (sendrecv of device tensors, VarlenPlan's dispatch and undispatch,
every move of every method on adversarial batches against a per-token
gather, position_ids, varlen_attn forward and backward against
single-process PyTorch in double precision).  One rank per GPU; with
fewer GPUs than ranks the ranks share them, each its own NCCL host
(NCCL_HOSTID), since NCCL refuses two ranks of one host on one GPU.
Skipped without an NVIDIA GPU or without a CUDA build of libzcomm."""
import os
import sys

import tap


def gpu_count():
    """Asked of the driver, not of CUDA: the ranks are forked, and CUDA must
    not start in this process before that."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def skip(reason):
    print("ok 1 - # SKIP %s" % reason)
    print("1..1")
    sys.exit(0)


if gpu_count() == 0:
    skip("CUDA tensors through the _stream calls: no GPU")

import torch  # noqa: E402  (after the skip: a machine without a GPU needs none of this)

import common  # noqa: E402
import ranks  # noqa: E402
import zcomm  # noqa: E402
import zcomm.torch as zt  # noqa: E402
import zcomm.torch_ops as zops  # noqa: E402
from zcomm import _lib  # noqa: E402

if not _lib.lib.zc_get_features() & _lib.FEATURE_NCCL:
    skip("CUDA tensors through the _stream calls: libzcomm built without CUDA and NCCL")

LENGTHS = common.VARLEN_LENGTHS


def on_gpu(fn):
    """fn(comm) on this rank's GPU."""
    def run(comm):
        ndev = torch.cuda.device_count()
        if comm.size > ndev:
            os.environ["NCCL_HOSTID"] = "zc-test-cuda-rank-%d" % comm.rank
        torch.cuda.set_device(comm.rank % ndev)
        return fn(comm)
    return run


def sendrecv(comm):
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    a = torch.arange(1 << 16, dtype=torch.float32, device="cuda") + comm.rank
    b = torch.full_like(a, -1.0)
    comm.sendrecv(a, right, b, left)
    want = torch.arange(1 << 16, dtype=torch.float32) + left
    return [("sendrecv of CUDA tensors around the ring: bytes equal",
             torch.equal(b.cpu(), want), "")]


def moves(comm):
    plan = zt.VarlenPlan(common.cu_of(LENGTHS), comm)
    lo, hi = plan.loader_range
    ids = torch.arange(sum(LENGTHS), dtype=torch.int64)[lo:hi]
    mine = plan.dispatch(ids.cuda())
    want = plan.dispatch(ids)
    back = plan.undispatch(mine)
    pos = plan.position_ids(device="cuda")
    res = [("VarlenPlan.dispatch of a CUDA tensor gives the host path's rows, on the GPU",
            mine.is_cuda and torch.equal(mine.cpu(), want), ""),
           ("undispatch brings them home", back.is_cuda and torch.equal(back.cpu(), ids), ""),
           ("position_ids on the GPU equal the host's",
            pos.is_cuda and torch.equal(pos.cpu(), plan.position_ids()), "")]
    plan.close()
    return res + common.moves_against_reference(comm, zt.METHODS, device="cuda")


def attn(dtype, hq, hkv, d=64, tol=None):
    tol = tol or (2e-5 if dtype == torch.float32 else 3e-2)

    def run(comm):
        plan = zt.VarlenPlan(common.cu_of(LENGTHS), comm)
        q, k, v, w, ref, out_ref = common.varlen_reference(LENGTHS, hq, hkv, d)
        lo, hi = plan.loader_range
        mine = [t[lo:hi].to("cuda", dtype).requires_grad_() for t in (q, k, v)]
        out = zt.varlen_attn(*(plan.dispatch(t) for t in mine), plan)
        y = plan.undispatch(out)
        (y * w[lo:hi].to("cuda", dtype)).sum().backward()
        errs, finite = common.slice_errors(y, mine, out_ref, ref, slice(lo, hi))
        plan.close()
        name = ("varlen_attn on CUDA, %s, GQA %d/%d, head dim %d: out, dq, dk, dv match "
                "PyTorch, no NaN" % (str(dtype)[6:], hq, hkv, d))
        return [(name, y.is_cuda and finite and max(errs) <= tol,
                 "rank %d: errors %s" % (comm.rank, errs))]
    return run


def ring_ops(dtype, hq=8, hkv=2, d=64, tol=None):
    """zcomm.torch_ops.ring_attention on CUDA tensors of the plan's
    attention layout (the stream forms, lse on the GPU) against PyTorch."""
    tol = tol or (2e-5 if dtype == torch.float32 else 3e-2)

    def run(comm):
        total = sum(LENGTHS)
        plan = zcomm.Plan(LENGTHS, comm.node_count, comm.size // comm.node_count,
                          common.capacity(total, comm.size))
        q, k, v, w, ref, out_ref = common.varlen_reference(LENGTHS, hq, hkv, d)
        pieces = plan.rank_pieces(comm.rank)

        def mine(t):
            return common.rows(common.split(t, LENGTHS), pieces)
        lq, lk, lv = (mine(t).to("cuda", dtype).requires_grad_() for t in (q, k, v))
        out = zops.ring_attention(lq, lk, lv, comm, plan)
        (out * mine(w).to("cuda", dtype)).sum().backward()
        torch.cuda.synchronize()
        errs = common.piece_errors(out, (lq.grad, lk.grad, lv.grad), pieces, LENGTHS, out_ref,
                                   ref)
        name = ("torch_ops.ring_attention on CUDA tensors, %s, GQA %d/%d, head dim %d: out, "
                "dq, dk, dv match PyTorch" % (str(dtype)[6:], hq, hkv, d))
        return [(name, out.is_cuda and max(errs) <= tol,
                 "rank %d: relative errors %s" % (comm.rank, errs))]
    return run


def run_all(comm):
    res = sendrecv(comm) + moves(comm)
    res += ring_ops(torch.bfloat16)(comm)
    res += attn(torch.float32, 4, 2)(comm)
    res += attn(torch.bfloat16, 8, 2)(comm)
    return res


ranks.run(on_gpu(run_all), 2)
ranks.run(on_gpu(run_all), 4, nodes=2)
sys.exit(tap.done())
