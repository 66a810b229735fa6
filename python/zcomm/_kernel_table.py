"""A Python attention kernel as libzcomm's kernel table (zc_attn_kernels_t,
zc_attn_kernels(3)): zcomm.torch.varlen_attn(..., kernel=K) hands K's
forward and backward every block the ring engine computes.

The engine calls the table from the thread that called zc_ring_attn_*:
here, the Python thread inside ctypes' foreign call (which released the
GIL), so a ctypes callback takes the GIL back and runs K on that thread,
one call at a time; nothing runs on a worker thread.  Driving the per-block
loop from Python instead would mean re-implementing the engine's blocks,
transfers and merges; the callback keeps all of them in C.

Each call's C pointers become tensors without a copy (host memory through
ctypes arrays, device memory through __cuda_array_interface__, on the
engine's stream), K's results are checked (shape, dtype, device: a
ZcommError naming K and the argument) and copied into the engine's
buffers.  K may return NotImplemented for a call it does not take: the
block then runs on libzcomm's own kernels.  Anything K raises, and any
result refused, fails the ring call on every rank (the engine keeps moving
its data and agrees on the failure at the end): this rank raises a
ZcommError from K's exception, the others one naming this rank."""
import ctypes

import torch

from . import _lib
from ._lib import ZcommError

_TORCH = {_lib.FLOAT32: torch.float32, _lib.BFLOAT16: torch.bfloat16,
          _lib.FLOAT16: torch.float16}
# __cuda_array_interface__ typestr of the same bytes (bfloat16 has none: int16, viewed)
_TYPESTR = {_lib.FLOAT32: "<f4", _lib.BFLOAT16: "<i2", _lib.FLOAT16: "<f2", _lib.INT32: "<i4"}


class _DeviceArray:
    def __init__(self, ptr, shape, typestr):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "version": 2}


def _wrap(ptr, shape, dtype, memtype):
    """The engine's memory at ptr as a tensor of `shape` (zc dtype)."""
    count = 1
    for n in shape:
        count *= n
    if memtype == _lib.MEM_CUDA:
        t = torch.as_tensor(_DeviceArray(ptr, shape, _TYPESTR[dtype]),
                            device=torch.device("cuda", torch.cuda.current_device()))
        return t.view(torch.bfloat16) if dtype == _lib.BFLOAT16 else t
    tdtype = torch.int32 if dtype == _lib.INT32 else _TORCH[dtype]
    size = count * torch.empty((), dtype=tdtype).element_size()
    memory = (ctypes.c_char * size).from_address(ptr)
    return torch.frombuffer(memory, dtype=tdtype, count=count).view(shape)


def _name(kernel):
    return type(kernel).__name__


class KernelTable:
    """The C table of `kernel` for the ring calls of `where` (the binding
    function named in errors).  Keep it alive while a call runs; .struct
    goes into zc_ring_attn_args_t.kernels."""

    def __init__(self, kernel, where):
        for method in ("forward", "backward"):
            if not callable(getattr(kernel, method, None)):
                raise _lib.invalid(where, "kernel: %s has no %s method (forward(q, k, v, "
                                   "cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, "
                                   "causal, softmax_scale) and backward(dout, q, k, v, out, "
                                   "lse, ...))" % (_name(kernel), method))
        self.kernel, self.where = kernel, where
        self.error = None
        self.calls = [0, 0]
        # the callbacks are attributes: ctypes keeps no reference to them
        self._fns = (_lib.KERNEL_FN(self._forward), _lib.KERNEL_FN(self._backward))
        self.struct = _lib.AttnKernels(ctypes.sizeof(_lib.AttnKernels), None, self._fns[0],
                                       self._fns[1], _lib.KERNELS_FLOAT32_OUT)

    def reraise(self, pass_name):
        """After a ring call that failed: raise this rank's kernel's own
        error when it failed here (returns otherwise, for the C library's
        error naming the failing rank)."""
        if self.error is not None:
            error, self.error = self.error, None
            if isinstance(error, ZcommError) or not isinstance(error, Exception):
                raise error  # ours, or KeyboardInterrupt and the like as they came
            raise ZcommError(_lib.INVALID_ARG, "kernel: %s.%s raised %s: %s"
                             % (_name(self.kernel), pass_name, type(error).__name__, error),
                             self.where) from error

    # ---- the callbacks ------------------------------------------------------
    def _forward(self, ctx, call):
        return self._run(call.contents, 0)

    def _backward(self, ctx, call):
        return self._run(call.contents, 1)

    def _run(self, c, backward):
        try:
            self.calls[backward] += 1
            if c.memtype == _lib.MEM_CUDA:
                stream = torch.cuda.ExternalStream(c.stream or 0)
                with torch.cuda.stream(stream), torch.no_grad():
                    return self._call(c, backward)
            with torch.no_grad():
                return self._call(c, backward)
        except BaseException as e:  # noqa: B902 -- everything must stay in Python
            if self.error is None:
                self.error = e
            return _lib.INVALID_ARG

    def _call(self, c, backward):
        mem, hq, hk, d = c.memtype, c.num_heads_q, c.num_heads_kv, c.head_dim
        tq, tk = c.total_q, c.total_kv
        q = _wrap(c.q, (tq, hq, d), c.dtype, mem)
        k = _wrap(c.k, (tk, hk, d), c.dtype, mem)
        v = _wrap(c.v, (tk, hk, d), c.dtype, mem)
        cu_q = _wrap(c.cu_seqlens_q, (c.batch + 1,), _lib.INT32, mem)
        cu_k = _wrap(c.cu_seqlens_kv, (c.batch + 1,), _lib.INT32, mem)
        common = (cu_q, cu_k, c.max_seqlen_q, c.max_seqlen_kv, bool(c.causal), float(c.scale))
        if not backward:
            got = self.kernel.forward(q, k, v, *common)
            names, shapes = ("out", "lse"), ((tq, hq, d), (hq, tq))
            dests = (_wrap(c.out, (tq, hq, d), c.out_dtype, mem),
                     _wrap(c.lse, (hq, tq), _lib.FLOAT32, mem))
        else:
            dout = _wrap(c.dout, (tq, hq, d), c.dtype, mem)
            out = _wrap(c.out, (tq, hq, d), c.dtype, mem)
            lse = _wrap(c.lse, (hq, tq), _lib.FLOAT32, mem)
            got = self.kernel.backward(dout, q, k, v, out, lse, *common)
            names, shapes = ("dq", "dk", "dv"), ((tq, hq, d), (tk, hk, d), (tk, hk, d))
            dests = tuple(_wrap(p, s, c.out_dtype, mem)
                          for p, s in zip((c.dq, c.dk, c.dv), shapes))
        if got is NotImplemented:
            return _lib.UNSUPPORTED
        self._check(got, names, shapes, q, backward)
        for dst, src in zip(dests, got):
            dst.copy_(src)
        return _lib.OK

    def _check(self, got, names, shapes, q, backward):
        method = "%s.%s" % (_name(self.kernel), "backward" if backward else "forward")
        if not isinstance(got, (tuple, list)) or len(got) != len(names):
            raise _lib.invalid(self.where, "kernel: %s returned %s, expected a tuple (%s)"
                               % (method, type(got).__name__, ", ".join(names)))
        for t, name, shape in zip(got, names, shapes):
            dtypes = (torch.float32,) if name == "lse" else (q.dtype, torch.float32)
            if not isinstance(t, torch.Tensor):
                raise _lib.invalid(self.where, "kernel: %s returned %s as %s, expected a tensor"
                                   % (method, type(t).__name__, name))
            if tuple(t.shape) != shape:
                raise _lib.invalid(self.where, "kernel: %s returned %s of shape %s, expected %s"
                                   % (method, name, tuple(t.shape), shape))
            if t.dtype not in dtypes:
                raise _lib.invalid(self.where, "kernel: %s returned %s of dtype %s, expected %s"
                                   % (method, name, t.dtype, " or ".join(map(str, dtypes))))
            if t.device != q.device:
                raise _lib.invalid(self.where, "kernel: %s returned %s on %s, the inputs are on "
                                   "%s" % (method, name, t.device, q.device))
