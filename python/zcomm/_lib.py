"""ctypes view of libzcomm: the library, its structs, the one table of the C
functions the binding calls, and the error mapping.

Every C function the package calls is declared once, in FUNCTIONS below,
with its argument and result types; `call()` refuses a name that is not
there, so no call goes through ctypes' defaults (int arguments and an int
result), which silently truncate 64-bit counts and pointers.  The structs
mirror zcomm.h; tests/test_python.sh compiles a probe from STRUCTS and
checks every size and field offset against the C compiler's.

The library is found through ZC_LIBRARY (a path), then the libdir that
`make install` recorded next to the package (_install.py), then next to
this package, then the dynamic loader's search (libzcomm.so.0: ld.so.cache,
LD_LIBRARY_PATH), then ctypes.util.find_library("zcomm"), then
$(prefix)/lib of this interpreter and /usr/local/lib.
"""
import ctypes
import ctypes.util
import os
import sys

STATUS_NAMES = {
    0: "ZC_OK", 1: "ZC_INPROGRESS", -1: "ZC_ERR_INVALID_ARG", -2: "ZC_ERR_NO_MEMORY",
    -3: "ZC_ERR_SYSTEM", -4: "ZC_ERR_TRANSPORT", -5: "ZC_ERR_TIMEOUT",
    -6: "ZC_ERR_PEER_FAILED", -7: "ZC_ERR_UNSUPPORTED", -8: "ZC_ERR_TOPOLOGY",
    -9: "ZC_ERR_INTERNAL", -10: "ZC_ERR_CAPACITY", -11: "ZC_ERR_MISMATCH",
    -12: "ZC_ERR_REFUSED",
}
OK = 0
INVALID_ARG, UNSUPPORTED, INTERNAL, CAPACITY, MISMATCH = -1, -7, -9, -10, -11

BYTE, FLOAT32, FLOAT16, BFLOAT16, INT32, INT64 = range(6)
MEM_HOST, MEM_CUDA = 0, 1
UNIQUE_ID_BYTES = 128
FEATURE_CUDA, FEATURE_NCCL = 1 << 1, 1 << 2


class ZcommError(RuntimeError):
    """A libzcomm call failed or the binding refused its arguments.

    status: the zc_status_t value; name: its enum name ("ZC_ERR_MISMATCH");
    detail: zc_get_last_error() for a C refusal, the binding's message
    (naming the argument) otherwise; call: the C function ("zc_plan_create")
    or the binding function ("VarlenPlan.dispatch") that refused."""

    def __init__(self, status, detail, call=""):
        self.status = status
        self.name = STATUS_NAMES.get(status, "ZC_STATUS_%d" % status)
        self.detail = detail
        self.call = call
        prefix = call + ": " if call else ""
        super().__init__("%s%s: %s" % (prefix, self.name, detail))


def invalid(call, message):
    """ZC_ERR_INVALID_ARG from the binding function `call`; `message` starts
    with the argument's name."""
    return ZcommError(INVALID_ARG, message, call)


# ---- structs (zcomm.h) ----------------------------------------------------
# _c_name_ is the C type; the probe checks sizeof and offsetof of each field.
# Structs the library fills start with their size, which the caller sets
# (zcomm.h, "Structs that grow"): _Sized sets it on construction.

class _Sized(ctypes.Structure):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        if not self.size:
            self.size = ctypes.sizeof(self)


class Config(ctypes.Structure):
    _c_name_ = "zc_config_t"
    _fields_ = [("size", ctypes.c_size_t), ("timeout_ms", ctypes.c_int),
                ("node_id", ctypes.c_char_p),
                # the per-communicator ZC_* variables (0: keep the environment)
                ("routed_min_bytes", ctypes.c_int64), ("routed_chunk", ctypes.c_int64),
                ("alltoallv_split_bytes", ctypes.c_int64), ("alltoallv_check", ctypes.c_int),
                ("alltoallv_rows_max", ctypes.c_int), ("alltoallv_window", ctypes.c_int),
                ("ring_attn_check", ctypes.c_int), ("ring_attn_slice_mflop", ctypes.c_int),
                ("ring_attn_bwd_order", ctypes.c_int), ("wait_spin_us", ctypes.c_int),
                ("host_split_bytes", ctypes.c_int64)]


class UniqueId(ctypes.Structure):
    _c_name_ = "zc_unique_id_t"
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class PlanOpts(ctypes.Structure):
    _c_name_ = "zc_plan_opts_t"
    _fields_ = [("size", ctypes.c_size_t), ("b_intra", ctypes.c_double),
                ("b_inter", ctypes.c_double), ("flags", ctypes.c_uint),
                ("rails", ctypes.c_int), ("reserved", ctypes.c_int),
                ("window_left", ctypes.c_int), ("window_right", ctypes.c_int)]


class PlanInfo(_Sized):
    _c_name_ = "zc_plan_info_t"
    _fields_ = [("size", ctypes.c_size_t),
                ("nnodes", ctypes.c_int), ("gpus_per_node", ctypes.c_int),
                ("nranks", ctypes.c_int), ("capacity", ctypes.c_int64),
                ("nseqs", ctypes.c_size_t), ("nrings", ctypes.c_int),
                ("total_tokens", ctypes.c_int64), ("s1", ctypes.c_int64),
                ("flags", ctypes.c_uint), ("remap_objective", ctypes.c_double),
                ("window_left", ctypes.c_int), ("window_right", ctypes.c_int)]


class PlanRank(ctypes.Structure):
    _c_name_ = "zc_plan_rank_t"
    _fields_ = [("tokens", ctypes.c_int64), ("linear_tokens", ctypes.c_int64),
                ("attn_pairs", ctypes.c_double), ("node", ctypes.c_int),
                ("s0", ctypes.c_int64)]


class PlanPiece(ctypes.Structure):
    _c_name_ = "zc_plan_piece_t"
    _fields_ = [("seq", ctypes.c_size_t), ("begin", ctypes.c_int64), ("end", ctypes.c_int64),
                ("zone", ctypes.c_int), ("ring", ctypes.c_int), ("chunk", ctypes.c_int)]


class PlanRun(ctypes.Structure):
    _c_name_ = "zc_plan_run_t"
    _fields_ = [("offset", ctypes.c_int64), ("peer_offset", ctypes.c_int64),
                ("count", ctypes.c_int64), ("peer", ctypes.c_int)]


class Transfer(ctypes.Structure):
    _c_name_ = "zc_transfer_t"
    _fields_ = [("src", ctypes.c_int), ("dst", ctypes.c_int), ("count", ctypes.c_int64)]


class RingAttnStats(_Sized):
    _c_name_ = "zc_ring_attn_stats_t"
    _fields_ = [("size", ctypes.c_size_t),
                ("total_seconds", ctypes.c_double), ("compute_seconds", ctypes.c_double),
                ("wait_seconds", ctypes.c_double), ("bytes_sent", ctypes.c_uint64),
                ("kernel_calls", ctypes.c_int64),
                ("blocks_cudnn", ctypes.c_int64), ("blocks_native", ctypes.c_int64),
                ("native_chosen", ctypes.c_int64), ("native_dtype", ctypes.c_int64),
                ("native_head_dim", ctypes.c_int64), ("native_shape", ctypes.c_int64),
                ("native_no_engine", ctypes.c_int64), ("native_failed", ctypes.c_int64),
                ("blocks_table", ctypes.c_int64), ("table_refused", ctypes.c_int64),
                ("table_banded", ctypes.c_int64)]


class AttnVarlen(ctypes.Structure):
    """zc_attn_varlen_t: one call of a kernel table (zc_attn_kernels(3))."""
    _c_name_ = "zc_attn_varlen_t"
    _fields_ = [("size", ctypes.c_size_t), ("batch", ctypes.c_int),
                ("num_heads_q", ctypes.c_int), ("num_heads_kv", ctypes.c_int),
                ("head_dim", ctypes.c_int), ("causal", ctypes.c_int), ("scale", ctypes.c_float),
                ("dtype", ctypes.c_int), ("out_dtype", ctypes.c_int), ("memtype", ctypes.c_int),
                ("stream", ctypes.c_void_p),
                ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_kv", ctypes.c_void_p),
                ("host_cu_seqlens_q", ctypes.POINTER(ctypes.c_int32)),
                ("host_cu_seqlens_kv", ctypes.POINTER(ctypes.c_int32)),
                ("max_seqlen_q", ctypes.c_int), ("max_seqlen_kv", ctypes.c_int),
                ("total_q", ctypes.c_int64), ("total_kv", ctypes.c_int64),
                ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("out", ctypes.c_void_p), ("lse", ctypes.c_void_p), ("dout", ctypes.c_void_p),
                ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p)]


# zc_status_t (*)(void *ctx, const zc_attn_varlen_t *call)
KERNEL_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(AttnVarlen))
KERNELS_BOTTOM_RIGHT, KERNELS_FLOAT32_OUT = 1 << 0, 1 << 1


class AttnKernels(ctypes.Structure):
    """zc_attn_kernels_t: a kernel table."""
    _c_name_ = "zc_attn_kernels_t"
    _fields_ = [("size", ctypes.c_size_t), ("ctx", ctypes.c_void_p), ("fwd", KERNEL_FN),
                ("bwd", KERNEL_FN), ("flags", ctypes.c_uint)]


class RingAttnArgs(ctypes.Structure):
    _c_name_ = "zc_ring_attn_args_t"
    _fields_ = [("size", ctypes.c_size_t), ("mode", ctypes.c_int),
                ("num_heads_q", ctypes.c_int), ("num_heads_kv", ctypes.c_int),
                ("head_dim", ctypes.c_int), ("scale", ctypes.c_float),
                ("dtype", ctypes.c_int), ("memtype", ctypes.c_int),
                ("tokens", ctypes.c_int64),
                ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("out", ctypes.c_void_p), ("lse", ctypes.c_void_p), ("dout", ctypes.c_void_p),
                ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p),
                ("stats", ctypes.POINTER(RingAttnStats)),
                ("flags", ctypes.c_uint), ("window_left", ctypes.c_int),
                ("window_right", ctypes.c_int),
                ("kernels", ctypes.POINTER(AttnKernels))]


STRUCTS = [Config, UniqueId, PlanOpts, PlanInfo, PlanRank, PlanPiece, PlanRun, Transfer,
           RingAttnStats, AttnVarlen, AttnKernels, RingAttnArgs]

# ---- the function table ---------------------------------------------------
_p = ctypes.c_void_p          # handles, buffers, requests' storage, streams
_pp = ctypes.POINTER(ctypes.c_void_p)
_ip = ctypes.POINTER(ctypes.c_int)
_i64 = ctypes.c_int64
_i64p = ctypes.POINTER(ctypes.c_int64)
_int = ctypes.c_int
_st = ctypes.c_int            # zc_status_t, and the enums passed by value
_sz = ctypes.c_size_t

FUNCTIONS = {
    # name: (restype, argtypes)
    "zc_strerror": (ctypes.c_char_p, [_st]),
    "zc_get_last_error": (ctypes.c_char_p, []),
    "zc_get_version": (_int, []),
    "zc_get_features": (ctypes.c_uint, []),
    "zc_get_unique_id": (_st, [ctypes.POINTER(UniqueId)]),
    "zc_comm_init_rank": (_st, [_pp, _int, ctypes.POINTER(UniqueId), _int,
                                ctypes.POINTER(Config)]),
    "zc_comm_init_env": (_st, [_pp, ctypes.POINTER(Config)]),
    "zc_comm_destroy": (None, [_p]),
    "zc_comm_rank": (_st, [_p, _ip]),
    "zc_comm_size": (_st, [_p, _ip]),
    "zc_comm_node": (_st, [_p, _ip]),
    "zc_comm_node_count": (_st, [_p, _ip]),
    "zc_comm_local_rank": (_st, [_p, _ip]),
    "zc_comm_local_size": (_st, [_p, _ip]),
    "zc_comm_rank_node": (_st, [_p, _int, _ip]),
    "zc_comm_rail_count": (_st, [_p, _ip]),
    "zc_barrier": (_st, [_p]),
    "zc_send": (_st, [_p, _i64, _st, _st, _int, _p, _pp]),
    "zc_recv": (_st, [_p, _i64, _st, _st, _int, _p, _pp]),
    "zc_wait": (_st, [_pp]),
    "zc_sendrecv": (_st, [_p, _i64, _int, _p, _i64, _int, _st, _st, _p]),
    "zc_host_alloc": (_st, [_sz, _pp]),
    "zc_host_free": (None, [_p]),
    "zc_routed_sendrecv": (_st, [ctypes.POINTER(Transfer), _int, _p, _p, _st, _st, _p, _pp]),
    "zc_remap_alltoallv": (_st, [_p, _i64p, _i64p, _p, _i64p, _i64p, _st, _st, _p, _pp]),
    "zc_remap_alltoallv_plan": (_st, [_p, _st, _p, _p, _i64, _st, _st, _p, _pp]),
    "zc_plan_create": (_st, [_int, _int, _i64, _i64p, _sz, ctypes.POINTER(PlanOpts), _pp]),
    "zc_plan_destroy": (None, [_p]),
    "zc_plan_check": (_st, [_p]),
    "zc_plan_info": (_st, [_p, ctypes.POINTER(PlanInfo)]),
    "zc_plan_ring_layout": (_st, [_p, _int, _ip]),
    "zc_plan_rank": (_st, [_p, _int, ctypes.POINTER(PlanRank)]),
    "zc_plan_rank_pieces": (_st, [_p, _int, ctypes.POINTER(ctypes.POINTER(PlanPiece)),
                                  ctypes.POINTER(_sz)]),
    "zc_plan_rank_linear_pieces": (_st, [_p, _int, ctypes.POINTER(ctypes.POINTER(PlanPiece)),
                                         ctypes.POINTER(_sz)]),
    "zc_plan_remap_counts": (_st, [_p, _int, _st, _i64p, _i64p, _i64p, _i64p]),
    "zc_plan_move_runs": (_st, [_p, _int, _st, _st, ctypes.POINTER(PlanRun), ctypes.POINTER(_sz),
                                ctypes.POINTER(PlanRun), ctypes.POINTER(_sz)]),
    "zc_remap_alltoallv_layouts": (_st, [_p, _st, _st, _p, _p, _i64, _st, _st, _p, _pp]),
    "zc_ring_attn_fwd": (_st, [_p, _p, ctypes.POINTER(RingAttnArgs)]),
    "zc_ring_attn_bwd": (_st, [_p, _p, ctypes.POINTER(RingAttnArgs)]),
    # Device memory (stream-ordered; ZC_ERR_UNSUPPORTED in a build without CUDA).
    "zc_comm_cuda_init": (_st, [_p]),
    "zc_stream_synchronize": (_st, [_p, _p]),
    "zc_sendrecv_stream": (_st, [_p, _i64, _int, _p, _i64, _int, _st, _p, _p]),
    "zc_routed_sendrecv_stream": (_st, [ctypes.POINTER(Transfer), _int, _p, _p, _st, _p, _p]),
    "zc_remap_alltoallv_stream": (_st, [_p, _i64p, _i64p, _p, _i64p, _i64p, _st, _p, _p]),
    "zc_remap_alltoallv_layouts_stream": (_st, [_p, _st, _st, _p, _p, _i64, _st, _p, _p]),
    "zc_ring_attn_fwd_stream": (_st, [_p, _p, ctypes.POINTER(RingAttnArgs), _p]),
    "zc_ring_attn_bwd_stream": (_st, [_p, _p, ctypes.POINTER(RingAttnArgs), _p]),
}


def _candidates():
    env = os.environ.get("ZC_LIBRARY")
    if env:
        yield env
        return  # an explicit choice: do not fall back to another library
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from ._install import LIBDIR  # written by `make install`
        yield os.path.join(LIBDIR, "libzcomm.so.0")
    except ImportError:
        pass
    for rel in ("libzcomm.so", "../../../libzcomm.so.0"):
        path = os.path.normpath(os.path.join(here, rel))
        if os.path.exists(path):
            yield path
    yield "libzcomm.so.0"  # the dynamic loader's own search
    found = ctypes.util.find_library("zcomm")
    if found:
        yield found
    for libdir in (os.path.join(sys.prefix, "lib"), "/usr/local/lib"):
        yield os.path.join(libdir, "libzcomm.so.0")


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:  # try the next place
            errors.append("%s: %s" % (path, e))
    raise ImportError("libzcomm not found (install it, or set ZC_LIBRARY to its path): "
                      + "; ".join(errors))


_cdll, path = _load()


class _Lib:
    """The declared functions of the library as attributes; a name that is
    not in FUNCTIONS is an AttributeError, not a call with guessed types."""

    def __init__(self, cdll):
        for name, (restype, argtypes) in FUNCTIONS.items():
            fn = getattr(cdll, name)
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)


lib = _Lib(_cdll)


def check(status, call):
    """Raise ZcommError for an error status; return the status otherwise."""
    if status < 0:
        raise ZcommError(status, lib.zc_get_last_error().decode(errors="replace"), call)
    return status


def call(name, *args):
    """lib.<name>(*args), raising ZcommError naming `name` on an error."""
    return check(getattr(lib, name)(*args), name)


def version_string():
    code = lib.zc_get_version()
    return "%d.%d.%d" % (code // 10000, code // 100 % 100, code % 100)


class Handle:
    """An opaque libzcomm handle that a `_destroy` function releases: on
    close(), at garbage collection, or at the end of a `with` block."""
    _destroy = None  # name of the zc_*_destroy function
    _what = "handle"
    _handle = None

    @property
    def handle(self):
        if not self._handle:
            raise ZcommError(INVALID_ARG, "%s: already destroyed" % self._what,
                             type(self).__name__)
        return self._handle

    def close(self):
        if self._handle:
            getattr(lib, self._destroy)(self._handle)
            self._handle = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def int64_array(values):
    values = [int(v) for v in values]
    return (ctypes.c_int64 * max(len(values), 1))(*values)
