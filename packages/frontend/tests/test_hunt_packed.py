"""Traced modules and functions on the packed kernels against eager NumPy: module state changed between
calls (in place, load_state_dict), the weight passed as the argument too, weights passed as arguments,
batches other than the traced one (1 runs on GEMV, 0 rows, tile tails), and concurrent calls equal to
serial ones bit for bit."""

import threading

import numpy as np
import numtrace as nt
import pytest
from numtrace import nn


def _close(got, want, x_scale):
    """Equal to NumPy within float rounding of the summation order (special values exact)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    eps = np.finfo(want.dtype).eps
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.all(np.abs(got[ok] - want[ok]) <= 64 * eps * (x_scale + 1))


class _Block(nt.Module):
    def __init__(self, dtype):
        super().__init__()
        self.fc = nn.Linear(37, 45, dtype=dtype, seed=1)
        self.fc2 = nn.Linear(45, 45, dtype=dtype, seed=2)

    def forward(self, x):
        h = np.maximum(self.fc(x), 0)
        return np.maximum(self.fc2(h) + h, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_module_state_changes_and_batches(dtype, backend):
    rng = np.random.default_rng(0)
    m = _Block(dtype).eval()
    tm = nt.trace_module(m, {"forward": (rng.standard_normal((5, 37)).astype(dtype),)}, check_trace=False,
                         backend=backend)
    for step, rows in enumerate((5, 1, 2, 9, 0, 300, 17)):
        if step == 3:
            for p in tm.parameters():
                p *= 1.5
        if step == 5:
            tm.load_state_dict({k: v * -0.5 + 0.1 for k, v in m.state_dict().items()})
        x = rng.standard_normal((rows, 37)).astype(dtype)
        _close(tm(x), m(x), 1e3)
    stats = tm.forward.stats()["signatures"].values()
    assert backend != "cpu" or any(s["packed_matmuls"] == 2 and s["packed_epilogue_ops"] == 5 for s in stats)


def test_state_weight_passed_as_the_argument_and_concurrent_calls(backend):
    rng = np.random.default_rng(1)

    class Square(nt.Module):
        def __init__(self):
            super().__init__()
            self.w = nt.Parameter(rng.standard_normal((40, 40)).astype(np.float32))

        def forward(self, x):
            return x @ self.w + x

    m = Square()
    example = rng.standard_normal((6, 40)).astype(np.float32)
    tm = nt.trace_module(m, {"forward": (example,)}, check_trace=False, backend=backend)
    _close(tm(m.w), m(m.w), 1e3)
    _close(tm(m.w.T), m(m.w.T), 1e3)
    xs = [rng.standard_normal((int(r), 40)).astype(np.float32) for r in rng.integers(0, 300, 16)]
    serial = [tm(x).copy() for x in xs]
    got = [None] * len(xs)

    def work(i):
        got[i] = tm(xs[i])
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(got, serial):
        np.testing.assert_array_equal(a, b)


def _mlp(x, w1, b1, w2, b2):
    h = np.maximum(x @ w1 + b1, 0)
    return h @ w2 + b2 + h[:, :7]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weights_passed_as_arguments(dtype, backend):
    """Products of two run-time values (weights as arguments, a convolution's weight over its patches)
    against eager NumPy at batches around the packed kernels' row threshold, transposed and strided
    weights, special values, and concurrent calls equal to serial ones bit for bit."""
    rng = np.random.default_rng(2)
    w1, b1 = rng.standard_normal((37, 45)).astype(dtype), rng.standard_normal(45).astype(dtype)
    w2, b2 = rng.standard_normal((45, 7)).astype(dtype), rng.standard_normal(7).astype(dtype)
    traced = nt.trace(_mlp, (rng.standard_normal((64, 37)).astype(dtype), w1, b1, w2, b2), check_trace=False,
                      backend=backend)
    for rows in (64, 0, 1, 7, 8, 9, 17, 300):
        x = rng.standard_normal((rows, 37)).astype(dtype)
        if rows == 17:
            x[3, 4], x[5, :] = np.nan, -0.0
        for w in (w1, np.asfortranarray(w1), np.repeat(w1, 2, axis=1)[:, ::2]):
            with np.errstate(invalid="ignore"):
                _close(traced(x, w, b1, w2, b2), _mlp(x, w, b1, w2, b2), 1e3)
    stats = traced.stats()["signatures"].values()
    assert backend != "cpu" or any(s["packed_runtime"] == 2 for s in stats)
    xs = [rng.standard_normal((64, 37)).astype(dtype) for _ in range(12)]
    serial = [traced(x, w1, b1, w2, b2).copy() for x in xs]
    got = [None] * len(xs)

    def work(i):
        got[i] = traced(xs[i], w1, b1, w2, b2)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(got, serial):
        np.testing.assert_array_equal(a, b)


def _conv_like(w, cols, b):
    return np.maximum(w @ cols + b, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_shared_left_operand_over_a_stack(dtype, backend):
    """(M, K) @ (B, K, N), as a convolution by im2col computes: every product of the stack reads the
    same left operand."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 72)).astype(dtype)
    b = rng.standard_normal(169).astype(dtype)
    cols = rng.standard_normal((5, 72, 169)).astype(dtype)
    traced = nt.trace(_conv_like, (w, cols, b), check_trace=False, backend=backend)
    for c in (cols, np.swapaxes(np.swapaxes(cols, 1, 2).copy(), 1, 2), cols[::-1]):
        _close(traced(w, c, b), _conv_like(w, c, b), 1e3)
    _close(traced(w[:, ::-1].copy(), cols, b), _conv_like(w[:, ::-1].copy(), cols, b), 1e3)
    stats = traced.stats()["signatures"].values()
    assert backend != "cpu" or any(s["packed_runtime"] == 1 for s in stats)
