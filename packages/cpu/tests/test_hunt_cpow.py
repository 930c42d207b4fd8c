"""Hunt of np.scalar_power lowered to C pow / powf in a pass (classify._scalar_power_plan, NT_CPOW):
inputs where the trace and eager NumPy differ (bits, reports in order, which arrays change), beyond
test_scalar_power.py. Findings stay here as regressions; the checks that passed guard the paths.

Findings: a bool base (``np.False_ ** np.float32(-inf)``) was lowered, but np.bool_ has no scalar
math: its ``**`` is np.power's loop, which raises 'divide by zero' at ``0 ** -inf`` where C pow
raises nothing, so the call returned inf without NumPy's warning or FloatingPointError (fixed: a
bool base stays on NumPy's operator). The strict xfails are differences this lowering newly reaches
or that predate it (see their reasons)."""

import operator
import warnings

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler
from numtrace_ir import Graph
from numtrace_ir.types import TensorType

MODES = ["off", "sync"]   # the interpreter, generated kernels
F4, F8 = np.dtype(np.float32), np.dtype(np.float64)


def _compiled(g: Graph, mode: str, updates=None):
    old = compiler.set_mode(mode)
    try:
        return compile_graph(g, [v.type for v in g.inputs], updates)
    finally:
        compiler.set_mode(old)


def _const(g: Graph, value):
    return g.create_node("prim.Constant", [], attrs={"value": value}).output


def _node(g: Graph, op: str, *ins, **attrs):
    return g.create_node(op, list(ins), attrs=attrs).output


def _scalar_graph(a, b) -> Graph:
    """``a ** b``: a dtype is a 0-d input of it, anything else a constant of that value."""
    g = Graph()
    ops = [g.add_input(f"x{k}", TensorType(x, ())) if isinstance(x, np.dtype) else _const(g, x)
           for k, x in enumerate((a, b))]
    g.set_outputs([_node(g, "np.scalar_power", *ops)])
    return g


def _bits(v) -> tuple:
    a = np.asarray(v)
    return a.dtype, a.shape, a.tobytes()


def _outcome(fn, *args):
    """What `fn(*args)` gives, NumPy's way: the RuntimeWarnings in order (not sorted: the order of an earlier
    op's report and the power's is checked), the FloatingPointError's (or ValueError's) message or None,
    the results' bits (None when it raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, raised = fn(*args), None
        except FloatingPointError as exc:
            result, raised = None, str(exc).rsplit("FloatingPointError: ", 1)[-1]
        except ValueError as exc:   # a traced call's names the node first
            result, raised = None, "ValueError: " + str(exc).rsplit("ValueError: ", 1)[-1]
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    bits = None if result is None else [_bits(r) for r in (result if isinstance(result, (tuple, list))
                                                           else (result,))]
    return said, raised, bits


def _scalar(v):
    return v[()] if isinstance(v, np.ndarray) else v


def _specials(dt: np.dtype) -> list:
    info = np.finfo(dt)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -2.5, 3.0, 1e30, 1e-30,
              float(info.max), float(info.smallest_subnormal)]
    with np.errstate(all="ignore"):
        return [np.array(v).astype(dt) for v in values]


_STATES = ({"all": "warn"}, {"all": "raise"}, {"divide": "raise", "invalid": "warn", "over": "ignore"})


# -- finding: a bool base is np.power's loop, not C pow -------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", [F4, F8], ids=str)
def test_bool_base_to_a_float_scalar_reports_as_numpys_power_loop(dt, mode):
    """``np.False_ ** np.float32(-inf)``: np.bool_'s ``**`` is np.power's loop, which says 'divide by zero
    encountered in power' (and raises it under "raise"); C powf/pow raise no flag at 0 ** -inf, so the
    lowered pass returned inf silently. The node runs NumPy's operator."""
    exe = _compiled(_scalar_graph(np.dtype(bool), dt), mode)
    assert (exe.stats()["scalar_powers"], exe.stats()["scalar_powers_numpy"]) == (0, 1)
    for b in (np.array(False), np.array(True)):
        for y in _specials(dt):
            for state in _STATES:
                with np.errstate(**state):
                    want = _outcome(operator.pow, _scalar(b), _scalar(y))
                    got = _outcome(exe, b, y)
                assert got == want, (b, y, state)


# -- guards: what the hunt checked and found right ------------------------------------------------------

_SNAN32 = np.array([0x7F800001, 0xFF800123], np.uint32).view(np.float32)
_SNAN64 = np.array([0x7FF0000000000001, 0xFFF0000000000123], np.uint64).view(np.float64)
# uint64/int64 values whose conversion to float64 rounds (a tie, a sticky bit): the pass converts as C does
_U8 = np.array([2 ** 63 + 2 ** 11 + 1, 2 ** 64 - 1, 2 ** 53 + 1, 2 ** 63 + 2 ** 10, 2 ** 63 + 3 * 2 ** 10],
               np.uint64)
_I8 = np.array([2 ** 62 + 1, -(2 ** 62) - 1, 2 ** 53 + 1, -(2 ** 63)], np.int64)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("values", "others"), [
    (_SNAN32, np.array([0.0, 1.0, 2.0], F8)), (_SNAN32, np.array([0.0, 1.0], F4)),
    (_SNAN64, np.array([0.0, 1.0], F4)), (_SNAN64, np.array([0, 3], np.int64)),
    (_U8, np.array([1.0, -1.0, 0.5], F8)), (_I8, np.array([1.0, -1.0], F8))],
    ids=["snan32-f8", "snan32-f4", "snan64-f4", "snan64-i8", "u8-f8", "i8-f8"])
def test_operands_converted_into_the_scalar_math_dtype(values, others, mode):
    """Signaling NaNs (quieted by a float32 -> float64 conversion, which raises 'invalid' that NumPy
    does not report), int64/uint64 that round into float64: on either side, NumPy's bits and reports."""
    for a, b in ((values, others), (others, values)):
        exe = _compiled(_scalar_graph(a.dtype, b.dtype), mode)
        assert exe.stats()["scalar_powers"] == 1, (a.dtype, b.dtype)
        for x in a:
            for y in b:
                for state in _STATES:
                    with np.errstate(**state):
                        assert _outcome(exe, np.array(x), np.array(y)) == _outcome(operator.pow, x, y), \
                            (x, y, state)


_NEG_NAN = float(np.array(0xFFF8000000000001, np.uint64).view(np.float64))
# Python numbers test_scalar_power.py does not take: a NaN with sign and payload, the largest exact
# ints, float32's largest value and subnormals of both dtypes (their conversion at run time raises
# 'underflow' NumPy does not report).
_CONSTANTS = [_NEG_NAN, 2 ** 53, -(2 ** 53), float(np.finfo(F4).max), 1e-40, 1e-310, 5e-324, 2 ** 24 - 1]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", [F4, F8], ids=str)
def test_python_number_constants_at_the_edges(dt, mode):
    for c in _CONSTANTS:
        for reflected in (False, True):
            exe = _compiled(_scalar_graph(c, dt) if reflected else _scalar_graph(dt, c), mode)
            assert exe.stats()["scalar_powers"] == 1, c
            for s in _specials(dt):
                with np.errstate(all="warn"):
                    want = _outcome(operator.pow, *((c, s[()]) if reflected else (s[()], c)))
                    assert _outcome(exe, s) == want, (c, s, reflected)


def _pass_graph(dt: np.dtype, n: int) -> Graph:
    """``r = x.sum() ** -1.0; return x * r, r``: the power of a reduction in a pass over x."""
    g = Graph()
    x = g.add_input("x", TensorType(dt, (n,)))
    r = _node(g, "np.scalar_power", _node(g, "np.sum", x, axis=None), _const(g, -1.0))
    g.set_outputs([_node(g, "np.multiply", x, r), r])
    return g


def _eager_pass(x):
    r = x.sum() ** -1.0
    return x * r, r


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", [F4, F8], ids=str)
def test_power_of_a_reduction_in_a_pass(dt, mode, threads):
    """An empty x still computes (and reports) ``0.0 ** -1.0``; zeros add 'invalid' in the multiply
    after the power's 'divide by zero', in NumPy's order, on 1 and 2 threads and long rows. (Sums
    exact in any order: the backend adds float32 in float64.)"""
    for x in (np.zeros(0, dt), np.zeros(3, dt), np.zeros(5001, dt), np.full(7, 0.25, dt),
              np.arange(1, 40, dtype=dt)[::-3]):
        exe = _compiled(_pass_graph(dt, x.size), mode)
        assert exe.stats()["scalar_powers"] == 1
        for state in _STATES:
            with np.errstate(**state):
                assert _outcome(exe, x) == _outcome(_eager_pass, x), (x.shape, state)


def _overflowing_power_graph(errstate: str | None = None) -> Graph:
    """``x * x.max() ** 400.0`` of a float64 x of 3, the power made under `errstate` (`Node.errstate`)."""
    g = Graph()
    x = g.add_input("x", TensorType(F8, (3,)))
    power = g.create_node("np.scalar_power", [_node(g, "np.max", x, axis=None), _const(g, 400.0)])
    power.errstate = errstate
    g.set_outputs([_node(g, "np.multiply", x, power.output)])
    return g


@pytest.mark.parametrize("mode", MODES)
def test_errstate_recorded_on_the_power(mode):
    """The traced function's own ``np.errstate(over="ignore")`` around ``s ** 400.0`` (`Node.errstate`)
    holds whatever the caller's state, and the caller's state holds for the ops after it."""
    exe = _compiled(_overflowing_power_graph("over=ignore"), mode)

    def eager(v):
        with np.errstate(over="ignore"):
            r = v.max() ** 400.0
        return v * r

    for v in (np.full(3, 10.0), np.array([10.0, 0.0, -1.0]), np.full(3, 0.5)):
        for state in _STATES:
            with np.errstate(**state):
                assert _outcome(exe, v) == _outcome(eager, v), (v, state)


# -- differences kept as strict xfails -------------------------------------------------------------------


@pytest.mark.xfail(strict=True, reason=(
    "documented (docs/cpu.md, Floating-point warnings and errors): a call whose kernels write into the "
    "caller's arrays is not rerun, so it names the kind ('overflow encountered in a traced call') and "
    "under 'raise' has written x first. With np.scalar_power a NumPy step (main) `x *= x.max() ** 400.0` "
    "said 'scalar power' and left x as it was; lowered into the pass, it reaches that limitation"))
@pytest.mark.parametrize("mode", MODES)
def test_power_in_a_pass_that_writes_its_argument(mode):
    exe = _compiled(_overflowing_power_graph(), mode, updates={0: 0})

    def eager(v):
        v *= v.max() ** 400.0
        return v

    for state in ({"all": "warn"}, {"all": "raise"}):
        a, b = np.full(3, 10.0), np.full(3, 10.0)
        with np.errstate(**state):
            want, got = _outcome(eager, a), _outcome(exe, b)
        assert got[:2] == want[:2] and _bits(b) == _bits(a), state


@pytest.mark.xfail(strict=True, reason=(
    "the kernels' flags are reported at the end of the call (a rerun, NumPy steps quiet), a NumPy step's "
    "warnings as it runs: `a ** 400.0` (lowered, 'underflow encountered in scalar power') then "
    "`2.0 ** b` of an int32 b (NumPy's np.power step, 'overflow encountered in power') warn in the "
    "opposite order. On main both were NumPy steps, in NumPy's order; under 'raise' the order holds"))
@pytest.mark.parametrize("mode", MODES)
def test_lowered_power_reports_before_a_later_numpy_step(mode):
    g = Graph()
    a, b = g.add_input("a", TensorType(F8, ())), g.add_input("b", TensorType(np.dtype(np.int32), ()))
    g.set_outputs([_node(g, "np.scalar_power", a, _const(g, 400.0)),
                   _node(g, "np.scalar_power", _const(g, 2.0), b)])
    exe = _compiled(g, mode)
    assert (exe.stats()["scalar_powers"], exe.stats()["scalar_powers_numpy"]) == (1, 1)

    def eager(x, k):
        return x[()] ** 400.0, 2.0 ** k[()]

    args = (np.array(1e-20), np.array(2000, np.int32))
    with np.errstate(all="warn"):
        assert _outcome(exe, *args) == _outcome(eager, *args)


@pytest.mark.xfail(strict=True, reason=(
    "predates the lowering (main too): fusion puts `x / s` in one pass with `x * k ** k`, after the NumPy "
    "step of the int power, so when that step raises ValueError (an int to a negative int power) the "
    "divide has not run: NumPy's 'invalid value encountered in divide' (inf / inf) is not said, and under "
    "'raise' the call raises the ValueError where NumPy raises FloatingPointError first"))
def test_divide_fused_past_a_numpy_step_that_raises():
    g = Graph()
    x, k = g.add_input("x", TensorType(F4, (3,))), g.add_input("k", TensorType(np.dtype(np.int32), (2,)))
    s = _node(g, "np.scalar_power", _node(g, "np.min", x, axis=None), _const(g, 1e-40))
    kk = _node(g, "np.min", k, axis=None)
    g.set_outputs([_node(g, "np.divide", x, s),
                   _node(g, "np.multiply", x, _node(g, "np.scalar_power", kk, kk))])
    exe = _compiled(g, "off")

    def eager(v, w):
        q = v / v.min() ** 1e-40
        return q, v * w.min() ** w.min()

    args = (np.array([np.inf, -np.inf, 1.0], F4), np.array([-1, 2], np.int32))
    for state in ({"all": "warn"}, {"all": "raise"}):
        with np.errstate(**state):
            assert _outcome(exe, *args) == _outcome(eager, *args), state


@pytest.mark.xfail(strict=True, reason=(
    "predates the lowering: a Python float constant a float32 op converts with overflow (`x * 1e300`) "
    "makes NumPy 2 say 'overflow encountered in cast' (a FloatingPointError under 'raise'); the cpu "
    "backend casts the constant when it compiles, silently. classify._scalar_math_operands keeps "
    "np.scalar_power out of this case; every other op of a float32 array with such a constant has it"))
@pytest.mark.parametrize("mode", MODES)
def test_float32_op_with_a_constant_that_overflows_float32(mode):
    g = Graph()
    x = g.add_input("x", TensorType(F4, (3,)))
    g.set_outputs([_node(g, "np.multiply", x, _const(g, 1e300))])
    exe = _compiled(g, mode)
    v = np.ones(3, F4)
    for state in ({"all": "warn"}, {"all": "raise"}):
        with np.errstate(**state):
            assert _outcome(exe, v) == _outcome(operator.mul, v, 1e300), state


def test_numpy_scalar_argument_powers_as_numpy_scalar():
    """A NumPy scalar argument is traced as one (branch scalars), so `s ** 0.5` on it is NumPy's
    scalar math, C pow: +0.0 at -0.0 and +inf at -inf, where np.sqrt of a 0-d array gives -0.0 and NaN
    (this was a strict xfail while the frontend traced such an argument as a 0-d array)."""
    nt = pytest.importorskip("numtrace")   # the frontend traces (tests_cpu runs without it)

    def half_power(s):
        return s ** 0.5

    traced = nt.trace(half_power, (np.float64(2.0),))
    for s in (np.float64(-0.0), np.float64(-np.inf)):
        with np.errstate(all="warn"):
            assert _outcome(traced, s) == _outcome(half_power, s), s
