"""Hunt in output identity and aliasing, guarded in-place writes and run-time error classes: a trace's
results share memory with its arguments and with each other exactly where NumPy's do, at every call
(another layout, another size, an empty array at trace time), and NumPy's errors keep their class."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest


def _flat(obj):
    if isinstance(obj, (tuple, list)):
        return [x for v in obj for x in _flat(v)]
    return [obj]


def _like(a):
    """A fresh array equal to `a` with its shape and strides (a view into a fresh buffer)."""
    if a.size == 0:
        return a.copy()
    lo = sum(min(0, (n - 1) * s) for n, s in zip(a.shape, a.strides))
    hi = sum(max(0, (n - 1) * s) for n, s in zip(a.shape, a.strides)) + a.itemsize
    out = np.ndarray(a.shape, a.dtype, buffer=np.zeros(hi - lo, np.uint8), offset=-lo, strides=a.strides)
    out[...] = a
    return out


def _sharing(result, args):
    items = _flat(result) + list(args)
    return [[(a is b, bool(np.shares_memory(a, b))) for b in items] for a in items]


def _assert_like_numpy(fn, traced, *args):
    """Values, identity, memory sharing and writeability of the results as NumPy's, and a write into each
    result seen where NumPy's write is seen."""
    want_args, got_args = [_like(a) for a in args], [_like(a) for a in args]
    want, got = fn(*want_args), _call(traced, got_args)
    for g, w in zip(_flat(got), _flat(want)):
        np.testing.assert_array_equal(g, w)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)   # (a broadcast_arrays result's flag)
            assert g.flags.writeable == w.flags.writeable
    assert _sharing(got, got_args) == _sharing(want, want_args)
    for k, w in enumerate(_flat(want)):
        if w.size and 0 not in w.strides and w.flags.writeable:   # (a broadcast warns on a write)
            want_args, got_args = [_like(a) for a in args], [_like(a) for a in args]
            want, got = _flat(fn(*want_args)), _flat(_call(traced, got_args))
            want[k].flat[0] = got[k].flat[0] = -7.0
            for g, w in zip(got + got_args, want + want_args):
                np.testing.assert_array_equal(g, w)


def _call(traced, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)   # (a re-trace at another size)
        return traced(*args)


def _trace(fn, example, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return nt.trace(fn, tuple(_like(a) for a in example), backend=backend, check_trace=False)


# -- a view call that copies at the traced layout, a view where NumPy makes one ---------------------------

def flattened(x):
    return x, x.reshape(-1)


def raveled(x):
    return x.ravel()


def contiguous(x):
    return np.ascontiguousarray(x)


def transposed_flat(x):
    return x.T.reshape(-1)


def updated_flat(x):
    x *= 2.0
    return x.reshape(-1)


_M = np.arange(48.0).reshape(6, 8)
_LAYOUTS = {"c": _M, "rows": _M[::2], "cols": _M[:, ::2], "T": _M.T, "neg": _M[::-1],
            "F": np.asfortranarray(_M), "odd": np.arange(35.0).reshape(5, 7), "one": _M[:1]}


@pytest.mark.parametrize("fn", [flattened, raveled, contiguous, transposed_flat, updated_flat],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("traced_at", ["rows", "T", "neg"])
def test_a_copy_at_the_traced_layout_is_a_view_where_numpy_makes_one(backend, fn, traced_at):
    traced = _trace(fn, (_LAYOUTS[traced_at],), backend)
    for name, x in _LAYOUTS.items():
        if fn is updated_flat and name != traced_at:
            continue   # (a write through a layout-dependent view: refused at another layout)
        _assert_like_numpy(fn, traced, x)


# -- views traced at size zero (an empty array shares no memory) -----------------------------------------

def strided(x):
    return x, x[::2]


def reversed_rows(x):
    return x[::-1]


def swapped(x):
    return np.swapaxes(x, 0, -1)


def broadcast(x):
    return np.broadcast_to(x, (3, *x.shape))


def broadcast_both(x):
    return np.broadcast_arrays(x, x[:1])


def diagonal(x):
    return np.diag(x)


def imaginary(x):
    return np.imag(x)


def split_rows(x):
    return np.array_split(x, 3)


def tail_then_write(x):
    tail = x[1:]
    x *= 2.0
    return tail


def derived_views(x):
    y = x + 1.0
    return y, y[1:], y.T


_EMPTY_CASES = [strided, reversed_rows, swapped, broadcast, broadcast_both, diagonal, imaginary, split_rows,
                tail_then_write, derived_views]


@pytest.mark.triton
@pytest.mark.parametrize("fn", _EMPTY_CASES, ids=lambda f: f.__name__)
def test_views_traced_at_size_zero_are_views_at_other_sizes(backend, fn):
    traced = _trace(fn, (np.zeros((0, 4)),), backend)
    for x in (np.arange(24.0).reshape(6, 4), np.arange(4.0).reshape(1, 4), np.zeros((0, 4))):
        _assert_like_numpy(fn, traced, x)


def test_parts_empty_at_the_traced_size_are_views_at_others(backend):
    traced = _trace(split_rows, (np.arange(4.0).reshape(1, 4),), backend)    # parts 1 and 2 empty
    _assert_like_numpy(split_rows, traced, np.arange(32.0).reshape(8, 4))


def test_a_computed_result_is_not_replayed(backend):
    def scaled(x):
        return (x * 2.0).reshape(-1)

    traced = _trace(scaled, (np.ones((2, 3)),), backend)
    assert traced.views == ()


# -- a view of a view that copies: NumPy's is a view of that copy ------------------------------------------

def transposed_reshape(x):
    r = x.reshape(2, -1)
    return x, r, r.T


def expanded_flat(x):
    r = x.reshape(-1)
    return r, np.expand_dims(r, -1)


def contiguous_rows(x):
    rows = x[::2]
    c = np.ascontiguousarray(rows)
    return x, rows, c, c.T


def written_half(x):
    x += 1.0
    return x, x[: x.shape[0] // 2]


_CHAINS = [(transposed_reshape, "c"), (transposed_reshape, "one"), (expanded_flat, "rows"),
           (contiguous_rows, "c"), (written_half, "one")]


@pytest.mark.parametrize(("fn", "traced_at"), _CHAINS, ids=lambda v: getattr(v, "__name__", v))
def test_views_of_views_share_memory_as_numpys(backend, fn, traced_at):
    traced = _trace(fn, (_LAYOUTS[traced_at],), backend)
    for name, x in _LAYOUTS.items():
        if name != "odd":     # (35 elements: NumPy refuses the reshape)
            _assert_like_numpy(fn, traced, x)


# -- a view of a computed result, whose layout the backend chooses ----------------------------------------

def flat_of_result(x):
    y = x * 2.0
    return y, y.reshape(-1)


@pytest.mark.parametrize("backend_name", ["reference", "cpu"])
def test_a_reshape_of_a_result_of_a_fortran_argument(backend_name):
    if backend_name not in nt.available_backends():
        pytest.skip(f"{backend_name} is not installed")
    traced = _trace(flat_of_result, (np.ones((2, 3)),), backend_name)
    _assert_like_numpy(flat_of_result, traced, np.asfortranarray(np.arange(6.0).reshape(2, 3)))


def rows_of_cast(x):
    y = (x + 1.0).astype(np.float32)
    return y, y.reshape(x.shape[0], -1)


def flat_of_where(x, z):
    y = np.where(x > 2.0, x, z * 3.0)
    return y, y.ravel(), y.T.reshape(-1)


def flat_of_mixed(x, z):
    y = np.sqrt(x) - z[..., :1]
    return y, y.reshape(-1)


def _layouts(shape, dtype):
    """The same values C-ordered, Fortran-ordered, with axes permuted (a transposed array's layout)."""
    a = np.arange(np.prod(shape), dtype=dtype).reshape(shape) / 7
    permuted = np.ascontiguousarray(a.transpose(1, 0, *range(2, a.ndim))).transpose(1, 0, *range(2, a.ndim))
    return {"C": a, "F": np.asfortranarray(a), "permuted": permuted}


@pytest.mark.triton
@pytest.mark.parametrize("shape", [(2, 3), (3, 2, 4), (4, 1, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_views_of_computed_results_follow_numpys_order_for_the_arguments(backend, shape, dtype):
    """A result of elementwise ops is laid out by NumPy in its arguments' memory order (``order="K"``):
    a reshape of it is a view or a copy by that order, for every layout of the call's arguments,
    whatever layout the trace was made at."""
    layouts = _layouts(shape, dtype)
    for fn, arity in [(flat_of_result, 1), (rows_of_cast, 1), (flat_of_where, 2), (flat_of_mixed, 2)]:
        traced = _trace(fn, (layouts["C"],) * arity, backend)
        for first in layouts.values():
            for second in layouts.values():
                _assert_like_numpy(fn, traced, *(first, second)[:arity])


# -- NumPy's error classes at call time -----------------------------------------------------------------

def outer(x):
    return np.outer(x, x)


@pytest.mark.triton
def test_numpys_memory_error_is_a_memory_error(backend):
    # NumPy raises its private _ArrayMemoryError (a MemoryError whose constructor takes a shape and a dtype)
    traced = _trace(outer, (np.ones(3),), backend)
    x = np.ones(3_000_000)
    with pytest.raises(MemoryError):
        outer(x)
    with pytest.raises(MemoryError):
        traced(x)
