"""A worker of `python3 -m torch.distributed.run` (torchrun): the gloo
process group from torchrun's environment, Communicator.from_torch() on it
(nodes from ZC_NODE_ID, one torchrun per emulated node), then the
packed-batch API: a VarlenPlan, dispatch, varlen_attn forward and backward
through undispatch against single-process PyTorch, the linear remap,
position_ids, cu_seqlens_local, all_reduce_sum, every move of every method
on adversarial batches against a per-token gather from the whole batch,
and ranks that disagree on cu_seqlens failing on every rank.  Results are gathered over the torch
group; global rank 0 prints TAP and every worker exits non-zero when a case
failed anywhere.
usage: torchrun --nnodes N --nproc_per_node P ... test_torchrun.py NODES TAP_FILE
(rank 0 writes the TAP to TAP_FILE: torchrun 1.13 under Python 3.11 cannot
pass output through untouched, see tests/test_python.sh)."""
import os
import sys
import traceback

import torch
import torch.distributed as dist

import common
import zcomm
import zcomm.torch as zt

LENGTHS = [61, 1, 200, 17, 2, 33, 5, 90]


def cases(comm, nodes):
    res = [("from_torch: rank and size are the group's",
            (comm.rank, comm.size) == (dist.get_rank(), dist.get_world_size()),
            (comm.rank, comm.size)),
           ("from_torch: %d nodes from ZC_NODE_ID, ranks grouped by node" % nodes,
            comm.node_count == nodes and comm.rank_node(comm.rank) == comm.rank * nodes
            // comm.size, (comm.node_count, comm.rank_node(comm.rank)))]
    cu = torch.tensor([0] + torch.tensor(LENGTHS).cumsum(0).tolist(), dtype=torch.int32)
    T = sum(LENGTHS)
    for method in zt.METHODS:
        plan = zt.VarlenPlan(cu, comm, method=method)
        g = torch.Generator().manual_seed(3)
        q, k, v = (torch.randn(T, h, 16, generator=g) for h in (4, 2, 2))
        w = torch.randn(T, 4, 16, generator=g)
        ref = [t.double().requires_grad_() for t in (q, k, v)]
        out_ref = common.attention(*ref, LENGTHS)
        (out_ref * w.double()).sum().backward()
        lo, hi = plan.loader_range
        mine = [t[lo:hi].clone().requires_grad_() for t in (q, k, v)]
        attn = zt.ZeppelinAttention()
        out = attn(*(plan.dispatch(t) for t in mine), plan)
        # through the linear layout and back: an identity, gradients included
        out = plan.from_linear(plan.to_linear(out))
        y = plan.undispatch(out)
        (y * w[lo:hi]).sum().backward()
        full = [out_ref.detach()] + [r.grad for r in ref]
        errs = [((a.double() - b[lo:hi]).abs().max() / b.abs().max()).item()
                for a, b in zip([y] + [t.grad for t in mine], full)]
        res.append(("%s: varlen_attn through dispatch, the linear layout and undispatch "
                    "matches PyTorch, gradients included" % method, max(errs) < 2e-5, errs))
        plan.close()
    plan = zt.VarlenPlan(cu, comm)
    lo, hi = plan.loader_range
    g = plan.dispatch(torch.arange(T)[lo:hi])                 # global token index
    cu64 = cu.long()
    want = g - cu64[torch.bucketize(g, cu64[1:], right=True)]
    res.append(("position_ids: each token's position in its sequence",
                torch.equal(plan.position_ids(), want), ""))
    seg = plan.cu_seqlens_local
    res.append(("cu_seqlens_local delimits runs of consecutive tokens",
                int(seg[-1]) == plan.tokens and all(
                    bool((g[seg[i] + 1:seg[i + 1]] - g[seg[i]:seg[i + 1] - 1] == 1).all())
                    for i in range(len(seg) - 1)), seg))
    total = zt.all_reduce_sum(torch.tensor([float(comm.rank), 1.0]), comm)
    res.append(("all_reduce_sum over the ranks",
                total.tolist() == [comm.size * (comm.size - 1) / 2, comm.size], total))
    plan.close()
    res += common.moves_against_reference(comm, zt.METHODS)
    bad = cu.clone()
    if comm.rank == 0:
        bad[2] -= 1
    try:
        zt.VarlenPlan(bad, comm)
        res.append(("different cu_seqlens on rank 0: ZC_ERR_MISMATCH on every rank", False,
                    "no error"))
    except zcomm.ZcommError as e:
        res.append(("different cu_seqlens on rank 0: ZC_ERR_MISMATCH on every rank",
                    e.name == "ZC_ERR_MISMATCH" and "cu_seqlens" in e.detail, str(e)))
    return res


def main():
    nodes = int(sys.argv[1])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    try:
        with zcomm.Communicator.from_torch() as comm:
            res = cases(comm, nodes)
    except Exception:  # reported through the group like a failed case
        res = [("the worker ran to the end", False, traceback.format_exc())]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, res)
    if dist.get_rank() == 0:
        sys.stdout = open(sys.argv[2], "w")
        names = [r[0] for r in gathered[0]]
        for i, name in enumerate(names):
            bad = [(r, rows[i][2]) for r, rows in enumerate(gathered)
                   if i >= len(rows) or rows[i][0] != name or not rows[i][1]]
            print("%s %d - torchrun %d ranks on %d nodes: %s"
                  % ("not ok" if bad else "ok", i + 1, len(gathered), nodes, name))
            for r, diag in bad:
                print("# rank %d: %s" % (r, str(diag).replace("\n", "\n# ")))
        print("1..%d" % len(names))
    failed = any(not ok for rows in gathered for _, ok, _ in rows)
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(1 if failed else 0)


if __name__ == "__main__":
    main()
