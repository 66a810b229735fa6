"""The pieces that the examples (train.py, train_step.py, zc_train_perf.py)
share: the LLaMA-style model's RMSNorm and rotary embedding, causal
attention over a packed batch in one process (their reference), the
gradients flattened for one all-reduce and back, and --fork's ranks.

Not part of the zcomm package: the examples import it from their own
directory (Python puts a script's directory first on sys.path)."""
import math
import sys

import torch


def rmsnorm(x, weight, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope(x, positions):
    """Rotary embedding of x [tokens, heads, d] at each token's position."""
    d = x.shape[-1]
    inv = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    angle = positions.float()[:, None] * inv[None, :]
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), -1).flatten(-2)


def reference_attention(q, k, v, lengths):
    """Causal GQA attention of the packed sequences of `lengths` (q
    [tokens, heads, d], k and v [tokens, kv_heads, d]), sequence by
    sequence in plain PyTorch."""
    outs, at = [], 0
    for n in lengths:
        qs, ks, vs = q[at:at + n], k[at:at + n], v[at:at + n]
        group = qs.shape[1] // ks.shape[1]
        ks, vs = ks.repeat_interleave(group, 1), vs.repeat_interleave(group, 1)
        s = torch.einsum("qhd,khd->hqk", qs, ks) / math.sqrt(qs.shape[-1])
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        outs.append(torch.einsum("hqk,khd->qhd", s.softmax(-1), vs))
        at += n
    return torch.cat(outs)


def flat_grads(loss, p, names):
    """[loss, then the gradient of every p[name]] in one flat tensor: one
    all-reduce sums them all."""
    return torch.cat([loss.detach().view(1)] + [p[k].grad.flatten() for k in names])


def split_grads(total, p, names):
    """flat_grads's layout back (total[0] is the loss): {name: gradient}
    in p[name]'s shape."""
    grads, at = {}, 1
    for k in names:
        grads[k] = total[at:at + p[k].numel()].view_as(p[k])
        at += p[k].numel()
    return grads


def add_fork_arguments(ap):
    ap.add_argument("--fork", type=int, default=0, metavar="N",
                    help="run N ranks on this machine (forked) instead of one rank of a job")
    ap.add_argument("--nodes", type=int, default=1, help="with --fork: emulated nodes")


def run_fork(fn, size, nodes, **kwargs):
    """fn(comm) on `size` forked ranks making `nodes` emulated nodes
    (zcomm.launch.run_forked; kwargs: its timeout): 0 when every rank
    returned 0, else 1, each rank that failed said on stderr."""
    from zcomm.launch import run_forked
    codes = run_forked(fn, size, nodes, **kwargs)
    for rank, (ok, value) in enumerate(codes):
        if not ok:
            print("# rank %d: %s" % (rank, value), file=sys.stderr)
    return 0 if all(ok and value == 0 for ok, value in codes) else 1
