"""Random traced programs that move data around (hypothesis, bounded and derandomized): transposes,
reshapes with dims taken from ``x.shape`` (also after a transpose), broadcasting, reductions over any
axis (also after a transpose), matmuls with epilogues, and slicing. Whatever the planner fuses,
relabels or stores, the ``triton`` result equals the ``reference`` backend's, at the traced shape and
at another one (re-planned, not re-traced)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

nt = pytest.importorskip("numtrace", reason="programs are traced by the frontend")


def _split_heads(h, w):
    b, t, c = h.shape
    return h.reshape(b, t, 2, c // 2).transpose(0, 2, 1, 3)


def _merge_heads(h, w):
    b, n, t, c = h.shape
    return h.transpose(0, 2, 1, 3).reshape(b, t, n * c)


def _linear(h, w):
    return np.tanh(h.reshape(-1, h.shape[-1]) @ w + w[0]).reshape(h.shape) if h.shape[-1] == w.shape[0] else h


def _attention(h, w):
    s = h @ h.swapaxes(-1, -2)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ h + h


def _reduce_after_transpose(h, w):
    return h * h.swapaxes(-1, -2).mean(axis=-1, keepdims=True).swapaxes(-1, -2)


def _normalize_axis0(h, w):
    return h - h.max(axis=0)


def _normalize_axis1(h, w):
    return (h - h.mean(axis=1, keepdims=True)) * 0.5


def _flatten_roundtrip(h, w):
    return (h.swapaxes(0, 1).reshape(h.shape[1], -1) + 1.0).reshape(h.shape[1], h.shape[0], *h.shape[2:])


def _reverse_slice(h, w):
    return h[:, ::-1] * 2.0 + h


def _broadcast_bias(h, w):
    return np.maximum(h + w[: h.shape[-1], 0], 0.0)


def _sum_then_broadcast(h, w):
    first = h.swapaxes(-1, -2)[..., :1, :].swapaxes(-1, -2)
    return h + np.sqrt(np.abs(h)).sum(axis=-1, keepdims=True) * first


STEPS = [
    _split_heads,
    _merge_heads,
    _linear,
    _attention,
    _reduce_after_transpose,
    _normalize_axis0,
    _normalize_axis1,
    _flatten_roundtrip,
    _reverse_slice,
    _broadcast_bias,
    _sum_then_broadcast,
]


def _applicable(step, ndim: int, last: int) -> bool:
    if step is _split_heads:
        return ndim == 3 and last % 2 == 0
    if step is _merge_heads:
        return ndim == 4
    return True


def _program(steps):
    def f(x, w):
        h = x
        for step in steps:
            if _applicable(step, h.ndim, h.shape[-1]):
                h = step(h, w)
        return h

    return f


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.sampled_from(STEPS), min_size=1, max_size=5),
    b=st.integers(1, 3),
    t=st.integers(1, 5),
    c=st.sampled_from([2, 4, 6]),
)
def test_random_layout_program_matches_reference(steps, b, t, c):
    rng = np.random.default_rng(len(steps) * 100 + b * 10 + t)
    x = rng.uniform(-1, 1, (b, t, c)).astype(np.float32)
    w = rng.uniform(-1, 1, (c, c)).astype(np.float32)
    f = _program(steps)
    traced = nt.trace(f, (x, w), backend="triton")
    reference = traced.to("reference")
    x2 = rng.uniform(-1, 1, (b + 1, t + 2, c)).astype(np.float32)
    for inputs in ((x, w), (x2, w)):
        got, want = traced(*inputs), reference(*inputs)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got, f(*inputs), rtol=1e-4, atol=1e-5)
