"""Differential checks against eager NumPy of dead code's shape checks (``prim.check``), dtype
arguments, einsum's attributes and layout-following conversions (``np.require``), at shapes other than
the traced ones: each case is one NumPy answered or refused differently from a trace."""

import os
import warnings

import numpy as np
import numtrace as nt
import pytest


def _call(fn, *args):
    """``fn``'s answer, or its error; RuntimeWarnings off (NumPy's empty reductions)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", nt.TracerWarning)   # a call that traces again
        try:
            return fn(*(np.copy(a) for a in args)), None
        except Exception as exc:   # NumPy's error, whatever its class
            return None, exc


def _assert_like_numpy(traced, fn, *args):
    """The trace answers as NumPy does, or raises NumPy's error: of its class, or a backend's report of
    it (a RuntimeError that says which node raised it and quotes it)."""
    want, error = _call(fn, *args)
    got, got_error = _call(traced, *args)
    if error is not None:
        assert got_error is not None, f"NumPy raised {error!r}, the trace answered"
        assert isinstance(got_error, type(error)) or (
            isinstance(got_error, RuntimeError) and str(error) in str(got_error)), (error, got_error)
        return
    assert got_error is None, got_error
    np.testing.assert_array_equal(got, want)
    assert got.dtype == want.dtype


def _saved(traced, tmp_path, backend):
    path = os.fspath(tmp_path / "t.nt")
    traced.save(path)
    return nt.load(path, backend=backend)


# -- dead code whose NumPy call reads its data (an index array, a singular matrix, an all-NaN slice) ---

_READS_DATA = {
    "fancy_index": (lambda x, i: (x[i], x + 1.0)[1], (np.ones(5), np.arange(3)),
                    [(np.ones(2), np.arange(3)), (np.ones(3), np.array([0, -4, 1]))]),
    "take": (lambda x, i: (np.take(x, i), x * 2.0)[1], (np.ones(5), np.arange(3)),
             [(np.ones(2), np.arange(3))]),
    "take_a_number": (lambda x, i: (np.take(x, 2, axis=-1), x + i)[1], (np.ones((3, 3)), np.ones(3)),
                      [(np.ones((2, 2)), np.ones(2)), (np.ones((2, 0)), np.ones(0))]),
    "inv": (lambda x, i: (np.linalg.inv(x), x + i)[1], (np.eye(3), np.ones(3)),
            [(np.ones((3, 3)), np.ones(3)), (np.eye(3), np.ones(3))]),
    "nanargmax": (lambda x, i: (np.nanargmax(x), x - i)[1], (np.ones(3), np.ones(3)),
                  [(np.full(3, np.nan), np.ones(3))]),
    "integer_power": (lambda x, i: (i ** i, x + 1.0)[1], (np.ones(3), np.arange(3)),
                      [(np.ones(3), np.array([1, -2, 3]))]),
}


@pytest.mark.triton
@pytest.mark.parametrize("load", [False, True], ids=["traced", "loaded"])
@pytest.mark.parametrize("name", sorted(_READS_DATA))
def test_dead_code_raises_where_numpy_reads_data_and_raises(backend, name, load, tmp_path):
    fn, example, calls = _READS_DATA[name]
    traced = nt.trace(fn, example, backend=backend, check_trace=False)
    if load:
        traced = _saved(traced, tmp_path, backend)
    for args in calls:
        _assert_like_numpy(traced, fn, *args)


# -- dead code of sizes the program computes ------------------------------------------------------------

_COMPUTED_SIZES = {
    "index": (lambda x: (x[x.shape[0] - 3], x + 1.0)[1], (np.ones(5),), [(np.ones(0),), (np.ones(3),)]),
    "reshape": (lambda x: (x.reshape(x.shape[0] // 2, 2), x + 1.0)[1], (np.ones(6),),
                [(np.ones(5),), (np.ones(4),), (np.ones(0),)]),
    "slice_then_max": (lambda x: (x[: x.shape[0] - 2].max(), x + 1.0)[1], (np.ones(5),),
                       [(np.ones(2),), (np.ones(3),)]),
}


@pytest.mark.triton
@pytest.mark.parametrize("load", [False, True], ids=["traced", "loaded"])
@pytest.mark.parametrize("name", sorted(_COMPUTED_SIZES))
def test_dead_code_of_computed_sizes_raises_where_numpy_raises(backend, name, load, tmp_path):
    fn, example, calls = _COMPUTED_SIZES[name]
    traced = nt.trace(fn, example, backend=backend, check_trace=False)
    if load:
        traced = _saved(traced, tmp_path, backend)
    for args in calls:
        _assert_like_numpy(traced, fn, *args)


def test_dead_code_numpy_answers_but_the_op_does_not_model_is_left_to_numpy(backend):
    """A nanquantile with a sequence q of an empty array is NumPy's nanmean (not modelled by the op):
    dead, its check does not refuse the call."""
    def fn(x):
        np.nanquantile(x, [0.2, 0.7], axis=1)
        return x + 1.0

    traced = nt.trace(fn, (np.ones((3, 4)),), backend=backend, check_trace=False)
    for shape in [(0, 4), (3, 0), (2, 3)]:
        _assert_like_numpy(traced, fn, np.ones(shape))


def test_dead_shape_checks_are_still_decided_without_running_the_op(backend):
    """A check of float data that its shapes decide becomes a constant of the specialized program."""
    from numtrace_ir import specialize
    from numtrace_ir.types import TensorType

    traced = nt.trace(lambda x, y: ((x @ y)[0], x + 1.0)[1], (np.ones((2, 3)), np.ones((3, 2))),
                      backend=backend, check_trace=False)
    graph = specialize(traced.graph, [TensorType("f64", (4, 3)), TensorType("f64", (3, 5))],
                       check_shapes=False)
    assert "prim.check" not in str(graph)
    assert "np.matmul" in str(graph)   # the dead product's value: erased by a backend's dce


# -- dtype arguments are NumPy's codes: "i8" is int64, "u8" uint64 -----------------------------------

_DTYPE_CODES = {
    "astype": lambda x: x.astype("i8"),
    "astype_u8": lambda x: np.abs(x).astype("u8"),
    "arange": lambda x: np.arange(x.shape[0], dtype="i8") + x.astype(np.int64),
    "sum": lambda x: np.sum(x, dtype="i8"),
    "cumsum": lambda x: np.cumsum(x, dtype="i8"),
    "ones_like": lambda x: np.ones_like(x, dtype="i8"),
    "concatenate": lambda x: np.concatenate([x, x], dtype="i8"),
    "asarray": lambda x: np.asarray(x, dtype="u8"),
    "einsum": lambda x: np.einsum("i->", x, dtype="i8", casting="unsafe"),
}


@pytest.mark.parametrize("name", sorted(_DTYPE_CODES))
def test_a_dtype_code_means_what_it_means_to_numpy(backend, name):
    fn = _DTYPE_CODES[name]
    x = np.arange(5, dtype=np.int32)
    traced = nt.trace(fn, (x,), backend=backend)
    for n in (5, 3, 0):
        _assert_like_numpy(traced, fn, np.arange(n, dtype=np.int32))


# -- einsum of one operand and no sum is NumPy's view: the operand's dtype whatever dtype= says -------

@pytest.mark.triton
@pytest.mark.parametrize("subscripts", ["ii->i", "ij->ji", "ij", "ji", "ij->ij"])
@pytest.mark.parametrize("dtype", ["f8", "c16", "i4"])
def test_einsum_view_keeps_its_operands_dtype(backend, subscripts, dtype):
    def fn(x):
        return np.einsum(subscripts, x, dtype=dtype, casting="unsafe") * 1

    x = np.arange(9, dtype=np.int16).reshape(3, 3)
    traced = nt.trace(fn, (x,), backend=backend)
    _assert_like_numpy(traced, fn, np.arange(16, dtype=np.int16).reshape(4, 4))


def test_einsum_with_a_sum_still_takes_dtype():
    x = np.arange(9, dtype=np.int16).reshape(3, 3)
    traced = nt.trace(lambda x: np.einsum("ii", x, dtype="f4"), (x,), backend="reference")
    assert traced(x).dtype == np.float32


# -- a layout-following conversion of a view whose dims become 1 at other shapes -----------------------

_CONVERSIONS = {
    "require_F": lambda v: np.require(v, requirements="F"),
    "require_C": lambda v: np.require(v, requirements=["C", "E"]),
    "asarray_F": lambda v: np.asarray(v, order="F"),
    "asfortranarray": lambda v: np.asfortranarray(v),
    "ascontiguousarray": lambda v: np.ascontiguousarray(v),
}
_VIEWS = {"rows": lambda a: a[1:], "columns": lambda a: a[:, 1:], "stepped": lambda a: a[:, ::2]}


@pytest.mark.parametrize("view", sorted(_VIEWS))
@pytest.mark.parametrize("conversion", sorted(_CONVERSIONS))
@pytest.mark.parametrize("layout", ["C", "F"])
def test_a_write_through_a_converted_view_matches_numpy(backend, conversion, view, layout):
    convert, take = _CONVERSIONS[conversion], _VIEWS[view]

    def fn(a):
        v = convert(take(a))
        v[..., :1] = 7.0
        return a * 1.0, v * 1.0

    traced = nt.trace(fn, (np.asarray(np.zeros((4, 6)), order=layout),), backend=backend,
                      check_trace=False)
    for shape in [(2, 2), (4, 2), (2, 3), (3, 1), (1, 3), (4, 6)]:
        data = np.asarray(np.arange(np.prod(shape), dtype=float).reshape(shape), order=layout)
        eager, call = data.copy(order="K"), data.copy(order="K")
        want = fn(eager)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)
            got = traced(call)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(call, eager)


# -- an integer q picks elements: an integer input's quantile keeps its dtype -------------------------

@pytest.mark.parametrize("func", [np.quantile, np.nanquantile, np.percentile, np.nanpercentile])
@pytest.mark.parametrize("q", [0, 1, [0, 1], 0.5])
@pytest.mark.parametrize("dtype", ["i4", "u1", "f2", "f4"])
@pytest.mark.parametrize("method", ["linear", "midpoint", "hazen"])
def test_quantile_of_an_integer_q_matches_numpy(backend, func, q, dtype, method):
    if func in (np.percentile, np.nanpercentile):
        q = [v * 100 for v in q] if isinstance(q, list) else q * 100

    def fn(x):
        return func(x, q, axis=1, method=method)

    rng = np.random.default_rng(9)
    traced = nt.trace(fn, ((rng.standard_normal((3, 4)) * 5).astype(dtype),), backend=backend)
    for shape in [(3, 4), (2, 1), (1, 5)]:
        _assert_like_numpy(traced, fn, (rng.standard_normal(shape) * 5).astype(dtype))


# -- NumPy's quantile and median of empty arrays: an error to pick from nothing, or to reshape ---------

_EMPTY_STATISTICS = {
    "quantile": lambda x, axis: np.quantile(x, 0.3, axis=axis),
    "percentile_list": lambda x, axis: np.percentile(x, [10.0, 90.0], axis=axis, method="lower"),
    "median": lambda x, axis: np.median(x, axis=axis),
    "nanquantile": lambda x, axis: np.nanquantile(x, 0.3, axis=axis),
    "nanmedian": lambda x, axis: np.nanmedian(x, axis=axis),
}


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (1, 2), (0, 1, 2)])
@pytest.mark.parametrize("name", sorted(_EMPTY_STATISTICS))
def test_dead_quantile_of_an_empty_array_raises_where_numpy_raises(backend, name, axis):
    stat = _EMPTY_STATISTICS[name]

    def fn(x):
        stat(x, axis)
        return x + 1.0

    traced = nt.trace(fn, (np.ones((2, 3, 4)),), backend=backend, check_trace=False)
    for shape in [(0, 3, 4), (2, 0, 4), (2, 3, 0), (0, 0, 4), (1, 1, 1), (2, 3, 4)]:
        _assert_like_numpy(traced, fn, np.ones(shape))


# -- rules that now refuse what NumPy refuses: padding an empty axis, positions out of range -----------

_REFUSED_BY_NUMPY = {
    "pad_reflect": lambda x: np.pad(x, 1, mode="reflect"),
    "pad_edge_one_axis": lambda x: np.pad(x, ((0, 1), (0, 0)), mode="edge"),
    "pad_mean": lambda x: np.pad(x, ((0, 0), (2, 1)), mode="mean"),
    "pad_constant": lambda x: np.pad(x, 2),
    "delete": lambda x: np.delete(x, 1, axis=0),
    "delete_negative": lambda x: np.delete(x, (-2, -1), axis=1),
    "insert": lambda x: np.insert(x, 2, 5.0, axis=1),
    "insert_negative": lambda x: np.insert(x, (-3,), 5.0, axis=0),
}


@pytest.mark.parametrize("dead", [False, True], ids=["live", "dead"])
@pytest.mark.parametrize("name", sorted(_REFUSED_BY_NUMPY))
def test_edits_refuse_shapes_numpy_refuses(backend, name, dead):
    op = _REFUSED_BY_NUMPY[name]

    def fn(x):
        y = op(x)
        return x * 2.0 if dead else y

    traced = nt.trace(fn, (np.ones((3, 4)),), backend=backend, check_trace=False)
    for shape in [(0, 4), (3, 0), (1, 1), (2, 2), (0, 0), (4, 5)]:
        _assert_like_numpy(traced, fn, np.arange(np.prod(shape), dtype=float).reshape(shape))


# -- a write into a copy that is never read still raises NumPy's errors --------------------------------

def _write_index(x):
    y = x.copy()
    y[2] = 1.0
    return x * 2.0


def _write_broadcast(x):
    y = x.copy()
    y[0] = x[:, 0]
    return x * 2.0


def _write_transposed(x):
    y = x.copy()
    y[...] = x.T
    return x * 2.0


def _add_at(x):
    y = np.zeros_like(x)
    np.add.at(y, ([0, 3],), 1.0)
    return x * 2.0


def _put(x):
    y = x.copy()
    np.put(y, [5], 1.0)
    return x * 2.0


@pytest.mark.triton
@pytest.mark.parametrize("fn", [_write_index, _write_broadcast, _write_transposed, _add_at, _put],
                         ids=lambda f: f.__name__)
def test_dead_write_raises_where_numpy_raises(backend, fn):
    traced = nt.trace(fn, (np.ones((4, 4)),), backend=backend, check_trace=False)
    for shape in [(2, 2), (4, 2), (2, 4), (1, 1), (4, 4), (5, 5)]:
        _assert_like_numpy(traced, fn, np.ones(shape))


# -- an index computed from data is guarded at run time: a call's shapes must not refuse it first ------

@pytest.mark.parametrize("dead", [False, True], ids=["live", "dead"])
def test_an_index_from_data_at_other_shapes_traces_again(backend, dead):
    def fn(x):
        y = x[np.argmax(x)]
        return x + 1.0 if dead else y + 1.0

    with pytest.warns(nt.TracerWarning, match="Converting a traced array"):
        traced = nt.trace(fn, (np.array([[0.0], [5.0], [1.0]]),), backend=backend, check_trace=False)
    _assert_like_numpy(traced, fn, np.ones((1, 1)))   # traced again: NumPy's x[0]
    _assert_like_numpy(traced, fn, np.ones((1, 3)))
    _assert_like_numpy(traced, fn, np.array([[1.0], [3.0]]))
