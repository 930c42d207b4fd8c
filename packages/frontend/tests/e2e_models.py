"""The end-to-end models every backend must run, written in plain NumPy on ``numtrace.nn``: an MLP, a
CNN and a pre-LN transformer encoder block, at sizes Triton's interpreter runs quickly.

One definition for every package's tests: the backend packages import this file (their tests put
this directory on ``sys.path``), so every backend checks the same programs. Each model runs eagerly
as ordinary NumPy, which is the reference the traced versions are compared with."""

from __future__ import annotations

import math

import numpy as np
import numtrace as nt
from numtrace import nn


class MLP(nt.Module):
    def __init__(self, d_in: int = 32, hidden: int = 64, d_out: int = 10):
        super().__init__()
        self.l1 = nn.Linear(d_in, hidden, seed=0)
        self.l2 = nn.Linear(hidden, hidden, seed=1)
        self.l3 = nn.Linear(hidden, d_out, seed=2)

    def forward(self, x):
        h = np.maximum(self.l1(x), 0)
        h = np.maximum(self.l2(h), 0)
        return self.l3(h)


class CNN(nt.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1, seed=0)
        self.c2 = nn.Conv2d(8, 8, 3, stride=2, seed=1)
        self.fc = nn.Linear(8 * 3 * 3, 10, seed=2)

    def forward(self, x):
        h = np.maximum(self.c1(x), 0)
        h = np.maximum(self.c2(h), 0)
        return self.fc(h.reshape(h.shape[0], -1))


class Block(nt.Module):
    """Pre-LN encoder block: multi-head attention (softmax) and a GELU-tanh MLP, both residual.

    Written in the natural form: every reshape takes its dims from ``x.shape``, so the traced graph
    splits and merges heads of a transposed value (the pattern the planner must address)."""

    def __init__(self, d: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, seed=0), nn.Linear(d, d, seed=1)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d, seed=2), nn.Linear(4 * d, d, seed=3)
        self.gelu = nn.GELU()

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = (
            a.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)
            for a in np.split(self.qkv(self.ln1(x)), 3, axis=-1)
        )
        s = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(d // h))
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        a = e / e.sum(axis=-1, keepdims=True)
        x = x + self.proj((a @ v).transpose(0, 2, 1, 3).reshape(b, t, d))
        return x + self.fc2(self.gelu(self.fc1(self.ln2(x))))


def model_cases() -> list[tuple[str, nt.Module, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [
        ("mlp", MLP(), rng.standard_normal((16, 32)).astype(np.float32)),
        ("cnn", CNN(), rng.standard_normal((2, 3, 8, 8)).astype(np.float32)),
        ("transformer", Block(), rng.standard_normal((2, 8, 32)).astype(np.float32)),
    ]
