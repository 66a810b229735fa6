"""ctypes view of libzcomm: the library, its structs and the error mapping.

The library is found through ZC_LIBRARY (a path), then next to this package,
then three levels up (installed, the package is $(libdir)/libzcomm/python/
zcomm), then by ctypes.util.find_library("zcomm").
"""
import ctypes
import ctypes.util
import os

STATUS_NAMES = {
    0: "ZC_OK", 1: "ZC_INPROGRESS", -1: "ZC_ERR_INVALID_ARG", -2: "ZC_ERR_NO_MEMORY",
    -3: "ZC_ERR_SYSTEM", -4: "ZC_ERR_TRANSPORT", -5: "ZC_ERR_TIMEOUT",
    -6: "ZC_ERR_PEER_FAILED", -7: "ZC_ERR_UNSUPPORTED", -8: "ZC_ERR_TOPOLOGY",
    -9: "ZC_ERR_INTERNAL", -10: "ZC_ERR_CAPACITY", -11: "ZC_ERR_MISMATCH",
    -12: "ZC_ERR_REFUSED",
}

BYTE, FLOAT32, FLOAT16, BFLOAT16, INT32, INT64 = range(6)
MEM_HOST = 0
UNIQUE_ID_BYTES = 128


class ZcommError(RuntimeError):
    """A libzcomm call failed: `status` is the zc_status_t value, `name` its
    enum name ("ZC_ERR_MISMATCH"), `detail` zc_get_last_error()."""

    def __init__(self, status, detail, call=""):
        self.status = status
        self.name = STATUS_NAMES.get(status, "ZC_STATUS_%d" % status)
        self.detail = detail
        self.call = call
        prefix = call + ": " if call else ""
        super().__init__("%s%s: %s" % (prefix, self.name, detail))


def _candidates():
    env = os.environ.get("ZC_LIBRARY")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    for rel in ("libzcomm.so", "../../../libzcomm.so", "../../../libzcomm.so.0"):
        path = os.path.normpath(os.path.join(here, rel))
        if os.path.exists(path):
            yield path
    found = ctypes.util.find_library("zcomm")
    if found:
        yield found


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path)
        except OSError as e:  # try the next place
            errors.append("%s: %s" % (path, e))
    raise ImportError("libzcomm not found (set ZC_LIBRARY): " + "; ".join(errors))


lib = _load()

c_int64_p = ctypes.POINTER(ctypes.c_int64)
lib.zc_strerror.restype = ctypes.c_char_p
lib.zc_strerror.argtypes = [ctypes.c_int]
lib.zc_get_last_error.restype = ctypes.c_char_p
lib.zc_get_last_error.argtypes = []
lib.zc_comm_destroy.restype = None
lib.zc_comm_destroy.argtypes = [ctypes.c_void_p]
lib.zc_plan_destroy.restype = None
lib.zc_plan_destroy.argtypes = [ctypes.c_void_p]


def check(status, call):
    """Raise ZcommError for an error status; return the status otherwise."""
    if status < 0:
        raise ZcommError(status, lib.zc_get_last_error().decode(errors="replace"), call)
    return status


def call(name, *args):
    """lib.<name>(*args), raising ZcommError on an error."""
    return check(getattr(lib, name)(*args), name)


class PlanOpts(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("b_intra", ctypes.c_double),
                ("b_inter", ctypes.c_double), ("flags", ctypes.c_uint),
                ("rails", ctypes.c_int), ("reserved", ctypes.c_int)]


class PlanInfo(ctypes.Structure):
    _fields_ = [("nnodes", ctypes.c_int), ("gpus_per_node", ctypes.c_int),
                ("nranks", ctypes.c_int), ("capacity", ctypes.c_int64),
                ("nseqs", ctypes.c_size_t), ("nrings", ctypes.c_int),
                ("total_tokens", ctypes.c_int64), ("s1", ctypes.c_int64),
                ("flags", ctypes.c_uint), ("remap_objective", ctypes.c_double)]


class PlanRank(ctypes.Structure):
    _fields_ = [("tokens", ctypes.c_int64), ("linear_tokens", ctypes.c_int64),
                ("attn_pairs", ctypes.c_double), ("node", ctypes.c_int),
                ("s0", ctypes.c_int64)]


class PlanPiece(ctypes.Structure):
    _fields_ = [("seq", ctypes.c_size_t), ("begin", ctypes.c_int64), ("end", ctypes.c_int64),
                ("zone", ctypes.c_int), ("ring", ctypes.c_int), ("chunk", ctypes.c_int)]


class Transfer(ctypes.Structure):
    _fields_ = [("src", ctypes.c_int), ("dst", ctypes.c_int), ("count", ctypes.c_int64)]


class RingAttnStats(ctypes.Structure):
    _fields_ = [("total_seconds", ctypes.c_double), ("compute_seconds", ctypes.c_double),
                ("wait_seconds", ctypes.c_double), ("bytes_sent", ctypes.c_uint64),
                ("kernel_calls", ctypes.c_int64)]


class RingAttnArgs(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("mode", ctypes.c_int),
                ("num_heads_q", ctypes.c_int), ("num_heads_kv", ctypes.c_int),
                ("head_dim", ctypes.c_int), ("scale", ctypes.c_float),
                ("dtype", ctypes.c_int), ("memtype", ctypes.c_int),
                ("tokens", ctypes.c_int64),
                ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("out", ctypes.c_void_p), ("lse", ctypes.c_void_p), ("dout", ctypes.c_void_p),
                ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p),
                ("stats", ctypes.POINTER(RingAttnStats))]


class Handle:
    """An opaque libzcomm handle that a `_destroy` function releases: on
    close(), at garbage collection, or at the end of a `with` block."""
    _destroy = None  # name of the zc_*_destroy function
    _what = "handle"
    _handle = None

    @property
    def handle(self):
        if not self._handle:
            raise ZcommError(-1, "%s: already destroyed" % self._what)
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
