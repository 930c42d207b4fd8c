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


class EncoderBlock(nt.Module):
    def __init__(self, d: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, seed=0), nn.Linear(d, d, seed=1)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d, seed=2), nn.Linear(4 * d, d, seed=3)
        self.gelu = nn.GELU()

    def attention(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = (a.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)
                   for a in np.split(self.qkv(self.ln1(x)), 3, axis=-1))
        scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(d // h))
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = weights / weights.sum(axis=-1, keepdims=True)
        return self.proj((weights @ v).transpose(0, 2, 1, 3).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attention(x)
        return x + self.fc2(self.gelu(self.fc1(self.ln2(x))))


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
