"""Hunted through the programs users write (benchmarks/realistic.py, examples/): traced at one size,
called at others and with other data, layouts and special values, against eager NumPy; each a minimal
program that a traced call answered otherwise than NumPy, kept with the passing checks that cover it."""

from __future__ import annotations

import numpy as np
import numtrace as nt
import pytest

_SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, 2.0, -3.0, 0.7])


def _same(got, want) -> bool:
    """Same type, dtype, shape and bits (NaNs by their bits too)."""
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    return len(got) == len(want) and all(
        type(g) is type(w) and np.asarray(g).dtype == np.asarray(w).dtype
        and np.asarray(g).shape == np.asarray(w).shape
        and np.asarray(g).tobytes() == np.asarray(w).tobytes() for g, w in zip(got, want))


def _clean_in_place(x):
    np.nan_to_num(x, copy=False)
    np.clip(x, -1.0, 1.0, out=x)


def _clean_then_read(x):
    np.nan_to_num(x, copy=False, nan=-1.0, posinf=9.0)
    return x * 0.5


def _clean_returned(x):
    y = np.nan_to_num(x, False)
    return y + 0.0, y


@pytest.mark.parametrize("fn", [_clean_in_place, _clean_then_read, _clean_returned])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_to_num_without_copy_writes_into_its_argument(backend, fn, dtype):
    """np.nan_to_num(x, copy=False) updates x in place; the trace recorded it as a copy, so the caller's
    array kept its NaN and infinities and a later read of x saw them (a silent wrong answer)."""
    traced = nt.trace(fn, (np.linspace(-2, 2, 6).astype(dtype),), backend=backend)
    for x in (_SPECIAL.astype(dtype), np.tile(_SPECIAL, 3)[::-2].astype(dtype)):
        mine, theirs = x.copy(), x.copy()
        assert _same(traced(mine), fn(theirs))
        assert _same(mine, theirs)


def test_nan_to_num_without_copy_returns_its_argument(backend):
    """NumPy returns the argument itself (a 0-d one as a scalar), so a write into the result reaches it."""
    def fn(x, s):
        y = np.nan_to_num(x, copy=False)
        y[0] = 5.0
        return x + 1.0, np.nan_to_num(s, copy=False)

    traced = nt.trace(fn, (np.ones(3), np.array(2.0)), backend=backend)
    for args in ((np.array([np.nan, np.inf, 1.0]), np.array(np.nan)), (np.arange(4.0), np.array(-np.inf))):
        mine, theirs = tuple(a.copy() for a in args), tuple(a.copy() for a in args)
        assert _same(traced(*mine), fn(*theirs))
        assert all(_same(m, t) for m, t in zip(mine, theirs))


@pytest.mark.parametrize("fn", [lambda x: np.argsort(x), lambda x: x.argsort(axis=0),
                                lambda x: np.argsort(x, axis=None), lambda x: x[np.argsort(x[:, 0])][-3:]],
                         ids=["default", "axis0", "flat", "top3-rows"])
def test_argsort_orders_ties_as_numpy(backend, fn):
    """np.argsort's default kind (an introsort) is deterministic; the trace ran a stable sort, so the
    indices of equal values (labels, NaNs) came out in another order than NumPy's."""
    rng = np.random.default_rng(0)
    traced = nt.trace(fn, (rng.random((10, 3)),), backend=backend, check_trace=False)
    for x in (rng.integers(0, 3, (17, 3)).astype(float), rng.integers(0, 2, (100, 3)) * 0.5,
              np.where(rng.random((40, 3)) < 0.5, np.nan, 1.0)):
        assert _same(traced(x), fn(x))


@pytest.mark.filterwarnings("ignore::numtrace.TracerWarning")   # a host call, then a guarded value
@pytest.mark.parametrize("fn", [lambda x: x * (np.allclose(x, 1.0) + 1), lambda x: (x + 0, np.array_equal(x, x[::-1]))],
                         ids=["allclose-plus-one", "array_equal-returned"])
def test_a_host_call_returning_a_python_number_promotes_as_numpy(backend, fn):
    """np.allclose (a host call) returns a Python bool, a weak scalar to NumPy's promotion; the trace held it
    as a 0-d bool array, so `x32 * (np.allclose(...) + 1)` came out float64, and the result was an
    ndarray where NumPy returns a bool. The value now leaves the graph, guarded like bool(x)."""
    traced = nt.trace(fn, (np.arange(1.0, 5.0, dtype=np.float32),), backend=backend, check_trace=False)
    for x in (np.arange(1.0, 5.0, dtype=np.float32), np.ones(4, np.float32), np.ones(3, np.float32)):
        assert _same(traced(x), fn(x))
