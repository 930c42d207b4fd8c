"""In-place assignments on the cpu backend: ``out[1:-1] = expr`` (and ``u[1:-1, 1:-1] = ...``), where
``out`` is an array the program computed, has the pass computing ``expr`` write straight into ``out``'s
slice: no buffer for ``expr`` and no copy. Where ``expr`` reads ``out`` itself, is returned, or the
slice is not of its exact shape and dtype, the assignment copies as NumPy does."""

from __future__ import annotations

import numpy as np
import numtrace as nt
import pytest

pytest.importorskip("numtrace_cpu")


def stencil(u):
    lap = u[:-2] - 2.0 * u[1:-1] + u[2:]
    out = u.copy()
    out[1:-1] = u[1:-1] + 0.1 * lap
    return out


def jacobi_into(u):
    out = u * 1.0
    out[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return out


def strided_then_read(u):
    a = u * 3.0
    a[1:-1:2, ::2] = np.sqrt(np.abs(u[1:-1:2, ::2])) - 0.0
    return a.max(axis=1), a


def row_into(u):
    a = u + 0.0
    a[0] = u[1] * 2.0
    return a


def reads_itself(u):   # expr reads out: computing it into out would read values already replaced
    out = u * 1.0
    out[1:-1] = out[:-2] + out[2:]
    return out


def value_returned(u):
    out = u * 2.0
    v = u[1:] - 1.0
    out[:-1] = v
    return out, v


def cast_on_assign(u):
    out = u * 2.0
    out[1:] = (u[1:] > 0.0).astype(np.float32)
    return out


def broadcast_on_assign(u):
    out = u * 2.0
    out[1:] = u[0] + 1.0
    return out


CASES = [(stencil, (50,), 1), (jacobi_into, (9, 12), 1), (strided_then_read, (7, 6), 1),
         (row_into, (4, 5), 1),
         (reads_itself, (40,), 0), (value_returned, (40,), 0), (cast_on_assign, (40,), 0),
         (broadcast_on_assign, (40,), 0)]


@pytest.mark.parametrize(("f", "shape", "in_place"), CASES, ids=[c[0].__name__ for c in CASES])
def test_assignment_computed_in_place(f, shape, in_place):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    x.flat[::7] = -0.0
    traced = nt.trace(f, (x,), backend="cpu")
    for y in (x, rng.standard_normal(shape), rng.standard_normal((shape[0] + 3, *shape[1:]))):
        want, got = f(y.copy()), traced(y)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
            assert np.array_equal(np.signbit(g), np.signbit(w))
    for s in traced.stats()["signatures"].values():
        assert s["assigned_in_place"] == in_place
