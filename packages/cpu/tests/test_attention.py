"""Causal attention as benchmarks/realistic.py writes it: its mask (fixed by the shape) folded into a
constant, its softmax's -inf lanes through the vector exp, and its float64 softmax @ float32 values
widened to a float64 product on numtrace's kernels; values, NaN and inf as NumPy's."""

import numpy as np
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import Graph
from numtrace_ir.types import TensorType

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # special values on purpose


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _attention_graph(t, d, k):
    """scores = q @ k.T / sqrt(d); where(triu(ones((t, t)), k), -inf, scores); softmax; @ v."""
    g = Graph()
    f32 = TensorType(np.dtype(np.float32), (t, d))
    q, kk, v = (g.add_input(name, f32) for name in ("q", "k", "v"))
    scale = _op(g, "np.sqrt", _op(g, "prim.Constant", value=d))
    s = _op(g, "np.divide", _op(g, "np.matmul", q, _op(g, "np.transpose", kk, axes=None)), scale)
    ones = _op(g, "prim.full", shape=(t, t), fill_value=1, dtype=np.dtype(bool))
    s = _op(g, "np.where", _op(g, "np.triu", ones, k=k), _op(g, "prim.Constant", value=-np.inf), s)
    s = _op(g, "np.subtract", s, _op(g, "np.max", s, axis=-1, keepdims=True))
    p = _op(g, "np.exp", s)
    p = _op(g, "np.divide", p, _op(g, "np.sum", p, axis=-1, keepdims=True))
    g.set_outputs([_op(g, "np.matmul", p, v)])
    return g, [f32] * 3


def _numpy(q, k, v, mask_k):
    t, d = q.shape
    with np.errstate(invalid="ignore"):
        s = np.where(np.triu(np.ones((t, t), dtype=bool), k=mask_k), -np.inf, q @ k.T / np.sqrt(d))
        p = np.exp(s - s.max(axis=-1, keepdims=True))
        return (p / p.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("t", [1, 5, 40])
@pytest.mark.parametrize("mask_k", [1, 0])   # 0 masks all of row 0: a row of NaN
def test_causal_attention_matches_numpy(t, mask_k):
    g, types = _attention_graph(t, 8, mask_k)
    exe = compile_graph(g, types)
    stats = exe.stats()
    assert stats["folded_constants"] == 2 and stats["products_widened"] == 1, stats   # mask, sqrt(d)
    assert stats["fallbacks"] == 0 and not {"np.triu", "prim.full"} & set(stats["numpy_into"]), stats
    rng = np.random.default_rng(t)
    q, k, v = (rng.standard_normal((t, 8)).astype(np.float32) * 3 for _ in range(3))
    want = _numpy(q, k, v, mask_k)
    (got,) = exe(q, k, v)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9, equal_nan=True)
    assert np.isnan(got[0]).all() == (mask_k == 0)


def test_widened_product_keeps_numpys_nan_and_inf():
    """The masked weights are exact zeros: 0 * inf in v gives NaN in every row, inf * a positive weight
    inf, as NumPy's float64 matmul of the cast values does."""
    t = 40
    g, types = _attention_graph(t, 8, 1)
    exe = compile_graph(g, types)
    assert exe.stats()["packed_runtime"] == 2
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((t, 8)).astype(np.float32) for _ in range(3))
    v[0, 0], v[t - 1, 1], v[3, 2] = np.inf, -np.inf, np.nan
    want = _numpy(q, k, v, 1)
    (got,) = exe(q, k, v)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(want) & (want > 0))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9, equal_nan=True)
