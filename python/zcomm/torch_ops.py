"""torch.autograd.Functions over libzcomm: ring attention (forward
zc_ring_attn_fwd, backward zc_ring_attn_bwd) and the plan's remap (forward
remap, inverse remap of the gradient)."""
import torch

from .plan import FORWARD, INVERSE


class RingAttention(torch.autograd.Function):
    """out = RingAttention.apply(q, k, v, comm, plan, mode, scale): causal
    attention of this rank's rows [tokens, heads, head_dim] in the plan's
    attention layout; every rank of comm calls it together.  CPU tensors
    run the host forms, CUDA tensors the stream forms on the current
    stream (out and lse are made on q's device)."""

    @staticmethod
    def forward(ctx, q, k, v, comm, plan, mode="zeppelin", scale=0.0):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        out = torch.empty_like(q)
        # beside q: device tensors go to the stream forms, which take every
        # tensor, lse included, in device memory
        lse = torch.empty(q.shape[0], q.shape[1], dtype=torch.float32, device=q.device)
        comm.ring_attn_fwd(plan, q, k, v, out, lse, mode=mode, scale=scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.comm, ctx.plan, ctx.mode, ctx.scale = comm, plan, mode, scale
        ctx.mark_non_differentiable(lse)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        ctx.comm.ring_attn_bwd(ctx.plan, q, k, v, out, lse, dout.contiguous(), dq, dk, dv,
                               mode=ctx.mode, scale=ctx.scale)
        return dq, dk, dv, None, None, None, None


def _remap(comm, plan, x, direction):
    info = plan.rank(comm.rank)
    rows = info["linear_tokens"] if direction == FORWARD else info["tokens"]
    y = x.new_empty((rows,) + tuple(x.shape[1:]))
    comm.remap(plan, x.contiguous(), y, direction)
    return y


class Remap(torch.autograd.Function):
    """y = Remap.apply(x, comm, plan, direction): the plan's remap of this
    rank's tokens (x [tokens, ...]; FORWARD: attention -> linear layout);
    the gradient takes the opposite direction."""

    @staticmethod
    def forward(ctx, x, comm, plan, direction=FORWARD):
        ctx.comm, ctx.plan, ctx.direction = comm, plan, direction
        return _remap(comm, plan, x, direction)

    @staticmethod
    def backward(ctx, dy):
        back = INVERSE if ctx.direction == FORWARD else FORWARD
        return _remap(ctx.comm, ctx.plan, dy, back), None, None, None


def ring_attention(q, k, v, comm, plan, mode="zeppelin", scale=0.0):
    return RingAttention.apply(q, k, v, comm, plan, mode, scale)


def remap(x, comm, plan, direction=FORWARD):
    return Remap.apply(x, comm, plan, direction)
