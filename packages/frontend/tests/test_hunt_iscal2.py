"""Hunt of the iscal2 change: ``-s`` and ``abs(s)`` of traced NumPy int scalars (np.scalar_unary_operator),
``divmod`` of NumPy scalars (np.scalar_operator, op="divmod", two results) and the scalar ops' warnings
named at the user's line (`interpreter.OnScalars`), against eager NumPy: values, types, warnings (text,
category, count, file and line) under np.errstate and warnings filters, on every backend (cpu: its
interpreter and generated kernels, 1 and 2 threads)."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest
from test_hunt_breadth import _same, mode  # noqa: F401  (mode: the cpu kernel modes' fixture)
from test_hunt_hunt_sect import threads  # noqa: F401  (1 and 2 threads' fixture)
from test_hunt_known import _matches, _trace


def _report(fn, args, state="warn", action="always", repeat=1):
    """fn(*copies of args) under np.errstate(all=state) and the warnings filter `action`, `repeat` times in
    one filter context (the once-per-location registries then act): (the last result or the error's
    builtin type and message tail, [(message, category, file, line) of each warning])."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all=state):
        warnings.simplefilter(action)
        warnings.simplefilter("ignore", nt.TracerWarning)
        for _ in range(repeat):
            copies = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)
            try:
                result = fn(*copies)
            except (ArithmeticError, ValueError, Warning) as exc:
                base = next(t for t in type(exc).__mro__ if t.__module__ == "builtins")
                result = (base, str(exc).rsplit(": ", 1)[-1])
    return result, [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


def _same_report(got, want):
    assert got[1] == want[1]
    if isinstance(want[0], tuple) and isinstance(want[0][0], type):
        assert got[0] == want[0]
    else:
        assert _same(got[0], want[0]), (got[0], want[0])


# --- Findings ------------------------------------------------------------------------------------------

def _dead_and_live_scalar_math(x):
    s = x[0]
    -s                                  # noqa: B018  (dead: the tracer keeps a prim.check)
    divmod(s, x[1])
    s - 1
    abs(s)
    x.astype(np.float64)[0] ** 0.5
    return x * 2, -s, divmod(s, x[1])


@pytest.mark.triton
def test_dead_scalar_math_warns_at_the_users_line(backend):
    """Fixed: a dead NumPy scalar operator (its result unused) leaves a ``prim.check`` that runs the op, so
    it warns and raises as NumPy's does; its reference was the op's Python function, so its warnings named
    numtrace_ir/ops/elementwise.py (the iscal2 fix covered the live nodes only): a
    ``-W error::RuntimeWarning:mymodule`` filter missed them and the default filter said one warning for
    all of them. The interpreter now calls the C operator from the node's line for such a check too
    (`OnScalars(check=True)`). Triton: its host steps called references from host_steps.py, for every
    op; they now go through `at_location` too."""
    traced = _trace(_dead_and_live_scalar_math, (np.array([3, 2], np.int8),), backend=backend)
    assert traced.code.count("prim.check") == 5, traced.code
    x = (np.array([-128, 0], np.int8),)
    want = _report(_dead_and_live_scalar_math, x)
    assert {w[2] for w in want[1]} == {__file__} and len(want[1]) == 7
    _same_report(_report(traced, x), want)
    states = ("ignore",) if backend == "triton" else ("raise", "ignore")   # (no FP errors of kernels)
    for state in states:
        _same_report(_report(traced, x, state), _report(_dead_and_live_scalar_math, x, state))


def _quiet_scalar_math(x):
    with np.errstate(over="ignore", divide="ignore"):
        a = -x[0]
        q = divmod(x[0], x[2])
    return a, abs(x[1]), q


@np.errstate(all="ignore")
def _quiet_function(x):
    return -x[0], divmod(x[0], x[2])


@pytest.mark.triton
@pytest.mark.parametrize("fn", [_quiet_scalar_math, _quiet_function])
def test_the_functions_own_errstate_holds_for_scalar_math(backend, fn):
    """Fixed on Triton: its host steps ran every op under the caller's error state, not the traced
    function's own np.errstate block around the node (`Node.errstate`), which the reference and cpu
    backends apply: `-x[0]` inside np.errstate(over="ignore") warned, and raised FloatingPointError under
    the caller's errstate raise where NumPy returns -128 (np.negative in a kernel was silent before the
    scalar ops became host steps). HostRunner now runs the call in that state."""
    traced = _trace(fn, (np.array([3, 2, 1], np.int8),), backend=backend)
    for v in ([-128, -128, 0], [-128, 5, -1]):
        x = (np.array(v, np.int8),)
        for state in ("warn", "raise", "ignore"):
            _same_report(_report(traced, x, state), _report(fn, x, state))


def _negated_twice(x):
    m = x.max()
    a = -m
    b = -m
    return a + 1, b * 2


@pytest.mark.xfail(strict=True, reason=(
    "not fixed (CSE, pre-existing and not special to these ops: np.log(x[0]) at two lines does the same): "
    "numtrace_ir.passes.cse merges two nodes with the same op and inputs made at different lines (or on "
    "one line: `x * -s + -s`), so -m at two lines warns once ('overflow encountered in scalar negative' at "
    "the first line), where NumPy warns at each (twice under 'always', once per line under the default "
    "filter)"))
def test_the_same_scalar_operator_at_two_lines_warns_at_both():
    traced = _trace(_negated_twice, (np.array([1, 2], np.uint8),), backend="reference")
    x = (np.array([0, 3], np.uint8),)
    _same_report(_report(traced, x), _report(_negated_twice, x))


def _kernel_before_a_scalar_step(x, i):
    return x * 0.0 + abs(i[0])


@pytest.mark.xfail(strict=True, reason=(
    "not fixed (cpu step order, pre-existing for every op the cpu backend runs as a NumPy step): "
    "NumPy computes x * 0.0 first ('invalid value encountered in multiply', raised under errstate raise), "
    "the cpu backend runs the scalar step abs(i[0]) before the fused pass that holds x * 0.0 (the pass "
    "reads its result), so under np.errstate(all='raise') the FloatingPointError names 'scalar absolute', "
    "and under over='raise', invalid='warn' the invalid warning is not said"))
def test_which_error_is_raised_first_on_the_cpu_backend():
    traced = _trace(_kernel_before_a_scalar_step, (np.ones(3), np.array([1, 2], np.int8)), backend="cpu")
    args = (np.array([np.inf, 1.0, 2.0]), np.array([-128, 2], np.int8))
    _same_report(_report(traced, args, "raise"), _report(_kernel_before_a_scalar_step, args, "raise"))


# --- Passing checks of the new paths --------------------------------------------------------------------

def _unary_and_divmod(x, y):
    s, t = x[0], y[0]
    return -s, abs(s), divmod(s, t), divmod(t, s), divmod(s, 3), divmod(7, s), divmod(s, -2.5), \
        divmod(s, x.shape[0] - 4)


def _extremes(dtype):
    if dtype == "?":
        return [True, False]
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return [info.min, info.max, 0, 1, 7]
    return [np.nan, np.inf, -np.inf, -0.0, 0.0, -7.25]


@pytest.mark.triton
@pytest.mark.parametrize("dtype", ["i1", "u1", "i8", "u8", "f2", "f4", "f8"])
def test_unary_and_divmod_of_numpy_scalars_of_every_kind(backend, dtype):
    """Values, types (NumPy scalars, not 0-d arrays) and warnings' texts of -s, abs(s) and divmod with
    scalars, Python numbers and a traced size, at each dtype's extremes and zero divisors."""
    ex = (np.array([5, 3, 1, 2], dtype), np.array([3], dtype))
    traced = _trace(_unary_and_divmod, ex, backend=backend)
    if np.dtype(dtype).kind in "iu":
        assert traced.code.count("np.scalar_unary_operator") == 2
    calls = [(np.array([a, 1, 2, 3, 4][:n], dtype), np.array([b], dtype))
             for a, b, n in zip(_extremes(dtype), _extremes(dtype)[::-1] + [0], (4, 5, 3, 4, 5, 4))]
    calls += [(np.array([v, 1, 2, 3], dtype), np.array([0], dtype)) for v in _extremes(dtype)]
    _matches(traced, _unary_and_divmod, calls, states=("warn", "raise", "ignore"))


def _scalar_math_into_arrays(x, i):
    s = i[0]
    q, r = divmod(s, i[1])
    n = -s
    y = x * n + abs(i[1])
    y += q
    x[1:] -= r
    i[0] = -i[0]
    return y, n, q, np.sqrt(np.abs(x)) * divmod(x[0], 3.0)[1]


@pytest.mark.parametrize("idtype", ["i1", "u1", "i8"])
def test_scalar_math_results_in_fused_array_ops_and_in_place_updates(mode, threads, idtype):  # noqa: F811
    """The results of the new ops read by the cpu backend's fused passes (interpreter and generated
    kernels, 1 and 2 threads) and written into the arguments; warnings' texts as NumPy's."""
    ex = (np.linspace(0.5, 3, 7), np.array([3, 2, 5, 4], idtype))
    traced = _trace(_scalar_math_into_arrays, ex, backend="cpu")
    info = np.iinfo(idtype)
    calls = [(np.array([np.inf, -0.0, 1.5, -2.0, 3.0]), np.array([info.min, -1 % (info.max + 1), 3], idtype)),
             (np.linspace(-1, 1, 9), np.array([info.max, 0, 1], idtype)),
             (np.linspace(-1, 1, 9)[::-2], np.array([7, 2, 1, 0], idtype)[::-1])]
    _matches(traced, _scalar_math_into_arrays, calls, states=("warn", "ignore"))
    for stats in traced.stats()["signatures"].values():   # one per shape
        assert stats["fused_groups"] >= 2 and (stats["generated_runs"] > 0) == (mode == "sync"), stats


_SOURCES = {
    "element": lambda x: x[0],
    "element of 2-d": lambda x: x.reshape(1, -1)[0, 0],
    "0-d array": lambda x: x[0, ...],                     # operators of 0-d arrays: the ufuncs
    "ufunc of a 0-d array": lambda x: np.negative(-x[0, ...]),   # a NumPy scalar again
    "np.asarray": lambda x: np.asarray(x[0]),
    "reduction": lambda x: x.max(),
    "dot": lambda x: x.dot(np.ones_like(x)),
    "np.take": lambda x: np.take(x, 0),
    "np.where": lambda x: np.where(True, x[0], x[1]),
    "flat": lambda x: x.flat[0],
    "negative strides": lambda x: x[::-1][-1],
    "Fortran-ordered 2-d": lambda x: np.asfortranarray(np.stack([x, x]))[0, 0],
}


@pytest.mark.triton
@pytest.mark.parametrize("source", list(_SOURCES))
def test_scalars_and_0d_arrays_from_every_source(backend, source):
    """Whether a value is a NumPy scalar (scalar math: warns) or a 0-d array (the ufunc: silent) follows
    NumPy for each way of making it."""
    src = _SOURCES[source]

    def fn(x):
        s = src(x)
        return -s, abs(s), divmod(s, -1), s

    traced = _trace(fn, (np.array([5, 6, 7], np.int8),), backend=backend)
    # (Triton's kernels report no floating-point errors: np.divmod of a 0-d array runs in one there.)
    states = ("ignore",) if backend == "triton" and "np.divmod(" in traced.code else ("warn", "raise")
    _matches(traced, fn, [(np.array([-128, -128, 0], np.int8),), (np.array([0, 1, 2], np.int8),)],
             states=states)


def _warns_at_lines(x):
    s = x[0]
    q, r = divmod(s,
                  x[1])
    return -s, abs(x[1]), q, r, (x.astype(np.float64).sum()
                                 ** 0.5)


@pytest.mark.triton
@pytest.mark.parametrize("action", ["always", "default", "once", "module", "error"])
def test_warnings_filters_see_numpys_warnings(backend, action):
    """Each filter action sees NumPy's warnings (file, line, count) or its error, over two calls in one
    filter context, so that the once-per-location registries act as NumPy's."""
    if backend == "triton" and action in ("default", "once", "module"):
        pytest.skip("Triton's interpreter (TRITON_INTERPRET=1) launches each kernel inside "
                    "warnings.catch_warnings(), which resets every once-per-location registry")
    traced = _trace(_warns_at_lines, (np.array([3, 2, 1], np.int8),), backend=backend)
    x = (np.array([-128, 0, 7], np.int8),)
    want = _report(_warns_at_lines, x, action=action, repeat=2)
    assert len(want[1]) == {"always": 6, "error": 0}.get(action, 3), want[1]
    _same_report(_report(traced, x, action=action, repeat=2), want)


def test_errstate_call_mode():
    """np.errstate's call mode gets NumPy's calls, in NumPy's order."""
    def fn(x):
        return divmod(x[0], x[1]), -x[0]

    traced = _trace(fn, (np.array([3, 2], np.int8),), backend="reference")
    for x in (np.array([-128, 0], np.int8), np.array([-128, -1], np.int8)):
        seen = []
        for f in (fn, traced):
            calls = []
            with np.errstate(all="call", call=lambda kind, flag, calls=calls: calls.append((kind, flag))):
                f(x)
            seen.append(calls)
        assert seen[0] == seen[1] and seen[0]


def test_saved_traces_with_the_new_ops_load(backend, tmp_path):
    traced = _trace(_unary_and_divmod, (np.array([5, 3, 1, 2], np.int16), np.array([3], np.int16)),
                    backend=backend)
    traced.save(tmp_path / "t.nt")
    loaded = nt.load(tmp_path / "t.nt", backend=backend)
    x = (np.array([-32768, 1, 2, 3], np.int16), np.array([-1], np.int16))
    _same_report(_report(loaded, x), _report(_unary_and_divmod, x))
