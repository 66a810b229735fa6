"""Single-process references of the distributed tests: rows of a rank's
pieces, and causal GQA attention with plain PyTorch."""
import math

import torch


def rows(per_seq, pieces):
    """The rank's buffer: the rows of each piece, in piece order."""
    return torch.cat([per_seq[p["seq"]][p["begin"]:p["end"]] for p in pieces])


def split(x, lengths):
    return list(torch.split(x, list(lengths)))


def attention(q, k, v, lengths):
    """Causal attention of packed sequences, q [T, hq, d], k/v [T, hkv, d]."""
    outs = []
    for qs, ks, vs in zip(split(q, lengths), split(k, lengths), split(v, lengths)):
        group = qs.shape[1] // ks.shape[1]
        ks, vs = ks.repeat_interleave(group, 1), vs.repeat_interleave(group, 1)
        scores = torch.einsum("qhd,khd->hqk", qs, ks) / math.sqrt(qs.shape[2])
        n = qs.shape[0]
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        outs.append(torch.einsum("hqk,khd->qhd", scores.softmax(-1), vs))
    return torch.cat(outs)


def rel_error(got, want):
    got, want = got.double(), want.double()
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def capacity(total, size):
    """Tokens per device as tests/mn_ring_attn.c gives them: 25% headroom."""
    return (total * 5 // 4 + size - 1) // size + 8
