"""Buffers as (pointer, elements, zc dtype, shape, memory type).

Host buffers are numpy arrays, CPU torch tensors and CPU DLPack objects;
device buffers are CUDA torch tensors and any object with
__cuda_array_interface__ or a CUDA DLPack capsule.  The data pointer goes
to C as it is: no copy is ever made, so a buffer must be C-contiguous, of a
dtype libzcomm knows, and writable when written, else a ZcommError
(ZC_ERR_INVALID_ARG) names the argument and the refusing call.  Device
buffers send the call to its `_stream` form (see Communicator).

A torch tensor that requires grad is refused where it would be written (an
in-place write behind autograd's back corrupts the graph); where it is only
read the call does not record anything for autograd: use zcomm.torch for
differentiable calls.
"""
import ctypes

from . import _lib
from ._lib import invalid

try:
    import numpy as _np
except ImportError:  # the package works without numpy on torch tensors
    _np = None
try:
    import torch as _torch
except ImportError:
    _torch = None

_NUMPY_DTYPES = {"float32": _lib.FLOAT32, "float16": _lib.FLOAT16, "int32": _lib.INT32,
                 "int64": _lib.INT64, "uint8": _lib.BYTE, "int8": _lib.BYTE}
_TORCH_DTYPES = {"torch.float32": _lib.FLOAT32, "torch.float16": _lib.FLOAT16,
                 "torch.bfloat16": _lib.BFLOAT16, "torch.int32": _lib.INT32,
                 "torch.int64": _lib.INT64, "torch.uint8": _lib.BYTE,
                 "torch.int8": _lib.BYTE}
# __cuda_array_interface__ typestr (byte order dropped) and DLPack (code, bits).
_TYPESTR_DTYPES = {"f4": _lib.FLOAT32, "f2": _lib.FLOAT16, "i4": _lib.INT32, "i8": _lib.INT64,
                   "u1": _lib.BYTE, "i1": _lib.BYTE}
_DLPACK_DTYPES = {(2, 32): _lib.FLOAT32, (2, 16): _lib.FLOAT16, (4, 16): _lib.BFLOAT16,
                  (0, 32): _lib.INT32, (0, 64): _lib.INT64, (1, 8): _lib.BYTE, (0, 8): _lib.BYTE}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


class Buffer:
    """A checked view: ptr (int), count (elements), dtype (zc_datatype_t),
    shape (tuple), mem (MEM_HOST or MEM_CUDA), stream (int, device buffers
    of torch: the current CUDA stream; else 0) and keep (what must stay
    alive while C uses ptr)."""
    __slots__ = ("ptr", "count", "dtype", "shape", "mem", "stream", "keep")

    def __init__(self, ptr, count, dtype, shape, mem=_lib.MEM_HOST, stream=0, keep=None):
        self.ptr, self.count, self.dtype, self.shape = ptr, count, dtype, shape
        self.mem, self.stream, self.keep = mem, stream, keep


def is_tensor(x):
    return _torch is not None and isinstance(x, _torch.Tensor)


def _prod(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def _torch_view(x, name, call, writable):
    if x.device.type not in ("cpu", "cuda"):
        raise invalid(call, "%s: tensor on %s, expected CPU or CUDA" % (name, x.device))
    if not x.is_contiguous():
        raise invalid(call, "%s: tensor is not contiguous" % name)
    dtype = _TORCH_DTYPES.get(str(x.dtype))
    if dtype is None:
        raise invalid(call, "%s: unsupported dtype %s" % (name, x.dtype))
    if writable and x.requires_grad:
        raise invalid(call, "%s: a tensor that requires grad cannot be written in place "
                      "(use zcomm.torch for autograd)" % name)
    if x.device.type == "cuda":
        stream = _torch.cuda.current_stream(x.device).cuda_stream
        return Buffer(x.data_ptr(), x.numel(), dtype, tuple(x.shape), _lib.MEM_CUDA, stream)
    return Buffer(x.data_ptr(), x.numel(), dtype, tuple(x.shape))


def _cuda_interface_view(x, name, call, writable):
    cai = x.__cuda_array_interface__
    shape = tuple(int(s) for s in cai["shape"])
    typestr = cai["typestr"]
    dtype = _TYPESTR_DTYPES.get(typestr[1:])
    if dtype is None:
        raise invalid(call, "%s: unsupported __cuda_array_interface__ typestr %s"
                      % (name, typestr))
    ptr, readonly = cai["data"]
    strides = cai.get("strides")
    if strides is not None:
        want, step = [], int(typestr[2:])
        for s in reversed(shape):
            want.insert(0, step)
            step *= s
        if tuple(strides) != tuple(want) and _prod(shape) > 1:
            raise invalid(call, "%s: device array is not C-contiguous" % name)
    if writable and readonly:
        raise invalid(call, "%s: device array is read-only" % name)
    stream = cai.get("stream") or 0
    return Buffer(int(ptr or 0), _prod(shape), dtype, shape, _lib.MEM_CUDA,
                  stream if stream > 2 else 0, keep=x)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def _dlpack_view(x, name, call, writable):
    """The DLTensor of x.__dlpack__(): the capsule is kept in the Buffer (its
    destructor releases the producer's tensor once we drop it)."""
    try:
        capsule = x.__dlpack__()
    except Exception as e:  # a producer that cannot export (e.g. read-only numpy)
        raise invalid(call, "%s: __dlpack__() failed: %s" % (name, e))
    try:
        t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    except ValueError as e:
        raise invalid(call, "%s: not a DLPack capsule: %s" % (name, e))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides and _prod(shape) > 1:
        want, step = [], 1
        for s in reversed(shape):
            want.insert(0, step)
            step *= s
        if tuple(t.strides[i] for i in range(t.ndim)) != tuple(want):
            raise invalid(call, "%s: DLPack tensor is not C-contiguous" % name)
    dtype = _DLPACK_DTYPES.get((t.dtype.code, t.dtype.bits)) if t.dtype.lanes == 1 else None
    if dtype is None:
        raise invalid(call, "%s: unsupported DLPack dtype (code %d, %d bits, %d lanes)"
                      % (name, t.dtype.code, t.dtype.bits, t.dtype.lanes))
    kind = t.device.device_type
    if kind in (_DL_CPU, _DL_CUDA_HOST):
        mem = _lib.MEM_HOST
    elif kind in (_DL_CUDA, _DL_CUDA_MANAGED):
        mem = _lib.MEM_CUDA
    else:
        raise invalid(call, "%s: DLPack device type %d, expected CPU or CUDA" % (name, kind))
    return Buffer((t.data or 0) + t.byte_offset, _prod(shape), dtype, shape, mem, 0,
                  keep=capsule)


def view(x, name, call, writable=False):
    """Buffer of x; ZcommError naming `name` and `call` if C cannot take it
    without a copy."""
    if is_tensor(x):
        return _torch_view(x, name, call, writable)
    if _np is not None and isinstance(x, _np.ndarray):
        if not x.flags["C_CONTIGUOUS"]:
            raise invalid(call, "%s: array is not C-contiguous" % name)
        if writable and not x.flags["WRITEABLE"]:
            raise invalid(call, "%s: array is read-only" % name)
        dtype = _NUMPY_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise invalid(call, "%s: unsupported dtype %s" % (name, x.dtype))
        return Buffer(x.ctypes.data, x.size, dtype, tuple(x.shape))
    if hasattr(x, "__cuda_array_interface__"):
        return _cuda_interface_view(x, name, call, writable)
    if hasattr(x, "__dlpack__"):
        return _dlpack_view(x, name, call, writable)
    raise invalid(call, "%s: expected a numpy array, a torch tensor, or an object with "
                  "__cuda_array_interface__ or __dlpack__, got %s" % (name, type(x).__name__))


def same_dtype(a, b, name_a, name_b, call):
    if a.dtype != b.dtype:
        raise invalid(call, "%s and %s: dtypes differ" % (name_a, name_b))


def same_memory(buffers, call):
    """The memory type shared by `buffers` ((name, Buffer or None) pairs);
    host and device buffers in one call are refused naming the first device
    one."""
    present = [(n, b) for n, b in buffers if b is not None]
    mems = {b.mem for _, b in present}
    if len(mems) > 1:
        first = next(n for n, b in present if b.mem == _lib.MEM_CUDA)
        host = next(n for n, b in present if b.mem == _lib.MEM_HOST)
        raise invalid(call, "%s: device memory, but %s is host memory" % (first, host))
    return mems.pop() if mems else _lib.MEM_HOST


def stream_of(buffers, stream):
    """The CUDA stream of a device call: `stream` when given (a
    torch.cuda.Stream, or an int cudaStream_t), else the first buffer's
    (torch's current stream), else 0 (the legacy default stream)."""
    if stream is not None:
        return int(getattr(stream, "cuda_stream", stream))
    for b in buffers:
        if b is not None and b.stream:
            return b.stream
    return 0
