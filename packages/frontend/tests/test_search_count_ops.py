"""Edge cases of the searching and counting ops (`searchsorted digitize isin argwhere unique bincount
histogram`): empty inputs, NaN, values outside a histogram's range, integer/bool/float32 data, and
the checks NumPy makes on the data (negative counts, non-monotonic bins), which a trace makes at every
call. One trace serves every call here: none re-traces."""

import warnings

import numpy as np
import numtrace as nt
import pytest


def _trace(fn, *inputs, backend):
    return nt.trace(fn, inputs, backend=backend)


def _flat(r):
    return [a for x in r for a in _flat(x)] if isinstance(r, tuple) else [np.asarray(r)]


def _same(got, expected):
    got, expected = _flat(got), _flat(expected)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape, (g, e)
        np.testing.assert_array_equal(g, e)


NAN = np.nan
# (function, example inputs, further calls' inputs): each call must equal NumPy's result exactly.
EDGES = {
    "unique_empty_and_nan": (
        lambda x: np.unique(x, return_index=True, return_inverse=True, return_counts=True),
        (np.array([1.0, NAN, 1.0, 2.0]),),
        [(np.zeros(0),), (np.array([NAN, NAN, 3.0]),), (np.array([NAN]),)]),
    "unique_nan_kept_apart": (
        lambda x: np.unique(x, return_counts=True, equal_nan=False),
        (np.array([1.0, NAN, NAN]),), [(np.array([NAN, NAN, NAN, 0.0]),), (np.zeros(0),)]),
    "unique_ints_bools": (
        lambda i, b: (np.unique(i, return_counts=True), np.unique(b, return_inverse=True)),
        (np.array([3, 1, 3], np.int32), np.array([True, False, True])),
        [(np.zeros(0, np.int32), np.zeros(0, bool)), (np.array([7] * 5, np.int32), np.ones(4, bool))]),
    "unique_rows_empty": (
        lambda x: np.unique(x, axis=0, return_index=True),
        (np.array([[1, 2], [1, 2], [0, 5]]),), [(np.zeros((0, 2), np.int64),), (np.ones((4, 2), np.int64),)]),
    "argwhere_empty_and_none": (
        lambda x: np.argwhere(x), (np.array([[0.0, 1.0], [2.0, 0.0]]),),
        [(np.zeros((0, 2)),), (np.zeros((3, 2)),), (np.array([[NAN, 0.0]]),)]),
    "bincount_empty_minlength": (
        lambda x: np.bincount(x, minlength=4), (np.array([0, 5, 5]),),
        [(np.zeros(0, np.int64),), (np.array([2, 2]),), (np.array([9]),)]),
    "bincount_bool_weights_f4": (
        lambda x, w: np.bincount(x, w), (np.array([True, False, True]), np.ones(3, np.float32)),
        [(np.zeros(0, bool), np.zeros(0, np.float32)), (np.ones(5, bool), np.arange(5, dtype=np.float32))]),
    "searchsorted_nan_empty": (
        lambda a, v: (np.searchsorted(a, v), np.searchsorted(a, v, side="right")),
        (np.array([0.0, 1.0, 1.0, NAN]), np.array([1.0, NAN, -np.inf])),
        [(np.zeros(0), np.array([1.0, NAN])), (np.array([NAN, NAN]), np.zeros(0)),
         (np.array([-1.0, 2.0, 2.0]), np.array([2.0, NAN, 0.0, 3.0]))]),
    "searchsorted_f4_in_i4": (
        lambda a, v: np.searchsorted(a, v), (np.array([0, 2, 4], np.int32), np.array([1.5, 4.0], np.float32)),
        [(np.zeros(0, np.int32), np.array([1.0], np.float32)), (np.arange(9, dtype=np.int32),
                                                                 np.array([8.5, -1.0, 3.0], np.float32))]),
    "digitize_nan_ties_empty": (
        lambda x, b: (np.digitize(x, b), np.digitize(x, b[::-1], right=True)),
        (np.array([0.5, NAN, 3.0]), np.array([0.0, 1.0, 2.0])),
        [(np.zeros(0), np.array([0.0, 1.0])), (np.array([NAN, -NAN]), np.zeros(0)),
         (np.array([1.0, 1.0]), np.array([1.0, 1.0, 1.0]))]),
    "isin_nan_bool_empty": (
        lambda x, t, b: (np.isin(x, t), np.isin(b, [True]), np.isin(t, x, invert=True)),
        (np.array([1.0, NAN, 2.0]), np.array([NAN, 2.0]), np.array([True, False])),
        [(np.zeros(0), np.array([1.0]), np.zeros(0, bool)),
         (np.array([NAN]), np.zeros(0), np.ones(3, bool))]),
    "histogram_outside_range_nan": (
        lambda x: np.histogram(x, bins=4, range=(-1.0, 1.0)),
        (np.array([-2.0, 0.5, 1.0, -1.0]),),
        [(np.array([NAN, 0.0, 7.0, -np.inf]),), (np.zeros(0),), (np.full(3, 5.0),)]),
    "histogram_range_from_data": (
        lambda x: np.histogram(x, bins=3), (np.array([0.0, 1.0, 2.5]),),
        [(np.zeros(0),), (np.full(4, 2.0),), (np.array([-1e300, 1e300]),)]),
    "histogram_ints_bools_f4": (
        lambda i, f: (np.histogram(i, 3), np.histogram(i > 0, 2, range=(0, 1)), np.histogram(f, 2)),
        (np.array([1, 5, 9], np.int32), np.array([0.5, 1.5], np.float32)),
        [(np.zeros(0, np.int32), np.zeros(0, np.float32)), (np.array([-4, 4], np.int32),
                                                            np.array([3.0, 3.0], np.float32))]),
    "histogram_edges_weights_density": (
        lambda x, e, w: (np.histogram(x, e, weights=w), np.histogram(x, e, density=True)),
        (np.array([0.1, 0.9, 2.0]), np.array([0.0, 0.5, 1.0]), np.array([1.0, 2.0, 3.0])),
        [(np.zeros(0), np.array([0.0, 3.0]), np.zeros(0)), (np.array([NAN, 1.0]), np.array([1.0]),
                                                             np.array([1.0, 4.0]))]),
}


@pytest.mark.triton
@pytest.mark.parametrize("name", list(EDGES))
def test_edge_inputs_match_numpy_without_retracing(name, backend):
    fn, example, calls = EDGES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # NumPy's own (a histogram of bools), when tracing
        traced = _trace(fn, *example, backend=backend)
    assert not any(n.op in ("prim.host_call", "prim.guard") for n in traced.graph.nodes), traced.graph
    for inputs in calls:
        with warnings.catch_warnings(record=True) as numpy_warned:
            warnings.simplefilter("always")
            expected = fn(*inputs)
        with warnings.catch_warnings(record=True) as traced_warned:
            warnings.simplefilter("always")
            got = traced(*inputs)
        assert [str(w.message) for w in traced_warned] == [str(w.message) for w in numpy_warned]
        _same(got, expected)
    assert traced.retraces == 0


@pytest.mark.parametrize(("fn", "good", "bad", "numpy_error"), [
    (lambda x: np.bincount(x), np.array([0, 2]), np.array([1, -1]), "must have no negative elements"),
    (lambda x, b: np.digitize(x, b), (np.array([0.5]), np.array([0.0, 1.0])), (np.array([0.5]),
                                                                               np.array([0.0, 1.0, 0.5])),
     "monotonically"),
    (lambda x, e: np.histogram(x, e), (np.array([0.5]), np.array([0.0, 1.0])), (np.array([0.5]),
                                                                                np.array([1.0, 0.0])),
     "monotonically"),
    (lambda x: np.histogram(x, 3), np.array([0.5, 1.0]), np.array([0.5, NAN]), "range of \\[nan, nan\\]"),
])
def test_numpy_checks_on_the_data_run_at_every_call(fn, good, bad, numpy_error, backend):
    good, bad = (v if isinstance(v, tuple) else (v,) for v in (good, bad))
    traced = _trace(fn, *good, backend=backend)
    with pytest.raises(ValueError, match=numpy_error):
        fn(*bad)
    with pytest.raises(ValueError, match=numpy_error):   # tracing runs NumPy: its own error
        _trace(fn, *bad, backend=backend)
    with pytest.raises(RuntimeError, match=f"While executing node np.*ValueError.*{numpy_error}"):
        traced(*bad)
    assert traced.retraces == 0


def test_bins_by_method_name_stay_a_host_call(backend):
    def f(x):
        return np.histogram(x, bins="auto")

    x = np.linspace(0.0, 1.0, 20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        traced = _trace(f, x, backend=backend)
        y = np.concatenate([x, x ** 3])
        _same(traced(y), f(y))
    assert "np.histogram" not in [n.op for n in traced.graph.nodes]


def test_each_data_dependent_node_has_its_own_size():
    def f(x):
        return np.unique(x), np.argwhere(x), np.bincount(x), x[x > 1]

    traced = nt.trace(f, (np.array([0, 3, 3, 1]),), backend="reference")
    sizes = [n.attrs["size"] for n in traced.graph.nodes if "size" in n.attrs]
    assert len(sizes) == 4 and len(set(sizes)) == 4, sizes
    x = np.array([5, 0, 2, 2, 2, 9])
    for g, e in zip(traced(x), f(x)):
        np.testing.assert_array_equal(g, e)
