"""Communicator: zc_comm_h with point-to-point and the plan-driven
collectives on numpy arrays and torch tensors (no copies).  Host buffers
take the blocking calls; device buffers (CUDA tensors, objects with
__cuda_array_interface__ or a CUDA DLPack capsule) take the `_stream`
forms, enqueued on `stream` (default: torch's current stream, else the
legacy default stream) without waiting for it."""
import ctypes

from . import _lib
from ._buffer import same_dtype, same_memory, stream_of, view
from ._lib import call, invalid
from .plan import FORWARD, INVERSE, Plan, layout_code

RING_ATTN_MODES = {"zeppelin": 0, "te_cp": 1, "llama_cp": 2}
ATTN_WINDOW = 2  # ZC_ATTN_WINDOW: zc_ring_attn_args_t's window gives the mask


def get_unique_id():
    """A new unique id (bytes); the calling process runs the bootstrap root
    and must stay alive until every rank has joined."""
    uid = _lib.UniqueId()
    call("zc_get_unique_id", ctypes.byref(uid))
    return ctypes.string_at(ctypes.addressof(uid), _lib.UNIQUE_ID_BYTES)


def plan_handle(plan, where):
    """The C handle of a zcomm.Plan; anything else is ZC_ERR_INVALID_ARG."""
    if not isinstance(plan, Plan):
        raise invalid(where, "plan: expected a zcomm.Plan, got %s" % type(plan).__name__)
    return plan.handle


def _wait(req):
    call("zc_wait", ctypes.byref(req))


class Communicator(_lib.Handle):
    """Communicator(unique_id, rank, size) joins the ranks of an id from
    get_unique_id(); Communicator.from_env() reads ZC_RANK/ZC_SIZE/
    ZC_MASTER_ADDR/ZC_MASTER_PORT, torchrun, mpirun, srun or PMI;
    Communicator.from_torch(group) takes the ranks of a torch.distributed
    process group."""

    _destroy, _what = "zc_comm_destroy", "comm"

    def __init__(self, unique_id=None, rank=None, size=None, timeout_ms=0, node_id=None,
                 _handle=None):
        if _handle is None:
            where = "Communicator"
            for value, name in ((unique_id, "unique_id"), (rank, "rank"), (size, "size")):
                if value is None:
                    raise invalid(where, "%s: required (or use Communicator.from_env() or "
                                  "Communicator.from_torch())" % name)
            uid = bytes(unique_id)
            if len(uid) != _lib.UNIQUE_ID_BYTES:
                raise invalid(where, "unique_id: %d bytes, expected %d"
                              % (len(uid), _lib.UNIQUE_ID_BYTES))
            handle = ctypes.c_void_p()
            call("zc_comm_init_rank", ctypes.byref(handle), int(size),
                 ctypes.byref(_lib.UniqueId.from_buffer_copy(uid)), int(rank),
                 self._config(timeout_ms, node_id))
            _handle = handle
        self._handle = _handle
        self.rank = self._query("zc_comm_rank")
        self.size = self._query("zc_comm_size")

    @staticmethod
    def _config(timeout_ms, node_id):
        return ctypes.byref(_lib.Config(ctypes.sizeof(_lib.Config), int(timeout_ms),
                                        node_id.encode() if node_id else None))

    @classmethod
    def from_env(cls, timeout_ms=0, node_id=None):
        handle = ctypes.c_void_p()
        call("zc_comm_init_env", ctypes.byref(handle), cls._config(timeout_ms, node_id))
        return cls(_handle=handle)

    @classmethod
    def from_torch(cls, group=None, timeout_ms=0, node_id=None):
        """The communicator of an initialized torch.distributed process group
        (None: the default group): its rank and size, and its group rank 0
        makes the unique id and sends it to the others through the group
        (all_gather_object, so any backend that moves objects works: gloo,
        NCCL).  Nodes are libzcomm's (host, or ZC_NODE_ID, or `node_id`).
        A failure to make the id is raised on every rank, never a hang."""
        where = "Communicator.from_torch"
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise invalid(where, "group: torch.distributed is not initialized "
                          "(call torch.distributed.init_process_group first)")
        try:
            rank, size = dist.get_rank(group), dist.get_world_size(group)
        except Exception as e:  # e.g. a group object from another world
            raise invalid(where, "group: %s" % e)
        if rank < 0:
            raise invalid(where, "group: this process is not a member")
        answer = (0, b"")
        if rank == 0:
            try:
                answer = (0, get_unique_id())
            except _lib.ZcommError as e:  # sent to the others before raising
                answer = (e.status, str(e))
        gathered = [None] * size
        dist.all_gather_object(gathered, answer, group=group)
        status, uid = gathered[0]
        if status:
            raise _lib.ZcommError(status, "group: rank 0 could not make the unique id: %s"
                                  % uid, where)
        return cls(uid, rank, size, timeout_ms, node_id)

    def _query(self, fn, *args):
        out = ctypes.c_int()
        call(fn, self.handle, *args, ctypes.byref(out))
        return out.value

    @property
    def node(self):
        return self._query("zc_comm_node")

    @property
    def node_count(self):
        return self._query("zc_comm_node_count")

    @property
    def local_rank(self):
        return self._query("zc_comm_local_rank")

    @property
    def local_size(self):
        return self._query("zc_comm_local_size")

    @property
    def rail_count(self):
        return self._query("zc_comm_rail_count")

    def rank_node(self, rank):
        return self._query("zc_comm_rank_node", int(rank))

    def barrier(self):
        call("zc_barrier", self.handle)

    # ---- point-to-point -------------------------------------------------
    def send(self, buf, peer, stream=None):
        b = view(buf, "buf", "Communicator.send")
        if b.mem == _lib.MEM_CUDA:
            return self._sendrecv_stream(b, peer, None, -1, stream)
        req = ctypes.c_void_p()
        call("zc_send", b.ptr, b.count, b.dtype, _lib.MEM_HOST, int(peer), self.handle,
             ctypes.byref(req))
        _wait(req)

    def recv(self, buf, peer, stream=None):
        """Receive into buf; its element count must equal the sender's."""
        b = view(buf, "buf", "Communicator.recv", writable=True)
        if b.mem == _lib.MEM_CUDA:
            self._sendrecv_stream(None, -1, b, peer, stream)
            return buf
        req = ctypes.c_void_p()
        call("zc_recv", b.ptr, b.count, b.dtype, _lib.MEM_HOST, int(peer), self.handle,
             ctypes.byref(req))
        _wait(req)
        return buf

    def _sendrecv_stream(self, s, dst, r, src, stream):
        dtype = (s or r).dtype
        call("zc_sendrecv_stream", s.ptr if s else None, s.count if s else 0, int(dst),
             r.ptr if r else None, r.count if r else 0, int(src), dtype, self.handle,
             stream_of([s, r], stream))

    def sendrecv(self, sendbuf, dst, recvbuf, src, stream=None):
        where = "Communicator.sendrecv"
        s = view(sendbuf, "sendbuf", where)
        r = view(recvbuf, "recvbuf", where, writable=True)
        same_dtype(s, r, "sendbuf", "recvbuf", where)
        if same_memory([("sendbuf", s), ("recvbuf", r)], where) == _lib.MEM_CUDA:
            self._sendrecv_stream(s, dst, r, src, stream)
            return recvbuf
        call("zc_sendrecv", s.ptr, s.count, int(dst), r.ptr, r.count, int(src), s.dtype,
             _lib.MEM_HOST, self.handle)
        return recvbuf

    # ---- collectives ----------------------------------------------------
    def routed_sendrecv(self, transfers, sendbuf=None, recvbuf=None, stream=None):
        """transfers: the same list of (src, dst, count) on every rank; this
        rank sends sendbuf if it is a src and receives into recvbuf if it is
        a dst (elements of the buffers' dtype)."""
        where = "Communicator.routed_sendrecv"
        transfers = [tuple(int(x) for x in t) for t in transfers]
        s = view(sendbuf, "sendbuf", where) if sendbuf is not None else None
        r = view(recvbuf, "recvbuf", where, writable=True) if recvbuf is not None else None
        for src, dst, count in transfers:
            for b, me, name in ((s, src, "sendbuf"), (r, dst, "recvbuf")):
                if me == self.rank and (b is None or b.count < count):
                    raise invalid(where, "%s: %s elements, transfer %d->%d needs %d"
                                  % (name, "no" if b is None else b.count, src, dst, count))
        if s is not None and r is not None:
            same_dtype(s, r, "sendbuf", "recvbuf", where)
        mem = same_memory([("sendbuf", s), ("recvbuf", r)], where)
        dtype = (s or r).dtype if (s or r) else _lib.BYTE
        array = (_lib.Transfer * max(len(transfers), 1))(*[_lib.Transfer(*t) for t in transfers])
        sp, rp = (s.ptr if s else None), (r.ptr if r else None)
        if mem == _lib.MEM_CUDA:
            call("zc_routed_sendrecv_stream", array, len(transfers), sp, rp, dtype, self.handle,
                 stream_of([s, r], stream))
            return recvbuf
        req = ctypes.c_void_p()
        call("zc_routed_sendrecv", array, len(transfers), sp, rp, dtype, _lib.MEM_HOST,
             self.handle, ctypes.byref(req))
        _wait(req)
        return recvbuf

    def remap_alltoallv(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                        stream=None):
        """MPI_Alltoallv in elements, one count and displacement per rank;
        ranks that disagree on a block's size all get ZC_ERR_MISMATCH."""
        where = "Communicator.remap_alltoallv"
        s = view(sendbuf, "sendbuf", where)
        r = view(recvbuf, "recvbuf", where, writable=True)
        same_dtype(s, r, "sendbuf", "recvbuf", where)
        arrays = []
        for name, values in (("sendcounts", sendcounts), ("sdispls", sdispls),
                             ("recvcounts", recvcounts), ("rdispls", rdispls)):
            values = [int(v) for v in values]
            if len(values) != self.size:
                raise invalid(where, "%s: %d entries, expected one per rank (%d)"
                              % (name, len(values), self.size))
            arrays.append(values)
        for counts, displs, b, name in ((arrays[0], arrays[1], s, "sendbuf"),
                                        (arrays[2], arrays[3], r, "recvbuf")):
            end = max([d + c for c, d in zip(counts, displs) if c > 0], default=0)
            if end > b.count:
                raise invalid(where, "%s: %d elements, the counts reach %d" % (name, b.count, end))
        c_arrays = [_lib.int64_array(a) for a in arrays]
        if same_memory([("sendbuf", s), ("recvbuf", r)], where) == _lib.MEM_CUDA:
            call("zc_remap_alltoallv_stream", s.ptr, c_arrays[0], c_arrays[1], r.ptr,
                 c_arrays[2], c_arrays[3], s.dtype, self.handle, stream_of([s, r], stream))
            return recvbuf
        req = ctypes.c_void_p()
        call("zc_remap_alltoallv", s.ptr, c_arrays[0], c_arrays[1], r.ptr, c_arrays[2],
             c_arrays[3], s.dtype, _lib.MEM_HOST, self.handle, ctypes.byref(req))
        _wait(req)
        return recvbuf

    def remap(self, plan, sendbuf, recvbuf, direction=FORWARD, stream=None):
        """The plan's remap (FORWARD: attention -> linear layout, INVERSE:
        back) of tokens of sendbuf.shape[1:] elements each."""
        where = "Communicator.remap"
        handle = plan_handle(plan, where)
        s = view(sendbuf, "sendbuf", where)
        r = view(recvbuf, "recvbuf", where, writable=True)
        same_dtype(s, r, "sendbuf", "recvbuf", where)
        if direction not in (FORWARD, INVERSE):
            raise invalid(where, "direction: %r, expected zcomm.FORWARD or zcomm.INVERSE"
                          % (direction,))
        if not s.shape or s.shape[1:] != r.shape[1:]:
            raise invalid(where, "recvbuf: token shape %s differs from sendbuf's %s"
                          % (r.shape[1:], s.shape[1:]))
        per_token = s.count // s.shape[0] if s.shape[0] else _prod_tail(s.shape)
        if plan.nranks == self.size:
            info = plan.rank(self.rank)
            rows = {FORWARD: (info["tokens"], info["linear_tokens"]),
                    INVERSE: (info["linear_tokens"], info["tokens"])}[direction]
            for b, n, name in ((s, rows[0], "sendbuf"), (r, rows[1], "recvbuf")):
                if b.shape[0] < n:
                    raise invalid(where, "%s: %d tokens, the plan puts %d on rank %d"
                                  % (name, b.shape[0], n, self.rank))
        if same_memory([("sendbuf", s), ("recvbuf", r)], where) == _lib.MEM_CUDA:
            # No plan-driven stream call: the plan's counts, scaled to elements.
            counts = plan.remap_counts(self.rank, direction)
            scaled = [[c * per_token for c in a] for a in counts]
            self.remap_alltoallv(sendbuf, scaled[0], scaled[1], recvbuf, scaled[2], scaled[3],
                                 stream)
            return recvbuf
        req = ctypes.c_void_p()
        call("zc_remap_alltoallv_plan", handle, direction, s.ptr, r.ptr, per_token, s.dtype,
             _lib.MEM_HOST, self.handle, ctypes.byref(req))
        _wait(req)
        return recvbuf

    def remap_layouts(self, plan, src, dst, sendbuf, recvbuf, stream=None):
        """Every token of `plan` from layout `src` to layout `dst` ("loader",
        "attention" or "linear"; zc_remap_alltoallv_layouts(3)): sendbuf
        holds this rank's tokens of src, recvbuf gets its tokens of dst, a
        token being sendbuf.shape[1:] elements.  Runs of tokens move whole:
        from the buffer itself when large, packed with their pair's other
        small runs otherwise."""
        where = "Communicator.remap_layouts"
        handle = plan_handle(plan, where)
        codes = [layout_code(v, n, where) for v, n in ((src, "src"), (dst, "dst"))]
        s = view(sendbuf, "sendbuf", where)
        r = view(recvbuf, "recvbuf", where, writable=True)
        same_dtype(s, r, "sendbuf", "recvbuf", where)
        if not s.shape or s.shape[1:] != r.shape[1:]:
            raise invalid(where, "recvbuf: token shape %s differs from sendbuf's %s"
                          % (r.shape[1:], s.shape[1:]))
        if plan.nranks == self.size:
            for b, layout, name in ((s, src, "sendbuf"), (r, dst, "recvbuf")):
                n = plan.layout_tokens(self.rank, layout)
                if b.shape[0] != n:
                    raise invalid(where, "%s: %d tokens, the plan puts %d of the %s layout on "
                                  "rank %d" % (name, b.shape[0], n, layout, self.rank))
        per_token = _prod_tail(s.shape)
        if same_memory([("sendbuf", s), ("recvbuf", r)], where) == _lib.MEM_CUDA:
            call("zc_remap_alltoallv_layouts_stream", handle, *codes, s.ptr, r.ptr, per_token,
                 s.dtype, self.handle, stream_of([s, r], stream))
            return recvbuf
        req = ctypes.c_void_p()
        call("zc_remap_alltoallv_layouts", handle, *codes, s.ptr, r.ptr, per_token, s.dtype,
             _lib.MEM_HOST, self.handle, ctypes.byref(req))
        _wait(req)
        return recvbuf

    # ---- ring attention -------------------------------------------------
    def _ring_args(self, where, q, k, v, out, lse, mode, scale):
        bq, bk, bv = view(q, "q", where), view(k, "k", where), view(v, "v", where)
        bo = view(out, "out", where, writable=where.endswith("fwd"))
        bl = view(lse, "lse", where, writable=where.endswith("fwd"))
        if len(bq.shape) != 3:
            raise invalid(where, "q: shape %s, expected [tokens, heads, head_dim]"
                          % (bq.shape,))
        tokens, hq, d = bq.shape
        for b, name in ((bk, "k"), (bv, "v")):
            if len(b.shape) != 3 or b.shape[0] != tokens or b.shape[2] != d:
                raise invalid(where, "%s: shape %s, expected [%d, heads_kv, %d] like q %s"
                              % (name, b.shape, tokens, d, bq.shape))
        if bv.shape != bk.shape:
            raise invalid(where, "v: shape %s differs from k's %s" % (bv.shape, bk.shape))
        if bo.shape != bq.shape:
            raise invalid(where, "out: shape %s, expected q's %s" % (bo.shape, bq.shape))
        if bl.shape != (tokens, hq) or bl.dtype != _lib.FLOAT32:
            raise invalid(where, "lse: expected float32 [%d, %d]" % (tokens, hq))
        for b, name in ((bk, "k"), (bv, "v"), (bo, "out")):
            same_dtype(bq, b, "q", name, where)
        mem = same_memory([("q", bq), ("k", bk), ("v", bv), ("out", bo), ("lse", bl)], where)
        allowed = (_lib.FLOAT32, _lib.BFLOAT16) + ((_lib.FLOAT16,) if mem else ())
        if bq.dtype not in allowed:
            raise invalid(where, "q: dtype must be float32 or bfloat16%s"
                          % (" (or float16 on a device)" if mem else ""))
        if mode not in RING_ATTN_MODES:
            raise invalid(where, "mode: %r, expected one of %s"
                          % (mode, ", ".join(RING_ATTN_MODES)))
        args = _lib.RingAttnArgs()
        args.size = ctypes.sizeof(args)
        args.mode = RING_ATTN_MODES[mode]
        args.num_heads_q, args.num_heads_kv, args.head_dim = hq, bk.shape[1], d
        args.scale = scale
        args.dtype, args.memtype, args.tokens = bq.dtype, mem, tokens
        args.q, args.k, args.v, args.out, args.lse = bq.ptr, bk.ptr, bv.ptr, bo.ptr, bl.ptr
        return args, bq, [bq, bk, bv, bo, bl]

    @staticmethod
    def _stats(args, stats):
        """args.stats -> a zcomm._lib.RingAttnStats the call fills (or None)."""
        if stats is not None:
            if not isinstance(stats, _lib.RingAttnStats):
                raise invalid("Communicator.ring_attn", "stats: expected a "
                              "zcomm._lib.RingAttnStats, got %s" % type(stats).__name__)
            if any(f[0] == "size" for f in stats._fields_):
                stats.size = ctypes.sizeof(stats)
            args.stats = ctypes.pointer(stats)

    @staticmethod
    def _window(args, window_size, where):
        """args' mask: None causal, else (left, right) as zc_ring_attn_args_t's
        window (ZC_ATTN_WINDOW; -1 unbounded: (-1, -1) full, (w - 1, 0) a
        sliding causal window of w keys); the library checks the values."""
        if window_size is not None:
            try:
                left, right = (int(w) for w in window_size)
            except (TypeError, ValueError):
                raise invalid(where, "window_size: %r, expected (left, right) ints"
                              % (window_size,)) from None
            args.flags |= ATTN_WINDOW
            args.window_left, args.window_right = left, right

    @staticmethod
    def _kernels(args, kernels, where):
        """args.kernels -> a zcomm._lib.AttnKernels (zc_attn_kernels_t), or None."""
        if kernels is not None:
            if not isinstance(kernels, _lib.AttnKernels):
                raise invalid(where, "kernels: expected a zcomm._lib.AttnKernels, got %s "
                              "(zcomm.torch.varlen_attn takes Python kernels)"
                              % type(kernels).__name__)
            args.kernels = ctypes.pointer(kernels)

    def ring_attn_fwd(self, plan, q, k, v, out, lse, mode="zeppelin", scale=0.0, stream=None,
                      stats=None, kernels=None, window_size=None):
        """Ring attention of this rank's rows (plan attention layout):
        writes out (like q) and lse (float32 [tokens, heads_q]).  stats: a
        zcomm._lib.RingAttnStats to fill (zc_ring_attn_stats_t: total,
        compute and wait seconds, bytes sent), host path.  kernels: a
        zcomm._lib.AttnKernels, the kernel table of the blocks
        (zc_attn_kernels(3)).  window_size: None (causal) or the mask as
        (left, right) keys, -1 unbounded: (-1, -1) full, (w - 1, 0) a
        sliding window of w keys (host memory; zc_ring_attn_fwd(3))."""
        where = "Communicator.ring_attn_fwd"
        handle = plan_handle(plan, where)
        args, _, bufs = self._ring_args(where, q, k, v, out, lse, mode, scale)
        self._window(args, window_size, where)
        self._stats(args, stats)
        self._kernels(args, kernels, where)
        if args.memtype == _lib.MEM_CUDA:
            call("zc_ring_attn_fwd_stream", self.handle, handle, ctypes.byref(args),
                 stream_of(bufs, stream))
        else:
            call("zc_ring_attn_fwd", self.handle, handle, ctypes.byref(args))
        return out, lse

    def ring_attn_bwd(self, plan, q, k, v, out, lse, dout, dq, dk, dv, mode="zeppelin",
                      scale=0.0, stream=None, stats=None, kernels=None, window_size=None):
        """Backward of ring_attn_fwd: writes dq, dk, dv (like q, k, v);
        stats, kernels and window_size as ring_attn_fwd's."""
        where = "Communicator.ring_attn_bwd"
        handle = plan_handle(plan, where)
        args, bq, bufs = self._ring_args(where, q, k, v, out, lse, mode, scale)
        self._window(args, window_size, where)
        self._stats(args, stats)
        self._kernels(args, kernels, where)
        bdo = view(dout, "dout", where)
        grads = [view(g, n, where, writable=True) for g, n in ((dq, "dq"), (dk, "dk"),
                                                              (dv, "dv"))]
        for b, like, name, like_name in ((bdo, bufs[0], "dout", "q"),
                                         (grads[0], bufs[0], "dq", "q"),
                                         (grads[1], bufs[1], "dk", "k"),
                                         (grads[2], bufs[2], "dv", "v")):
            if b.shape != like.shape or b.dtype != bq.dtype or b.mem != bq.mem:
                raise invalid(where, "%s: expected the shape, dtype and memory of %s"
                              % (name, like_name))
        args.dout, args.dq, args.dk, args.dv = bdo.ptr, grads[0].ptr, grads[1].ptr, grads[2].ptr
        if args.memtype == _lib.MEM_CUDA:
            call("zc_ring_attn_bwd_stream", self.handle, handle, ctypes.byref(args),
                 stream_of(bufs, stream))
        else:
            call("zc_ring_attn_bwd", self.handle, handle, ctypes.byref(args))
        return dq, dk, dv


def _prod_tail(shape):
    n = 1
    for s in shape[1:]:
        n *= s
    return n


__all__ = ["Communicator", "get_unique_id", "FORWARD", "INVERSE"]
