"""Differential hunt over the common-subexpression pass, the ndarray identity of traced arrays and the
Python numbers a trace returns: each test is a program whose traced call must return what NumPy returns
(or refuse clearly), found by comparing against eager NumPy at other shapes and data."""

import numbers
import warnings

import numpy as np
import numtrace as nt
import pytest


def _traced(fn, args, backend):
    return nt.trace(fn, args, backend=backend, check_trace=False)


# -- a value NumPy gives as a scalar is that scalar's class to isinstance ---------------------------------

def generic_branch(x):
    return x * 2.0 if isinstance(x.sum(), np.generic) else x * 3.0


def number_branch(x):
    return x * 2.0 if isinstance(x[0, 0], numbers.Number) else x * 3.0


def isscalar_branch(x):
    return x * (2.0 if np.isscalar(x.max()) else 3.0)


def float_branch(x):
    return x * (2.0 if isinstance(x.mean(), float) else 3.0)   # np.float64 is a float


def integer_branch(x):
    n = (x > 0).sum()
    return x * (2.0 if isinstance(n, np.integer) and not isinstance(n, float) else 3.0)


@pytest.mark.parametrize("fn", [generic_branch, number_branch, isscalar_branch, float_branch, integer_branch],
                         ids=lambda f: f.__name__)
def test_scalar_results_are_numpy_scalars_to_isinstance(fn, backend):
    rng = np.random.default_rng(0)
    traced = _traced(fn, (rng.standard_normal((3, 4)),), backend)
    x = rng.standard_normal((5, 4))
    np.testing.assert_array_equal(traced(x), fn(x))


def first_item(x):
    return x[0]


def unstacked(x):
    return np.unstack(x)


def several_scalars(x):
    return x.sum(), (x != 0).any(), np.abs(x).astype(np.float32).max(), x[1:], x[-1] * 2, x


def _flat(obj):
    return [y for v in obj for y in _flat(v)] if isinstance(obj, tuple) else [obj]


@pytest.mark.triton
@pytest.mark.parametrize("fn", [first_item, unstacked, several_scalars], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.complex128])
def test_a_call_returns_numpys_scalars_where_numpy_does(backend, fn, dtype, tmp_path):
    """``x[0]`` of a 1-D array, ``np.unstack`` of one, a full reduction: NumPy gives scalars of the
    dtype's class (``np.float64``), not 0-d arrays; so does the trace at another size, and loaded."""
    traced = _traced(fn, (np.arange(1, 4).astype(dtype),), backend)
    traced.save(tmp_path / "t.nt")
    for call in (traced, nt.load(tmp_path / "t.nt", backend=backend)):
        x = np.arange(-2, 1 if fn is unstacked else 3).astype(dtype)   # (unstack's count is its size)
        got, want = _flat(call(x)), _flat(fn(x))
        assert [type(g) for g in got] == [type(w) for w in want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_scalar_class_is_the_dtypes_scalar_type():
    seen = {}

    def fn(x):
        s = x.astype(np.float32).sum()
        seen.setdefault("traced", nt.is_tracing())   # the first run is the traced one
        seen.setdefault("cls", s.__class__)
        seen.setdefault("array", isinstance(x, np.ndarray) and not isinstance(s, np.ndarray))
        return x * 1.0

    nt.trace(fn, (np.ones(3),), backend="reference")
    assert seen == {"traced": True, "cls": np.float32, "array": True}


@pytest.mark.xfail(strict=True, reason="type(x) of a traced array is its proxy class: code branching "
                   "on `type(x) is np.ndarray` takes the other branch; the trace returns x * 2.0, not x")
def test_type_is_ndarray_branch(backend):
    def fn(x):
        return x * (1.0 if type(x) is np.ndarray else 2.0)   # NumPy: x * 1.0

    x = np.arange(3.0)
    np.testing.assert_array_equal(_traced(fn, (x,), backend)(x), fn(x))


# -- a guard on a value the backend computes with other rounding than NumPy --------------------------------

def normalized(x):
    return x / float(x.sum())


def total(x):
    return float(x.sum())


@pytest.mark.parametrize("fn", [normalized, total], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_guarded_sum_matches_numpy_on_every_backend(fn, dtype, backend):
    # cpu sums 1000 elements in another order than NumPy's pairwise sum: a guard on float(x.sum()),
    # recorded from NumPy's value, must still hold on the inputs the trace was made from (and a call
    # with other data must return NumPy's answer, never raise a GuardError).
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1000).astype(dtype)
    with pytest.warns(nt.TracerWarning):
        traced = _traced(fn, (x,), backend)
    for a in (x, rng.standard_normal(1000).astype(dtype), x):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)   # re-tracing, then running eagerly
            got = traced(a.copy())
        want = fn(a.copy())
        assert type(got) is type(want)
        np.testing.assert_array_equal(got, want)


# -- multi-output ops with one section ------------------------------------------------------------------

def test_split_into_one_section(backend):
    def fn(x):
        return tuple(np.array_split(x * 2.0, 1, axis=1))

    x = np.ones((3, 4))
    got, = _traced(fn, (x,), backend)(x)
    assert got.shape == (3, 4)


def test_shape_arithmetic_with_a_traced_scalar_stays_recorded(backend):
    # A traced np.float64 says it is a float to isinstance: `n * s` must still reach the traced
    # scalar's own operator (recorded), not read it as a plain number (a guard on its data).
    def fn(x):
        return x * (x.shape[0] * x.sum()), x - (x.max() + x.shape[0]), x * (x.shape[0] - (x > 0).sum())

    traced = _traced(fn, (np.arange(1.0, 4.0),), backend)   # warnings are errors: no guard on data
    for x in (np.arange(2.0, 7.0), -np.arange(4.0)):
        for got, want in zip(traced(x), fn(x)):
            np.testing.assert_array_equal(got, want)
