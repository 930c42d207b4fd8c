"""An MLP classifier (784 -> 256 -> 128 -> 10, LayerNorm, GELU, log-softmax) traced, saved, loaded, run.

A numtrace.nn model written as plain NumPy: traced at batch 32 and checked at batches 1 and 7,
saved to a file and loaded back (no Python code needed), then run on a fresh batch and compared
with the untraced model, and timed against it. Exits with status 1 on any mismatch.

    python examples/mlp_classifier.py [--backend cpu|reference|triton] [--quick]
"""

from __future__ import annotations

import sys

import numpy as np
import numtrace as nt
from _harness import parse_args, run
from numtrace import nn


class Classifier(nt.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256, seed=0)
        self.norm1 = nn.LayerNorm(256)
        self.fc2 = nn.Linear(256, 128, seed=1)
        self.norm2 = nn.LayerNorm(128)
        self.head = nn.Linear(128, 10, seed=2)
        self.act = nn.GELU()

    def forward(self, x):
        h = self.act(self.norm1(self.fc1(x)))
        h = self.act(self.norm2(self.fc2(h)))
        logits = self.head(h)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # log-probabilities


def main() -> int:
    args = parse_args(__doc__)
    rng = np.random.default_rng(0)

    def images(n):
        return (rng.random((n, 784)).astype(np.float32),)

    model = Classifier().eval()
    return run("mlp_classifier", model, images(32), [images(1), images(7)],
               images(64 if args.quick else 512), backend=args.backend, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())
