"""Hunt in NumPy scalars as results, the memory order of computed results and np.errstate blocks: a call
returns a NumPy scalar exactly where NumPy does (methods of a scalar keep it one, ``np.asarray`` of it is
an array), a view of a result of a broadcast argument is a view or a copy as NumPy's, and an error state
set inside the function holds at call time."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import numpy as np
import numtrace as nt
import pytest


def _trace(fn, example, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return nt.trace(fn, example, backend=backend, check_trace=False)


# -- NumPy scalars: a method of a scalar gives a scalar, a conversion to an array an array ------------------

SCALAR_PROGRAMS = {
    "astype": lambda x: x.sum().astype(np.float32),
    "np.astype": lambda x: np.astype(x.sum(), np.int64),
    "astype_bool": lambda x: x.sum().astype(bool),
    "reshape": lambda x: x.sum().reshape(()),
    "np.reshape": lambda x: np.reshape(x.sum(), ()),
    "copy": lambda x: x.sum().copy(),
    "T": lambda x: x.sum().T,
    "np.transpose": lambda x: np.transpose(x.sum()),
    "squeeze": lambda x: x.sum().squeeze(),
    "np.squeeze": lambda x: np.squeeze(x.sum()),
    "real": lambda x: x.sum().real,
    "np.imag": lambda x: np.imag(x.sum()),
    "np.asarray": lambda x: np.asarray(x.sum()),
    "np.asarray_dtype": lambda x: np.asarray(x.sum(), dtype=np.float32),
    "np.asanyarray": lambda x: np.asanyarray(x.sum()),
    "np.copy": lambda x: np.copy(x.sum()),
    "ellipsis": lambda x: x.sum()[...],
    "in_tuple": lambda x: (x[0].astype(np.float32), np.asarray(x[1]), x.max().reshape(())),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.complex128])
@pytest.mark.parametrize("name", SCALAR_PROGRAMS)
def test_methods_of_a_scalar_result_give_numpys_type(backend, name, dtype):
    """NumPy's scalar methods (``s.astype``, ``s.reshape(())``, ``s.copy()``, ``s.T``, ``s.real``, and the
    functions that call them) return NumPy scalars, while ``np.asarray(s)`` makes a 0-d array: a call
    returns the same type, dtype and value, at another size and after save/load."""
    fn = SCALAR_PROGRAMS[name]
    x = (np.arange(1, 5) / 7).astype(dtype) if dtype != np.int32 else np.arange(1, 5, dtype=dtype)
    try:
        fn(x)
    except (TypeError, ValueError, np.exceptions.ComplexWarning):
        pytest.skip("NumPy refuses (or warns on) this program for this dtype")
    traced = _trace(fn, (x,), backend)
    with tempfile.TemporaryDirectory() as d:
        traced.save(Path(d) / "t.nt")
        loaded = nt.load(Path(d) / "t.nt", backend=backend)
    for call in (traced, loaded):
        for y in (x[::-1].copy(), np.concatenate([x, x, x])):
            want, got = fn(y), call(y)
            pairs = zip(*(r if isinstance(r, tuple) else (r,) for r in (want, got)))
            for w, g in pairs:
                assert type(g) is type(w), (type(g), type(w))
                assert g.dtype == w.dtype
                np.testing.assert_allclose(g, w, rtol=1e-5)   # (a backend's sum rounds otherwise)


# -- a view of a computed result of a broadcast (stride 0) argument --------------------------------------

def _flat_of(op):
    def fn(x):
        y = op(x)
        return y, y.reshape(-1)
    return fn


def _broadcast(shape, axis):
    a = (np.arange(np.prod(shape), dtype=float).reshape(shape) + 1) / 7
    return np.broadcast_to(a.take([0], axis=axis), shape)


@pytest.mark.parametrize("shape", [(4, 2), (2, 3, 4)])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name, op", [
    ("astype", lambda x: x.astype(np.float32)),
    ("getitem_then_ufunc", lambda x: x[:, :1] * 2.0),
    ("ufunc_of_two", lambda x: x * x[:1]),
])
def test_a_reshape_of_a_result_of_a_broadcast_argument(backend, shape, axis, name, op):
    """NumPy lays out ``x.astype`` like ``x`` (``PyArray_NewLikeArray``: a stride-0 axis innermost) and an
    elementwise result by its iterator (a stride-0 axis not counted, also through a view of ``x``): a
    reshape of the result is a view or a copy as NumPy's, whatever layout the trace was made at."""
    fn = _flat_of(op)
    x = _broadcast(shape, axis)
    traced = _trace(fn, (np.ascontiguousarray(x),), backend)
    want, got = fn(x), traced(x)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
        assert (g.flags.c_contiguous, g.flags.f_contiguous) == (w.flags.c_contiguous, w.flags.f_contiguous)
    assert np.shares_memory(got[0], got[1]) == np.shares_memory(want[0], want[1])


@pytest.mark.xfail(strict=True, reason=(
    "a ufunc's out= array made by np.empty_like of a broadcast argument is laid out by NumPy like that "
    "argument (a stride-0 axis innermost: Fortran order for strides (0, 8)); the graph records the ufunc "
    "alone, so the trace lays out its result as the iterator would (C order), and a reshape of it is a "
    "view where NumPy's is a copy"))
def test_a_reshape_of_an_out_result_like_a_broadcast_argument(backend):
    fn = _flat_of(lambda x: np.add(x, 1.0, out=np.empty_like(x)))
    x = _broadcast((4, 2), 0)
    traced = _trace(fn, (np.ascontiguousarray(x),), backend)
    want, got = fn(x), traced(x)
    assert np.shares_memory(got[0], got[1]) == np.shares_memory(want[0], want[1])


# -- np.errstate and np.seterr inside a trace ----------------------------------------------------------

def _outcome(fn, x, state):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with np.errstate(**state):
            try:
                result = fn(x)
            except FloatingPointError:
                return "raised"
    return [w.category for w in caught], np.asarray(result).tolist()


def underflow_in_a_block(x):
    with np.errstate(under="ignore", divide="ignore"):
        return x * 1e-300 * 1e-300 + 1.0 / x


@np.errstate(under="ignore", divide="ignore")
def _decorated(x):
    return x * 1e-300 * 1e-300 + 1.0 / x


def calls_a_decorated_function(x):
    return _decorated(x)


def a_block_that_raises(x):
    try:
        with np.errstate(invalid="ignore"):
            raise KeyError("inside")
    except KeyError:
        pass
    return x * 1e-300 * 1e-300


@pytest.mark.parametrize("fn", [underflow_in_a_block, calls_a_decorated_function, a_block_that_raises])
@pytest.mark.parametrize("state", [{}, {"under": "raise"}, {"all": "raise"}, {"under": "warn"}])
def test_errstate_blocks_hold_at_call_time(backend, fn, state):
    """A block (or a function decorated after numtrace's import) naming a kind at the mode the caller has
    while tracing still holds that mode at a call in another state; a block left by an exception holds
    nothing after it."""
    x = np.array([1.0, 0.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        traced = _trace(fn, (x,), backend)
    assert _outcome(traced, x, state) == _outcome(fn, x, state)


def sets_under_with_seterr(x):
    old = np.seterr(under="ignore")
    try:
        return x * 1e-300 * 1e-300
    finally:
        np.seterr(**old)


def sets_all_with_seterr(x):
    old = np.seterr(all="ignore")
    y = x * 1e-300 * 1e-300 + 1.0 / x
    np.seterr(**old)
    return y * 1e300 * 1e300   # after the restore: the caller's state again


def sets_inside_a_block(x):
    with np.errstate():   # as np.ma's operations do: the block's exit restores the state
        np.seterr(under="ignore")
        y = x * 1e-300 * 1e-300
    return y + x * 1e-300 * 1e-300


def sets_positionally_with_seterr(x):
    old = np.seterr("ignore")
    try:
        return x * 1e-300 * 1e-300
    finally:
        np.seterr(**old)


@pytest.mark.parametrize("fn", [sets_under_with_seterr, sets_all_with_seterr, sets_positionally_with_seterr,
                                sets_inside_a_block])
@pytest.mark.parametrize("state", [{}, {"under": "raise"}, {"all": "raise"}, {"over": "warn"}])
def test_seterr_inside_a_trace_holds_at_call_time(backend, fn, state):
    """The kinds an np.seterr names hold their mode until it is restored, whatever the caller's state at
    a call; after the restore the caller's state holds."""
    x = np.array([1.0, 2.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        traced = _trace(fn, (x,), backend)
    assert _outcome(traced, x, state) == _outcome(fn, x, state)


def test_seterr_left_set_is_refused(backend):
    """A function that leaves np.seterr's change in place changes the caller's state, which a call of the
    trace cannot: refused, naming np.seterr."""
    def leaves_it(x):
        np.seterr(under="ignore")
        return x * 2.0

    before = np.geterr()
    try:
        with pytest.raises(NotImplementedError, match="np.seterr"):
            _trace(leaves_it, (np.ones(2),), backend)
    finally:
        np.seterr(**before)


def test_errstate_outside_a_trace_is_numpys():
    """The wrapped np.errstate keeps NumPy's behaviour outside a trace: the decorator's metadata and
    state, a block left by an exception restoring the state, a second enter refused."""
    before = np.geterr()

    @np.errstate(divide="raise")
    def divide(a):
        """doc"""
        return np.float64(1.0) / a

    assert (divide.__name__, divide.__doc__) == ("divide", "doc")
    with pytest.raises(FloatingPointError):
        divide(0.0)
    assert np.geterr() == before
    with pytest.raises(KeyError):
        with np.errstate(invalid="raise"):
            raise KeyError("k")
    assert np.geterr() == before
    block = np.errstate(over="raise")
    with block:
        with pytest.raises(TypeError, match="twice"):
            with block:
                pass
    assert np.geterr() == before


# -- a view of a result of a copy-like op (np.copy, np.sort, np.*_like) and of other non-elementwise ops ----

def _layouts(shape):
    a = (np.arange(np.prod(shape), dtype=float).reshape(shape) + 1) / 7
    return {"C": a, "F": np.asfortranarray(a), "broadcast": np.broadcast_to(a[:1], shape),
            "reversed": a[:, ::-1]}


COPIES = {
    "copy_K": lambda x: np.copy(x, order="K"),
    "copy_F": lambda x: np.copy(x, order="F"),
    "copy_A": lambda x: np.copy(x, order="A"),
    "method_copy_F": lambda x: x.copy(order="F"),
    "zeros_like": lambda x: np.zeros_like(x),
    "zeros_like_F_plus": lambda x: np.zeros_like(x, order="F") + 1.0,
    "full_like": lambda x: np.full_like(x, 2.0),
    "sort": lambda x: np.sort(x, axis=-1),
}


@pytest.mark.parametrize("name", COPIES)
def test_a_reshape_of_a_copy_like_result(backend, name):
    """NumPy allocates a copy like its operand (order K: ``PyArray_NewLikeArray``) or in the order asked,
    also from C-ordered arguments: a reshape of it is a view or a copy as NumPy's."""
    fn = _flat_of(COPIES[name])
    layouts = _layouts((2, 3, 4))
    for example in ("C", "F"):
        traced = _trace(fn, (layouts[example].copy(order="K"),), backend)
        for x in layouts.values():
            want, got = fn(x), traced(x)
            np.testing.assert_array_equal(got[1], want[1])
            assert got[0].flags.f_contiguous == want[0].flags.f_contiguous
            assert np.shares_memory(got[0], got[1]) == np.shares_memory(want[0], want[1])


@pytest.mark.parametrize("name, op", [
    ("concatenate", lambda x: np.concatenate([x, x])),
    ("concatenate_axis1", lambda x: np.concatenate([x, x], axis=1)),
    ("stack", lambda x: np.stack([x, x])),
    ("cumsum", lambda x: np.cumsum(x, axis=0)),
    ("cumprod_axis2", lambda x: np.cumprod(x, axis=2)),
    ("sum_axis0", lambda x: x.sum(axis=0)),
    ("max_axis1", lambda x: x.max(axis=1)),
    ("mean_keepdims", lambda x: x.mean(axis=0, keepdims=True)),
    ("argmax_axis0", lambda x: x.argmax(axis=0)),
    ("tril", lambda x: np.tril(x)),
    ("triu", lambda x: np.triu(x, 1)),
])
@pytest.mark.parametrize("layout", ["F", "transposed"])
def test_a_reshape_of_a_non_elementwise_result_of_a_fortran_argument(backend, name, op, layout):
    """NumPy keeps a Fortran-ordered (or transposed) argument's order in these results in its own way
    (a join like its operands, a reduction by its iterator, np.tril through np.where, np.argmax C-ordered);
    a call returns them laid out so, so that the reshape of the result is a view or a copy as NumPy's."""
    fn = _flat_of(op)
    a = (np.arange(24.0).reshape(2, 3, 4) + 1) / 7
    x = np.asfortranarray(a) if layout == "F" else \
        np.ascontiguousarray(a.transpose(1, 0, 2)).transpose(1, 0, 2)
    traced = _trace(fn, (np.ascontiguousarray(x),), backend)
    want, got = fn(x), traced(x)
    np.testing.assert_array_equal(got[1], want[1])
    assert np.shares_memory(got[0], got[1]) == np.shares_memory(want[0], want[1])
