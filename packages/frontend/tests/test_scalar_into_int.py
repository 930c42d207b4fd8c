"""A NumPy scalar stored into a signed integer array by a basic key goes through a Python int: NumPy
raises where it does not fit (OverflowError for inf or out of range, ValueError for NaN), while an
array value or a key of index arrays casts. A traced scalar that fitted while tracing must not be
stored wrapped at a call where NumPy raises."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest


def set_first(a, b):
    a[0] = b.sum()
    return a


def set_tail(a, b):
    a[1:] = b[0]
    return a


def set_masked(a, b):
    a[a > 0] = b.sum()   # an index array: NumPy casts (a RuntimeWarning for inf), never raises
    return a


def _numpy(fn, a, b):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(a.copy(), b.copy())
    except (OverflowError, ValueError) as e:
        return type(e)


@pytest.mark.parametrize("fn", [set_first, set_tail])
@pytest.mark.parametrize(("target", "source", "bad", "error"), [
    ("i8", "f8", np.inf, OverflowError), ("i8", "f8", np.nan, ValueError),
    ("i4", "f4", -np.inf, OverflowError), ("i8", "f8", 2.0**63, OverflowError),
    ("i1", "f8", 128.0, OverflowError), ("i1", "f8", -129.0, OverflowError),
    ("i2", "f2", np.inf, OverflowError), ("i1", "i8", 300, OverflowError), ("i4", "u8", 2**40, OverflowError),
])
def test_scalar_that_no_longer_fits_raises(backend, fn, target, source, bad, error):
    a = np.arange(4, dtype=target)
    traced = nt.trace(fn, (a, np.ones(3, source)), backend=backend)
    good = np.array([1, 0, 0], source)
    np.testing.assert_array_equal(traced(a.copy(), good), fn(a.copy(), good))
    b = np.array([bad, 0, 0], source)
    assert _numpy(fn, a, b) is error
    with pytest.warns(nt.TracerWarning, match="re-tracing"), pytest.raises(error):
        traced(a.copy(), b)   # the guard breaks: traced again, NumPy's own call raises


@pytest.mark.parametrize(("target", "value"), [("i1", 127.9), ("i1", -128.9), ("i8", -2.0**63)])
def test_scalar_at_the_edge_still_stored(backend, target, value):
    a = np.arange(4, dtype=target)
    traced = nt.trace(set_first, (a, np.ones(3)), backend=backend)
    b = np.array([value, 0, 0])
    np.testing.assert_array_equal(traced(a.copy(), b), set_first(a.copy(), b))


def test_unsigned_target_and_index_arrays_cast(backend):
    """Where NumPy casts (an unsigned target, an index-array key) a call with inf is not refused."""
    a = np.arange(4, dtype=np.int64)
    traced = nt.trace(set_masked, (a, np.ones(3)), backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        traced(a.copy(), np.array([np.inf, 0, 0]))
