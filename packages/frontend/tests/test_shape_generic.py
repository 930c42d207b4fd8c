"""A trace taken at one size runs at others when the program reads its sizes from ``x.shape``."""

import numpy as np
import numtrace as nt
import pytest


def split_heads_and_back(x, w):
    b, t, c = x.shape
    q = (x @ w).reshape(b, t, 4, c // 4).transpose(0, 2, 1, 3)
    scores = q @ q.transpose(0, 1, 3, 2)
    mixed = scores @ q
    return mixed.transpose(0, 2, 1, 3).reshape(b, t, c)


@pytest.mark.triton
def test_attention_reshapes_follow_the_batch_and_sequence(backend, rng):
    w = rng.standard_normal((16, 16)).astype(np.float32)
    x = rng.standard_normal((2, 8, 16)).astype(np.float32)
    traced = nt.trace(split_heads_and_back, (x, w), check_inputs=[(x[:1, :3], w)], backend=backend)
    for shape in [(3, 5, 16), (1, 1, 16)]:
        x2 = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(traced(x2, w), split_heads_and_back(x2, w), rtol=1e-4, atol=1e-4)


def test_a_size_the_program_cannot_take_is_a_clear_error(backend, rng):
    w = rng.standard_normal((16, 16)).astype(np.float32)
    traced = nt.trace(split_heads_and_back, (rng.standard_normal((2, 8, 16)).astype(np.float32), w),
                      backend=backend)
    with pytest.raises(ValueError, match="shapes do not fit the traced program"):
        traced(np.zeros((2, 8, 12), np.float32), w)  # 12 columns meet the 16-row weight


def test_numpy_ufunc_of_a_shape_is_recorded(backend, rng):
    """``np.sqrt(q.shape[-1])`` (attention's scale) follows the size instead of baking the traced one."""
    def scaled(q):
        return q / np.sqrt(q.shape[-1]) + np.maximum(q.shape[0], 2)

    traced = nt.trace(scaled, (rng.standard_normal((4, 3)).astype(np.float32),), backend=backend)
    q = rng.standard_normal((6, 5)).astype(np.float32)
    np.testing.assert_allclose(traced(q), scaled(q), rtol=1e-6)


@pytest.mark.triton
def test_float_arithmetic_on_shapes_is_recorded(backend, rng):
    """``n * 0.5``, ``n / 4``, ``1 / n`` on a traced size are recorded floats, so scales taken from a
    shape follow the input; the output dtype is NumPy's (Python floats stay weak)."""
    def scale(x):
        n, d = x.shape
        return x * (n - 1.5) / (d * 2.0) + 1 / d - (-(n * 0.25)) + n / 4

    traced = nt.trace(scale, (rng.standard_normal((3, 4)).astype(np.float32),), backend=backend)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    got = traced(x)
    assert got.dtype == scale(x).dtype == np.float32
    np.testing.assert_allclose(got, scale(x), rtol=1e-6)
    assert "prim.truediv" in str(traced.graph) and "prim.Constant[value=6.0]" not in str(traced.graph)


def test_empty_with_traced_dims_follows_the_shape(backend, rng):
    """``np.empty((n, 2))`` is recorded like ``np.zeros``: its contents are unspecified, its shape is not."""
    def f(x):
        buf = np.empty((x.shape[0], 2), x.dtype)
        buf[:] = 1
        return x.sum(axis=1, keepdims=True) * buf

    traced = nt.trace(f, (rng.standard_normal((3, 4)).astype(np.float32),), backend=backend)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    np.testing.assert_allclose(traced(x), f(x), rtol=1e-6)
