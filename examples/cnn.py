"""A small CNN (two 3x3 convolutions, ReLU, a linear head) on 28x28 images, traced, saved, loaded, run.

Convolutions are numtrace.nn.Conv2d (im2col in plain NumPy). Traced at batch 8, checked at
batches 1 and 3; the loaded trace runs a fresh batch and is compared with the untraced model, then
timed against it. Exits with status 1 on any mismatch.

    python examples/cnn.py [--backend cpu|reference|triton] [--quick]
"""

from __future__ import annotations

import sys

import numpy as np
import numtrace as nt
from _harness import parse_args, run
from numtrace import nn


class SmallCNN(nt.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1, seed=0)     # 28x28 -> 28x28
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, seed=1)     # 28x28 -> 13x13
        self.head = nn.Linear(16 * 13 * 13, 10, seed=2)

    def forward(self, x):
        h = np.maximum(self.conv1(x), 0)
        h = np.maximum(self.conv2(h), 0)
        return self.head(h.reshape(h.shape[0], -1))


def main() -> int:
    args = parse_args(__doc__)
    rng = np.random.default_rng(0)

    def images(n):
        return (rng.random((n, 1, 28, 28)).astype(np.float32),)

    model = SmallCNN().eval()
    return run("cnn", model, images(8), [images(1), images(3)], images(16 if args.quick else 64),
               backend=args.backend, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())
