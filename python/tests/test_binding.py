"""Error mapping and argument checks of the zcomm binding: every libzcomm
error becomes ZcommError with the zc_status_t name and the library's detail,
and buffers that C cannot take as they are (dtype, layout, length, a plan
of another size) are refused before any data moves; host_empty's memory,
and the cache of the moves' outputs (reuse, limit, release)."""
import gc
import os
import sys

import numpy as np
import torch

import ranks
import tap
import zcomm
from zcomm._host_cache import HostCache
from zcomm.torch_ops import ring_attention
from zcomm._lib import lib

torch.manual_seed(1)
comm = zcomm.Communicator(zcomm.get_unique_id(), 0, 1)
tap.ok((comm.rank, comm.size, comm.node_count, comm.local_size) == (0, 1, 1, 1),
       "a 1-rank communicator from a unique id answers rank 0 of 1 on 1 node")

# Error mapping: the C status and detail, unchanged.
try:
    zcomm.Plan([100], 1, 1, 50)
    tap.ok(False, "a batch over capacity raises ZcommError")
except zcomm.ZcommError as e:
    tap.ok(e.status == -10 and e.name == "ZC_ERR_CAPACITY" and isinstance(e, RuntimeError),
           "a batch over capacity raises ZcommError ZC_ERR_CAPACITY (-10)", e)
    tap.ok(e.detail == lib.zc_get_last_error().decode() and "lengths[0]" in e.detail,
           "its detail is zc_get_last_error(), naming lengths[0]", e.detail)
    tap.ok(e.name in str(e) and e.detail in str(e) and "zc_plan_create" in str(e),
           "its message names the call, the status and the detail", str(e))
tap.raises(lambda: zcomm.Plan([10], 0, 1, 50), "nnodes 0 is ZC_ERR_INVALID_ARG naming nnodes",
           "ZC_ERR_INVALID_ARG", "nnodes")
tap.raises(lambda: zcomm.Communicator(b"short", 0, 1), "a unique id of the wrong size",
           "ZC_ERR_INVALID_ARG", "unique_id")

# Buffers.
x = torch.zeros(8, 4)
tap.raises(lambda: comm.sendrecv(np.zeros(4, np.float64), 0, np.zeros(4, np.float64), 0),
           "float64 (no zc dtype) is refused naming sendbuf", "ZC_ERR_INVALID_ARG",
           "sendbuf: unsupported dtype")
tap.raises(lambda: comm.sendrecv(x, 0, torch.zeros(8, 4, dtype=torch.int32), 0),
           "send and receive dtypes that differ are refused", "ZC_ERR_INVALID_ARG",
           "dtypes differ")
tap.raises(lambda: comm.sendrecv(x.t(), 0, torch.zeros(32), 0),
           "a non-contiguous tensor is refused", "ZC_ERR_INVALID_ARG",
           "sendbuf: tensor is not contiguous")
tap.raises(lambda: comm.sendrecv(x.numpy().T, 0, np.zeros(32, np.float32), 0),
           "a non-contiguous numpy array is refused", "ZC_ERR_INVALID_ARG",
           "sendbuf: array is not C-contiguous")
tap.raises(lambda: comm.sendrecv([1.0, 2.0], 0, x, 0), "a Python list is refused",
           "ZC_ERR_INVALID_ARG", "sendbuf: expected a numpy array, a torch tensor")
ro = np.zeros(4, np.float32)
ro.flags.writeable = False
tap.raises(lambda: comm.recv(ro, 0), "a read-only array is refused as a receive buffer",
           "ZC_ERR_INVALID_ARG", "buf: array is read-only")
y = torch.zeros(8, 4)
comm.sendrecv(torch.arange(32.0).view(8, 4), 0, y, 0)
tap.ok(torch.equal(y, torch.arange(32.0).view(8, 4)), "sendrecv to itself delivers the data")
a = np.arange(10, dtype=np.int64)
b = np.zeros(10, np.int64)
comm.remap_alltoallv(a, [10], [0], b, [10], [0])
tap.ok(np.array_equal(a, b), "remap_alltoallv on 1 rank copies the self block")
tap.raises(lambda: comm.remap_alltoallv(a, [10, 0], [0, 0], b, [10], [0]),
           "counts with one entry too many are refused", "ZC_ERR_INVALID_ARG",
           "sendcounts: 2 entries")
tap.raises(lambda: comm.remap_alltoallv(a, [10], [0], b[:6], [10], [0]),
           "a receive buffer shorter than its counts is refused", "ZC_ERR_INVALID_ARG",
           "recvbuf: 6 elements")

# Plans.
p1 = zcomm.Plan([10, 6], 1, 1, 100)
p2 = zcomm.Plan([10, 6], 1, 2, 100)
tap.ok(p1.rank_pieces(0) == [{"seq": 0, "begin": 0, "end": 10, "zone": "local", "ring": -1,
                              "chunk": -1},
                             {"seq": 1, "begin": 0, "end": 6, "zone": "local", "ring": -1,
                              "chunk": -1}],
       "the pieces of a 1-rank plan are its two whole sequences, as dicts", p1.rank_pieces(0))
tap.ok(p1.remap_counts(0) == ([16], [0], [16], [0]),
       "its remap keeps the 16 tokens at home", p1.remap_counts(0))
# Masks: a plan balances the one it is given, and says which layout each ring takes.
pc = zcomm.Plan([65536], 2, 8, 4096)
pw = zcomm.Plan([65536], 2, 8, 4096, window_size=(4095, 0))
tap.ok((pc.window_size, pc.ring_layout(0), pw.window_size, pw.ring_layout(0)) ==
       ((-1, 0), "zigzag", (4095, 0), "contiguous"),
       "one 64K sequence on 16 ranks: a causal plan's ring is zigzag, a window of 4096's "
       "contiguous", (pc.ring_layout(0), pw.ring_layout(0)))
tap.raises(lambda: zcomm.Plan([10], 1, 1, 50, window_size=(-2, 0)),
           "window_size (-2, 0) is ZC_ERR_INVALID_ARG naming opts->window_left",
           "ZC_ERR_INVALID_ARG", "opts->window_left")
tap.raises(lambda: comm.remap(p2, torch.zeros(16, 4), torch.zeros(16, 4)),
           "remap with a plan of 2 ranks on a 1-rank communicator", "ZC_ERR_MISMATCH",
           "plan: has 2 ranks")
q = torch.randn(16, 2, 8)
lse = torch.zeros(16, 2)
tap.raises(lambda: comm.ring_attn_fwd("p1", q, q, q, torch.empty_like(q), lse),
           "ring attention with something that is not a plan", "ZC_ERR_INVALID_ARG",
           "plan: expected a zcomm.Plan")
tap.raises(lambda: comm.ring_attn_fwd(p2, q, q, q, torch.empty_like(q), lse),
           "ring attention with a plan of 2 ranks on a 1-rank communicator", "ZC_ERR_MISMATCH",
           "plan: built for 2 ranks")
tap.raises(lambda: comm.ring_attn_fwd(p1, q[:8], q[:8], q[:8], torch.empty_like(q[:8]),
                                      lse[:8]),
           "ring attention on fewer rows than the plan's tokens (C check)",
           "ZC_ERR_INVALID_ARG", "tokens: buffers of 8 rows")
tap.raises(lambda: comm.ring_attn_fwd(p1, q.half(), q.half(), q.half(), q.half(), lse),
           "ring attention in float16 is refused", "ZC_ERR_INVALID_ARG", "float32 or bfloat16")
tap.raises(lambda: comm.ring_attn_fwd(p1, q, q, q, torch.empty_like(q), lse.double()),
           "an lse that is not float32 is refused", "ZC_ERR_INVALID_ARG", "lse")
tap.raises(lambda: comm.ring_attn_fwd(p1, q.transpose(1, 2).contiguous().transpose(1, 2), q, q,
                                      torch.empty_like(q), lse),
           "a non-contiguous q is refused", "ZC_ERR_INVALID_ARG", "q: tensor is not contiguous")


class _Recorder:
    """A stand-in communicator: what zcomm.torch_ops.RingAttention hands the
    library, and on which device."""

    def ring_attn_fwd(self, plan, q, k, v, out, lse, mode="zeppelin", scale=0.0):
        self.fwd = (out.device, lse.device, lse.dtype, tuple(lse.shape))

    def ring_attn_bwd(self, plan, q, k, v, out, lse, dout, dq, dk, dv, mode="zeppelin",
                      scale=0.0):
        self.bwd = (lse.device, dq.device, dk.device)


# The device plumbing of RingAttention without a device: tensors on torch's
# "meta" device stand for CUDA ones (test_cuda.py runs the real thing).
rec = _Recorder()
mq = torch.empty(16, 2, 4, device="meta", requires_grad=True)
mo = ring_attention(mq, mq, mq, rec, p1)
mo.backward(torch.empty_like(mo))
tap.ok(rec.fwd == (mq.device, mq.device, torch.float32, (16, 2)) and
       rec.bwd == (mq.device,) * 3,
       "RingAttention makes out, lse and the gradients on q's device (lse float32 [tokens, "
       "heads]), as the stream forms need: %s %s" % (rec.fwd, rec.bwd))
comm.close()


def count_mismatch(comm):
    """The receiver expects more elements than the sender sends."""
    buf = torch.zeros(8 if comm.rank == 0 else 16)
    try:
        if comm.rank == 0:
            comm.send(buf, 1)
        else:
            comm.recv(buf, 0)
        return [("a receive of the wrong length raises ZC_ERR_MISMATCH on the receiver",
                 comm.rank == 0, "no error")]
    except zcomm.ZcommError as e:
        return [("a receive of the wrong length raises ZC_ERR_MISMATCH on the receiver",
                 comm.rank == 1 and e.name == "ZC_ERR_MISMATCH", str(e))]


ranks.run(count_mismatch, 2)


# zcomm.torch.host_empty: zc_host_alloc memory as a tensor, freed with the
# last tensor on it.
def huge_page_size():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size") as f:
            return int(f.read())
    except OSError:
        return 2 << 20


def marked_huge(address):
    """VmFlags "hg" (MADV_HUGEPAGE) on the mapping holding address."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("VmFlags:"):
                return " hg" in line
    return False


hp = huge_page_size()
t = zcomm.torch.host_empty(3, 1 << 20)
tap.ok(t.shape == (3, 1 << 20) and t.dtype == torch.float32 and t.device.type == "cpu" and
       t.data_ptr() % hp == 0,
       "host_empty(3, 1M): float32 [3, 1048576] on the CPU, aligned to the huge page",
       "%s %s 0x%x" % (t.shape, t.dtype, t.data_ptr()))
thp = os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled")
tap.ok(marked_huge(t.data_ptr()) == thp, "its memory is marked MADV_HUGEPAGE exactly when the "
       "kernel has transparent huge pages (%s)" % ("it has" if thp else "it has not"))
t.copy_(torch.arange(t.numel(), dtype=torch.float32).view_as(t))
row = t[2]
del t
gc.collect()
tap.ok(torch.equal(row, torch.arange(2 << 20, 3 << 20, dtype=torch.float32)),
       "a view keeps the memory: a row's data outlive the base tensor")
freed = []
real_free = lib.zc_host_free
lib.zc_host_free = lambda p: (freed.append(p), real_free(p))
try:
    u = zcomm.torch.host_empty((5, 7), dtype=torch.bfloat16)
    address = u.data_ptr()
    u.fill_(1.5)
    del u
    gc.collect()
finally:
    lib.zc_host_free = real_free
tap.ok(freed == [address], "the memory goes back to zc_host_free once, when the last tensor goes",
       "%s, allocated 0x%x" % (freed, address))
e = zcomm.torch.host_empty(0, 5, dtype=torch.int64)
tap.ok(e.shape == (0, 5) and e.dtype == torch.int64, "an empty shape gives an empty tensor")
tap.raises(lambda: zcomm.torch.host_empty(4, -1), "a negative size is ZC_ERR_INVALID_ARG naming "
           "size", "ZC_ERR_INVALID_ARG", "size")
tap.raises(lambda: zcomm.torch.host_empty(2.5), "a float size is ZC_ERR_INVALID_ARG naming size",
           "ZC_ERR_INVALID_ARG", "size")
tap.raises(lambda: zcomm.torch.host_empty(1 << 60, dtype=torch.uint8),
           "1 EiB is ZC_ERR_NO_MEMORY from zc_host_alloc", "ZC_ERR_NO_MEMORY", "zc_host_alloc")

# The moves' outputs (zcomm._host_cache): a block whose tensors are gone
# serves the next output of about its size; beyond the limit, the oldest go
# back to zc_host_free.
cache = HostCache(limit=8 << 20)
big = cache.empty((3 << 20,), torch.uint8)
first = big.data_ptr()
del big
gc.collect()
small = cache.empty((1 << 20,), torch.uint8)
near = cache.empty((((3 << 20) - 1000) // 4,), torch.float32)
tap.ok(small.data_ptr() != first and near.data_ptr() == first and cache.cached_bytes() == 0,
       "the 4 MiB block of a gone 3 MiB tensor is not given to a 1 MiB request, and is to the "
       "next of 3 MiB - 1000 B", (hex(first), hex(small.data_ptr()), hex(near.data_ptr())))
del small, near
gc.collect()
freed = []
lib.zc_host_free = lambda p: (freed.append(p), real_free(p))
try:
    kept = cache.cached_bytes()
    old = cache.set_limit(0)
finally:
    lib.zc_host_free = real_free
tap.ok(kept == 6 << 20 and old == 8 << 20 and len(freed) == 2 and cache.cached_bytes() == 0,
       "their 4 and 2 MiB blocks wait under an 8 MiB limit; a limit of 0 frees both once",
       (kept, old, freed))
tiny = cache.empty((1000,), torch.uint8)
del tiny
gc.collect()
tap.ok(cache.cached_bytes() == 0, "an output under 1 MiB comes from torch, not a huge page",
       cache.cached_bytes())
tap.raises(lambda: zcomm.torch.set_host_cache_limit(-1), "set_host_cache_limit(-1) is "
           "ZC_ERR_INVALID_ARG naming nbytes", "ZC_ERR_INVALID_ARG", "nbytes")
sys.exit(tap.done())
