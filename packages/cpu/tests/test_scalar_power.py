"""np.scalar_power (``s ** p`` of NumPy scalars) on float32/float64 runs in a fused pass as the C library's
powf/pow, the functions NumPy's scalar math calls (classify's _scalar_power_plan, nt_opcodes.h's
NT_CPOW): NumPy's bits at special values (signed zeros, infinities, NaN, subnormals, negative bases,
huge and tiny exponents), constant and run-time exponents on either side, on the interpreter and the
generated kernels; its warnings and FloatingPointError name "scalar power", after the earlier ops'
reports. Operands NumPy sends elsewhere (promoted pairs, ints, an int constant float32 cannot hold, a
float constant whose conversion overflows) stay on NumPy's own operator, counted apart."""

import itertools

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType

FLOATS = [np.dtype(np.float32), np.dtype(np.float64)]
MODES = ["off", "sync"]   # the interpreter, generated kernels


def _special(dt: np.dtype) -> list:
    info = np.finfo(dt)
    return [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 1 / 3, 0.1, 2.5,
            -2.5, 10.0, -10.0, 1e3, -1e3, 127.0, 128.0, -129.0, 1e10, -1e10, float(info.max),
            -float(info.max), float(info.tiny), float(info.smallest_subnormal),
            -float(info.smallest_subnormal), float(info.eps), 1 + float(info.eps), 1 - float(info.epsneg),
            0.999, 1.001]


def _compiled(g: Graph, mode: str):
    old = compiler.set_mode(mode)
    try:
        return compile_graph(g, [v.type for v in g.inputs])
    finally:
        compiler.set_mode(old)


def _power_graph(base, exponent) -> Graph:
    """``base ** exponent``: a dtype is a 0-d input of it, anything else a constant of that value."""
    g = Graph()
    ops = []
    for k, x in enumerate((base, exponent)):
        if isinstance(x, np.dtype):
            ops.append(g.add_input(f"x{k}", TensorType(x, ())))
        else:
            ops.append(g.create_node("prim.Constant", [], attrs={"value": x}).output)
    g.set_outputs([g.create_node("np.scalar_power", ops).output])
    return g


def _bits(v) -> tuple:
    a = np.asarray(v)
    return a.dtype, a.tobytes()


def _eager(a, b):
    return (a[()] if isinstance(a, np.ndarray) else a) ** (b[()] if isinstance(b, np.ndarray) else b)


# float32 pairs whose powf differs from pow computed in double and rounded to float32.
_POWF_NOT_POW = [(1.5584338, 8.531173), (1.943792, -0.21805117), (1.5480047, 11.97788),
                 (0.1373031, 2.0756907)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_scalar_power_of_two_scalars_is_numpys_bits(dt, mode):
    """Every pair of special values (and random ones) as base and exponent: pow/powf's bits, NaNs
    included, and float32 pairs where pow in double, rounded, differs from powf."""
    exe = _compiled(_power_graph(dt, dt), mode)
    assert exe.stats()["scalar_powers"] == 1 and exe.stats()["fallbacks"] == 0
    rng = np.random.default_rng(1)
    values = _special(dt) + list(rng.standard_normal(12) * 4) + list(np.exp(rng.standard_normal(12) * 30))
    with np.errstate(all="ignore"):
        values = [np.array(v, dt) for v in values]
        pairs = [(np.array(a, dt), np.array(b, dt)) for a, b in _POWF_NOT_POW]
        for a, b in [*itertools.product(values, values), *pairs]:
            (got,) = exe(a, b)
            assert _bits(got) == _bits(_eager(a, b)), (a, b, got, _eager(a, b))


_CONSTANTS = [0.5, 2, 2.0, -1.0, -1, 3, -2.0, 0.0, -0.0, 1 / 3, 0.1, 1e-50, np.inf, -np.inf, np.nan, 2 ** 24,
              -(2 ** 24), 1e30]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("reflected", [False, True])
def test_scalar_power_with_a_python_number_constant(dt, mode, reflected):
    """``s ** c`` and ``c ** s``, c a Python float or int constant (a literal in a generated kernel:
    GCC does not fold pow(x, 2.0) into x * x), as NumPy converts c into the scalar's dtype."""
    for c in _CONSTANTS:
        exe = _compiled(_power_graph(c, dt) if reflected else _power_graph(dt, c), mode)
        assert exe.stats()["scalar_powers"] == 1 and exe.stats()["fallbacks"] == 0, c
        with np.errstate(all="ignore"):
            for s in _special(dt):
                s = np.array(s, dt)
                (got,) = exe(s)
                want = _eager(c, s) if reflected else _eager(s, c)
                assert _bits(got) == _bits(want), (c, s, got, want)


# (base, exponent) whose scalar math converts the other operand exactly into the result's dtype.
_LOWERED_MIXED = [("f8", "f4"), ("f4", "f8"), ("f8", "i8"), ("i8", "f8"), ("f8", "i4"), ("f8", "u8"),
                  ("f4", "i2"), ("u1", "f4"), ("f4", "?")]
# Routed elsewhere by NumPy: promotion to a third dtype (np.power's loop), int scalar math, a bool base
# (np.bool_ has no scalar math: np.power's loop).
_NUMPY_MIXED = [("f4", "i4"), ("i4", "f4"), ("i8", "i8"), ("f4", "i8"), ("?", "f8")]


def _mixed_values(code: str) -> list:
    dt = np.dtype(code)
    if dt.kind == "b":
        return [np.array(v, dt) for v in (False, True)]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return [np.array(v, dt) for v in (0, 1, 2, 3, 7, info.max, info.min, -1 if dt.kind == "i" else 5)]
    return [np.array(v, dt) for v in _special(dt)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("a", "b"), _LOWERED_MIXED + _NUMPY_MIXED, ids=str)
def test_scalar_power_of_mixed_dtypes(a, b, mode):
    exe = _compiled(_power_graph(np.dtype(a), np.dtype(b)), mode)
    lowered = (a, b) in _LOWERED_MIXED
    assert (exe.stats()["scalar_powers"], exe.stats()["scalar_powers_numpy"]) == (lowered, not lowered)
    with np.errstate(all="ignore"):
        for x, y in itertools.product(_mixed_values(a), _mixed_values(b)):
            if np.dtype(a).kind in "iu" and np.dtype(b).kind in "iu" and y < 0:
                continue   # NumPy raises for an int to a negative int power (the step does too)
            (got,) = exe(x, y)
            assert _bits(got) == _bits(_eager(x, y)), (x, y, got, _eager(x, y))


@pytest.mark.parametrize(("dt", "c"), [("f4", 2 ** 24 + 1), ("f4", 1e300), ("f4", -1e39),
                                       ("f8", 2 ** 60 + 1)])
def test_constants_numpy_converts_otherwise_stay_on_numpy(dt, c):
    """An int constant float32 (or float64) does not hold exactly (NumPy rounds it to double first, the
    constant would round once), and a float constant float32 overflows on (NumPy warns 'overflow
    encountered in cast'): NumPy's operator, with its warnings."""
    exe = _compiled(_power_graph(np.dtype(dt), c), "off")
    assert (exe.stats()["scalar_powers"], exe.stats()["scalar_powers_numpy"]) == (0, 1)
    s = np.array(1.5, dt)
    with np.errstate(all="warn"):
        want, _, expected = testing.fp_reports(lambda: _eager(s, c))
        got, _, actual = testing.fp_reports(lambda: exe(s))
    assert got == want and _bits(actual[0]) == _bits(expected)


_ERRING = [(0.0, -1.0), (-0.0, -3.0), (-2.0, 0.5), (10.0, 400.0), (10.0, -400.0), (1e30, 2.0), (-np.inf, 0.5),
           (np.nan, 0.0), (1.0, np.nan), (1e-30, 2.0), (2.0, -1074.5)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", FLOATS, ids=str)
def test_scalar_power_reports_as_numpy(dt, mode):
    """'divide by zero', 'invalid value', 'overflow', 'underflow' encountered in scalar power: warned,
    raised (FloatingPointError), ignored as the caller's np.errstate says, with NumPy's answer."""
    exe = _compiled(_power_graph(dt, dt), mode)
    for a, b in _ERRING:
        a, b = np.array(a, dt), np.array(b, dt)
        for state in ({"all": "warn"}, {"all": "raise"}, {"all": "ignore"}, {"under": "warn"},
                      {"divide": "ignore", "invalid": "raise", "over": "warn"}):
            with np.errstate(**state):
                want, want_raised, expected = testing.fp_reports(lambda a=a, b=b: _eager(a, b))
                got, got_raised, actual = testing.fp_reports(lambda a=a, b=b: exe(a, b))
            assert (got, got_raised) == (want, want_raised), (a, b, state)
            if want_raised is None:
                assert _bits(actual[0]) == _bits(expected), (a, b, state)


@pytest.mark.parametrize("mode", MODES)
def test_scalar_power_raises_after_an_earlier_ops_report(mode):
    """``(x * 1e-300).max() ** -1.0``: under np.errstate(all="raise") the multiply's 'underflow' raises
    first, as in NumPy; under "warn" both warn, in order, and the answer is NumPy's."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(np.float64), (5,)))
    const = g.create_node("prim.Constant", [], attrs={"value": 1e-300}).output
    y = g.create_node("np.multiply", [x, const]).output
    m = g.create_node("np.max", [y], attrs={"axis": None, "keepdims": False}).output
    minus_one = g.create_node("prim.Constant", [], attrs={"value": -1.0}).output
    g.set_outputs([y, g.create_node("np.scalar_power", [m, minus_one]).output])
    exe = _compiled(g, mode)
    assert exe.stats()["scalar_powers"] == 1 and exe.stats()["fallbacks"] == 0

    def eager(v):
        y = v * 1e-300
        return y, y.max() ** -1.0

    for v in (np.array([1e-300, 0.0, -1.0, -2.0, -3.0]), np.zeros(5), np.full(5, -1.0)):
        for state in ("warn", "raise"):
            with np.errstate(all=state):
                want, want_raised, expected = testing.fp_reports(lambda v=v: eager(v))
                got, got_raised, actual = testing.fp_reports(lambda v=v: exe(v))
            assert (got, got_raised) == (want, want_raised), (v, state)
            if want_raised is None:
                assert all(_bits(p) == _bits(q) for p, q in zip(actual, expected))
