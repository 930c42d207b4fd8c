"""Hunted in branch scalars' changes: NumPy scalar arguments traced as NumPy scalars (their kind checked
on every call), `**` of a NumPy scalar constant to a traced value told from an np.power call by the
caller's instruction (np.scalar_power), and ``+ - * / // %`` of NumPy scalar constants with traced sizes
(np.scalar_operator). Traced at one input, called at others, under np.errstate warn and raise, on the
reference and cpu backends (interpreter and generated kernels, 1 and 2 threads), against eager NumPy.
Findings are strict xfails with their cause; the passing checks guard the paths the change added."""

from __future__ import annotations

import functools
import operator
import warnings

import numpy as np
import numtrace as nt
import pytest
from test_hunt_breadth import mode  # noqa: F401  (mode: the cpu kernel modes' fixture)
from test_hunt_hunt_sect import threads  # noqa: F401  (1 and 2 threads' fixture)
from test_hunt_known import _f8, _matches, _trace

_NINF = np.float64(-np.inf)


def _sizes(*ns):
    return [(np.arange(float(n)),) for n in ns]


# --- Findings ------------------------------------------------------------------------------------------

_CALLED_OPERATORS = {
    "sum-start": lambda x: sum([x.shape[0]], np.int8(127)),
    "reduce-operator.add": lambda x: functools.reduce(operator.add, [np.int8(127), x.shape[0]]),
    "dunder-add": lambda x: np.int8(127).__add__(x.shape[0]),
    "dunder-pow": lambda x: _NINF.__pow__(x.shape[0] / 4),
    "operator.ipow": lambda x: operator.ipow(_NINF, x.shape[0] / 4),
    "divmod": lambda x: divmod(np.int8(7), x.shape[0] - 2),
}


@pytest.mark.xfail(strict=True, reason=(
    "a NumPy scalar constant's operator run by a call (sum()'s start value, functools.reduce(operator.add), "
    "s.__add__(n), s.__pow__(n / 4), operator.ipow, divmod) reaches __array_ufunc__ from a CALL "
    "instruction, as an explicit np.add / np.power does, so the ufunc is recorded where NumPy runs its "
    "scalar math: sum([n], np.int8(127)) at n = 1 wraps to -128 silently where NumPy warns 'overflow "
    "encountered in scalar add' and raises under errstate raise; s.__pow__(n / 4) at n = 2 is NaN where "
    "NumPy gives C pow's +inf; divmod warns 'divmod' for 'scalar divmod'. sharp-edges names pow() and "
    "operator.pow only"))
@pytest.mark.parametrize("name", list(_CALLED_OPERATORS))
def test_a_numpy_scalar_constants_operator_run_by_a_call(backend, name):
    fn = _CALLED_OPERATORS[name]
    traced = _trace(fn, _sizes(4)[0], backend=backend)
    _matches(traced, fn, _sizes(1, 2))


def _array_to_a_scalar_arguments_power(x, s):
    return x ** s


def test_an_array_to_a_numpy_scalar_arguments_power(backend):
    """np.power of an array and a NumPy scalar exponent is NumPy's loop (NaN at -inf ** 0.5, -0.0 at
    -0.0 ** 0.5, 'invalid value' warned) on every backend."""
    traced = _trace(_array_to_a_scalar_arguments_power, (np.ones(3), np.float64(2.0)), backend=backend)
    _matches(traced, _array_to_a_scalar_arguments_power,
             [(np.array([-0.0, -np.inf, 2.0]), np.float64(0.5))], states=("warn",))


def _folded_scalar_of_a_size(x):
    return np.float32(x.shape[0]) * np.float32(1e38)


@pytest.mark.xfail(strict=True, reason=(
    "pre-existing (main too), beside the change: np.float32(n) of a traced size guards n and folds the "
    "expression into a constant while tracing, so its 'overflow encountered in scalar multiply' is issued "
    "at trace time only: a call under np.errstate(over='raise') returns inf where NumPy raises "
    "FloatingPointError, and warns nothing under 'warn' (sharp-edges says so of values computed only "
    "from constants; this one is computed from a size)"))
def test_a_numpy_scalar_made_from_a_size_keeps_its_overflow(backend):
    traced = _trace(_folded_scalar_of_a_size, _sizes(5)[0], backend=backend)
    _matches(traced, _folded_scalar_of_a_size, _sizes(5))


_WARN_AT_THE_TRACED_SHAPE = {
    "scalar_operator": lambda x: np.int8(127) + x.shape[0],
    "scalar_power": lambda x: np.float64(-0.0) ** (x.shape[0] - 3),
    "log-of-a-fill": lambda x: x + np.log(np.zeros(x.shape)),
}


@pytest.mark.parametrize("name", list(_WARN_AT_THE_TRACED_SHAPE))
def test_a_node_folded_for_the_traced_shape_keeps_its_warnings(backend, name):
    """Fixed (numtrace_ir.passes._evaluate): the cpu backend folds a node computed only from the
    signature's sizes (np.int8(127) + n, np.float64(-0.0) ** (n - 3), np.log of a fill) when its NumPy
    reference does not warn, but that reference ran under the compiling caller's np.errstate: a trace made
    under errstate ignore (the executable of the example's signature is compiled while tracing) folded
    them, so every call at the traced shape returned the wrapped int8 / -inf silently, also under
    errstate raise, where NumPy raises. Other shapes, compiled at a call, were right."""
    fn = _WARN_AT_THE_TRACED_SHAPE[name]
    traced = _trace(fn, (np.ones(2),), backend=backend)   # (under np.errstate(all="ignore"))
    _matches(traced, fn, [(np.ones(2),), (np.ones(5),), (np.ones(2),)])


def _scalar_math_warns(x):
    return (np.int8(127) + x.shape[0], np.float64(-0.0) ** (x.shape[0] - 3), -(x.astype(np.uint8)[0] + 1),
            divmod(x[0], 0.0))


def test_numpy_scalar_math_warnings_name_the_users_line(backend):
    """Fixed: np.scalar_operator's, np.scalar_unary_operator's and np.scalar_power's warnings at a call
    named numtrace_ir/ops/elementwise.py (their references' lines): at_location (numtrace_ir.interpreter)
    puts the frame that calls an op's reference at the node's line, which is the frame NumPy warns from
    when the reference is NumPy's C function; these references were Python functions (they turn 0-d
    arrays back into scalars first), so NumPy's scalar math warned from their own frame. The interpreter
    now converts the inputs first and calls the C operator from the node's line (`OnScalars`).
    sharp-edges: 'A warning NumPy issues for its caller names the line of your call'."""
    traced = _trace(_scalar_math_warns, (np.zeros(5),), backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traced(np.zeros(2))
    assert sorted(str(w.message) for w in caught) == ["divide by zero encountered in scalar power",
                                                      "invalid value encountered in scalar divmod",
                                                      "overflow encountered in scalar add",
                                                      "overflow encountered in scalar negative"]
    assert {(w.filename, w.category) for w in caught} == {(__file__, RuntimeWarning)}, [
        (w.filename, w.lineno) for w in caught]
    _matches(traced, _scalar_math_warns, [(np.zeros(2),), (np.ones(4),)], states=("warn", "raise", "ignore"))


# --- Passing checks: NumPy scalar arguments ---------------------------------------------------------------

def _scalar_argument_uses(x, s, i):
    y = x[i:] * s                                   # slice bound from an int scalar argument
    return (s, s * 2, np.sqrt(s), s.astype(np.float32), s[()], s.real, x[i], x.reshape(i, -1)[0],
            np.stack([s, s]), np.where(x > s, x, s), np.maximum(s, x[0]), s ** x[1], x[1] ** s, y,
            np.float32(-np.inf) ** s, s ** np.float32(0.5), s.item() * x, i + 1, i // 2, -i, i ** 2)


def test_numpy_scalar_arguments_in_array_ops_indices_shapes_and_outputs(backend):
    """A float64 and an int64 NumPy scalar argument used as values, slice bounds, indices and shapes,
    returned as they are and through ops: the results' types (np.float64, np.float32, 0-d ndarray) and
    bits are NumPy's at special values and other sizes."""
    x = np.arange(1.0, 7.0)
    traced = _trace(_scalar_argument_uses, (x, np.float64(2.0), np.int64(2)), backend=backend)
    calls = [(np.arange(1.0, 7.0) * k, np.float64(v), np.int64(i))
             for k, v, i in ((1, -0.0, 2), (-1, -np.inf, 3), (2, 0.5, 1), (1, np.nan, 5))]
    _matches(traced, _scalar_argument_uses, calls, states=("warn",))


def _branch_on_a_scalar(x, s):
    if s > 0:
        return x * 1.0, s ** 0.5
    return x * 2.0, s ** 0.5


def _branch_on_a_size(x, s):
    if x.shape[0] > 3:
        return x[:2] * 1.0, s ** 0.5
    return x * 2.0, s ** 0.5


@pytest.mark.parametrize("fn", [_branch_on_a_scalar, _branch_on_a_size])
def test_a_traced_again_numpy_scalar_argument_stays_a_numpy_scalar(backend, fn):
    """A guard broken by a call (on the scalar's value or on a size) traces again from that call's
    arguments: the scalar is traced as a NumPy scalar again (C pow's +0.0 and +inf, not np.sqrt's)."""
    traced = _trace(fn, (np.ones(5), np.float64(4.0)), backend=backend)
    calls = [(np.ones(2), np.float64(-0.0)), (np.ones(2), np.float64(-np.inf)), (np.ones(7), np.float64(4.0))]
    _matches(traced, fn, calls, states=("warn",))
    assert traced.stats()["retraces"] == 1


def _kinds(x, s, a):
    return (_NINF ** a, s ** a, a ** s, np.float64(-0.0) ** a, a ** 0.5, s + a, a + s, np.float16(2) * s,
            np.int8(100) + a.astype(np.int8))


def test_a_numpy_scalar_and_a_0d_array_argument_side_by_side():
    """NumPy routes a 0-d array's operators to the ufuncs (NaN at -inf ** 0.5) and a NumPy scalar's to its
    scalar math; mixed, the array decides (np.float64(-inf) ** np.array(0.5) is NaN). (Reference backend:
    the cpu backend's np.power of 0-d operands is test_hunt_known's finding.)"""
    a = np.array
    traced = _trace(_kinds, (np.ones(2), np.float64(2.0), a(3.0)), backend="reference")
    calls = [(np.ones(2), np.float64(-np.inf), a(0.5)), (np.ones(1), np.float64(0.5), a(-np.inf)),
             (np.ones(1), np.float64(0.5), a(-0.0)), (np.ones(1), np.float64(-0.0), a(0.5))]
    _matches(traced, _kinds, calls, states=("warn",))


@pytest.mark.parametrize("scalar", [np.float16, np.uint64, np.int8, np.bool_, np.complex128])
def test_numpy_scalar_arguments_of_more_dtypes(backend, scalar):
    """Operators of a NumPy scalar argument whose scalar math NumPy gives the ufuncs' results (no int
    overflow here: that is the documented, known difference), as values and outputs."""
    kind = np.dtype(scalar).kind

    def fn(x, s):
        common = (x * s, s ** 2, s, np.where(x > 1, x, s), abs(s), *((s * 2,) if kind != "c" else ()))
        if kind == "b":
            return (*common, s + s, ~s, np.logical_not(s), s / 1, s - 0.5)
        if kind == "c":
            return (*common, s ** 0.5, s ** -1, s ** s, s.real, s.imag, np.conj(s), np.angle(s))
        if kind == "f":
            return (*common, s ** 0.5, s ** -1, s / 2, -s, np.full(2, s))   # (// and %: 'scalar' warnings)
        return (*common, s + 1, s * 1.5, s / 2, s // 2, s % 3, ~s, s << 2, s >> 1, s & 5,
                np.full(2, s), np.arange(s))

    values = {"b": [True, False], "u": [5, 0, 7], "i": [5, 0, -7], "f": [-0.0, np.inf, -np.inf, np.nan, 2.25],
              "c": [complex(-np.inf, 0), -0.0, complex(0, np.inf)]}
    traced = _trace(fn, (np.arange(4.0), scalar(3)), backend=backend)
    _matches(traced, fn, [(np.arange(float(n)), scalar(v)) for n, v in zip((3, 1, 5, 2, 4), values[kind])],
             states=("warn",))


def test_numpy_scalar_arguments_in_containers_and_kinds_refused():
    """A NumPy scalar in a dict or tuple argument is traced as one: the other kind (a 0-d array, a Python
    float) is refused where it stands; another dtype asks for a new trace."""
    def in_dict(d):
        return d["x"] * d["s"] + d["s"] ** 0.5

    def in_tuple(x, ss):
        return x * ss[0] + ss[1] ** 0.5

    traced = _trace(in_dict, ({"x": np.ones(3), "s": np.float64(4.0)},), backend="reference")
    _matches(traced, in_dict, [({"x": np.ones(2), "s": np.float64(-0.0)},)], states=("warn",))
    with pytest.raises(TypeError, match="argument 'd_s' is a ndarray, but the function was traced with a "
                                        "NumPy scalar"):
        traced({"x": np.ones(3), "s": np.array(-np.inf)})
    pair = _trace(in_tuple, (np.ones(3), (np.float64(1.0), np.float32(4.0))), backend="reference")
    _matches(pair, in_tuple, [(np.ones(3), (np.float64(2.0), np.float32(-0.0)))], states=("warn",))
    with pytest.raises(TypeError, match="argument 'ss_0' is a ndarray"):
        pair(np.ones(3), (np.array(1.0), np.float32(-0.0)))
    with pytest.raises(TypeError, match="argument 'ss_1' is a float, but the function was traced with a "
                                        "NumPy scalar"):
        pair(np.ones(3), (np.float64(1.0), 4.0))
    with pytest.raises(TypeError, match="has dtype float64, but the function was traced with float32"):
        pair(np.ones(3), (np.float64(1.0), np.float64(4.0)))


def _inner(x, s):
    return x + s ** 0.5, s ** 0.5, s


def test_a_traced_function_with_a_numpy_scalar_argument_inlined_with_a_constant():
    """Called while another function is traced with a NumPy scalar constant, a traced NumPy scalar or a
    scalar argument of the outer function: NumPy scalar math and types in each."""
    inner = _trace(_inner, (np.ones(3), np.float64(4.0)), backend="reference")
    outer = _trace(lambda x: inner(x, np.float64(-0.0)), (np.ones(3),), backend="reference")
    _matches(outer, lambda x: _inner(x, np.float64(-0.0)), [(np.ones(2),)], states=("warn",))
    passed = _trace(lambda x, s: inner(x, s), (np.ones(3), np.float64(3.0)), backend="reference")
    _matches(passed, _inner, [(np.ones(3), _NINF), (np.ones(1), np.float64(-0.0))], states=("warn",))
    summed = _trace(lambda x: inner(x, x.sum()), (np.ones(3),), backend="reference")
    _matches(summed, lambda x: _inner(x, x.sum()), [_f8(-np.inf, 1.0)], states=("warn",))


def _fused(x, s, t):
    y = x * s + t
    return y, y * s, (x > s).sum(), s ** 0.5 * x, x ** 2 * s, s, t * 2, np.where(x > t, x, s)


@pytest.mark.parametrize("dtype, scalar, other", [
    ("f8", np.float64, np.int64), ("f4", np.float32, np.int8), ("f4", np.float64, np.float16),
    ("c8", np.complex64, np.float32)])
def test_numpy_scalar_arguments_in_generated_kernels(mode, threads, dtype, scalar, other):  # noqa: F811
    """NumPy scalar arguments broadcast into fused passes (interpreter and generated kernels, 1 and 2
    threads, short and long rows), with promotion by the scalars' strong dtypes."""
    traced = _trace(_fused, (np.ones(4, dtype), scalar(2), other(3)), backend="cpu")
    calls = [(np.linspace(-3, 3, n).astype(dtype), scalar(v), other(w))
             for n, v, w in ((1, -0.0, 1), (7, np.inf, 1), (33, -np.inf, 0), (1000, 0.5, 3), (5, np.nan, 2))]
    _matches(traced, _fused, calls, states=("warn",))
    signatures = traced.stats()["signatures"].values()
    assert any(s.get("generated_runs") for s in signatures) == (mode == "sync")


# --- Passing checks: the caller's instruction ----------------------------------------------------------

def _decorated(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)
    return wrapper


@_decorated
def _decorated_operators(x):
    return _NINF ** (x.shape[0] / 4), np.int8(127) + x.shape[0]


_exec_namespace = {"np": np, "_NINF": _NINF}
exec("def _executed(x):\n    return _NINF ** (x.shape[0] / 4), np.int8(127) + x.shape[0]", _exec_namespace)

_OPERATOR_PLACES = {
    "lambda": lambda x: (lambda n: (_NINF ** (n / 4), np.int8(127) + n))(x.shape[0]),
    "comprehension": lambda x: [_NINF ** (x.shape[0] / k) for k in (4, 2)],
    "generator": lambda x: tuple(np.int8(127) + x.shape[0] * k for k in (1, 2)),
    "decorated": _decorated_operators,
    "exec": _exec_namespace["_executed"],
    "nested-pow": lambda x: np.float64(2) ** np.float64(-3) ** (x.shape[0] / 4),
    "reflected": lambda x: (x.shape[0] + np.int8(125), (x.shape[0] / 4) * np.float32(3e38)),
}


@pytest.mark.parametrize("name", list(_OPERATOR_PLACES))
def test_numpy_scalar_constants_operators_wherever_the_code_runs(backend, name):
    """The operator is read from the frame that runs it: a lambda's, a comprehension's, a generator's, a
    decorated function's, exec'd code's; right-associative ** chains; a traced number on the left."""
    fn = _OPERATOR_PLACES[name]
    traced = _trace(fn, _sizes(4)[0], backend=backend)
    assert "np.scalar_" in traced.code and "np.add(" not in traced.code and "np.power(" not in traced.code
    _matches(traced, fn, _sizes(1, 2, 3, 200))


def test_ufunc_calls_inside_and_around_a_power_stay_ufuncs():
    """np.power / np.add called in a `**` expression's operand or on its result are calls, recorded as the
    ufuncs (NumPy's loops), while the `**` itself is scalar math."""
    def fn(x):
        return (_NINF ** np.power(x[0], 1.0), np.power(_NINF, x[0]) ** 1.0,
                np.add(np.int8(127), x.shape[0]) ** 1, _NINF ** np.add(x[0], 0.0))

    traced = _trace(fn, _f8(0.5, 2.0), backend="reference")
    assert traced.code.count("np.scalar_power") == 4 and traced.code.count("np.power(") == 2
    assert traced.code.count("np.add(") == 2
    _matches(traced, fn, [_f8(0.5, 3.0), _f8(-0.0, 1.0)], states=("warn",))


# --- Passing checks: constants with traced sizes ----------------------------------------------------------

def _more_constant_operators(x):
    n = x.shape[0]
    f = n / 4
    return (np.uint64(5) - n, n - np.uint64(5), np.uint64(2**63) + n * 2**60, np.bool_(True) + n,
            np.bool_(True) * f, np.complex64(1j) * n, np.complex128(1 + 1j) / (n - 3), f * np.float32(3e38),
            np.int8(-128) // (n - 3), np.int8(5) % (n - 2), np.int8(100) + f, np.float16(1) + n,
            np.int64(7) / n, np.uint8(200) + n * 30, np.int32(5) - f, np.int16(3) - (-n),
            np.float64(0.0) % (n - 2), np.float32(-0.0) // (n - 2), np.int64(-2**63) - n,
            np.uint64(2**64 - 1) // n, np.int64(-7) % (2 - n), np.bool_(True) - n, np.bool_(True) // (n - 2),
            np.complex128(-8) ** f, np.bool_(True) ** n, np.float16(-np.inf) ** f, np.uint8(2) ** n)


def _constant_in_place(x):
    n = x.shape[0]
    a = np.int8(100)
    a += n
    b = np.float32(3e38)
    b *= n
    c = np.uint8(1)
    c -= n
    d = np.int16(7)
    d //= n - 2
    e = np.int16(7)
    e %= n - 2
    g = np.float16(2)
    g /= n - 2
    h = np.int8(3)
    h **= n
    return a, b, c, d, e, g, h


@pytest.mark.parametrize("fn", [_more_constant_operators, _constant_in_place])
def test_more_numpy_scalar_constants_with_traced_sizes(backend, fn):
    """uint64 (with negative results), bool, complex, float16, int64's minimum, in-place forms, Python
    floats from sizes: values, types, warnings and errors under errstate warn and raise."""
    traced = _trace(fn, _sizes(5)[0], backend=backend)
    assert "np.scalar_operator" in traced.code
    _matches(traced, fn, _sizes(1, 2, 3, 4, 40, 100))


def _out_of_range(x):
    return np.int8(100) + x.shape[0], np.uint8(3) - x.shape[0], x.shape[0] * np.int16(2)


def test_a_traced_size_out_of_a_numpy_scalars_range_raises_as_numpy(backend, tmp_path):
    """NumPy 2 refuses a Python int out of the scalar's range (OverflowError); the traced size is such an
    int at run time, so the trace raises the same; also after save and load."""
    traced = _trace(_out_of_range, _sizes(5)[0], backend=backend)
    traced.save(tmp_path / "t.nt")
    loaded = nt.load(tmp_path / "t.nt", backend=backend)
    for t in (traced, loaded):
        _matches(t, _out_of_range, _sizes(127, 128))
        for n in (300, 70000):
            with pytest.raises(OverflowError, match="out of bounds for"):
                t(np.zeros(n))
            with pytest.raises(OverflowError, match="out of bounds for"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _out_of_range(np.zeros(n))


# --- Passing checks: operators of traced NumPy scalars -----------------------------------------------------

def _traced_int_scalar_operators(x):
    a, b = x[0], x[1]                     # x[i] of a 1-d array: NumPy scalars
    t = x.max()                           # a full reduction's result
    s = a + b
    s += 1                                # in place: a new scalar
    u = x.astype(np.uint8)[2]
    n = x.shape[0]
    return (s, a - b, a * 2, 3 * b, t * t, a // b, a % b, a / b, u - a, a + n, n - a, np.int8(100) + a,
            b - np.int16(1), (b + a) * b, a + True, False - a, np.bool_(True) + a,
            a * np.float64(0.5), np.add(a, b), x + a, x * t)   # a float scalar, a call, arrays: ufuncs


_INT8_CALLS = [(np.array(v, np.int8),) for v in ([127, 1, 5], [-128, -1, 0], [100, 0, 3], [3, 4, -56],
                                                 [1, 2, 3, 4, 5])]


@pytest.mark.triton
def test_operators_of_traced_numpy_int_scalars_are_numpy_scalar_math(backend, tmp_path):
    """+ - * / // % (and +=) of traced NumPy int scalars (x[i], a reduction's result) with int and bool
    scalars and Python ints (traced sizes too) run NumPy's scalar math, np.scalar_operator: int overflow
    warned ('overflow encountered in scalar add'), raised under errstate raise, silent under ignore; the
    ufuncs on 0-d arrays wrapped silently. An explicit np.add and array operands stay the ufuncs. Also after
    the checker's second trace and after save and load."""
    traced = _trace(_traced_int_scalar_operators, (np.array([100, 50, 3], np.int8),), backend=backend,
                    check_inputs=[(np.array([1, 2, 3, 4], np.int8),)])
    assert traced.code.count("np.scalar_operator") == 19
    assert "np.add(v" in traced.code and "np.multiply(x, " in traced.code
    traced.save(tmp_path / "t.nt")
    loaded = nt.load(tmp_path / "t.nt", backend=backend)
    for t in (traced, loaded):
        _matches(t, _traced_int_scalar_operators, _INT8_CALLS, states=("warn", "raise", "ignore"))


def _int_scalar_argument_operators(x, s):
    return s + 1, x[0] * s, s - x.shape[0], x + s


@pytest.mark.triton
def test_operators_of_a_numpy_int_scalar_argument_are_numpy_scalar_math(backend):
    """A NumPy int scalar argument is a NumPy scalar too: its operators overflow as NumPy's scalar math."""
    traced = _trace(_int_scalar_argument_operators, (np.array([1, 2], np.int8), np.int8(3)), backend=backend)
    assert traced.code.count("np.scalar_operator") == 3
    _matches(traced, _int_scalar_argument_operators,
             [(np.array([2, 0], np.int8), np.int8(127)), (np.array([5, 1, 1], np.int8), np.int8(-128))],
             states=("warn", "raise", "ignore"))


def _float_scalar_operators(x):
    a, t = x[0], x.sum()
    return (a + t, a - 1.0, t * a, t / x.shape[0], x / t, (x * x).sum() ** 0.5, a // t, t % 2.0,
            a // x.shape[0])


@pytest.mark.triton
def test_float_scalar_operators_keep_the_ufuncs_but_floor_division_and_remainder(backend):
    """Float + - * / of NumPy scalars stay the ufuncs, which the backends fuse (IEEE gives NumPy's bits);
    `//` and `%` run NumPy's scalar math for its warnings' names ('scalar remainder'). (Triton's kernels
    do not report floating-point errors, docs/triton.md: there its values only.)"""
    traced = _trace(_float_scalar_operators, _f8(1.0, 2.0, 3.0), backend=backend)
    assert traced.code.count("np.scalar_operator") == 3
    _matches(traced, _float_scalar_operators,
             [_f8(np.inf, 2.0), _f8(-0.0, 0.0), _f8(1e308, 1e308, -0.0), _f8(np.nan, 1.0, 5.0)],
             states=("ignore",) if backend == "triton" else ("warn", "raise", "ignore"))


def _zero_d_array_operators(x):
    z = np.asarray(x[0])                  # a 0-d array: the ufunc, which wraps silently...
    w = z + 127
    return w, x[:1].reshape(()) * 2, np.int8(127) + z, w + 127   # ...and gives a NumPy scalar: scalar math


@pytest.mark.triton
def test_operators_of_0d_arrays_stay_the_ufuncs(backend):
    """A 0-d array is no NumPy scalar: its operators are the ufuncs (no overflow warning), whose result for
    0-d operands is a NumPy scalar, whose operators are scalar math again."""
    traced = _trace(_zero_d_array_operators, (np.array([1, 2], np.int8),), backend=backend)
    assert traced.code.count("np.scalar_operator") == 1
    _matches(traced, _zero_d_array_operators, _INT8_CALLS[:3], states=("warn", "raise", "ignore"))


def _int_scalar_negation(x):
    a, u, w = x[0], x.astype(np.uint8)[1], x.astype(np.int64).min()
    return -a, abs(a), -u, abs(u), -w, abs(w), +a, ~a, -(a + 1), np.negative(a), -x[1:], -x.astype(float)[0]


@pytest.mark.triton
def test_a_traced_int_scalars_negation_reports_its_overflow(backend, tmp_path):
    """Unary - and abs() of a traced NumPy int scalar run NumPy's scalar math, np.scalar_unary_operator:
    'overflow encountered in scalar negative' ('scalar absolute') at the type's minimum and for an
    unsigned nonzero, a FloatingPointError under errstate raise; np.negative / np.absolute on a 0-d array
    wrapped silently. + and ~ (never warned), an explicit np.negative, arrays and float scalars stay the
    ufuncs. Also after the checker's second trace and after save and load."""
    traced = _trace(_int_scalar_negation, (np.array([1, 2], np.int8),), backend=backend,
                    check_inputs=[(np.array([3, 4, 5], np.int8),)])
    assert traced.code.count("np.scalar_unary_operator") == 7, traced.code
    traced.save(tmp_path / "t.nt")
    loaded = nt.load(tmp_path / "t.nt", backend=backend)
    for t in (traced, loaded):
        _matches(t, _int_scalar_negation,
                 [(np.array(v, np.int8),) for v in ([-128, 0], [127, 3], [-1, -128])],
                 states=("warn", "raise", "ignore"))
