"""Single-process references of the distributed tests: rows of a rank's
pieces, and causal GQA attention with plain PyTorch."""
import math

import torch


# Lengths of every kind for the packed-batch tests: 1-token sequences,
# primes, one longer than a rank holds (it rings), an empty sequence.
VARLEN_LENGTHS = [150, 37, 1, 64, 9, 0, 20, 91, 3, 1, 17]


def cu_of(lengths):
    """cu_seqlens (int32) of packed sequences of these lengths."""
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32)


def rows(per_seq, pieces):
    """The rank's buffer: the rows of each piece, in piece order."""
    return torch.cat([per_seq[p["seq"]][p["begin"]:p["end"]] for p in pieces])


def split(x, lengths):
    return list(torch.split(x, list(lengths)))


def attention(q, k, v, lengths, window=(-1, 0)):
    """Attention of packed sequences, q [T, hq, d], k/v [T, hkv, d]: query
    i sees key j when i - left <= j <= i + right, window = (left, right),
    -1 unbounded (default causal), written out here, not taken from
    zcomm."""
    left, right = window
    outs = []
    for qs, ks, vs in zip(split(q, lengths), split(k, lengths), split(v, lengths)):
        group = qs.shape[1] // ks.shape[1]
        ks, vs = ks.repeat_interleave(group, 1), vs.repeat_interleave(group, 1)
        scores = torch.einsum("qhd,khd->hqk", qs, ks) / math.sqrt(qs.shape[2])
        n = qs.shape[0]
        i, j = torch.arange(n).view(n, 1), torch.arange(n).view(1, n)
        hidden = torch.zeros(n, n, dtype=torch.bool)
        if right >= 0:
            hidden |= j > i + right
        if left >= 0:
            hidden |= j < i - left
        scores = scores.masked_fill(hidden, float("-inf"))
        outs.append(torch.einsum("hqk,khd->qhd", scores.softmax(-1), vs))
    return torch.cat(outs)


def varlen_reference(lengths, hq, hkv, d, window=(-1, 0)):
    """A packed batch's random q, k, v [T, heads, d] and output weights w,
    and single-process attention of them under `window` (attention's) in
    double precision with the gradients of sum(out * w): (q, k, v, w, ref,
    out_ref), ref being q, k, v as double leaves holding their .grad."""
    g = torch.Generator().manual_seed(7)
    T = sum(lengths)
    q, k, v = (torch.randn(T, h, d, generator=g) for h in (hq, hkv, hkv))
    w = torch.randn(T, hq, d, generator=g)
    ref = [t.double().requires_grad_() for t in (q, k, v)]
    out_ref = attention(*ref, [n for n in lengths if n], window)
    (out_ref * w.double()).sum().backward()
    return q, k, v, w, ref, out_ref


def rel_error(got, want):
    got, want = got.double(), want.double()
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def piece_errors(out, grads, pieces, lengths, out_ref, ref):
    """Relative errors of this rank's out and (dq, dk, dv) grads, rows of
    the plan's `pieces`, against varlen_reference's out_ref and ref."""
    def mine(t):
        return rows(split(t, lengths), pieces)
    errs = [rel_error(out.detach().cpu(), mine(out_ref.detach()))]
    errs += [rel_error(g.cpu(), mine(r.grad)) for g, r in zip(grads, ref)]
    return errs


def capacity(total, size):
    """Tokens per device as tests/mn_ring_attn.c gives them: 25% headroom."""
    return (total * 5 // 4 + size - 1) // size + 8


def slice_errors(y, mine, out_ref, ref, rows):
    """A rank's attention output y and the gradients of its inputs `mine`
    against the single-process out_ref and the gradients of `ref`, at the
    rank's `rows` of the batch: the errors relative to the largest element
    of the whole batch (a rank's slice can be exactly 0, as dq and dk of
    1-token sequences are; rounding is not), and whether all are finite."""
    def err(got, full):
        got = got.detach().cpu().double()
        return ((got - full[rows]).abs().max().item() /
                max(full.abs().max().item(), 1e-30)) if got.numel() else 0.0
    errs = [err(y, out_ref.detach())] + [err(t.grad, r.grad) for t, r in zip(mine, ref)]
    finite = all(bool(torch.isfinite(t).all()) for t in [y] + [t.grad for t in mine])
    return errs, finite


def adversarial_lengths(size):
    """Batches that stress the moves on `size` ranks, by name: 1-token
    sequences; a sequence longer than the default capacity of 3 ranks (so
    it rings over every rank); fewer tokens than ranks (ranks with nothing
    in a layout); mixed lengths with an empty sequence."""
    return {"1-token sequences": [1] * 9,
            "a sequence on every rank": [3, 150 * size, 5],
            "fewer tokens than ranks": [1] if size <= 2 else [2, 1],
            "mixed lengths": VARLEN_LENGTHS}


def batch_rows(total, dtype, tail, seed):
    """A whole batch of rows [total, *tail] of `dtype`, the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand((total,) + tail, generator=g) > 0.5
    if dtype == torch.int64:
        return torch.randint(-2 ** 40, 2 ** 40, (total,) + tail, generator=g)
    return torch.randn((total,) + tail, generator=g).to(dtype)


def token_ids(plan, pieces):
    """The batch token of each row of a rank's buffer, token by token from
    its pieces (the reference: no runs)."""
    starts = plan.cu_seqlens.tolist()
    return torch.tensor([starts[p["seq"]] + t for p in pieces for t in range(p["begin"], p["end"])],
                        dtype=torch.int64)


def premise(plan, name):
    """Whether the plan shows what the batch `name` is about: a sequence with
    pieces on every rank, or a rank with no tokens in some layout."""
    size = plan.comm.size
    if name == "a sequence on every rank":
        ranks = [{p["seq"] for p in plan.plan.rank_pieces(r)} for r in range(size)]
        return bool(set.intersection(*ranks))
    if name == "fewer tokens than ranks":
        return any(plan.plan.layout_tokens(r, layout) == 0 for r in range(size)
                   for layout in ("loader", "attention", "linear"))
    return True


# (dtype, row shape): any bytes move, rows of odd sizes included.
MOVE_ROWS = [(torch.float32, (2, 3)), (torch.bfloat16, (5,)), (torch.int64, ()),
             (torch.bool, (4,))]


def moves_against_reference(comm, methods, device="cpu"):
    """Every move of zcomm.torch (dispatch and undispatch to and from both
    layouts, to_linear, from_linear) of every row type, for every method and
    adversarial batch, against rows gathered token by token from the whole
    batch: cases (name, ok, detail)."""
    import zcomm.torch as zt
    res = []
    for name, lengths in adversarial_lengths(comm.size).items():
        for method in methods:
            plan = zt.VarlenPlan(cu_of(lengths), comm, method=method)
            ids = {"loader": torch.arange(*plan.loader_range, dtype=torch.int64),
                   "attention": token_ids(plan, plan.pieces),
                   "linear": token_ids(plan, plan.linear_pieces)}
            moves = [("dispatch", lambda x: plan.dispatch(x), "loader", "attention"),
                     ("dispatch linear", lambda x: plan.dispatch(x, "linear"), "loader",
                      "linear"),
                     ("undispatch", lambda x: plan.undispatch(x), "attention", "loader"),
                     ("undispatch linear", lambda x: plan.undispatch(x, "linear"), "linear",
                      "loader"),
                     ("to_linear", plan.to_linear, "attention", "linear"),
                     ("from_linear", plan.from_linear, "linear", "attention")]
            wrong = []
            for i, (dtype, tail) in enumerate(MOVE_ROWS):
                whole = batch_rows(sum(lengths), dtype, tail, 11 + i)
                ref = {k: whole.index_select(0, v).to(device) for k, v in ids.items()}
                for move, fn, src, dst in moves:
                    got = fn(ref[src])
                    if got.device != ref[dst].device or not torch.equal(got, ref[dst]):
                        wrong.append("%s of %s %s" % (move, dtype, tail))
            shows = premise(plan, name)
            res.append(("%s, %s: every move of every row type equals the per-token reference"
                        "%s" % (name, method, " (the plan shows it)" if name in (
                            "a sequence on every rank", "fewer tokens than ranks") else ""),
                        not wrong and shows, "wrong: %s; premise %s" % (wrong, shows)))
            plan.close()
    return res
