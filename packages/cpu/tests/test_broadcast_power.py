"""np.power of a float array and a run-time exponent that NumPy's loop reads with stride 0 (a 0-d input, a
Python number input, a one-element array broadcast over the result, a 0-d value computed in the pass):
NumPy's FLOAT/DOUBLE_power branch on its value (-1: 1 / x, 0: 1, 0.5: sqrt, 1: x, 2: x * x, else pow), so
-inf ** 0.5 is NaN ('invalid value') and -0.0 ** 0.5 is -0.0 where C pow gives +inf and +0.0. The pass
takes the same branch (classify.broadcast_exponent, nt_opcodes.h's NT_NPPOW): NumPy's bits and warnings.
Such a pass stays on the interpreter, which picks its loop once a block, also where kernels are generated.
A one-element exponent of the result's own shape (size 1) is read with its stride: NumPy's pow, and the
pass's."""

import warnings

import numpy as np
import pytest
from numtrace_ir import Graph
from numtrace_ir.types import ScalarType, TensorType
from test_scalar_power import FLOATS, MODES, _compiled

# The exponents NumPy's loop branches on, their neighbours, and NaN. Not +-inf: NumPy's SIMD pow reports
# overflow / divide by zero at x ** +-inf where the C library's pow (the pass's, whatever the exponent's
# shape) reports nothing, which is pow's own difference, not the branch's.
EXPONENTS = [-1.0, 0.0, -0.0, 0.5, 1.0, 2.0, 3.0, -0.5, 0.25, 1.5, -2.0, np.nan,
             np.nextafter(0.5, 1.0), np.nextafter(2.0, 0.0)]


def _bases(dt: np.dtype) -> np.ndarray:
    info = np.finfo(dt)
    return np.array([-np.inf, np.inf, -0.0, 0.0, np.nan, -np.nan, 1.0, -1.0, 2.0, -2.0, 0.3, -7.5, 1e10,
                     float(info.max), -float(info.max), float(info.tiny), float(info.smallest_subnormal),
                     -float(info.smallest_subnormal), 1 + float(info.eps), 1e-30], dt)


def _power_graph(base: TensorType, exponent, computed: bool = False) -> Graph:
    """``np.power(x, e)``; `computed`: e is ``e * 1.0`` (a 0-d value the pass computes)."""
    g = Graph()
    x, e = g.add_input("x", base), g.add_input("e", exponent)
    if computed:
        one = g.create_node("prim.Constant", [], attrs={"value": 1.0}).output
        e = g.create_node("np.multiply", [e, one]).output
    g.set_outputs([g.create_node("np.power", [x, e]).output])
    return g


def _outcome(fn, state: str, exact: bool):
    """(bits or the error's type, the warnings' texts) of fn() under np.errstate(all=state); not `exact`:
    the values to 5 digits, NaNs' signs dropped (pow: NumPy's SIMD pow is not the C library's)."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all=state):
        warnings.simplefilter("always")
        try:
            out = np.asarray(fn())
            values = out.tobytes() if exact else [f"{v:.5g}" for v in out.ravel().tolist()]
            got = (out.dtype, out.shape, values)
        except FloatingPointError as exc:
            got = (FloatingPointError, str(exc).rsplit(": ", 1)[-1].split(" encountered")[0])
    return got, sorted({str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)})


def _check(exe, x, e, expect_branch: bool):
    """exe(x, e) against np.power(x, e): NumPy's bits where its loop branches (the module's doc)."""
    assert exe.stats()["broadcast_powers"] == int(expect_branch) and exe.stats()["fallbacks"] == 0
    exact = expect_branch and float(np.ravel(e)[0]) in (-1.0, 0.0, 0.5, 1.0, 2.0)
    for state in ("ignore", "warn", "raise"):
        got = _outcome(lambda: exe(x, e)[0], state, exact)
        want = _outcome(lambda: np.power(x, e), state, exact)
        assert got == want, (state, x, e, got, want)


_KINDS = {"0-d": lambda dt: (TensorType(dt, ()), lambda v: np.array(v, dt)),
          "(1,)": lambda dt: (TensorType(dt, (1,)), lambda v: np.array([v], dt)),
          "(1, 1)": lambda dt: (TensorType(dt, (1, 1)), lambda v: np.array([[v]], dt)),
          "python float": lambda dt: (ScalarType("float"), float)}


# (e * 1.0 of a Python float is a Python float the graph computes apart, not a pass's value)
_CASES = [(k, False) for k in _KINDS] + [(k, True) for k in _KINDS if k != "python float"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dt", FLOATS, ids=str)
@pytest.mark.parametrize("kind, computed", _CASES)
def test_a_broadcast_exponent_takes_numpys_branch(dt, mode, kind, computed):
    """Every base of `_bases` to each exponent (given, or computed in the pass: ``e * 1.0``): NumPy's
    bits, warnings and FloatingPointError."""
    e_type, make = _KINDS[kind](dt)
    x = _bases(dt)
    exe = _compiled(_power_graph(TensorType(dt, x.shape), e_type, computed), mode)
    for v in EXPONENTS:
        _check(exe, x, make(v), True)
    assert exe.stats()["interpreted_runs"] > 0   # also in sync mode (codegen.generate)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("x_shape, e_shape, branch", [
    ((), (), True), ((1,), (), True), ((1, 1), (1,), True), ((3, 1), (1, 1), True), ((2, 3), (1,), True),
    ((1,), (1,), False), ((1, 1), (1, 1), False), ((), (1,), False)])
def test_a_one_element_exponent_branches_where_numpy_reads_it_with_stride_0(mode, x_shape, e_shape, branch):
    """Where the result has one element and the exponent its ndim, NumPy's loop reads the exponent with
    its own stride and calls pow (-inf ** 0.5 is +inf); otherwise it branches (NaN)."""
    dt = np.dtype(np.float64)
    exe = _compiled(_power_graph(TensorType(dt, x_shape), TensorType(dt, e_shape)), mode)
    x = np.full(x_shape, -np.inf)
    for v in (0.5, -0.0, 2.0, 3.0):
        _check(exe, x, np.full(e_shape, v), branch)


@pytest.mark.parametrize("mode", MODES)
def test_an_exponent_array_stays_pow(mode):
    """An exponent that varies along the pass is pow, as NumPy's loop (no branch counted)."""
    dt = np.dtype(np.float64)
    exe = _compiled(_power_graph(TensorType(dt, (4,)), TensorType(dt, (4,))), mode)
    _check(exe, np.array([-np.inf, -0.0, 2.0, -np.inf]), np.array([0.5, 0.5, 2.0, 3.0]), False)
