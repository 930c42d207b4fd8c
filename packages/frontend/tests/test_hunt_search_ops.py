"""Wrong answers and unclear errors found by a differential hunt over the searching and counting ops
(`searchsorted digitize isin argwhere unique bincount histogram`): each trace is called with new
inputs and must give NumPy's answer (values, dtype, shape) or raise as NumPy does."""

import numpy as np
import numtrace as nt
import pytest


def _same(got, expected):
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert (g.dtype, g.shape) == (e.dtype, e.shape), (g, e)
        np.testing.assert_array_equal(g, e)


def _edges_written_after(x):
    e = np.linspace(-1.0, 1.0, 3)
    h, e2 = np.histogram(x, e)   # NumPy's bin_edges is `e` itself
    e[0] = -100.0
    return h, e2


def _constant_edges_written_after(x):
    e = np.array([-1.0, 0.0, 1.0])
    e2 = np.histogram(x, e)[1]
    e[1] = 0.5
    return e2 + 0


def _input_edges_written_after(x, e):
    h, e2 = np.histogram(x, e)
    e[0] = -100.0
    return h, e2


def _returned_edges_written(x, e):
    h, e2 = np.histogram(x, e)
    e2 += 1.0
    return h, e


@pytest.mark.parametrize("fn", [_edges_written_after, _constant_edges_written_after,
                                _input_edges_written_after, _returned_edges_written])
def test_histogram_bin_edges_are_the_edges_array_given(fn, backend, rng):
    """NumPy returns an array of edges as bin_edges itself: a write into either is seen in the other."""
    def inputs(n):
        x = rng.standard_normal(n)
        return (x,) if fn.__code__.co_argcount == 1 else (x, np.array([-1.0, 0.0, 0.5, 1.0]))

    example = inputs(5)
    traced = nt.trace(fn, tuple(np.copy(a) for a in example), backend=backend)
    for args in (example, inputs(9), inputs(0)):
        expected = fn(*(np.copy(a) for a in args))
        _same(traced(*(np.copy(a) for a in args)), expected)


def _weighted_masked(x, w):
    keep = x > 0
    return np.bincount(x[keep], w[keep], minlength=3)


def _weighted(x, w):
    return np.bincount(x, w)


@pytest.mark.parametrize(("fn", "example", "call"), [
    (_weighted_masked, (np.array([1, 2]), np.ones(2)), (np.array([0, 0]), np.ones(2))),   # none kept: intp
    (_weighted_masked, (np.array([0, 0]), np.ones(2)), (np.array([1, 2]), np.ones(2))),   # and back
    (_weighted, (np.array([True, False]), np.ones(2, np.float32)),
     (np.zeros(0, bool), np.zeros(0, np.float32))),
    (_weighted, (np.zeros(0, np.intp), np.zeros(0)), (np.array([3]), np.ones(1))),
])
def test_bincount_weights_of_an_empty_x(fn, example, call, backend):
    """NumPy's np.bincount returns intp zeros for an empty x even with weights (float64 otherwise): with
    x's length known only at run time, that dtype comes from the data: a call that gives the other dtype
    breaks a guard (the function is traced again), once."""
    traced = nt.trace(fn, example, backend=backend)
    with pytest.warns(nt.TracerWarning, match="re-tracing.*np.bincount's result dtype"):
        _same(traced(*call), fn(*call))
    for args in (example, call):
        _same(traced(*args), fn(*args))
    assert traced.retraces == 1


def test_code_of_a_bincount_of_an_empty_weighted_x_runs():
    """`.code` calls np.bincount with NumPy's own parameters: NumPy decides the dtype there again."""
    from numtrace import codegen

    x, w = np.zeros(0, np.intp), np.zeros(0)
    traced = nt.trace(lambda x, w: np.bincount(x, w, minlength=2), (x, w), backend="reference")
    namespace = {"np": np, "op": codegen.op, "CONSTANTS": traced.constants}
    exec(traced.code, namespace)
    _same(namespace["traced"](x, w), np.bincount(x, w, minlength=2))
