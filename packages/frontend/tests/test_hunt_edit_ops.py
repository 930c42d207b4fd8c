"""Differential hunt on the shape-generic ops of issue 22 (piecewise, pad, insert/delete, nan quantiles,
fftfreq, select, meshgrid, sinc, i0): a trace called at other sizes returns what NumPy returns, or
re-traces, never raises where NumPy answers."""

import warnings

import numpy as np
import numtrace as nt
import pytest

_W3 = np.arange(3.0)

# Functions whose recorded ops are all elementwise/movement/creation yet raise (or give a value an
# empty piece cannot take) when called on an empty piece, which NumPy never does.
_RAISE_ON_EMPTY = {
    "take": lambda v: np.take(v, 0) * np.ones_like(v),
    "delete": lambda v: np.insert(np.delete(v, 0), 0, 1.0),
    "insert_past_start": lambda v: np.insert(v, 1, 5.0)[1:],
    "broadcast_with_constant": lambda v: v + _W3,
    "broadcast_to": lambda v: np.broadcast_to(v, (3,)),
    "reshape": lambda v: np.reshape(v, (3,)),
    "take_along_axis": lambda v: np.take_along_axis(v, np.zeros(1, np.intp), 0) + v,
    "constant_of_three": lambda v: np.ones(3),
}


@pytest.mark.parametrize("name", sorted(_RAISE_ON_EMPTY))
def test_piecewise_function_raising_on_an_empty_piece_is_skipped_there(backend, name):
    func = _RAISE_ON_EMPTY[name]

    def f(x):
        return np.piecewise(x, [x < 0], [func, lambda v: v])

    traced = nt.trace(f, (np.array([-1.0, -2.0, -3.0, 4.0]),), backend=backend, check_trace=False)
    for x in (np.array([1.0, 2.0]), np.array([-1.0, -2.0, -3.0, 5.0, 6.0]), np.zeros(0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)   # a re-trace is allowed
            np.testing.assert_array_equal(traced(x), f(x))


@pytest.mark.parametrize("name", sorted(_RAISE_ON_EMPTY))
def test_piecewise_traced_on_an_empty_piece(backend, name):
    func = _RAISE_ON_EMPTY[name]

    def f(x):
        return np.piecewise(x, [x < 0], [func, lambda v: v])

    x = np.array([1.0, 2.0, 3.0])
    traced = nt.trace(f, (x,), backend=backend, check_trace=False)
    np.testing.assert_array_equal(traced(x), f(x))


def test_piecewise_single_traced_condition_array(backend):
    def f(x):
        return np.piecewise(x, x > 0, [lambda v: v + 1])

    traced = nt.trace(f, (np.array([-1.0, 2.0, 3.0]),), backend=backend)
    for x in (np.array([1.0, -2.0]), np.arange(-3.0, 4.0)):   # one trace: no guard on the length
        np.testing.assert_array_equal(traced(x), f(x))


def _doubling(c):
    def in_place_out(v):
        np.multiply(c, 2, out=c)
        return v * 2

    def in_place_setitem(v):
        c[0] += 1
        return v * 2

    return {"out": in_place_out, "setitem": in_place_setitem}


@pytest.mark.parametrize("form", ["out", "setitem"])
def test_piecewise_function_writing_in_place_runs_once(backend, form):
    def f(x):
        c = np.ones_like(x)
        return np.piecewise(x, [x < 0], [_doubling(c)[form], lambda v: v]), c

    traced = nt.trace(f, (np.array([-1.0, 2.0, -3.0]),), backend=backend, check_trace=False)
    for x in (np.array([-1.0, 2.0, -3.0]), np.array([-4.0, 2.0, 1.0, -3.0, 5.0]), np.array([1.0, 2.0])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)
            for g, e in zip(traced(x), f(x)):
                np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("func", [np.nanquantile, np.quantile])
@pytest.mark.parametrize("dtype", ["f2", "f4"])
@pytest.mark.parametrize("method", ["linear", "hazen", "lower"])
def test_quantile_of_narrow_floats_with_a_sequence_q_has_numpys_dtype(backend, func, dtype, method):
    def f(x):   # a sequence q is a float64 array to NumPy: the interpolating methods promote to it
        return func(x, [0.25, 0.5], axis=1, method=method)

    x = np.arange(12.0).reshape(3, 4).astype(dtype)
    traced = nt.trace(f, (x,), backend=backend)
    for a in (x, np.arange(35.0).reshape(7, 5).astype(dtype)):
        got, expected = traced(a), f(a)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("q", [np.float64(0.3), np.float32(0.3), np.array(0.3)], ids=["f8", "f4", "0d"])
def test_quantile_of_float16_with_a_numpy_scalar_q(q):
    def f(x):
        return np.nanquantile(x, q, axis=1)

    x = np.arange(12.0).reshape(3, 4).astype("f2")
    traced = nt.trace(f, (x,), backend="reference")
    assert traced(x).dtype == f(x).dtype
