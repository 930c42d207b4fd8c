"""W1 and W4 as numba loops, for peers.py's numba column: one parallel pass for W1, one loop holding
the value in a register for W4."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True)
def w1_into(a, b, c, d, out):
    for i in numba.prange(a.size):
        out[i] = (a[i] * b[i] + c[i]) * np.exp(-d[i]) / (np.float32(1.0) + abs(a[i]))
    return out


def w1(a, b, c, d):
    return w1_into(a, b, c, d, np.empty_like(a))


@numba.njit
def w4(x, y):
    out = np.empty_like(x)
    k = np.float32(1.0001)
    for i in range(x.size):
        v = x[i]
        for _ in range(100):
            v = v * k + y[i]
        out[i] = v
    return out
