"""Generated kernels keep the interpreter's (and NumPy's) NaN bits where a differential hunt of
(300, 7) float programs with NaN-heavy inputs found them apart: a column-mode sum or mean keeps
each column's first NaN, and hypot of a negated NaN is that NaN, not its negation."""

import numpy as np
import pytest
from numtrace_ir import Graph, testing
from numtrace_ir.testing.clip_cases import same_bits
from test_codegen import _cache, _compiled  # noqa: F401  (the kernel cache fixture, autouse)


def _nans(rng, dtype, shape, share):
    """Quarter-integers with a share of NaNs of both signs and random payloads."""
    x = (rng.integers(-8, 9, size=shape) / 4).astype(dtype)
    u = np.dtype(f"u{np.dtype(dtype).itemsize}")
    bits = 8 * u.itemsize
    quiet = (0x7FF8 << (bits - 16)) if bits == 64 else (0x7FC0 << (bits - 16))
    payload = rng.integers(1, 1 << 16, size=shape).astype(u)
    sign = (rng.random(shape) < 0.5).astype(u) << u.type(bits - 1)
    nan = (u.type(quiet) | payload | sign).view(dtype)
    return np.where(rng.random(shape) < share, nan, x)


@pytest.mark.parametrize("share", [0.02, 0.9])
@pytest.mark.parametrize("ncol", [3, 7, 8])   # unrolled column loops (3, 8) and the general one
@pytest.mark.parametrize("name", ["np.sum", "np.mean"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_column_sums_keep_each_columns_first_nan(dtype, name, ncol, share):
    """``x.mean(axis=0)`` of a (300, ncol) x beside an elementwise output (so the pass runs in column
    mode, not folded in place): NumPy adds the rows in order, so a column's sum is its first NaN."""
    rng = np.random.default_rng(7)
    x = _nans(rng, dtype, (300, ncol), share)
    g = Graph()
    t = testing.type_of(x)
    xv = g.add_input("x", t)
    red = g.create_node(name, [xv], attrs={"axis": 0, "keepdims": True}).outputs[0]
    g.set_outputs([red, g.create_node("np.negative", [xv]).outputs[0]])
    gen, interp = _compiled(g, [t], "sync"), _compiled(g, [t], "off")
    want = getattr(np, name[3:])(x, axis=0, keepdims=True)
    assert gen.stats()["generated_kernels"] == 1
    got, expected = gen(x)[0], interp(x)[0]
    assert gen.stats()["generated_column_runs"] == 1
    assert same_bits(expected, want).all()
    assert same_bits(got, want).all(), f"{got.view(f'u{got.itemsize}')} {want.view(f'u{got.itemsize}')}"


@pytest.mark.parametrize("mode", ["off", "sync"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_hypot_of_a_negated_nan_is_that_nan(dtype, mode):
    """``np.hypot(-1.25, -x)``: GCC folds hypot(a, -b) into hypot(a, b), which for a NaN b returns
    b, not -b (NumPy's)."""
    x = _nans(np.random.default_rng(3), dtype, (300, 7), 0.5)
    g = Graph()
    t = testing.type_of(x)
    xv = g.add_input("x", t)
    c = g.create_node("prim.Constant", [], attrs={"value": -1.25}).output
    neg = g.create_node("np.negative", [xv]).outputs[0]
    g.set_outputs(g.create_node("np.hypot", [c, neg]).outputs)
    (got,) = _compiled(g, [t], mode)(x)
    want = np.hypot(dtype(-1.25), -x)
    assert same_bits(got, want).all()
