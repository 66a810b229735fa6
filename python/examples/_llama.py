"""The pieces that the examples (train.py, train_step.py, zc_train_perf.py,
zc_varlen_perf.py) share: the LLaMA-style model's RMSNorm and rotary
embedding, causal attention over a packed batch in one process (their
reference), the gradients flattened for one all-reduce and back, batches
of the paper's length distributions, and --fork's ranks.

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


def run_ranks(fn, cfg, timeout=3600):
    """fn(comm) on --fork's ranks (cfg.fork, cfg.nodes; run_fork's status),
    or as this process's rank of a job (Communicator.from_env(); fn's)."""
    if cfg.fork:
        return run_fork(fn, cfg.fork, cfg.nodes, timeout=timeout)
    import zcomm
    with zcomm.Communicator.from_env() as comm:
        return fn(comm)


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


# Table 2 of the paper (shared/data/length-distributions.tsv): share of
# sequences per bin, bins in units of 1024 tokens.
EDGES = (1, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
SHARES = {"arxiv": (0.032, 0.03, 0.08, 0.219, 0.338, 0.224, 0.077, 0, 0),
          "github": (0, 0.34, 0.095, 0.104, 0.107, 0.102, 0.088, 0.064, 0.045),
          "prolong64k": (0.231, 0.042, 0.021, 0.012, 0.013, 0.008, 0.673, 0, 0)}
MASK = (1 << 64) - 1


class SplitMix64:
    """tools/zc_plan_dataset.c's generator (zc_rng_next, zc_rng_range)."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9e3779b97f4a7c15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK
        z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK
        return z ^ (z >> 31)

    def range(self, lo, hi):
        return lo + self.next() % (hi - lo)


def sample_lengths(dataset, tokens, scale, seed):
    """An exactly-full batch: lengths drawn as zc_dataset_sample draws them,
    each divided by scale (at least 1), until `tokens`; the last is cut."""
    rng, shares = SplitMix64(seed), SHARES[dataset]
    wsum, out = sum(shares), []
    while sum(out) < tokens:
        u = (rng.next() >> 11) / 9007199254740992.0 * wsum
        b = 0
        while b < len(shares) - 1:
            u -= shares[b]
            if u < 0:
                break
            b += 1
        while shares[b] == 0:
            b -= 1
        n = max(1, rng.range(EDGES[b], EDGES[b + 1]) // scale)
        out.append(min(n, tokens - sum(out)))
    return out
