"""A pre-LN transformer encoder block (4-head self-attention, GELU MLP) traced, saved, loaded, run.

Head sizes come from ``x.shape``, so one trace serves every batch size and sequence length: traced
at (2, 16, 64), checked at (1, 5, 64) and (3, 9, 64), then the loaded trace runs a fresh batch of
another length and is compared with the untraced block, and timed against it. Exits with status 1
on any mismatch.

    python examples/transformer_block.py [--backend cpu|reference|triton] [--quick]
"""

from __future__ import annotations

import math
import sys

import numpy as np
import numtrace as nt
from _harness import parse_args, run
from numtrace import nn


class SelfAttention(nt.Module):
    """Multi-head scaled dot-product attention; the head split is read from the input's shape."""

    def __init__(self, d: int, heads: int, seed: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d, seed=seed)
        self.out = nn.Linear(d, d, seed=seed + 1)

    def forward(self, x):
        batch, length, d = x.shape
        per_head = d // self.heads

        def split_heads(a):
            return a.reshape(batch, length, self.heads, per_head).transpose(0, 2, 1, 3)

        q, k, v = (split_heads(a) for a in np.split(self.qkv(x), 3, axis=-1))
        scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(per_head)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        return self.out((weights @ v).transpose(0, 2, 1, 3).reshape(batch, length, d))


class EncoderBlock(nt.Module):
    """Pre-LN: x + attention(norm(x)), then x + feed-forward(norm(x))."""

    def __init__(self, d: int = 64, heads: int = 4):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.attention = SelfAttention(d, heads, seed=0)
        self.norm2 = nn.LayerNorm(d)
        self.feed_forward = nn.Sequential(nn.Linear(d, 4 * d, seed=2), nn.GELU(), nn.Linear(4 * d, d, seed=3))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.feed_forward(self.norm2(x))


def main() -> int:
    args = parse_args(__doc__)
    rng = np.random.default_rng(0)

    def tokens(batch, length):
        return (rng.standard_normal((batch, length, 64)).astype(np.float32),)

    block = EncoderBlock().eval()
    fresh = tokens(4, 24) if args.quick else tokens(16, 64)
    return run("transformer_block", block, tokens(2, 16), [tokens(1, 5), tokens(3, 9)], fresh,
               backend=args.backend, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())
