"""A batch-1 MLP as users write it, on the cpu backend's GEMV (weights whose rows start past a cache
line are peeled, narrow outputs run a masked tail, weight constants are copied to a cache line):
NumPy's values for weights passed at any offset or layout, for closed-over weights through save and
load, and for module parameters changed in place after tracing."""

from __future__ import annotations

import numpy as np
import numtrace as nt
import pytest

# tests_frontend runs without the cpu backend: these check its GEMV.
pytestmark = pytest.mark.skipif("cpu" not in nt.available_backends(), reason="numtrace-cpu is not installed")


def _close(got, x, w, expected):
    """Within the rounding of any summation order of the product (the GEMV tests' bound)."""
    bound = 8e-6 * (np.abs(x) @ np.abs(w)) + 1e-6
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(np.isnan(got), np.isnan(expected))
    assert np.all(np.isnan(expected) | (np.abs(got - expected) <= bound))


def _offset_by(a, nbytes):
    """A copy of `a` whose data start `nbytes` past a 64-byte boundary (rows as packed as `a`'s)."""
    buf = np.zeros(a.nbytes + 128, np.uint8)
    start = -buf.ctypes.data % 64 + nbytes
    out = np.frombuffer(buf, a.dtype, a.size, start).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_weights_at_any_offset_and_layout_give_numpys_product(dtype):
    rng = np.random.default_rng(1)
    wide = rng.standard_normal((785, 530)).astype(dtype)
    wide[7, :20] = np.nan
    wide[9, 500:] = -0.0
    x = rng.standard_normal((1, 784)).astype(dtype)

    def layer(x, w):
        return x @ w

    traced = nt.trace(layer, (x, np.ascontiguousarray(wide[:784, :512])), check_trace=False)
    views = [wide[:784, k:k + 512] for k in (1, 2, 3, 4, 13)] + [wide[1:, :512], wide[:784, 17:529]]
    views += [np.asfortranarray(wide[:784, :512]), np.ascontiguousarray(wide[:784, :512].T).T]
    views.append(wide[783::-1, :512])
    views += [_offset_by(np.ascontiguousarray(wide[:784, :512]), k) for k in range(0, 64, 8)]
    for w in views:
        _close(traced(x, w), x, w, x @ w)
    narrow = nt.trace(layer, (x[:, :512], np.ascontiguousarray(wide[:512, :10])), check_trace=False)
    for w in [wide[:512, k:k + 10] for k in range(0, 17)]:
        _close(narrow(x[:, :512], w), x[:, :512], w, x[:, :512] @ w)


def test_closed_over_weights_through_save_and_load(tmp_path):
    """The MLP's layers as constants (the first 16 bytes past a cache line, as NumPy places a new
    array), traced at batch 1 and called at batch 1 and 2, before and after save and load."""
    rng = np.random.default_rng(2)
    w1 = _offset_by(rng.standard_normal((784, 512)).astype(np.float32) * 0.05, 16)
    b1 = rng.standard_normal(512).astype(np.float32)
    w2 = _offset_by(rng.standard_normal((512, 10)).astype(np.float32) * 0.05, 16)

    def mlp(x):
        return np.maximum(x @ w1 + b1, 0) @ w2

    x1 = rng.standard_normal((1, 784)).astype(np.float32)
    x2 = rng.standard_normal((2, 784)).astype(np.float32)
    traced = nt.trace(mlp, (x1,), check_trace=False)
    traced.save(tmp_path / "mlp.nt")
    loaded = nt.load(tmp_path / "mlp.nt")
    for x in (x1, x2, x1):
        want = mlp(x)
        h = np.maximum(x @ w1 + b1, 0)
        for fn in (traced, loaded):
            _close(fn(x), h, w2, want)


def test_module_parameters_changed_in_place_after_tracing_are_read():
    """Parameters are inputs of the traced module: a weight changed in place (or through
    load_state_dict) after tracing gives the new product, never the traced one."""
    rng = np.random.default_rng(3)

    class MLP(nt.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nt.Parameter(rng.standard_normal((784, 512)).astype(np.float32) * 0.05)
            self.w2 = nt.Parameter(rng.standard_normal((512, 10)).astype(np.float32) * 0.05)

        def forward(self, x):
            return np.maximum(x @ self.w1, 0) @ self.w2

    mod = MLP()
    x = rng.standard_normal((1, 784)).astype(np.float32)
    traced = nt.trace_module(mod, {"forward": x}, check_trace=False)
    mod.w1[:, :7] *= -3
    mod.w2[...] = mod.w2[::-1]
    h = np.maximum(x @ mod.w1, 0)
    _close(traced(x), h, mod.w2, h @ mod.w2)
    state = {k: v * 2 for k, v in mod.state_dict().items()}
    traced.load_state_dict(state)
    h = np.maximum(x @ state["w1"], 0)
    _close(traced(x), h, state["w2"], h @ state["w2"])
