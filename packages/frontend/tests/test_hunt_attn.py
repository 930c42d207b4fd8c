"""Differential checks of the attention rewrites against eager NumPy: constants folded at compile time
(outputs fresh at every call, whatever the caller wrote into the last ones; in-place writes after the
fold), float32 @ float64 products widened to float64, and float64 exp at and below -746 (+0, as
NumPy's, in the vector loop and its tail)."""

from __future__ import annotations

import numpy as np
import numtrace as nt
import pytest

pytest.importorskip("numtrace_cpu")


def mask_returned(x):
    n = x.shape[0]
    m = np.where(np.triu(np.ones((n, n), dtype=bool), 1), -np.inf, 0.0)
    return m, x + m


def mask_written_after(x):
    n = x.shape[0]
    m = np.tril(np.ones((n, n)))
    m[:, 0] = x
    m *= 2.0
    return m


def argument_set_to_a_fold(a):
    n = a.shape[0]
    a[...] = np.triu(np.ones((n, n))) * 3.0
    return a.sum()


@pytest.mark.parametrize("fn", [mask_returned, mask_written_after, argument_set_to_a_fold])
def test_folded_constants_are_fresh_at_every_call(fn):
    shape = (lambda n: (n, n)) if fn is argument_set_to_a_fold else (lambda n: (n,))
    traced = nt.trace(fn, (np.ones(shape(4)),), backend="cpu")
    for n in (4, 4, 5, 4):
        x = np.full(shape(n), 0.5)
        x.flat[0] = -1.0
        expected, mine = x.copy(), x.copy()
        want, got = fn(expected), traced(mine)
        np.testing.assert_array_equal(mine, expected)
        for w, g in zip(*((want, got) if isinstance(want, tuple) else ((want,), (got,)))):
            np.testing.assert_array_equal(g, w)
            if isinstance(g, np.ndarray) and g.ndim:
                g[...] = 99.0   # the caller owns its outputs: the next call must not see this


PRODUCT_SHAPES = [((5,), (5,)), ((3, 5), (5,)), ((5,), (5, 4)), ((3, 5), (5, 4)), ((2, 3, 5), (2, 5, 4)),
                  ((2, 64), (64, 40)), ((0, 5), (5, 3))]


@pytest.mark.parametrize(("a_shape", "b_shape"), PRODUCT_SHAPES)
@pytest.mark.parametrize(("da", "db"), [("f4", "f8"), ("f8", "f4"), ("f2", "f8"), ("i8", "f4"),
                                      ("f4", "c16")])
@pytest.mark.parametrize("op", [np.matmul, np.dot])
def test_mixed_products_as_numpy(a_shape, b_shape, da, db, op):
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=a_shape).astype(da), rng.normal(size=b_shape).astype(db)
    if a.size:
        a.flat[0] = np.nan if da[0] == "f" else 0
    want = op(a, b)
    got = nt.trace(op, (a, b), backend="cpu")(a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)   # every result is a float64 product


@pytest.mark.parametrize("n", [1, 7, 8, 9, 33])
def test_exp_at_and_below_minus_746_is_plus_zero(n):
    traced = nt.trace(np.exp, (np.zeros(n),), backend="cpu")
    for v in (-np.inf, -746.0, np.nextafter(-746.0, 0.0), np.nextafter(-746.0, -np.inf),
              -745.1332191019412, -745.1332191019411, -745.0, -1e308, np.nan, -0.0):
        for pos in range(min(n, 9)):
            x = np.full(n, -1.0)
            x[pos] = v
            got, want = traced(x), np.exp(x)
            if v <= -745.0 or np.isnan(v) or v == 0:   # results NumPy gives exactly on every ISA
                assert got[pos].tobytes() == want[pos].tobytes() or np.isnan(want[pos]) and np.isnan(got[pos])
    x = np.linspace(-760.0, -740.0, 20001)   # the subnormal results: a few ulps of the smallest normal
    got, want = nt.trace(np.exp, (x,), backend="cpu")(x), np.exp(x)
    np.testing.assert_array_equal(got == 0, want == 0)
    assert np.abs(got.view(np.int64) - want.view(np.int64)).max() <= 1
