"""Hunt in np.clip's decomposition, NumPy's warnings of a call (where, how many) and np.seterr inside a
trace: a trace called with bounds of another kind, shape or layout than the example's answers as NumPy's
clip does; a warning NumPy issues for the caller of a Python function (``np.nanmean``'s
``stacklevel=2``) or of a C method (``x.astype``) names the user's line, once per line under the
``default`` filter, on every backend and after save/load; an ``np.seterr`` is undone only by what it
returned."""

from __future__ import annotations

import inspect
import tempfile
import warnings
from pathlib import Path

import numpy as np
import numtrace as nt
import pytest
from numtrace_ir.testing.clip_cases import same_bits


def _trace(fn, example, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return nt.trace(fn, example, backend=backend, check_trace=False)


def _specials(rng, shape, dtype=np.float64):
    pool = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 0.5, np.nan, -np.nan], dtype)
    return rng.choice(pool, shape)


# -- np.clip: the loop NumPy picks follows the call's bounds, not the example's ---------------------------

_BOUNDS = {"0-d": (), "(1,)": (1,), "(1, 1)": (1, 1), "(m,)": (6,), "(n, 1)": (4, 1), "(n, m)": (4, 6)}


def clip3(x, lo, hi):
    return np.clip(x, lo, hi)


@pytest.mark.triton
@pytest.mark.parametrize("traced_as", ["(1,)", "(m,)", "(1, 1)", "(n, 1)"])
def test_clip_called_with_other_bound_shapes_answers_as_numpy(backend, traced_as):
    """Traced with one bound shape (the uniform loop for (1,), the varying one for (m,)), a call with a
    bound of the same rank and another shape, with a Fortran-ordered x, or with x of another batch
    gives NumPy's bits: the sign of a zero tie and which NaN."""
    rng = np.random.default_rng(7)
    shape = _BOUNDS[traced_as]
    traced = _trace(clip3, (_specials(rng, (4, 6)), _specials(rng, shape), _specials(rng, ())), backend)
    calls = [(n, s) for n, s in _BOUNDS.items() if len(s) == len(shape)]
    for rows in (4, 1, 7):
        for name, s in calls:
            if s and s[0] == 4 and rows != 4:
                continue
            x = _specials(rng, (rows, 6))
            for xs in (x, np.asfortranarray(x)):
                args = (xs, _specials(rng, s), _specials(rng, ()))
                with np.errstate(all="ignore"):
                    want = np.clip(*args)
                assert same_bits(traced(*args), want).all(), (name, rows)


def clip_into_x(x, lo, hi):
    np.clip(x, lo, hi, out=x)
    return x


def clip_x_by_itself(x, lo, hi):
    return np.clip(x, x, hi), np.clip(x, lo, x)


def clip_ints_by_floats(x, lo, hi):
    return np.clip(np.nan_to_num(x * 3).astype(np.int32), lo, hi)


def clip_unsigned(x, lo, hi):
    return np.clip(np.nan_to_num(np.abs(x) * 3, posinf=200).astype(np.uint8), -5, 300)


@pytest.mark.triton
@pytest.mark.parametrize("func", [clip_into_x, clip_x_by_itself, clip_ints_by_floats, clip_unsigned],
                         ids=lambda f: f.__name__)
def test_clip_programs_answer_and_write_as_numpy(backend, func):
    """In place into x, a bound that is x itself, an integer x with float bounds (float64 result) and a
    uint8 x with Python int bounds beyond its range: NumPy's bits and NumPy's writes into x."""
    rng = np.random.default_rng(8)
    example = (_specials(rng, (4, 6)), _specials(rng, ()), _specials(rng, (6,)))
    traced = _trace(func, tuple(a.copy() for a in example), backend)
    for rows in (4, 1):
        args = (_specials(rng, (rows, 6)), _specials(rng, ()), _specials(rng, (6,)))
        mine, theirs = [a.copy() for a in args], [a.copy() for a in args]
        with np.errstate(all="ignore"):
            want = func(*theirs)
            got = traced(*mine)
        pairs = zip(got, want) if isinstance(want, tuple) else [(got, want)]
        for g, w in pairs:
            assert same_bits(g, w).all()
        for g, w in zip(mine, theirs):
            assert same_bits(g, w).all()


# -- warnings NumPy issues for the caller's frame -----------------------------------------------------------

def two_nanmeans(x):
    a = np.nanmean(x, axis=0)
    b = np.nanmean(x * 2, axis=0)
    return a + b


def nan_extremes(x):
    return np.nanmax(x, axis=0) - np.nanmedian(x, axis=0)


def cast_overflow(x):
    return (x * 1e300).astype(np.float32)


def _said(call):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("default")
        for _ in range(2):
            call()
    return [(w.category, str(w.message), Path(w.filename).name, w.lineno) for w in said]


@pytest.mark.parametrize("func, x", [
    (two_nanmeans, np.array([[np.nan, 1.0], [np.nan, 2.0]])),
    (nan_extremes, np.array([[np.nan, 1.0], [np.nan, 2.0]])),
    (cast_overflow, np.array([1.0, 2.0])),
], ids=["two_nanmeans", "nan_extremes", "cast_overflow"])
def test_warnings_for_the_callers_line_name_the_users_line(backend, func, x):
    """``np.nanmean`` on two lines warns twice, each at its line (``stacklevel=2``), twice called once
    per line under "default"; a C method's cast warning is at its caller's line: a trace's calls, and a
    loaded trace's, say the same at the same lines."""
    want = _said(lambda: func(x))
    lines = {w[3] for w in want}
    first = inspect.getsourcelines(func)[1]
    assert lines and all(first < line < first + 4 for line in lines)   # the program's own lines
    traced = _trace(func, (x,), backend)
    assert _said(lambda: traced(x)) == want
    with tempfile.TemporaryDirectory() as d:
        traced.save(Path(d) / "t.nt")
        loaded = nt.load(Path(d) / "t.nt", backend=backend)
        assert _said(lambda: loaded(x)) == want


# -- np.seterr: undone only by what it returned ------------------------------------------------------------

_DEFAULTS = np.geterr()


def seterr_then_defaults(x):
    np.seterr(divide="ignore")
    a = np.log(x)
    np.seterr(**_DEFAULTS)   # the state at import, not the caller's: NumPy leaves it set
    return a + np.log(x)


def seterr_restored_by_hand(x):
    old = np.seterr(divide="ignore")
    a = np.log(x)
    np.seterr(divide=old["divide"])
    return a + np.log(x)


def _trace_in_state(fn, example, backend):
    """A trace taken in NumPy's default error state (the one `_DEFAULTS` holds)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(**_DEFAULTS):
            return nt.trace(fn, example, backend=backend, check_trace=False)


def _outcome(call):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            call()
        except FloatingPointError:
            return "raised"
    return [str(w.message) for w in said]


def test_seterr_of_fixed_modes_is_not_taken_for_a_restore(backend):
    """``np.seterr(**DEFAULTS)`` with modes read at import sets them whatever the caller's state: under
    ``np.errstate(divide="raise")`` NumPy's second log warns. The trace refuses the function (it leaves
    the caller's error state changed) rather than running the second log in the caller's state."""
    x = np.array([0.0, 1.0])
    with np.errstate(divide="raise"):
        want = _outcome(lambda: seterr_then_defaults(x))
    np.seterr(**_DEFAULTS)
    assert want == ["divide by zero encountered in log"]
    with pytest.raises(NotImplementedError, match="np.seterr"):
        _trace_in_state(seterr_then_defaults, (x,), backend)
    np.seterr(**_DEFAULTS)


def test_seterr_restored_kind_by_kind_is_a_restore(backend):
    """``np.seterr(divide=old["divide"])`` gives back what ``np.seterr(divide=...)`` returned for the
    one kind it set: the trace follows the caller's state after it, as NumPy does."""
    x = np.array([0.0, 1.0])
    traced = _trace_in_state(seterr_restored_by_hand, (x,), backend)
    for state in ({"divide": "raise"}, {"divide": "warn"}, {"divide": "ignore"}):
        with np.errstate(**state):
            assert _outcome(lambda: traced(x)) == _outcome(lambda: seterr_restored_by_hand(x))


# -- result layouts after a view that permutes axes ---------------------------------------------------------

def join_of_transposes(a, b):
    r = np.concatenate([a.T, b.T])
    return r, r.reshape(-1)


def scan_of_a_transpose(a, b):
    r = np.cumsum(a.T, axis=0)
    return r, r.reshape(-1)


def sum_of_a_transpose(a, b):
    r = a.T + b.T
    return r, r.reshape(-1)


@pytest.mark.parametrize("func", [join_of_transposes, scan_of_a_transpose, sum_of_a_transpose],
                         ids=lambda f: f.__name__)
def test_a_reshape_of_a_result_of_transposed_c_arguments_is_a_copy_as_numpys(backend, func):
    """C-ordered arguments, transposed inside: NumPy's join, scan or sum is Fortran-ordered, so its
    reshape is a copy; a write into the first result after the call leaves the second as it was."""
    a, b = np.arange(6.0).reshape(2, 3), np.arange(6.0).reshape(2, 3) + 10
    traced = _trace(func, (a, b), backend)
    for n in (2, 5):
        a, b = np.arange(3.0 * n).reshape(n, 3), np.arange(3.0 * n).reshape(n, 3) + 10
        got, want = traced(a, b), func(a, b)
        assert np.shares_memory(*got) == np.shares_memory(*want)
        got[0][0, 0] = want[0][0, 0] = -1.0
        assert np.array_equal(got[1], want[1])
