"""Ready-made attention kernels for zcomm.torch.varlen_attn(..., kernel=K)
and ZeppelinAttention(kernel=K), as zcomm.torch.kernels:

  Reference()   plain PyTorch on any device and dtype (float64 too):
                the blocks segment by segment, the scores of at most
                `rows` queries at once in float32 (or the inputs' dtype
                when wider).  For tests, and for checking another kernel.
  TorchFlash()  PyTorch's own flash-attention varlen operators
                (aten::_flash_attention_forward/_backward, CUDA, float16
                and bfloat16, head_dim a multiple of 8 up to 256); a block
                it cannot take (float32, another head_dim, CPU tensors)
                returns NotImplemented and runs on libzcomm's kernels.
                Constructing it raises ZcommError(ZC_ERR_UNSUPPORTED)
                where torch has no such operators (torch 1.13 has none;
                torch_flash_available() says).

Every kernel has the methods varlen_attn calls:
  forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
          causal, softmax_scale) -> (out, lse)
  backward(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
           max_seqlen_q, max_seqlen_k, causal, softmax_scale)
          -> (dq, dk, dv)
q, out, dout, dq [total_q, heads, head_dim]; k, v, dk, dv [total_k,
kv_heads, head_dim] (query head h reads kv head h // (heads // kv_heads));
cu_seqlens int32 on the tensors' device; lse float32 [heads, total_q],
natural log.  causal: every segment has as many keys as queries and query
i sees keys 0..i; False: every key of its segment.  backward gets the final
out and lse of its rows (over all their keys), as flash-attention's does.

The flash_attn package wraps the same way (flash-attention 2.6 shown; the
private functions' arguments change between its versions, check yours):

    from flash_attn.flash_attn_interface import (_flash_attn_varlen_forward,
                                                 _flash_attn_varlen_backward)

    class FlashAttn:
        def forward(self, q, k, v, cu_q, cu_k, max_q, max_k, causal, scale):
            out, lse, _, _ = _flash_attn_varlen_forward(
                q, k, v, cu_q, cu_k, max_q, max_k, 0.0, scale, causal=causal,
                window_size_left=-1, window_size_right=-1, softcap=0.0,
                alibi_slopes=None, return_softmax=False)
            return out, lse                      # lse [heads, total_q]

        def backward(self, dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k,
                     causal, scale):
            dq, dk, dv = (torch.empty_like(t) for t in (q, k, v))
            _flash_attn_varlen_backward(
                dout, q, k, v, out, lse, dq, dk, dv, cu_q, cu_k, max_q, max_k,
                0.0, scale, causal, -1, -1, 0.0, None, False, rng_state=None)
            return dq, dk, dv

flash_attn_varlen_func(..., return_attn_probs=True) gives the forward's
(out, lse) from the public API; older versions returned lse padded,
[batch, heads, max_seqlen_q]: unpad it to [heads, total_q] (TorchFlash
does so for torch's).  flash-attention's causal is bottom-right aligned,
which with the equal lengths varlen_attn gives is top-left too.
"""
import torch

from . import _lib
from ._lib import ZcommError


class Reference:
    """Causal (or full) varlen attention in plain PyTorch: any device, any
    floating dtype; scores in float32 or the inputs' dtype when wider, in
    chunks of `rows` query rows."""

    def __init__(self, rows=512):
        self.rows = rows

    @staticmethod
    def _segments(cu_q, cu_k):
        cq, ck = cu_q.tolist(), cu_k.tolist()
        return [(cq[b], cq[b + 1], ck[b], ck[b + 1]) for b in range(len(cq) - 1)]

    @staticmethod
    def _work(x):
        return x.dtype if x.dtype == torch.float64 else torch.float32

    def _chunks(self, q0, q1):
        for a in range(q0, q1, self.rows):
            yield a, min(a + self.rows, q1)

    def _scores(self, q, k, a, b, q0, k0, k1, causal, scale):
        """scale * q k^T of rows [a, b) of the segment starting at q0 against
        keys [k0, k1): [heads, rows, keys], the causal mask applied."""
        group = q.shape[1] // k.shape[1]
        w = self._work(q)
        kk = k[k0:k1].to(w).repeat_interleave(group, 1)
        s = torch.einsum("qhd,khd->hqk", q[a:b].to(w), kk) * scale
        if causal:
            rows = torch.arange(a - q0, b - q0, device=q.device).view(-1, 1)
            keys = torch.arange(k1 - k0, device=q.device).view(1, -1)
            s = s.masked_fill(keys > rows, float("-inf"))
        return s, kk

    def forward(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                causal, softmax_scale):
        w = self._work(q)
        out = torch.empty(q.shape, dtype=w, device=q.device)
        lse = torch.empty(q.shape[1], q.shape[0], dtype=torch.float32, device=q.device)
        group = q.shape[1] // k.shape[1]
        for q0, q1, k0, k1 in self._segments(cu_seqlens_q, cu_seqlens_k):
            vv = v[k0:k1].to(w).repeat_interleave(group, 1)
            for a, b in self._chunks(q0, q1):
                s, _ = self._scores(q, k, a, b, q0, k0, k1, causal, softmax_scale)
                m = s.logsumexp(-1)                                   # [heads, rows]
                out[a:b] = torch.einsum("hqk,khd->qhd", (s - m.unsqueeze(-1)).exp(), vv)
                lse[:, a:b] = m.float()
        return (out if w == torch.float64 else out.to(torch.float32)), lse

    def backward(self, dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                 max_seqlen_k, causal, softmax_scale):
        w = self._work(q)
        group = q.shape[1] // k.shape[1]
        dq = torch.zeros(q.shape, dtype=w, device=q.device)
        dk = torch.zeros(k.shape, dtype=w, device=q.device)
        dv = torch.zeros(v.shape, dtype=w, device=q.device)
        for q0, q1, k0, k1 in self._segments(cu_seqlens_q, cu_seqlens_k):
            vv = v[k0:k1].to(w).repeat_interleave(group, 1)
            dkk = torch.zeros(k1 - k0, q.shape[1], q.shape[2], dtype=w, device=q.device)
            dvv = torch.zeros_like(dkk)
            for a, b in self._chunks(q0, q1):
                s, kk = self._scores(q, k, a, b, q0, k0, k1, causal, softmax_scale)
                p = (s - lse[:, a:b].to(w).unsqueeze(-1)).exp()       # [heads, rows, keys]
                do = dout[a:b].to(w)
                delta = (do * out[a:b].to(w)).sum(-1).t()             # [heads, rows]
                dvv += torch.einsum("hqk,qhd->khd", p, do)
                ds = p * (torch.einsum("qhd,khd->hqk", do, vv) - delta.unsqueeze(-1))
                dq[a:b] = torch.einsum("hqk,khd->qhd", ds, kk) * softmax_scale
                dkk += torch.einsum("hqk,qhd->khd", ds, q[a:b].to(w)) * softmax_scale
            # the query heads of a group add into their kv head
            dk[k0:k1] = dkk.view(k1 - k0, k.shape[1], group, -1).sum(2)
            dv[k0:k1] = dvv.view(k1 - k0, k.shape[1], group, -1).sum(2)
        if w != torch.float64:
            dq, dk, dv = dq.float(), dk.float(), dv.float()
        return dq, dk, dv


def _aten(name):
    try:
        return getattr(torch.ops.aten, name)
    except (AttributeError, RuntimeError):
        return None


def torch_flash_available():
    """Does this torch have the flash-attention varlen operators?"""
    return (_aten("_flash_attention_forward") is not None
            and _aten("_flash_attention_backward") is not None)


class TorchFlash:
    """PyTorch's flash-attention varlen operators (see the module's doc)."""

    def __init__(self):
        if not torch_flash_available():
            raise ZcommError(_lib.UNSUPPORTED, "torch %s has no flash-attention varlen "
                             "operators (aten::_flash_attention_forward and _backward; torch "
                             "2.1 and later on CUDA have them): use Reference or wrap "
                             "flash_attn (zcomm.torch.kernels)" % torch.__version__,
                             "TorchFlash")
        self._fwd = _aten("_flash_attention_forward")
        self._bwd = _aten("_flash_attention_backward")

    @staticmethod
    def takes(q):
        return (q.is_cuda and q.dtype in (torch.float16, torch.bfloat16)
                and q.shape[2] % 8 == 0 and q.shape[2] <= 256)

    @staticmethod
    def _packed_lse(lse, cu_seqlens_q, total):
        """torch's lse as [heads, total_q]: older versions pad it to
        [batch, heads, max_seqlen_q]."""
        if lse.dim() == 2:
            return lse
        cu = cu_seqlens_q.tolist()
        return torch.cat([lse[b, :, :cu[b + 1] - cu[b]] for b in range(len(cu) - 1)], 1)

    @staticmethod
    def _padded_lse(lse, cu_seqlens_q, max_seqlen_q):
        cu = cu_seqlens_q.tolist()
        pad = lse.new_zeros(len(cu) - 1, lse.shape[0], max_seqlen_q)
        for b in range(len(cu) - 1):
            pad[b, :, :cu[b + 1] - cu[b]] = lse[:, cu[b]:cu[b + 1]]
        return pad

    def forward(self, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                causal, softmax_scale):
        if not self.takes(q):
            return NotImplemented
        res = self._fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, 0.0,
                        causal, False, scale=softmax_scale)
        self.padded = res[1].dim() == 3
        return res[0], self._packed_lse(res[1], cu_seqlens_q, q.shape[0])

    def backward(self, dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                 max_seqlen_k, causal, softmax_scale):
        if not self.takes(q):
            return NotImplemented
        if getattr(self, "padded", False):
            lse = self._padded_lse(lse, cu_seqlens_q, max_seqlen_q)
        # no dropout: the random state is never read
        seed = torch.zeros(2, dtype=torch.int64, device=q.device)
        offset = torch.zeros((), dtype=torch.int64, device=q.device)
        return tuple(self._bwd(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k,
                               max_seqlen_q, max_seqlen_k, 0.0, causal, seed, offset,
                               scale=softmax_scale)[:3])


__all__ = ["Reference", "TorchFlash", "torch_flash_available"]
