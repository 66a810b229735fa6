"""The packed-batch API for PyTorch: a global batch of packed sequences
described by flash-attn's cu_seqlens, spread over the ranks of a
Communicator with no padding and any lengths.

    plan = zcomm.torch.VarlenPlan(cu_seqlens, comm)    # same cu_seqlens on every rank
    h = plan.dispatch(embed(tokens))                   # loader layout -> attention layout
    pos = plan.position_ids()                          # for rotary embeddings
    o = zcomm.torch.varlen_attn(q, k, v, plan)         # causal, GQA, autograd
    y = plan.undispatch(o)                             # back to the loader layout

The loader layout: of T packed tokens over R ranks, rank r holds tokens
[floor(r*T/R), floor((r+1)*T/R)) as a tensor [tokens, ...].  The attention
layout is the plan's (zc_plan_rank_pieces: whole sequences, or zigzag
chunks of the sequences that ring over several ranks).  The linear layout
is the plan's token-balanced layout for the modules between attentions
(to_linear / from_linear).  Every move is one zc_remap_alltoallv_layouts of
libzcomm, which moves runs of tokens, never a token on its own; every one
is differentiable (the gradient makes the opposite move), and every rank
of the communicator makes the same calls in the same order.
See zcomm-python(7).
"""
import ctypes
import hashlib
import math
import sys

import torch

from . import _lib
from . import torch_kernels as kernels
from ._kernel_table import KernelTable
from ._host_cache import HostCache, element_size, host_alloc, host_tensor
from ._lib import ZcommError, invalid
from .comm import Communicator
from .plan import Plan

# zcomm.torch.kernels, importable by that name too (this module is a file)
sys.modules[__name__ + ".kernels"] = kernels

METHODS = ("zeppelin", "te_cp", "llama_cp")
# The moves' outputs on the host: recycled huge-page memory (_host_cache.py).
_outputs = HostCache()
LAYOUTS = ("attention", "linear")

# Codes of the argument a rank refused, exchanged by the agreement so that
# every rank can name it.  A local refusal is (code, message[, status]).
_ARG_NAMES = {1: "cu_seqlens", 2: "capacity", 3: "method", 4: "window_size"}


def _as_cu_seqlens(cu_seqlens):
    """cu_seqlens as a list of ints, or (code, message) naming the fault."""
    if isinstance(cu_seqlens, torch.Tensor):
        if cu_seqlens.dtype not in (torch.int32, torch.int64):
            return None, (1, "cu_seqlens: dtype %s, expected torch.int32 or torch.int64"
                          % cu_seqlens.dtype)
        if cu_seqlens.dim() != 1:
            return None, (1, "cu_seqlens: %d-D, expected a 1-D tensor" % cu_seqlens.dim())
        values = cu_seqlens.detach().cpu().tolist()
    elif isinstance(cu_seqlens, (list, tuple)) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in cu_seqlens):
        values = list(cu_seqlens)
    else:
        return None, (1, "cu_seqlens: expected a 1-D int tensor, got %s"
                      % type(cu_seqlens).__name__)
    if len(values) < 2:
        return None, (1, "cu_seqlens: %d entries, expected at least 2 (0 and the total)"
                      % len(values))
    if values[0] != 0:
        return None, (1, "cu_seqlens: starts at %d, expected 0" % values[0])
    for i in range(1, len(values)):
        if values[i] < values[i - 1]:
            return None, (1, "cu_seqlens: decreases at index %d (%d after %d)"
                          % (i, values[i], values[i - 1]))
    return values, None


def _digest(*parts):
    """Two int64 words of a SHA-256 over the parts' reprs."""
    h = hashlib.sha256(repr(parts).encode()).digest()
    return [int.from_bytes(h[i:i + 8], "little", signed=True) for i in (0, 8)]


def _agree(comm, error, cu, capacity, method, where):
    """Every rank learns every rank's verdict on its arguments and a digest
    of them (one all-gather through zc_remap_alltoallv), then raises the
    same kind of error: the refusing rank its own message, the others one
    naming that rank and the argument; digests that differ are
    ZC_ERR_MISMATCH naming the argument on every rank."""
    words = 5
    mine = [error[0] if error else 0] + _digest(cu) + _digest(capacity, method)
    send = torch.tensor(mine, dtype=torch.int64)
    got = torch.empty(comm.size * words, dtype=torch.int64)
    comm.remap_alltoallv(send, [words] * comm.size, [0] * comm.size, got,
                         [words] * comm.size, [r * words for r in range(comm.size)])
    table = got.view(comm.size, words).tolist()
    if error:
        raise ZcommError(error[2] if len(error) > 2 else _lib.INVALID_ARG, error[1], where)
    for r, row in enumerate(table):
        if row[0]:
            name = _ARG_NAMES.get(row[0], "arguments")
            raise ZcommError(_lib.INVALID_ARG, "%s: rank %d refused its %s (see its error)"
                             % (name, r, name), where)
    for r, row in enumerate(table):
        if row[1:3] != table[0][1:3]:
            raise ZcommError(_lib.MISMATCH, "cu_seqlens: rank %d passed a different "
                             "cu_seqlens from rank 0's (every rank passes the global batch)"
                             % r, where)
        if row[3:5] != table[0][3:5]:
            raise ZcommError(_lib.MISMATCH, "capacity, method, causal, window_size: rank %d "
                             "passed different ones from rank 0's" % r, where)


def _bytes(x):
    """x [rows, ...] contiguous as uint8 [rows, row_bytes]: any dtype moves."""
    rows = x.shape[0]
    per_row = math.prod(x.shape[1:])
    if per_row == 0 or rows == 0:  # no bytes to view (reshape(0, -1) is ambiguous)
        return (torch.empty(rows, per_row * x.element_size(), dtype=torch.uint8,
                            device=x.device), per_row * x.element_size())
    flat = x.reshape(rows, per_row)
    if x.dtype == torch.bool:
        flat = flat.view(torch.uint8)
    return flat.view(torch.uint8), flat.shape[1] * x.element_size()


def _alltoallv_rows(comm, send, scounts, recv, rcounts, sdispls=None, rdispls=None):
    """zc_remap_alltoallv of whole rows (counts and displacements in rows;
    displacements None: the blocks packed in rank order), any dtype."""
    sb, row_bytes = _bytes(send)
    rb, _ = _bytes(recv)
    if row_bytes == 0:
        return
    if sdispls is None:
        sdispls = [sum(scounts[:i]) for i in range(len(scounts))]
    if rdispls is None:
        rdispls = [sum(rcounts[:i]) for i in range(len(rcounts))]
    comm.remap_alltoallv(sb, [c * row_bytes for c in scounts],
                         [d * row_bytes for d in sdispls], rb,
                         [c * row_bytes for c in rcounts], [d * row_bytes for d in rdispls])


class _Move(torch.autograd.Function):
    """x from layout `src` to layout `dst` of the plan; the gradient makes
    the opposite move."""

    @staticmethod
    def forward(ctx, x, plan, src, dst):
        ctx.plan, ctx.src, ctx.dst = plan, src, dst
        return plan._move(x, src, dst)

    @staticmethod
    def backward(ctx, dy):
        return ctx.plan._move(dy.contiguous(), ctx.dst, ctx.src), None, None, None


def _piece_bounds(plan, rank, layout):
    """begin and end (int64 [pieces]) of `rank`'s pieces of `layout`, one
    copy of the plan's array: no Python object per piece."""
    array, n = plan.piece_array(rank, layout)
    words = ctypes.sizeof(_lib.PlanPiece) // 8
    if n == 0:
        return torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64)
    raw = (ctypes.c_int64 * (n * words)).from_address(ctypes.addressof(array.contents))
    table = torch.frombuffer(raw, dtype=torch.int64).view(n, words)
    return (table[:, _lib.PlanPiece.begin.offset // 8].clone(),
            table[:, _lib.PlanPiece.end.offset // 8].clone())


def _positions(begin, end):
    """Each token's position in its sequence, for tokens laid out as pieces
    [begin, end) (int64): one arange shifted piece by piece."""
    length = end - begin
    at = torch.cumsum(length, 0) - length          # where each piece starts in the buffer
    tokens = int(length.sum())
    return torch.arange(tokens, dtype=torch.int64) - torch.repeat_interleave(at - begin, length)


class VarlenPlan:
    """The plan of one global packed batch on the ranks of `comm`.

    cu_seqlens: the batch as flash-attn's varlen API gives it, a 1-D int
    tensor [nseqs + 1] (or a list of ints) starting at 0 and non-decreasing
    (empty sequences allowed); every rank passes the same, which is checked:
    a rank that differs or refuses its arguments makes every rank raise.
    capacity: tokens a rank may hold in the attention layout; None: the
    total over the ranks plus 25% (zeppelin), or plus two per sequence (the
    even split of te_cp and llama_cp, whose zigzag chunks round up).
    method: "zeppelin" (the paper's hierarchical plan, inter-node hops routed
    over every NIC), "te_cp" (TransformerEngine context parallelism: every
    sequence split over all ranks, zigzag, direct ring hops) or "llama_cp"
    (the same split, KV all-gathered: LLaMA 3 CP).
    window_size: the attention mask the plan balances and lays its rings
    out for, as varlen_attn's (flash-attention's convention, with causal):
    None the causal mask; (-1, -1) with causal=False full; (w - 1, 0) a
    sliding window of w keys.  varlen_attn computes whatever mask it is
    given on any plan; a plan balanced for that mask spreads its work evenly
    and, for a window, lays each ring out so that KV travels only as far as
    the window reaches (zc_plan_create(3), "Masks").
    Collective: every rank of comm calls it together.
    """

    def __init__(self, cu_seqlens, comm, capacity=None, method="zeppelin", causal=True,
                 window_size=None):
        where = "VarlenPlan"
        if not isinstance(comm, Communicator):
            raise invalid(where, "comm: expected a zcomm.Communicator, got %s "
                          "(Communicator.from_torch(group) makes one from a process group)"
                          % type(comm).__name__)
        self.comm = comm
        nnodes = comm.node_count
        if comm.size % nnodes or any(comm.rank_node(r) != r // (comm.size // nnodes)
                                     for r in range(comm.size)):
            raise invalid(where, "comm: its nodes are not consecutive ranks of equal count "
                          "(a plan puts rank r on node r // gpus_per_node); start the ranks "
                          "node by node")
        cu, error = _as_cu_seqlens(cu_seqlens)
        total = cu[-1] if cu else 0
        if error is None and method not in METHODS:
            error = (3, "method: %r, expected one of %s" % (method, ", ".join(METHODS)))
        if error is None and capacity is not None:
            if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
                error = (2, "capacity: %r, expected a positive int (tokens per rank)"
                         % (capacity,))
            elif capacity * comm.size < total:
                error = (2, "capacity: %d tokens per rank x %d ranks holds less than the "
                         "%d tokens of cu_seqlens" % (capacity, comm.size, total),
                         _lib.CAPACITY)
        window = None
        if error is None:
            try:
                window = _mask(causal, window_size, where)
            except ZcommError as e:
                error = (4, e.detail)
        _agree(comm, error, cu, capacity, (method, window), where)

        self.cu_seqlens = torch.tensor(cu, dtype=torch.int64)
        self.lengths = [cu[i + 1] - cu[i] for i in range(len(cu) - 1)]
        self.total_tokens = total
        self.method = method
        even = method != "zeppelin"
        if capacity is None:
            per_rank = math.ceil(total / comm.size)
            capacity = (per_rank + 2 * len(self.lengths) if even
                        else math.ceil(total * 5 / 4 / comm.size))
            capacity = max(capacity, 1)
        self.capacity = capacity
        self.window_size = window
        self.plan = Plan(self.lengths, nnodes, comm.size // nnodes, capacity, even_split=even,
                         rails=comm.rail_count, window_size=self.window_size)
        info = self.plan.rank(comm.rank)
        self.tokens, self.linear_tokens = info["tokens"], info["linear_tokens"]
        me, size = comm.rank, comm.size
        self.loader_range = (me * total // size, (me + 1) * total // size)
        self.loader_tokens = self.loader_range[1] - self.loader_range[0]
        self._rows = {"loader": self.loader_tokens, "attention": self.tokens,
                      "linear": self.linear_tokens}
        self._bounds = {lay: _piece_bounds(self.plan, me, lay) for lay in LAYOUTS}
        begin, end = self._bounds["attention"]
        # Each piece is a run of consecutive tokens of one sequence: a segment
        # of its own (a rank holding chunks i and 2G-1-i of a ring holds two).
        self.cu_seqlens_local = torch.cat((torch.zeros(1, dtype=torch.int64),
                                           torch.cumsum(end - begin, 0))).to(torch.int32)
        self.max_seqlen_local = int((end - begin).max()) if len(begin) else 0
        self._positions = {}   # (layout, device): position_ids, made on first use

    @property
    def pieces(self):
        """This rank's pieces of the attention layout (zcomm.Plan.rank_pieces)."""
        return self.plan.rank_pieces(self.comm.rank)

    @property
    def linear_pieces(self):
        """This rank's pieces of the linear layout."""
        return self.plan.rank_linear_pieces(self.comm.rank)

    def _move(self, x, src, dst):
        """This rank's rows x of layout src -> its rows of layout dst, as
        bytes (zc_remap_alltoallv_layouts: runs of tokens, never a token on
        its own; a CUDA tensor's move is enqueued on its current stream)."""
        shape = (self._rows[dst],) + tuple(x.shape[1:])
        out = (_outputs.empty(shape, x.dtype) if x.device.type == "cpu"
               else x.new_empty(shape))
        sb, row_bytes = _bytes(x)
        rb, _ = _bytes(out)
        if row_bytes:  # the same on every rank, which the C call checks
            self.comm.remap_layouts(self.plan, src, dst, sb, rb)
        return out

    def _check_rows(self, x, rows, what, where):
        if not isinstance(x, torch.Tensor):
            raise invalid(where, "x: expected a torch tensor, got %s" % type(x).__name__)
        if x.dim() < 1 or x.shape[0] != rows:
            raise invalid(where, "x: shape %s, expected [%d, ...]: this rank's %d tokens of "
                          "the %s" % (tuple(x.shape), rows, rows, what))
        if x.device.type not in ("cpu", "cuda"):
            raise invalid(where, "x: tensor on %s, expected CPU or CUDA" % x.device)

    def _layout(self, layout, where):
        if layout not in LAYOUTS:
            raise invalid(where, "layout: %r, expected 'attention' or 'linear'" % (layout,))
        return layout

    def dispatch(self, x, layout="attention"):
        """x [loader tokens, ...] in the loader layout -> this rank's tokens
        of the attention layout (or "linear"); any dtype; differentiable."""
        where = "VarlenPlan.dispatch"
        self._layout(layout, where)
        lo, hi = self.loader_range
        self._check_rows(x, self.loader_tokens, "loader layout (tokens [%d, %d))" % (lo, hi),
                         where)
        return _Move.apply(x.contiguous(), self, "loader", layout)

    def undispatch(self, y, layout="attention"):
        """The inverse of dispatch: y [tokens of the layout, ...] -> the
        loader layout; differentiable."""
        where = "VarlenPlan.undispatch"
        self._layout(layout, where)
        rows = self.tokens if layout == "attention" else self.linear_tokens
        self._check_rows(y, rows, "%s layout" % layout, where)
        return _Move.apply(y.contiguous(), self, layout, "loader")

    def to_linear(self, x):
        """Attention layout -> the token-balanced linear layout (the plan's
        forward remap); differentiable."""
        self._check_rows(x, self.tokens, "attention layout", "VarlenPlan.to_linear")
        return _Move.apply(x.contiguous(), self, "attention", "linear")

    def from_linear(self, x):
        """Linear layout -> attention layout (the inverse remap)."""
        self._check_rows(x, self.linear_tokens, "linear layout", "VarlenPlan.from_linear")
        return _Move.apply(x.contiguous(), self, "linear", "attention")

    def position_ids(self, layout="attention", device=None):
        """Each local token's position inside its sequence (int64 [tokens]),
        for rotary embeddings."""
        self._layout(layout, "VarlenPlan.position_ids")
        key = (layout, None if device is None else torch.device(device))
        if key not in self._positions:
            if key[1] is None:
                self._positions[key] = _positions(*self._bounds[layout])
            else:  # pinned and non-blocking: no wait for the device's stream
                host = self.position_ids(layout)
                if key[1].type == "cuda":
                    host = host.pin_memory()
                self._positions[key] = host.to(key[1], non_blocking=True)
        return self._positions[key]

    def close(self):
        self.plan.close()

    def __repr__(self):
        return ("VarlenPlan(%d sequences, %d tokens, method=%r, capacity=%d: rank %d holds %d "
                "attention / %d linear / %d loader tokens)"
                % (len(self.lengths), self.total_tokens, self.method, self.capacity,
                   self.comm.rank, self.tokens, self.linear_tokens, self.loader_tokens))


_ATTN_DTYPES = (torch.float32, torch.bfloat16)


def _ring(fn, table, pass_name, *args, **kw):
    """A ring attention call; with a kernel table, this rank's kernel error
    when it is what failed the call."""
    try:
        fn(*args, kernels=table.struct if table else None, **kw)
    except ZcommError:
        if table:
            table.reraise(pass_name)
        raise


def _mask(causal, window_size, where):
    """flash-attention's (causal, window_size) as the C window: None for
    causal, else (left, right) with -1 unbounded; causal hides the keys
    right of a query whatever window_size's right side says."""
    if causal is not True and causal is not False:
        raise invalid(where, "causal: %r, expected True or False" % (causal,))
    try:
        left, right = (int(w) for w in window_size) if window_size is not None else (-1, -1)
    except (TypeError, ValueError):
        raise invalid(where, "window_size: %r, expected (left, right) ints, -1 unbounded"
                      % (window_size,)) from None
    if left < -1 or right < -1:
        raise invalid(where, "window_size: (%d, %d), each side -1 (unbounded) or >= 0"
                      % (left, right))
    if causal:
        right = 0
    return None if (left, right) == (-1, 0) else (left, right)


class _VarlenAttn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, plan, scale, table, window):
        out = torch.empty_like(q)
        lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)
        _ring(plan.comm.ring_attn_fwd, table, "forward", plan.plan, q, k, v, out, lse,
              mode=plan.method, scale=scale, window_size=window)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.plan, ctx.scale, ctx.table, ctx.window = plan, scale, table, window
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        _ring(ctx.plan.comm.ring_attn_bwd, ctx.table, "backward", ctx.plan.plan, q, k, v, out,
              lse, dout.contiguous(), dq, dk, dv, mode=ctx.plan.method, scale=ctx.scale,
              window_size=ctx.window)
        return dq, dk, dv, None, None, None, None


def varlen_attn(q, k, v, plan, causal=True, softmax_scale=None, kernel=None, dropout_p=0.0,
                window_size=(-1, -1)):
    """Attention of every sequence of the plan's batch on this rank's
    rows of the attention layout: q [tokens, heads, head_dim], k and v
    [tokens, kv_heads, head_dim] (kv_heads divides heads: GQA, MQA).
    The mask is flash-attention's: the query at position i of its sequence
    sees the key at j when i - left <= j <= i + right for window_size =
    (left, right), -1 unbounded, and j <= i when causal: causal=True with
    (-1, -1) is causal, causal=False with (-1, -1) full (both directions),
    (w - 1, 0) a sliding window of w keys.  The mask is the call's (a model
    may change it layer by layer); the plan may be balanced for it
    (VarlenPlan's window_size).  CPU and CUDA tensors take every mask.
    softmax_scale None: 1/sqrt(head_dim).  Names as flash_attn_varlen_func;
    the plan takes the place of cu_seqlens_q/k and max_seqlen_q/k.  An
    autograd function: the backward is libzcomm's ring attention backward.
    A rank with no tokens passes [0, heads, head_dim] tensors and still
    calls: every rank of the plan's communicator calls together.

    kernel: None (libzcomm's kernels), or any object computing the blocks
    the ring engine decides on, flash-attention varlen style (see
    zcomm.torch.kernels, zcomm-python(7)):
      forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
              max_seqlen_k, causal, softmax_scale) -> (out, lse)
      backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
               max_seqlen_q, max_seqlen_k, causal, softmax_scale)
              -> (dq, dk, dv)
    on packed [tokens, heads, head_dim] tensors, cu_seqlens int32 on the
    tensors' device, lse float32 [heads, tokens] (natural log), causal
    top-left with as many keys as queries in every segment (or False:
    every key visible); backward gets the final out and lse of its rows.
    Under a window, blocks whose keys a window cuts on the left are beyond
    that contract: libzcomm's kernels compute them.
    out, dq, dk, dv in q's dtype or float32.  A method may return
    NotImplemented: libzcomm's kernels compute that block.  Every rank
    passes a kernel or none."""
    where = "varlen_attn"
    if not isinstance(plan, VarlenPlan):
        raise invalid(where, "plan: expected a zcomm.torch.VarlenPlan, got %s"
                      % type(plan).__name__)
    table = None if kernel is None else KernelTable(kernel, where)
    window = _mask(causal, window_size, where)
    if dropout_p:
        raise ZcommError(_lib.UNSUPPORTED, "dropout_p: %r, only 0.0 is implemented"
                         % (dropout_p,), where)
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        if not isinstance(t, torch.Tensor):
            raise invalid(where, "%s: expected a torch tensor, got %s"
                          % (name, type(t).__name__))
        if t.dim() != 3:
            raise invalid(where, "%s: shape %s, expected [tokens, heads, head_dim]"
                          % (name, tuple(t.shape)))
    if q.shape[0] != plan.tokens:
        raise invalid(where, "q: %d tokens, the plan puts %d on rank %d (attention layout: "
                      "use plan.dispatch)" % (q.shape[0], plan.tokens, plan.comm.rank))
    for t, name in ((k, "k"), (v, "v")):
        if t.shape[0] != q.shape[0] or t.shape[2] != q.shape[2]:
            raise invalid(where, "%s: shape %s, expected [%d, kv_heads, %d] like q %s"
                          % (name, tuple(t.shape), q.shape[0], q.shape[2], tuple(q.shape)))
    if v.shape != k.shape:
        raise invalid(where, "v: shape %s differs from k's %s" % (tuple(v.shape),
                                                                  tuple(k.shape)))
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise invalid(where, "k: %d heads do not divide q's %d heads (GQA)"
                      % (k.shape[1], q.shape[1]))
    if not 1 <= q.shape[2] <= 256:
        raise invalid(where, "q: head_dim %d, expected 1 to 256" % q.shape[2])
    allowed = _ATTN_DTYPES + ((torch.float16,) if q.device.type == "cuda" else ())
    if q.dtype not in allowed:
        raise invalid(where, "q: dtype %s, expected %s" % (
            q.dtype, " or ".join(str(d) for d in allowed)))
    for t, name in ((k, "k"), (v, "v")):
        if t.dtype != q.dtype:
            raise invalid(where, "%s: dtype %s differs from q's %s" % (name, t.dtype, q.dtype))
        if t.device != q.device:
            raise invalid(where, "%s: on %s, q on %s" % (name, t.device, q.device))
    if q.device.type not in ("cpu", "cuda"):
        raise invalid(where, "q: tensor on %s, expected CPU or CUDA" % q.device)
    scale = 0.0 if softmax_scale is None else float(softmax_scale)
    return _VarlenAttn.apply(q.contiguous(), k.contiguous(), v.contiguous(), plan, scale, table,
                             window)


def host_empty(*size, dtype=torch.float32):
    """An uninitialized CPU tensor, as torch.empty(*size, dtype=dtype), in
    zc_host_alloc(3) memory: from the huge page size (2 MiB on x86-64) up it
    is backed by transparent huge pages, and a transfer within a node sends
    it 1.8x faster than malloc'd memory (BENCHMARKS.md, "Huge-page
    buffers").  The memory goes back with zc_host_free when the last tensor
    viewing it is gone."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in size):
        raise invalid("host_empty", "size: expected ints, got %r" % (size,))
    if any(d < 0 for d in size):
        raise invalid("host_empty", "size: %r has a negative dimension" % (size,))
    shape = torch.Size(size)
    nbytes = shape.numel() * element_size(dtype)
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    address = host_alloc(nbytes)
    return host_tensor(address, nbytes, shape, dtype, _lib.lib.zc_host_free, address)


def set_host_cache_limit(nbytes):
    """The moves of VarlenPlan put their CPU outputs in huge-page memory
    that, once no tensor views it, waits for the next output of about its
    size instead of going back to the system (a fresh buffer costs the
    kernel's zeroing of every page, as much as the move itself).  Keep at
    most nbytes of such unused memory (default 1 GiB; 0: none); returns the
    previous limit."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 0:
        raise invalid("set_host_cache_limit", "nbytes: %r, expected an int >= 0" % (nbytes,))
    return _outputs.set_limit(nbytes)


def all_reduce_sum(tensor, comm):
    """The sum of `tensor` over the ranks of comm, the same bits on every
    rank (an all-gather through zc_remap_alltoallv, added in rank order):
    for gradients of small models and metrics, not bandwidth-optimal.  Not
    differentiable; every rank calls it with the same shape and dtype."""
    where = "all_reduce_sum"
    if not isinstance(tensor, torch.Tensor):
        raise invalid(where, "tensor: expected a torch tensor, got %s" % type(tensor).__name__)
    if not isinstance(comm, Communicator):
        raise invalid(where, "comm: expected a zcomm.Communicator, got %s"
                      % type(comm).__name__)
    flat = tensor.detach().reshape(1, -1).contiguous()
    gathered = flat.new_empty((comm.size, flat.shape[1]))
    _alltoallv_rows(comm, flat.expand(comm.size, -1).contiguous(), [1] * comm.size, gathered,
                    [1] * comm.size)
    return gathered.sum(0).view_as(tensor)


class ZeppelinAttention(torch.nn.Module):
    """varlen_attn as a module: forward(q, k, v, plan) with the plan of the
    current batch (plans change with every batch; the module holds only
    the attention's settings, kernel included)."""

    def __init__(self, causal=True, softmax_scale=None, kernel=None, window_size=(-1, -1)):
        super().__init__()
        self.causal, self.softmax_scale, self.kernel = causal, softmax_scale, kernel
        self.window_size = tuple(window_size)

    def forward(self, q, k, v, plan):
        return varlen_attn(q, k, v, plan, causal=self.causal, softmax_scale=self.softmax_scale,
                           kernel=self.kernel, window_size=self.window_size)

    def extra_repr(self):
        return "causal=%s, window_size=%s, softmax_scale=%s, kernel=%s" % (
            self.causal, self.window_size, self.softmax_scale,
            None if self.kernel is None else type(self.kernel).__name__)


__all__ = ["VarlenPlan", "varlen_attn", "ZeppelinAttention", "all_reduce_sum", "host_empty",
           "set_host_cache_limit", "METHODS", "kernels"]
