"""Host memory for the outputs of zcomm.torch's moves, kept for reuse.

Fresh memory costs the kernel's zeroing of every page at its first touch:
on a 2-core VM a new 64 MiB buffer took 110 ms to fill against 20-40 ms for
one already touched, more than the move itself, and torch's CPU allocator
hands every large tensor fresh pages (glibc maps and unmaps them).  So the
outputs live in zc_host_alloc(3) memory (huge pages: 1/512 of the faults,
and faster transfers inside a node), and a block whose last tensor is gone
waits here for the next output of about its size instead of going back to
the system, up to a limit (set_limit; blocks beyond it are freed, oldest
first), as PyTorch's CUDA caching allocator does for device memory."""
import ctypes
import threading
import weakref

import torch

from . import _lib

HUGE_PAGE = 2 << 20
DEFAULT_LIMIT = 1 << 30
# Smaller outputs come from torch's allocator: their faults cost little,
# and a whole huge page each would waste the rest of it.
SMALLEST = 1 << 20


def element_size(dtype):
    return torch.empty((), dtype=dtype).element_size()


def host_alloc(nbytes):
    """The address of nbytes of zc_host_alloc memory."""
    ptr = ctypes.c_void_p()
    _lib.call("zc_host_alloc", nbytes, ctypes.byref(ptr))
    return ptr.value


def host_tensor(address, nbytes, shape, dtype, release, *args):
    """A tensor of `shape` and `dtype` over nbytes at `address`; once no
    tensor views it, release(*args) runs (not at interpreter exit, where
    tensors may still view it: the process's end frees it)."""
    memory = (ctypes.c_ubyte * nbytes).from_address(address)
    # frombuffer holds `memory` while any tensor views it
    weakref.finalize(memory, release, *args).atexit = False
    return torch.frombuffer(memory, dtype=dtype, count=shape.numel()).view(shape)


class HostCache:
    """Blocks of zc_host_alloc memory, whole huge pages, handed out as
    tensors of 1 MiB and more; a block serves requests of about 80% of its
    size and up."""

    def __init__(self, limit=DEFAULT_LIMIT):
        self._limit = limit
        self._free = []             # (bytes, address) of the blocks no tensor views, oldest first
        self._lock = threading.Lock()

    def set_limit(self, nbytes):
        """Keep at most nbytes of unused blocks (0: none); returns the old
        limit."""
        with self._lock:
            old, self._limit = self._limit, nbytes
            dropped = self._trim()
        self._release(dropped)
        return old

    def cached_bytes(self):
        with self._lock:
            return sum(size for size, _ in self._free)

    def empty(self, shape, dtype):
        """An uninitialized CPU tensor of `shape` and `dtype`."""
        shape = torch.Size(shape)
        nbytes = shape.numel() * element_size(dtype)
        if nbytes < SMALLEST:
            return torch.empty(shape, dtype=dtype)
        block = self._take(nbytes)
        if block is None:
            size = -(-nbytes // HUGE_PAGE) * HUGE_PAGE
            block = (size, host_alloc(size))
        size, address = block
        return host_tensor(address, size, shape, dtype, self._give_back, size, address)

    def _take(self, nbytes):
        with self._lock:
            fits = [i for i, (size, _) in enumerate(self._free)
                    if nbytes <= size <= nbytes + nbytes // 4 + HUGE_PAGE]
            if not fits:
                return None
            return self._free.pop(min(fits, key=lambda i: self._free[i][0]))

    def _give_back(self, size, address):
        with self._lock:
            self._free.append((size, address))
            dropped = self._trim()
        self._release(dropped)

    def _trim(self):
        """The oldest blocks beyond the limit, taken out (lock held)."""
        dropped, total = [], sum(size for size, _ in self._free)
        while self._free and total > self._limit:
            size, address = self._free.pop(0)
            total -= size
            dropped.append(address)
        return dropped

    @staticmethod
    def _release(addresses):
        for address in addresses:
            _lib.lib.zc_host_free(address)
