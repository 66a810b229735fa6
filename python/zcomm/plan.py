"""Plan: a batch of sequence lengths placed on nnodes x gpus_per_node ranks
(zc_plan_create).  Every rank builds the same plan from the same lengths;
its per-rank views are plain Python data."""
import ctypes

from . import _lib
from ._lib import call

ZONE_NAMES = {0: "local", 1: "intra", 2: "inter"}
LAYOUT_NAMES = {0: "zigzag", 1: "contiguous"}
EVEN_SPLIT = 1
CUT = 2
WINDOW = 4
FORWARD = 0
INVERSE = 1
# zc_layout_t: the layouts a plan's tokens move between (zc_plan_move_runs(3))
LAYOUTS = {"loader": 0, "attention": 1, "linear": 2}


def _piece_dicts(array, count):
    return [{"seq": p.seq, "begin": p.begin, "end": p.end, "zone": ZONE_NAMES[p.zone],
             "ring": p.ring, "chunk": p.chunk} for p in array[:count]]


def layout_code(layout, name, where):
    """The zc_layout_t of a layout's name; anything else is ZC_ERR_INVALID_ARG."""
    if layout not in LAYOUTS:
        raise _lib.invalid(where, "%s: %r, expected one of %s"
                           % (name, layout, ", ".join(repr(k) for k in LAYOUTS)))
    return LAYOUTS[layout]


class Plan(_lib.Handle):
    """zc_plan_h of `lengths` on nnodes x gpus_per_node ranks of `capacity`
    tokens each.  even_split=True gives the TE CP layout.  window_size =
    (left, right), flash-attention's convention (-1: unbounded), is the
    attention mask the plan balances: None or (-1, 0) causal, (-1, -1)
    full, (w - 1, 0) a sliding window of w keys (zc_plan_create(3),
    "Masks")."""

    _destroy, _what = "zc_plan_destroy", "plan"

    def __init__(self, lengths, nnodes, gpus_per_node, capacity, even_split=False,
                 b_intra=1.0, b_inter=10.0, rails=0, window_size=None):
        self.lengths = [int(n) for n in lengths]
        left, right = (0, 0) if window_size is None else (int(w) for w in window_size)
        flags = (EVEN_SPLIT if even_split else 0) | (0 if window_size is None else WINDOW)
        # rails: the communicator's zc_comm_rail_count (0: one per GPU)
        opts = _lib.PlanOpts(ctypes.sizeof(_lib.PlanOpts), b_intra, b_inter, flags,
                             int(rails), 0, left, right)
        handle = ctypes.c_void_p()
        call("zc_plan_create", int(nnodes), int(gpus_per_node), int(capacity),
             _lib.int64_array(self.lengths), len(self.lengths), ctypes.byref(opts),
             ctypes.byref(handle))
        self._handle = handle
        info = _lib.PlanInfo()
        call("zc_plan_info", handle, ctypes.byref(info))
        self.nnodes, self.gpus_per_node, self.nranks = (info.nnodes, info.gpus_per_node,
                                                        info.nranks)
        self.capacity, self.nrings, self.total_tokens = (info.capacity, info.nrings,
                                                         info.total_tokens)
        self.cut = bool(info.flags & CUT)
        self.window_size = (info.window_left, info.window_right)

    def check(self):
        call("zc_plan_check", self.handle)

    def ring_layout(self, ring):
        """'zigzag' or 'contiguous': how ring `ring` lays its sequence out."""
        layout = ctypes.c_int()
        call("zc_plan_ring_layout", self.handle, int(ring), ctypes.byref(layout))
        return LAYOUT_NAMES[layout.value]

    def rank(self, rank):
        """{'tokens', 'linear_tokens', 'attn_pairs', 'node', 's0'} of `rank`."""
        out = _lib.PlanRank()
        call("zc_plan_rank", self.handle, int(rank), ctypes.byref(out))
        return {f: getattr(out, f) for f, _ in _lib.PlanRank._fields_}

    def piece_array(self, rank, layout="attention"):
        """(pointer to zc_plan_piece_t, count): `rank`'s pieces of layout
        "attention" or "linear" in the plan's own memory, valid while the
        plan lives (for readers that want no dict per piece)."""
        fn = "zc_plan_rank_pieces" if layout == "attention" else "zc_plan_rank_linear_pieces"
        array = ctypes.POINTER(_lib.PlanPiece)()
        count = ctypes.c_size_t()
        call(fn, self.handle, int(rank), ctypes.byref(array), ctypes.byref(count))
        return array, count.value

    def rank_pieces(self, rank):
        """The pieces of `rank` in attention-layout buffer order: dicts with
        seq, begin, end (token range of the sequence), zone, ring, chunk."""
        return _piece_dicts(*self.piece_array(rank))

    def rank_linear_pieces(self, rank):
        """The same for the balanced linear layout (after the forward remap)."""
        return _piece_dicts(*self.piece_array(rank, "linear"))

    def layout_tokens(self, rank, layout):
        """Tokens `rank` holds in `layout` ("loader": the batch in order,
        split evenly; "attention"; "linear")."""
        if layout == "loader":
            t, n = self.total_tokens, self.nranks
            return (rank + 1) * t // n - rank * t // n
        info = self.rank(rank)
        return info["tokens"] if layout == "attention" else info["linear_tokens"]

    def move_runs(self, rank, src, dst):
        """The runs of `rank` for the move of every token from layout `src`
        to layout `dst` (names of LAYOUTS): (send, recv), lists of
        (peer, offset, peer_offset, count) in tokens, as zc_plan_move_runs(3)
        orders them."""
        codes = [layout_code(v, n, "Plan.move_runs") for v, n in ((src, "src"), (dst, "dst"))]
        counts = [ctypes.c_size_t(), ctypes.c_size_t()]
        call("zc_plan_move_runs", self.handle, int(rank), *codes, None, ctypes.byref(counts[0]),
             None, ctypes.byref(counts[1]))
        arrays = [(_lib.PlanRun * max(c.value, 1))() for c in counts]
        call("zc_plan_move_runs", self.handle, int(rank), *codes, arrays[0],
             ctypes.byref(counts[0]), arrays[1], ctypes.byref(counts[1]))
        return tuple([(r.peer, r.offset, r.peer_offset, r.count) for r in a[:c.value]]
                     for a, c in zip(arrays, counts))

    def remap_counts(self, rank, direction=FORWARD):
        """(sendcounts, sdispls, recvcounts, rdispls) in tokens, lists of nranks."""
        arrays = [(ctypes.c_int64 * self.nranks)() for _ in range(4)]
        call("zc_plan_remap_counts", self.handle, int(rank), int(direction), *arrays)
        return tuple(list(a) for a in arrays)
