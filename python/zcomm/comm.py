"""Communicator: zc_comm_h with point-to-point and the plan-driven
collectives on numpy arrays and CPU torch tensors (no copies)."""
import ctypes

from . import _lib
from ._buffer import invalid, same_dtype, view
from ._lib import call
from .plan import FORWARD, INVERSE, Plan

RING_ATTN_MODES = {"zeppelin": 0, "te_cp": 1, "llama_cp": 2}


def get_unique_id():
    """A new unique id (bytes); the calling process runs the bootstrap root
    and must stay alive until every rank has joined."""
    uid = ctypes.create_string_buffer(_lib.UNIQUE_ID_BYTES)
    call("zc_get_unique_id", uid)
    return uid.raw



def plan_handle(plan):
    """The C handle of a zcomm.Plan; anything else is ZC_ERR_INVALID_ARG."""
    if not isinstance(plan, Plan):
        raise invalid("plan: expected a zcomm.Plan")
    return plan.handle

class Communicator(_lib.Handle):
    """Communicator(unique_id, rank, size) joins the ranks of an id from
    get_unique_id(); Communicator.from_env() reads ZC_RANK/ZC_SIZE/
    ZC_MASTER_ADDR/ZC_MASTER_PORT, torchrun, mpirun, srun or PMI."""

    _destroy, _what = "zc_comm_destroy", "comm"

    def __init__(self, unique_id=None, rank=None, size=None, timeout_ms=0, node_id=None,
                 _handle=None):
        if _handle is None:
            if unique_id is None or rank is None or size is None:
                raise invalid("Communicator: unique_id, rank and size are required "
                              "(or use Communicator.from_env())")
            uid = bytes(unique_id)
            if len(uid) != _lib.UNIQUE_ID_BYTES:
                raise invalid("unique_id: %d bytes, expected %d" % (len(uid),
                                                                   _lib.UNIQUE_ID_BYTES))
            _handle = ctypes.c_void_p()
            call("zc_comm_init_rank", ctypes.byref(_handle), ctypes.c_int(size),
                 ctypes.create_string_buffer(uid, len(uid)), ctypes.c_int(rank),
                 self._config(timeout_ms, node_id))
        self._handle = _handle
        self.rank = self._query("zc_comm_rank")
        self.size = self._query("zc_comm_size")

    @staticmethod
    def _config(timeout_ms, node_id):
        class Config(ctypes.Structure):
            _fields_ = [("size", ctypes.c_size_t), ("timeout_ms", ctypes.c_int),
                        ("node_id", ctypes.c_char_p)]
        return ctypes.byref(Config(ctypes.sizeof(Config), timeout_ms,
                                   node_id.encode() if node_id else None))

    @classmethod
    def from_env(cls, timeout_ms=0, node_id=None):
        handle = ctypes.c_void_p()
        call("zc_comm_init_env", ctypes.byref(handle), cls._config(timeout_ms, node_id))
        return cls(_handle=handle)

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

    def rank_node(self, rank):
        return self._query("zc_comm_rank_node", ctypes.c_int(rank))

    def barrier(self):
        call("zc_barrier", self.handle)

    # ---- point-to-point -------------------------------------------------
    def send(self, buf, peer):
        b = view(buf, "buf")
        req = ctypes.c_void_p()
        call("zc_send", ctypes.c_void_p(b.ptr), ctypes.c_int64(b.count), b.dtype,
             _lib.MEM_HOST, ctypes.c_int(peer), self.handle, ctypes.byref(req))
        call("zc_wait", ctypes.byref(req))

    def recv(self, buf, peer):
        """Receive into buf; its element count must equal the sender's."""
        b = view(buf, "buf", writable=True)
        req = ctypes.c_void_p()
        call("zc_recv", ctypes.c_void_p(b.ptr), ctypes.c_int64(b.count), b.dtype,
             _lib.MEM_HOST, ctypes.c_int(peer), self.handle, ctypes.byref(req))
        call("zc_wait", ctypes.byref(req))
        return buf

    def sendrecv(self, sendbuf, dst, recvbuf, src):
        s = view(sendbuf, "sendbuf")
        r = view(recvbuf, "recvbuf", writable=True)
        same_dtype(s, r, "sendbuf", "recvbuf")
        call("zc_sendrecv", ctypes.c_void_p(s.ptr), ctypes.c_int64(s.count), ctypes.c_int(dst),
             ctypes.c_void_p(r.ptr), ctypes.c_int64(r.count), ctypes.c_int(src), s.dtype,
             _lib.MEM_HOST, self.handle)
        return recvbuf

    # ---- collectives ----------------------------------------------------
    def routed_sendrecv(self, transfers, sendbuf=None, recvbuf=None):
        """transfers: the same list of (src, dst, count) on every rank; this
        rank sends sendbuf if it is a src and receives into recvbuf if it is
        a dst (elements of the buffers' dtype)."""
        transfers = [tuple(int(x) for x in t) for t in transfers]
        s = view(sendbuf, "sendbuf") if sendbuf is not None else None
        r = view(recvbuf, "recvbuf", writable=True) if recvbuf is not None else None
        for src, dst, count in transfers:
            for b, me, name in ((s, src, "sendbuf"), (r, dst, "recvbuf")):
                if me == self.rank and (b is None or b.count < count):
                    raise invalid("%s: %s elements, transfer %d->%d needs %d"
                                  % (name, "no" if b is None else b.count, src, dst, count))
        if s is not None and r is not None:
            same_dtype(s, r, "sendbuf", "recvbuf")
        dtype = (s or r).dtype if (s or r) else _lib.BYTE
        array = (_lib.Transfer * max(len(transfers), 1))(*[_lib.Transfer(*t) for t in transfers])
        req = ctypes.c_void_p()
        call("zc_routed_sendrecv", array, ctypes.c_int(len(transfers)),
             ctypes.c_void_p(s.ptr if s else None), ctypes.c_void_p(r.ptr if r else None),
             dtype, _lib.MEM_HOST, self.handle, ctypes.byref(req))
        call("zc_wait", ctypes.byref(req))
        return recvbuf

    def remap_alltoallv(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls):
        """MPI_Alltoallv in elements, one count and displacement per rank;
        ranks that disagree on a block's size all get ZC_ERR_MISMATCH."""
        s = view(sendbuf, "sendbuf")
        r = view(recvbuf, "recvbuf", writable=True)
        same_dtype(s, r, "sendbuf", "recvbuf")
        arrays = []
        for name, values, b in (("sendcounts", sendcounts, s), ("sdispls", sdispls, s),
                                ("recvcounts", recvcounts, r), ("rdispls", rdispls, r)):
            values = [int(v) for v in values]
            if len(values) != self.size:
                raise invalid("%s: %d entries, expected one per rank (%d)"
                              % (name, len(values), self.size))
            arrays.append(values)
        for counts, displs, b, name in ((arrays[0], arrays[1], s, "sendbuf"),
                                        (arrays[2], arrays[3], r, "recvbuf")):
            end = max([d + c for c, d in zip(counts, displs) if c > 0], default=0)
            if end > b.count:
                raise invalid("%s: %d elements, the counts reach %d" % (name, b.count, end))
        req = ctypes.c_void_p()
        call("zc_remap_alltoallv", ctypes.c_void_p(s.ptr), _lib.int64_array(arrays[0]),
             _lib.int64_array(arrays[1]), ctypes.c_void_p(r.ptr), _lib.int64_array(arrays[2]),
             _lib.int64_array(arrays[3]), s.dtype, _lib.MEM_HOST, self.handle,
             ctypes.byref(req))
        call("zc_wait", ctypes.byref(req))
        return recvbuf

    def remap(self, plan, sendbuf, recvbuf, direction=FORWARD):
        """The plan's remap (FORWARD: attention -> linear layout, INVERSE:
        back) of tokens of sendbuf.shape[1:] elements each."""
        handle = plan_handle(plan)
        s = view(sendbuf, "sendbuf")
        r = view(recvbuf, "recvbuf", writable=True)
        same_dtype(s, r, "sendbuf", "recvbuf")
        if not s.shape or s.shape[1:] != r.shape[1:]:
            raise invalid("recvbuf: token shape %s differs from sendbuf's %s"
                          % (r.shape[1:], s.shape[1:]))
        per_token = s.count // s.shape[0] if s.shape[0] else 1
        if plan.nranks == self.size:
            info = plan.rank(self.rank)
            rows = {FORWARD: (info["tokens"], info["linear_tokens"]),
                    INVERSE: (info["linear_tokens"], info["tokens"])}[direction]
            for b, n, name in ((s, rows[0], "sendbuf"), (r, rows[1], "recvbuf")):
                if b.shape[0] < n:
                    raise invalid("%s: %d tokens, the plan puts %d on rank %d"
                                  % (name, b.shape[0], n, self.rank))
        req = ctypes.c_void_p()
        call("zc_remap_alltoallv_plan", handle, ctypes.c_int(direction),
             ctypes.c_void_p(s.ptr), ctypes.c_void_p(r.ptr), ctypes.c_int64(per_token), s.dtype,
             _lib.MEM_HOST, self.handle, ctypes.byref(req))
        call("zc_wait", ctypes.byref(req))
        return recvbuf

    # ---- ring attention -------------------------------------------------
    def _ring_args(self, q, k, v, out, lse, mode, scale):
        bq, bk, bv = view(q, "q"), view(k, "k"), view(v, "v")
        bo, bl = view(out, "out", writable=True), view(lse, "lse", writable=True)
        if len(bq.shape) != 3 or len(bk.shape) != 3 or bk.shape != bv.shape:
            raise invalid("q, k, v: expected [tokens, heads, head_dim], k and v alike")
        tokens, hq, d = bq.shape
        if bk.shape[0] != tokens or bk.shape[2] != d:
            raise invalid("k: shape %s does not match q's %s" % (bk.shape, bq.shape))
        if bo.shape != bq.shape:
            raise invalid("out: shape %s, expected q's %s" % (bo.shape, bq.shape))
        if bl.shape != (tokens, hq) or bl.dtype != _lib.FLOAT32:
            raise invalid("lse: expected float32 [%d, %d]" % (tokens, hq))
        for b, name in ((bk, "k"), (bv, "v"), (bo, "out")):
            same_dtype(bq, b, "q", name)
        if bq.dtype not in (_lib.FLOAT32, _lib.BFLOAT16):
            raise invalid("q: dtype must be float32 or bfloat16")
        if mode not in RING_ATTN_MODES:
            raise invalid("mode: one of %s" % ", ".join(RING_ATTN_MODES))
        args = _lib.RingAttnArgs()
        args.size = ctypes.sizeof(args)
        args.mode = RING_ATTN_MODES[mode]
        args.num_heads_q, args.num_heads_kv, args.head_dim = hq, bk.shape[1], d
        args.scale = scale
        args.dtype, args.memtype, args.tokens = bq.dtype, _lib.MEM_HOST, tokens
        args.q, args.k, args.v, args.out, args.lse = bq.ptr, bk.ptr, bv.ptr, bo.ptr, bl.ptr
        return args, bq

    def ring_attn_fwd(self, plan, q, k, v, out, lse, mode="zeppelin", scale=0.0):
        """Causal ring attention of this rank's rows (plan attention layout):
        writes out (like q) and lse (float32 [tokens, heads_q])."""
        handle = plan_handle(plan)
        args, _ = self._ring_args(q, k, v, out, lse, mode, scale)
        call("zc_ring_attn_fwd", self.handle, handle, ctypes.byref(args))
        return out, lse

    def ring_attn_bwd(self, plan, q, k, v, out, lse, dout, dq, dk, dv, mode="zeppelin",
                      scale=0.0):
        """Backward of ring_attn_fwd: writes dq, dk, dv (like q, k, v)."""
        handle = plan_handle(plan)
        args, bq = self._ring_args(q, k, v, out, lse, mode, scale)
        bdo = view(dout, "dout")
        grads = [view(g, n, writable=True) for g, n in ((dq, "dq"), (dk, "dk"), (dv, "dv"))]
        for b, like, name, like_name in ((bdo, q, "dout", "q"), (grads[0], q, "dq", "q"),
                                         (grads[1], k, "dk", "k"), (grads[2], v, "dv", "v")):
            if b.shape != tuple(like.shape) or b.dtype != bq.dtype:
                raise invalid("%s: expected the shape and dtype of %s" % (name, like_name))
        args.dout, args.dq, args.dk, args.dv = bdo.ptr, grads[0].ptr, grads[1].ptr, grads[2].ptr
        call("zc_ring_attn_bwd", self.handle, handle, ctypes.byref(args))
        return dq, dk, dv


__all__ = ["Communicator", "get_unique_id", "FORWARD", "INVERSE"]
