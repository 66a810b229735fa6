"""Numpy arrays and CPU torch tensors as (pointer, elements, zc dtype).

The data pointer goes to C as is: no copy is ever made, so a buffer must be
C-contiguous host memory of a dtype libzcomm knows, else ZcommError
(ZC_ERR_INVALID_ARG) names the argument.
"""
from . import _lib

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


def invalid(message):
    return _lib.ZcommError(-1, message)


class Buffer:
    """A checked view: ptr (int), count (elements), dtype (zc_datatype_t),
    shape (tuple)."""
    __slots__ = ("ptr", "count", "dtype", "shape")

    def __init__(self, ptr, count, dtype, shape):
        self.ptr, self.count, self.dtype, self.shape = ptr, count, dtype, shape


def is_tensor(x):
    return _torch is not None and isinstance(x, _torch.Tensor)


def view(x, name, writable=False):
    """Buffer of a numpy array or CPU torch tensor; ZcommError if it cannot
    be handed to C without a copy."""
    if is_tensor(x):
        if x.device.type != "cpu":
            raise invalid("%s: tensor on %s, only CPU tensors are supported" % (name, x.device))
        if not x.is_contiguous():
            raise invalid("%s: tensor is not contiguous" % name)
        dtype = _TORCH_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise invalid("%s: unsupported dtype %s" % (name, x.dtype))
        if writable and x.requires_grad and x.is_leaf:
            raise invalid("%s: a leaf tensor that requires grad cannot be written" % name)
        return Buffer(x.data_ptr(), x.numel(), dtype, tuple(x.shape))
    if _np is not None and isinstance(x, _np.ndarray):
        if not x.flags["C_CONTIGUOUS"]:
            raise invalid("%s: array is not C-contiguous" % name)
        if writable and not x.flags["WRITEABLE"]:
            raise invalid("%s: array is read-only" % name)
        dtype = _NUMPY_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise invalid("%s: unsupported dtype %s" % (name, x.dtype))
        return Buffer(x.ctypes.data, x.size, dtype, tuple(x.shape))
    raise invalid("%s: expected a numpy array or a CPU torch tensor, got %s"
                  % (name, type(x).__name__))


def same_dtype(a, b, name_a, name_b):
    if a.dtype != b.dtype:
        raise invalid("%s and %s: dtypes differ" % (name_a, name_b))
