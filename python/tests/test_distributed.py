"""zcomm on forked ranks: point-to-point, routed transfers, alltoallv, the
plan's remap (and its autograd Function), and ring attention forward and
backward (direct calls and the autograd Function) against single-process
PyTorch attention, on a small variable-length batch."""
import sys

import torch

import common
import ranks
import tap
import zcomm
from zcomm.torch_ops import remap, ring_attention

LENGTHS = [150, 37, 64, 9, 20, 91, 3]


def p2p(comm):
    r, n = comm.rank, comm.size
    out = torch.full((1000,), float(r))
    got = torch.empty(1000)
    comm.sendrecv(out, (r + 1) % n, got, (r - 1) % n)
    res = [("sendrecv around the ring brings the left neighbour's tensor",
            bool((got == (r - 1) % n).all()), got[:3])]
    if r == 0:
        comm.send(torch.arange(7, dtype=torch.int64).numpy(), n - 1)
    if r == n - 1:
        arr = comm.recv(torch.zeros(7, dtype=torch.int64).numpy(), 0)
    ok = r != n - 1 or arr.tolist() == list(range(7))
    res.append(("send of a numpy array reaches recv", ok, ""))
    # every rank sends 100 + r elements to rank (r + 2) % n through the routes
    transfers = [(s, (s + 2) % n, 100 + s) for s in range(n)]
    src = (r - 2) % n
    recv = comm.routed_sendrecv(transfers, torch.full((100 + r,), r + 0.5, dtype=torch.bfloat16),
                                torch.zeros(100 + src, dtype=torch.bfloat16))
    res.append(("routed_sendrecv delivers each rank's bf16 tensor",
                bool((recv == src + 0.5).all()), recv[:3]))
    # alltoallv: rank r sends s + r + 1 int32 values of r*100 + s to rank s
    counts = [s + r + 1 for s in range(n)]
    sdispls = [sum(counts[:s]) for s in range(n)]
    send = torch.cat([torch.full((c,), r * 100 + s, dtype=torch.int32)
                      for s, c in enumerate(counts)])
    rcounts = [r + s + 1 for s in range(n)]
    rdispls = [sum(rcounts[:s]) for s in range(n)]
    recv = comm.remap_alltoallv(send, counts, sdispls, torch.zeros(sum(rcounts),
                                                                   dtype=torch.int32),
                                rcounts, rdispls)
    want = torch.cat([torch.full((c,), s * 100 + r, dtype=torch.int32)
                      for s, c in enumerate(rcounts)])
    res.append(("remap_alltoallv delivers every block", torch.equal(recv, want), ""))
    bad = list(rcounts)
    bad[(r + 1) % n] += 1
    try:
        comm.remap_alltoallv(send, counts, sdispls, torch.zeros(sum(bad), dtype=torch.int32),
                             bad, [sum(bad[:s]) for s in range(n)])
        res.append(("counts that disagree are ZC_ERR_MISMATCH on every rank", False, "none"))
    except zcomm.ZcommError as e:
        res.append(("counts that disagree are ZC_ERR_MISMATCH on every rank",
                    e.name == "ZC_ERR_MISMATCH", str(e)))
    comm.barrier()
    return res


def plan_for(comm, even_split=False):
    total = sum(LENGTHS)
    nnodes = comm.node_count
    return zcomm.Plan(LENGTHS, nnodes, comm.size // nnodes,
                      common.capacity(total, comm.size), even_split=even_split)


def remap_case(comm):
    plan = plan_for(comm)
    torch.manual_seed(5)
    full = torch.randn(sum(LENGTHS), 6)
    weight = torch.randn(sum(LENGTHS), 6)
    per_seq, w_seq = common.split(full, LENGTHS), common.split(weight, LENGTHS)
    x = common.rows(per_seq, plan.rank_pieces(comm.rank)).requires_grad_()
    lin = plan.rank_linear_pieces(comm.rank)
    y = remap(x, comm, plan)
    (y * common.rows(w_seq, lin)).sum().backward()
    want_grad = common.rows(w_seq, plan.rank_pieces(comm.rank))
    back = torch.empty_like(x)
    comm.remap(plan, y.detach(), back, zcomm.INVERSE)
    return [("remap puts the rows of the plan's linear pieces",
             torch.equal(y.detach(), common.rows(per_seq, lin)), ""),
            ("the inverse remap brings every row home", torch.equal(back, x.detach()), ""),
            ("Remap's backward is the inverse remap of the gradient",
             torch.equal(x.grad, want_grad), "")]


def attn_case(dtype, mode, hq=4, hkv=2, d=16):
    tol = 1e-5 if dtype == torch.float32 else 2.5e-2

    def run(comm):
        plan = plan_for(comm, even_split=mode != "zeppelin")
        q, k, v, w, ref, out_ref = common.varlen_reference(LENGTHS, hq, hkv, d)
        pieces = plan.rank_pieces(comm.rank)

        def mine(t):
            return common.rows(common.split(t, LENGTHS), pieces)
        lq, lk, lv = (mine(t).to(dtype).requires_grad_() for t in (q, k, v))
        out = ring_attention(lq, lk, lv, comm, plan, mode)
        (out * mine(w).to(dtype)).sum().backward()
        errs = common.piece_errors(out, (lq.grad, lk.grad, lv.grad), pieces, LENGTHS, out_ref,
                                   ref)
        name = "ring attention (%s, %s, GQA %d/%d): out, dq, dk, dv match PyTorch" % (
            mode, str(dtype)[6:], hq, hkv)
        return [(name, max(errs) <= tol, "relative errors %s" % errs)]
    return run


def run_all(comm):
    res = p2p(comm) + remap_case(comm)
    for dtype, mode in ((torch.float32, "zeppelin"), (torch.bfloat16, "zeppelin"),
                        (torch.float32, "te_cp"), (torch.float32, "llama_cp")):
        res += attn_case(dtype, mode)(comm)
    return res


ranks.run(run_all, 2)
ranks.run(run_all, 4, nodes=2)
sys.exit(tap.done())
