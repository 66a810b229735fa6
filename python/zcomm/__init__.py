"""libzcomm from Python: communicator, planner, routed transfers, remap and
ring attention on numpy arrays and torch tensors (ctypes; no copies), and
zcomm.torch, the packed-batch API for PyTorch training loops
(VarlenPlan, varlen_attn, ZeppelinAttention).  See zcomm-python(7)."""
from ._lib import STATUS_NAMES, ZcommError, lib
from ._version import __version__
from .comm import RING_ATTN_MODES, Communicator, get_unique_id
from .plan import EVEN_SPLIT, FORWARD, INVERSE, Plan


def version():
    """The loaded library's version as (major, minor, patch)."""
    code = lib.zc_get_version()
    return (code // 10000, code // 100 % 100, code % 100)


def __getattr__(name):
    # zcomm.torch imports torch, which takes seconds and is optional for the
    # numpy binding: load it on first use of `zcomm.torch`.
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError("module 'zcomm' has no attribute %r" % name)


__all__ = ["Communicator", "Plan", "ZcommError", "get_unique_id", "version", "__version__",
           "FORWARD", "INVERSE", "EVEN_SPLIT", "RING_ATTN_MODES", "STATUS_NAMES"]
