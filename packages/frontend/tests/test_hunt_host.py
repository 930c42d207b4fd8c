"""Differential hunt for silent wrong answers through host calls and guards on data: a function is traced
at one input and called at other values and shapes; every call must return, and leave in the caller's
arrays, what eager NumPy does (or raise)."""

import warnings

import numpy as np
import numtrace as nt
import pytest


def _trace(f, *args, backend="reference"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return nt.trace(f, tuple(np.copy(a) for a in args), check_trace=False, backend=backend)


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    if want is None:
        assert got is None
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    assert got.tobytes() == want.tobytes(), (got, want)  # bit for bit: NaN and -0.0 included


def _agree(traced, f, *args):
    """One call: the result and the caller's arrays afterwards equal eager NumPy's, or the call raises."""
    mine, theirs = [np.copy(a) for a in args], [np.copy(a) for a in args]
    try:
        want = f(*theirs)
    except Exception:  # NumPy refuses these inputs: the trace may refuse them as it likes
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        got = traced(*mine)
    _same(got, want)
    for a, b in zip(mine, theirs):
        _same(a, b)
    return True


# -- regressions ------------------------------------------------------------------------------------


def filled_like_shape(x):
    a = np.zeros(x.shape)
    np.copyto(a, 2.0)  # a scalar broadcast into an array whose shape follows x
    return a


def full_not_intercepted(x):
    return _FULL["full"](x.shape, 2.0)  # NumPy's own np.full: its empty() is intercepted, its copyto not


_FULL = {"full": np.full}


def broadcast_shapes(x):
    return np.ones(np.broadcast_shapes(x.shape, (1,)))  # np.empty(shape, dtype=[]): no traced array


def text_of_data(x):
    return x + float(f"{x[0]}") + len(str(x[1:]))


@pytest.mark.parametrize("f", [filled_like_shape, full_not_intercepted, broadcast_shapes, text_of_data])
def test_shape_or_data_leaving_the_graph_is_guarded(f, backend):
    traced = _trace(f, np.arange(3.0), backend=backend)
    for x in (np.arange(5.0) + 1, np.arange(3.0) + 10, np.arange(3.0), np.ones(1)):
        _agree(traced, f, x)


def test_copyto_of_a_scalar_into_an_argument_follows_its_shape(backend):
    def f(x):
        np.copyto(x, 2.0)

    traced = _trace(f, np.arange(3.0), backend=backend)
    for x in (np.arange(5.0), np.zeros(1)):
        _agree(traced, f, x)


@pytest.mark.xfail(strict=True, reason="repr() of a traced array is its own text (TracedArray(...)), not "
                   "guarded: code computing with it reads the tracing-time data and a different text")
def test_repr_of_data():
    def f(x):
        return x + len(repr(x[0]))

    traced = _trace(f, np.arange(3.0))
    _agree(traced, f, np.arange(3.0) + 10)
