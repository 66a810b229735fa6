"""zcomm.torch on forked ranks: VarlenPlan's moves (dispatch, undispatch,
the linear remap: exact rows, gradients the opposite move; every move of
every method on adversarial batches against a per-token gather from the
whole batch), position_ids and
cu_seqlens_local, varlen_attn and ZeppelinAttention forward and backward
against single-process PyTorch for every method, dtype and GQA shape, ranks
with no tokens, bad input named on every rank (ranks that disagree
included, in bounded time), Communicator.from_torch over gloo, and device
buffers routed to the _stream calls (CUDA tensors themselves: test_cuda.py)."""
import socket
import sys
import time

import numpy as np
import torch

import common
import ranks
import tap
import zcomm
import zcomm.torch as zt
from zcomm import _lib

LENGTHS = common.VARLEN_LENGTHS
cu_of = common.cu_of


def global_rows(plan, pieces):
    starts = plan.cu_seqlens.tolist()
    return torch.cat([torch.arange(starts[p["seq"]] + p["begin"], starts[p["seq"]] + p["end"])
                      for p in pieces]) if pieces else torch.empty(0, dtype=torch.int64)


def moves(comm):
    res = []
    T = sum(LENGTHS)
    for method in zt.METHODS:
        plan = zt.VarlenPlan(cu_of(LENGTHS), comm, method=method)
        lo, hi = plan.loader_range
        want_lo = comm.rank * T // comm.size
        res.append(("%s: loader range is [floor(r*T/R), floor((r+1)*T/R))" % method,
                    (lo, hi) == (want_lo, (comm.rank + 1) * T // comm.size), (lo, hi)))
        ids = torch.arange(T, dtype=torch.int64)[lo:hi]            # token ids: int64
        mine = plan.dispatch(ids)
        want = global_rows(plan, plan.pieces)
        res.append(("%s: dispatch gives the rows of the plan's pieces (int64)" % method,
                    torch.equal(mine, want), ""))
        res.append(("%s: undispatch brings them home" % method,
                    torch.equal(plan.undispatch(mine), ids), ""))
        lin = plan.dispatch(ids, layout="linear")
        res.append(("%s: dispatch to the linear layout gives its pieces' rows" % method,
                    torch.equal(lin, global_rows(plan, plan.linear_pieces)), ""))
        res.append(("%s: to_linear of the attention rows is the linear layout" % method,
                    torch.equal(plan.to_linear(mine), lin)
                    and torch.equal(plan.from_linear(lin), mine), ""))
        pos = plan.position_ids()
        want_pos = want - plan.cu_seqlens[torch.bucketize(want, plan.cu_seqlens[1:], right=True)]
        res.append(("%s: position_ids are each token's position in its sequence" % method,
                    torch.equal(pos, want_pos), ""))
        seg = plan.cu_seqlens_local
        ok = (seg.dtype == torch.int32 and seg[0] == 0 and seg[-1] == plan.tokens
              and all(int(seg[i + 1] - seg[i]) == p["end"] - p["begin"]
                      for i, p in enumerate(plan.pieces))
              and plan.max_seqlen_local == max([p["end"] - p["begin"] for p in plan.pieces]
                                               or [0]))
        res.append(("%s: cu_seqlens_local delimits the pieces (int32)" % method, ok, seg))
        # Gradients: d(sum(w * dispatch(x)))/dx = undispatch(w), exactly.
        x = torch.randn(hi - lo, 3, dtype=torch.float64, requires_grad=True)
        w = torch.randn(plan.tokens, 3, dtype=torch.float64)
        (plan.dispatch(x) * w).sum().backward()
        g1 = torch.equal(x.grad, plan.undispatch(w))
        x.grad = None
        wl = torch.randn(plan.tokens, 3, dtype=torch.float64)
        y = torch.randn(plan.tokens, 3, dtype=torch.float64, requires_grad=True)
        (plan.undispatch(y) * x.detach()).sum().backward()
        g2 = torch.equal(y.grad, plan.dispatch(x.detach()))
        z = torch.randn(plan.tokens, 3, requires_grad=True)
        (plan.to_linear(z) * plan.to_linear(wl.float())).sum().backward()
        g3 = torch.allclose(z.grad, wl.float())
        res.append(("%s: the gradients of dispatch, undispatch and to_linear make the "
                    "opposite move" % method, g1 and g2 and g3, (g1, g2, g3)))
        plan.close()
    return res


PER_TOKEN = [(torch.Tensor, "index_select"), (torch.Tensor, "index_copy_"),
             (torch.Tensor, "index_put_"), (torch, "index_select"), (torch, "gather"),
             (torch, "bucketize"), (torch, "sort")]


def no_token_by_token(comm):
    """The moves make no per-token index operation (each of these raises
    while they run), and a rank's runs for dispatch are at most the pieces
    it meets plus the ranks: one per overlap of its loader tokens with a
    piece, one per overlap of its pieces with a loader range."""
    lengths = common.adversarial_lengths(comm.size)["mixed lengths"] + [300, 1, 77]
    res = []
    for method in zt.METHODS:
        plan = zt.VarlenPlan(cu_of(lengths), comm, method=method)
        x = torch.randn(plan.loader_tokens, 6)
        saved = [(owner, name, getattr(owner, name)) for owner, name in PER_TOKEN]

        def refuse(*args, **kw):
            raise AssertionError("a per-token index operation in a move")
        try:
            for owner, name, _ in saved:
                setattr(owner, name, refuse)
            y = plan.from_linear(plan.to_linear(plan.dispatch(x)))
            back = plan.undispatch(y)
            undone, error = torch.equal(back, x), ""
        except AssertionError as e:
            undone, error = False, str(e)
        finally:
            for owner, name, fn in saved:
                setattr(owner, name, fn)
        pieces = sum(len(plan.plan.rank_pieces(r)) for r in range(comm.size))
        send, recv = plan.plan.move_runs(comm.rank, "loader", "attention")
        few = len(send) <= pieces + 1 and len(recv) <= len(plan.pieces) + comm.size
        res.append(("%s: the moves index no token on its own, and the runs of dispatch are at "
                    "most the pieces + ranks" % method, undone and few,
                    "%s; %d + %d runs, %d pieces" % (error, len(send), len(recv), pieces)))
        plan.close()
    return res


def attn(lengths, dtype, method, hq, hkv, d=8, tol=None, module=False, causal=True,
         window_size=(-1, -1), plan_mask=False):
    """varlen_attn (or ZeppelinAttention) with flash-attention's (causal,
    window_size) against the reference under the same mask; plan_mask: the
    plan balanced for it too."""
    tol = tol or (2e-5 if dtype == torch.float32 else 3e-2)
    left, right = window_size
    mask = (left, 0 if causal else right)

    def run(comm):
        kw = {"causal": causal, "window_size": window_size} if plan_mask else {}
        plan = zt.VarlenPlan(cu_of(lengths), comm, method=method, **kw)
        q, k, v, w, ref, out_ref = common.varlen_reference(lengths, hq, hkv, d, mask)
        lo, hi = plan.loader_range
        mine = [t[lo:hi].to(dtype).requires_grad_() for t in (q, k, v)]
        qa, ka, va = (plan.dispatch(t) for t in mine)
        if module:
            out = zt.ZeppelinAttention(causal=causal, window_size=window_size)(qa, ka, va, plan)
        else:
            out = zt.varlen_attn(qa, ka, va, plan, causal=causal, window_size=window_size)
        y = plan.undispatch(out)
        (y * w[lo:hi].to(dtype)).sum().backward()
        errs, finite = common.slice_errors(y, mine, out_ref, ref, slice(lo, hi))
        name = "%s%s, %s, GQA %d/%d, %d seqs%s: out, dq, dk, dv through dispatch match " \
               "PyTorch, no NaN" % ("ZeppelinAttention: " if module else "varlen_attn ",
                                    method, str(dtype)[6:], hq, hkv, len(lengths),
                                    "" if (causal, window_size) == (True, (-1, -1)) else
                                    ", causal=%s window_size=%s%s" % (
                                        causal, window_size,
                                        ", the plan balanced for it" if plan_mask else ""))
        return [(name, finite and max(errs) <= tol,
                 "rank %d, %d tokens: errors %s" % (comm.rank, plan.tokens, errs))]
    return run


def empty_ranks(comm):
    """Fewer tokens than ranks: some ranks hold nothing in every layout."""
    lengths = [1] if comm.size <= 2 else [2, 1]
    plan = zt.VarlenPlan(cu_of(lengths), comm)
    x = torch.randn(plan.loader_tokens, 2, 4, requires_grad=True)
    q = plan.dispatch(x)
    out = zt.varlen_attn(q, q, q, plan)
    y = plan.undispatch(out)
    y.sum().backward()
    res = [("a rank with no tokens gets [0, heads, dim] and zero-size gradients, no NaN",
            tuple(out.shape) == (plan.tokens, 2, 4) and bool(torch.isfinite(x.grad).all()),
            (plan.tokens, plan.loader_tokens))]
    # Some rank must have had nothing, else the case tested nothing.
    counts = torch.tensor([plan.tokens, plan.loader_tokens], dtype=torch.int64)
    got = torch.empty(2 * comm.size, dtype=torch.int64)
    comm.remap_alltoallv(counts, [2] * comm.size, [0] * comm.size, got, [2] * comm.size,
                         [2 * r for r in range(comm.size)])
    return res + [("some rank held no attention tokens and some no loader tokens",
                   (got[0::2] == 0).any().item() and (got[1::2] == 0).any().item(), got)]


def raises(fn, status, call, has):
    try:
        fn()
    except zcomm.ZcommError as e:
        ok = e.name == status and e.call == call and has in e.detail
        return ok, "%s (call %r)" % (e, e.call)
    except Exception as e:  # the wrong exception type fails the case
        return False, "%s: %s" % (type(e).__name__, e)
    return False, "no exception"


def bad_input(comm):
    res = []
    cu = cu_of(LENGTHS)
    T = int(cu[-1])

    def case(name, fn, status, call, has):
        ok, diag = raises(fn, status, call, has)
        res.append((name, ok, diag))

    case("cu_seqlens not starting at 0", lambda: zt.VarlenPlan(cu + 1, comm),
         "ZC_ERR_INVALID_ARG", "VarlenPlan", "cu_seqlens: starts at 1")
    case("cu_seqlens decreasing", lambda: zt.VarlenPlan(torch.tensor([0, 5, 3]), comm),
         "ZC_ERR_INVALID_ARG", "VarlenPlan", "cu_seqlens: decreases at index 2")
    case("cu_seqlens of floats", lambda: zt.VarlenPlan(cu.float(), comm),
         "ZC_ERR_INVALID_ARG", "VarlenPlan", "cu_seqlens: dtype torch.float32")
    case("cu_seqlens 2-D", lambda: zt.VarlenPlan(cu.view(1, -1), comm),
         "ZC_ERR_INVALID_ARG", "VarlenPlan", "cu_seqlens: 2-D")
    case("total over capacity", lambda: zt.VarlenPlan(cu, comm, capacity=T // comm.size - 1),
         "ZC_ERR_CAPACITY", "VarlenPlan", "capacity: %d tokens per rank" % (T // comm.size - 1))
    case("unknown method", lambda: zt.VarlenPlan(cu, comm, method="ring"),
         "ZC_ERR_INVALID_ARG", "VarlenPlan", "method: 'ring'")
    case("comm that is not a Communicator", lambda: zt.VarlenPlan(cu, "comm"),
         "ZC_ERR_INVALID_ARG", "VarlenPlan", "comm: expected a zcomm.Communicator")
    # Ranks that disagree: every rank raises, quickly (no timeout).
    t0 = time.time()
    mine = cu.clone()
    if comm.rank == comm.size - 1:
        mine[1] += 1
    case("ranks passing different cu_seqlens: ZC_ERR_MISMATCH on every rank",
         lambda: zt.VarlenPlan(mine, comm), "ZC_ERR_MISMATCH", "VarlenPlan",
         "cu_seqlens: rank %d passed a different cu_seqlens" % (comm.size - 1))
    bad = cu if comm.rank != 1 else torch.tensor([0, 5, 3])
    want = ("cu_seqlens: decreases" if comm.rank == 1 else "cu_seqlens: rank 1 refused its "
            "cu_seqlens")
    case("one rank refusing its cu_seqlens: every rank raises naming it",
         lambda: zt.VarlenPlan(bad, comm), "ZC_ERR_INVALID_ARG", "VarlenPlan", want)
    cap = None if comm.rank else 10 ** 6
    case("ranks passing different capacities: ZC_ERR_MISMATCH on every rank",
         lambda: zt.VarlenPlan(cu, comm, capacity=cap), "ZC_ERR_MISMATCH", "VarlenPlan",
         "capacity, method")
    res.append(("the disagreements were reported within 10 s", time.time() - t0 < 10,
                "%.1f s" % (time.time() - t0)))

    plan = zt.VarlenPlan(cu, comm)
    n, lt = plan.tokens, plan.loader_tokens
    q = torch.randn(n, 4, 8)
    kv = torch.randn(n, 2, 8)
    case("dispatch of the wrong row count names x", lambda: plan.dispatch(torch.zeros(lt + 1)),
         "ZC_ERR_INVALID_ARG", "VarlenPlan.dispatch", "x: shape (%d,), expected [%d, ...]"
         % (lt + 1, lt))
    case("dispatch of a list names x", lambda: plan.dispatch([1, 2]),
         "ZC_ERR_INVALID_ARG", "VarlenPlan.dispatch", "x: expected a torch tensor")
    case("undispatch of the loader's rows names y... as x", lambda: plan.undispatch(
        torch.zeros(n + 1)), "ZC_ERR_INVALID_ARG", "VarlenPlan.undispatch", "x: shape")
    case("a bad layout", lambda: plan.dispatch(torch.zeros(lt), layout="rows"),
         "ZC_ERR_INVALID_ARG", "VarlenPlan.dispatch", "layout: 'rows'")
    case("varlen_attn with q of the wrong token count", lambda: zt.varlen_attn(
        q[1:], kv[1:], kv[1:], plan), "ZC_ERR_INVALID_ARG", "varlen_attn",
        "q: %d tokens, the plan puts %d" % (n - 1, n))
    case("k heads not dividing q's", lambda: zt.varlen_attn(q, torch.randn(n, 3, 8),
                                                            torch.randn(n, 3, 8), plan),
         "ZC_ERR_INVALID_ARG", "varlen_attn", "k: 3 heads do not divide q's 4")
    case("v shaped unlike k", lambda: zt.varlen_attn(q, kv, torch.randn(n, 4, 8), plan),
         "ZC_ERR_INVALID_ARG", "varlen_attn", "v: shape")
    case("k of another head_dim", lambda: zt.varlen_attn(q, torch.randn(n, 2, 4), kv, plan),
         "ZC_ERR_INVALID_ARG", "varlen_attn", "k: shape")
    case("q in float64", lambda: zt.varlen_attn(q.double(), kv.double(), kv.double(), plan),
         "ZC_ERR_INVALID_ARG", "varlen_attn", "q: dtype torch.float64")
    case("k in another dtype", lambda: zt.varlen_attn(q, kv.bfloat16(), kv, plan),
         "ZC_ERR_INVALID_ARG", "varlen_attn", "k: dtype torch.bfloat16 differs")
    case("q of 2 dimensions", lambda: zt.varlen_attn(q.view(n, -1), kv, kv, plan),
         "ZC_ERR_INVALID_ARG", "varlen_attn", "q: shape")
    case("window_size (-2, 0) is invalid, named", lambda: zt.varlen_attn(
        q, kv, kv, plan, window_size=(-2, 0)), "ZC_ERR_INVALID_ARG", "varlen_attn",
        "window_size")
    case("causal='yes' is invalid, named", lambda: zt.varlen_attn(q, kv, kv, plan,
                                                                  causal="yes"),
         "ZC_ERR_INVALID_ARG", "varlen_attn", "causal")
    case("a plan that is not a VarlenPlan", lambda: zt.varlen_attn(q, kv, kv, plan.plan),
         "ZC_ERR_INVALID_ARG", "varlen_attn", "plan: expected a zcomm.torch.VarlenPlan")
    case("a tensor that requires grad as a receive buffer is refused",
         lambda: comm.sendrecv(torch.zeros(2), comm.rank, torch.zeros(2, requires_grad=True),
                               comm.rank),
         "ZC_ERR_INVALID_ARG", "Communicator.sendrecv", "recvbuf: a tensor that requires grad")
    case("a C refusal names the C function", lambda: zcomm.Plan([10], 0, 1, 50),
         "ZC_ERR_INVALID_ARG", "zc_plan_create", "nnodes")
    return res


class FakeDevice:
    """An object that only speaks __cuda_array_interface__ (its memory is
    host memory: enough to see which C call it is routed to)."""

    def __init__(self, array):
        self.array = array
        self.__cuda_array_interface__ = {
            "shape": array.shape, "typestr": array.dtype.str, "version": 3,
            "data": (array.ctypes.data, False), "strides": None}


class OnlyDLPack:
    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def devices(comm):
    res = []
    a = np.arange(6, dtype=np.float32) + comm.rank
    b = np.zeros(6, np.float32)
    comm.sendrecv(OnlyDLPack(a), (comm.rank + 1) % comm.size, OnlyDLPack(b),
                  (comm.rank - 1) % comm.size)
    res.append(("a CPU DLPack object is a host buffer (sendrecv delivers it)",
                np.array_equal(b, np.arange(6, dtype=np.float32) + (comm.rank - 1) % comm.size),
                b))
    cuda_built = bool(_lib.lib.zc_get_features() & _lib.FEATURE_CUDA)
    if not cuda_built:
        ok, diag = raises(lambda: comm.sendrecv(FakeDevice(a), comm.rank, FakeDevice(b),
                                                comm.rank),
                          "ZC_ERR_UNSUPPORTED", "zc_sendrecv_stream", "")
        res.append(("__cuda_array_interface__ buffers go to zc_sendrecv_stream "
                    "(ZC_ERR_UNSUPPORTED without CUDA)", ok, diag))
        ok, diag = raises(lambda: comm.remap_alltoallv(
            FakeDevice(a), [1] * comm.size, list(range(comm.size)), FakeDevice(b),
            [1] * comm.size, list(range(comm.size))), "ZC_ERR_UNSUPPORTED",
            "zc_remap_alltoallv_stream", "")
        res.append(("and to zc_remap_alltoallv_stream", ok, diag))
    ok, diag = raises(lambda: comm.sendrecv(FakeDevice(a), comm.rank, b, comm.rank),
                      "ZC_ERR_INVALID_ARG", "Communicator.sendrecv",
                      "sendbuf: device memory, but recvbuf is host memory")
    res.append(("device and host buffers in one call are refused naming both", ok, diag))
    return res


def from_torch(port):
    def run(comm):
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                                rank=comm.rank, world_size=comm.size)
        try:
            with zcomm.Communicator.from_torch() as c2:
                same = (c2.rank, c2.size, c2.node_count) == (comm.rank, comm.size,
                                                             comm.node_count)
                plan = zt.VarlenPlan(cu_of(LENGTHS), c2)
                ids = torch.arange(sum(LENGTHS))[plan.loader_range[0]:plan.loader_range[1]]
                back = torch.equal(plan.undispatch(plan.dispatch(ids)), ids)
                plan.close()
            sub = dist.new_group([r for r in range(comm.size) if r % 2 == 0])
            sub_ok = True
            if comm.rank % 2 == 0:
                with zcomm.Communicator.from_torch(sub) as c3:
                    sub_ok = (c3.rank, c3.size) == (comm.rank // 2, (comm.size + 1) // 2)
        finally:
            dist.destroy_process_group()
        return [("Communicator.from_torch(): the gloo group's ranks and the nodes", same,
                 ""), ("a VarlenPlan on it moves tokens there and back", back, ""),
                ("from_torch(subgroup): the subgroup's ranks", sub_ok, "")]
    return run


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_all(port):
    def run(comm):
        res = moves(comm)
        res += common.moves_against_reference(comm, zt.METHODS)
        res += no_token_by_token(comm)
        for method in zt.METHODS:
            res += attn(LENGTHS, torch.float32, method, 4, 2)(comm)
        res += attn(LENGTHS, torch.bfloat16, "zeppelin", 4, 2)(comm)
        res += attn(LENGTHS, torch.float32, "zeppelin", 4, 1)(comm)
        res += attn([1] * 5 + [7, 2], torch.float32, "zeppelin", 2, 2, module=True)(comm)
        # masks beyond causal: full, sliding windows (one of 2, one open on
        # both sides), on the plain plan and on plans balanced for them,
        # each method meeting one
        res += attn(LENGTHS, torch.float32, "zeppelin", 4, 2, window_size=(5, 0),
                    plan_mask=True)(comm)
        res += attn(LENGTHS, torch.float32, "te_cp", 4, 2, causal=False)(comm)
        res += attn(LENGTHS, torch.float32, "llama_cp", 4, 2, causal=False, window_size=(3, 2),
                    plan_mask=True)(comm)
        res += attn(LENGTHS, torch.float32, "zeppelin", 4, 2, window_size=(1, 0))(comm)
        res += attn(LENGTHS, torch.bfloat16, "zeppelin", 4, 2, causal=False,
                    window_size=(-1, -1), plan_mask=True)(comm)
        res += attn([1] * 5 + [7, 2], torch.float32, "zeppelin", 2, 2, module=True,
                    window_size=(2, 0))(comm)
        res += empty_ranks(comm)
        res += bad_input(comm)
        res += devices(comm)
        res += from_torch(port)(comm)
        return res
    return run


torch.set_num_threads(1)
v = zcomm.version()
tap.ok(zcomm.__version__ == "%d.%d.%d" % v,
       "zcomm.__version__ %s is the library's (zc_get_version)" % zcomm.__version__, v)
ranks.run(run_all(free_port()), 2)
ranks.run(run_all(free_port()), 4, nodes=2)
sys.exit(tap.done())
