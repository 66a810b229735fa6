"""libzcomm from Python: communicator, planner, routed transfers, remap and
ring attention on numpy arrays and CPU torch tensors (ctypes; no copies).
See zcomm-python(7).  The torch autograd functions live in zcomm.torch_ops."""
from ._lib import STATUS_NAMES, ZcommError, lib
from .comm import RING_ATTN_MODES, Communicator, get_unique_id
from .plan import EVEN_SPLIT, FORWARD, INVERSE, Plan


def version():
    """The library's version as (major, minor, patch)."""
    code = lib.zc_get_version()
    return (code // 10000, code // 100 % 100, code % 100)


__all__ = ["Communicator", "Plan", "ZcommError", "get_unique_id", "version", "FORWARD",
           "INVERSE", "EVEN_SPLIT", "RING_ATTN_MODES", "STATUS_NAMES"]
