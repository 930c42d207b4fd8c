"""Hunt of branch rtpow: np.power of a float pass by a run-time exponent NumPy's loop reads with stride 0
takes NumPy's branch by its value (classify.broadcast_exponent, nt_opcodes.h's NT_NPPOW,
stats()["broadcast_powers"]). Graphs compiled by the cpu backend (interpreter and generated kernels, 1
and 2 threads) against eager NumPy; tracer-level cases are in packages/frontend/tests/test_hunt_rtpow.py.

When NumPy's inner loop sees a stride-0 exponent (NumPy 2.4, its FLOAT/DOUBLE_power's POWER_FAST_PATH
is taken where steps[1] == 0; the loop is handed what the ufunc's buffered nditer makes of the operands):
- an exponent of ONE element (0-d, a Python number, (1,) or (1, 1) broadcast over more than one element
  or over more dims): always stride 0, also where a cast buffers it (float32 base, float64 exponent) and
  for any layout of the base: the rule the branch implements, guarded below.
- an exponent whose every stride is 0 (np.broadcast_to(p, shape)), any shape: coalesced to one stride-0
  dim, always the branch; and a one-element exponent of the result's own shape is read with its own
  stride, so a (1,) exponent made by np.broadcast_to takes the branch too.
- an exponent broadcast along SOME axes only ((m, 1) or (1, n) against (m, n)): the inner loop's stride
  depends on the nditer's buffering set-up (the operands' shapes, layouts, the result's size against
  np.getbufsize(), casts): a C-ordered x(m, n) ** e(m, 1) (m >= 2) branches iff n > 4096 (half the
  default buffer of 8192; 5462 with a float32 x cast to float64, 8192 with a float32 e; np.setbufsize
  moves it), x(m, n, 2) ** e(m, 1, 1) from n = 2049, x(1, n) ** e(2, 1) for every n >= 2 but
  x(1, n) ** e(3, 1) from n = 4096, a Fortran-ordered base swaps the axes. No static rule matches it
  (it reads run-time state, np.getbufsize()): the trace (C pow) is right where NumPy calls pow and silently
  wrong (+inf for NaN at -inf ** 0.5, +0.0 for -0.0 at -0.0 ** 0.5, pow's rounding for 1 / x and x * x)
  where NumPy branches. Strict xfails below keep the cases (they also fail if a static rule is tried
  that turns the pow cases wrong).
"""

import warnings

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler
from numtrace_ir import Graph
from numtrace_ir.types import TensorType

MODES = ["off", "sync"]   # the interpreter, generated kernels
F4, F8 = np.dtype(np.float32), np.dtype(np.float64)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "hunt_rtpow_kernels"))


def _compiled(g: Graph, mode: str, types=None):
    old = compiler.set_mode(mode)
    try:
        return compile_graph(g, types or [v.type for v in g.inputs])
    finally:
        compiler.set_mode(old)


def _node(g: Graph, op: str, *ins, **attrs):
    return g.create_node(op, list(ins), attrs=attrs).output


def _graph(x_type, e_type, body=None) -> Graph:
    """``body(g, x, e)`` (np.power(x, e) by default) of inputs x, e."""
    g = Graph()
    x, e = g.add_input("x", x_type), g.add_input("e", e_type)
    out = body(g, x, e) if body else _node(g, "np.power", x, e)
    g.set_outputs(list(out) if isinstance(out, tuple) else [out])
    return g


def _outcome(fn):
    """fn()'s results' (dtype, shape, bits) and its RuntimeWarnings' texts, or the FloatingPointError's
    message, under np.errstate warn and raise."""
    said = []
    for state in ("warn", "raise"):
        with warnings.catch_warnings(record=True) as caught, np.errstate(all=state):
            warnings.simplefilter("always")
            try:
                out = fn()
                out = out if isinstance(out, (tuple, list)) else (out,)
                said.append([(np.asarray(o).dtype, np.shape(o), np.asarray(o).tobytes()) for o in out])
            except FloatingPointError as exc:
                said.append(str(exc).rsplit(": ", 1)[-1])
        said.append(sorted({str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)}))
    return said


def _same(exe, fn, *args):
    got, want = _outcome(lambda: exe(*args)), _outcome(lambda: fn(*args))
    assert got == want, (args, got, want)


def _full(shape, v, dt=F8, order="C"):
    return np.full(shape, v, dt, order=order)


# --- one-axis broadcast exponents: NumPy's loop branches or not by its iterator's layout -----------------

# (x's shape, e's shape, x's order, whether NumPy 2.4's loop branches)
_ONE_AXIS = {
    "x(1,2)**e(2,1)": ((1, 2), (2, 1), "C", True),
    "x(2,5000)**e(2,1)": ((2, 5000), (2, 1), "C", True),
    "x(1,100)**e(2,1)": ((1, 100), (2, 1), "C", True),
    "xF(9000,2)**e(1,2)": ((9000, 2), (1, 2), "F", True),
    "x(3,4)**e(3,1)": ((3, 4), (3, 1), "C", False),
    "x(3,4)**e(1,4)": ((3, 4), (1, 4), "C", False),
    "x(2,3)**e(1,3)": ((2, 3), (1, 3), "C", False),
    "x(2,4000)**e(2,1)": ((2, 4000), (2, 1), "C", False),
    "x(1,100)**e(3,1)": ((1, 100), (3, 1), "C", False),
    "xF(2,5000)**e(2,1)": ((2, 5000), (2, 1), "F", False),
}


def _numpy_branches(x, e) -> bool:
    """Whether np.power(x, e) took its loop's sqrt branch at e = 0.5 for x = -inf (NaN, not pow's +inf)."""
    with np.errstate(all="ignore"):
        return bool(np.isnan(np.power(x, e)).all())


@pytest.mark.parametrize("name", [k for k, v in _ONE_AXIS.items() if not v[3]])
def test_numpys_layouts_that_call_pow_for_a_one_axis_exponent(name):
    """Guards NumPy's behaviour the cases below are keyed on (a NumPy whose iterator changes them turns
    the strict xfails into XPASS or the pow cases wrong; this says which)."""
    xs, es, order, _ = _ONE_AXIS[name]
    assert not _numpy_branches(_full(xs, -np.inf, order=order), _full(es, 0.5))


@pytest.mark.parametrize("name", [k for k, v in _ONE_AXIS.items() if v[3]])
def test_numpys_layouts_that_branch_for_a_one_axis_exponent(name):
    xs, es, order, _ = _ONE_AXIS[name]
    assert _numpy_branches(_full(xs, -np.inf, order=order), _full(es, 0.5))


def test_numpys_branch_for_a_one_axis_exponent_moves_with_its_buffer_size():
    """Why no rule of the shapes can match NumPy here: x(2, 1100) ** e(2, 1) calls pow at the default
    buffer size and branches under np.setbufsize(2048), run-time state the trace does not read."""
    x, e = _full((2, 1100), -np.inf), _full((2, 1), 0.5)
    old = np.getbufsize()
    try:
        np.setbufsize(2048)
        small = _numpy_branches(x, e)
    finally:
        np.setbufsize(old)
    assert (small, _numpy_branches(x, e)) == (True, False)


def _one_axis_case(name, mode):
    xs, es, order, _ = _ONE_AXIS[name]
    exe = _compiled(_graph(TensorType(F8, xs), TensorType(F8, es)), mode)
    x = _full(xs, -np.inf, order=order)
    x.ravel(order="K")[1::3] = -0.0
    return exe, x, _full(es, 0.5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [k for k, v in _ONE_AXIS.items() if not v[3]])
def test_a_one_axis_exponent_is_pow_where_numpy_calls_pow(mode, name):
    exe, x, e = _one_axis_case(name, mode)
    assert exe.stats()["broadcast_powers"] == 0
    _same(exe, np.power, x, e)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", [k for k, v in _ONE_AXIS.items() if v[3]])
def test_a_one_axis_exponent_branches_where_numpy_branches(mode, name):
    """Fixed (classify.exponent_read_by_layout): NumPy's loop branches here (sqrt at 0.5: NaN at -inf with
    'invalid value', -0.0 at -0.0) by its iterator's buffering set-up, which no rule of the shapes
    matches; the pass called C pow (+inf, +0.0, no warning). Such a node now runs NumPy's np.power."""
    exe, x, e = _one_axis_case(name, mode)
    _same(exe, np.power, x, e)
    assert exe.stats()["broadcast_powers"] == 0


# --- an exponent argument whose strides are all 0 (np.broadcast_to): NumPy always branches ----------------

@pytest.mark.xfail(strict=True, reason=(
    "an exponent argument of the result's shape whose strides are all 0 (np.broadcast_to(p, shape)) is "
    "coalesced by NumPy's iterator to one stride-0 dim, so its loop branches (NaN at -inf ** 0.5, -0.0 at "
    "-0.0 ** 0.5); classify.broadcast_exponent decides by the types alone (an (n,) exponent: pow), and "
    "the pass gives C pow's +inf and +0.0 silently. Also for shape (1,): a one-element exponent of the "
    "result's shape is read with its own stride, 0 here"))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(1,), (5,), (3, 4)])
def test_a_stride_0_exponent_argument_branches_as_numpy(mode, shape):
    exe = _compiled(_graph(TensorType(F8, shape), TensorType(F8, shape)), mode)
    x = _full(shape, -np.inf)
    x.ravel()[1::2] = -0.0
    _same(exe, np.power, x, np.broadcast_to(np.float64(0.5), shape))


# --- constant exponents NumPy's loop branches on (fixed) ------------------------------------------------

def _const(g: Graph, value):
    return g.create_node("prim.Constant", [], attrs={"value": value}).output


_CONSTANTS = {   # (x's dtype, the constant, NumPy's result: np.power(x, constant))
    "f64 ** array([0.5])": (F8, np.array([0.5])),
    "f64 ** array([[0.5]])": (F8, np.array([[0.5]])),
    "f64 ** float32 array([0.5])": (F8, np.array([0.5], F4)),
    "f32 ** array([0.5]) (f64 loop)": (F4, np.array([0.5])),
    "f64 ** array([2.0])": (F8, np.array([2.0])),
    "f64 ** array([-1.0])": (F8, np.array([-1.0])),
    "f32 ** 0.50000001 (0.5f)": (F4, 0.50000001),
    "f32 ** 2.0000001 (2.0f)": (F4, 2.0000001),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(_CONSTANTS))
def test_a_constant_exponent_takes_numpys_branch(mode, name):
    """Fixed: a one-element constant ARRAY exponent (``x ** np.array([0.5])``, a closure's constant) was
    pow (classify.broadcast_exponent left every constant outside POWER_EXPANSIONS to pow, and
    constant_exponent took 0-d ones only), and a Python float constant that is 0.5 in a float32 loop
    (``x32 ** 0.50000001``) was compared as a double: both gave +inf at -inf and +0.0 at -0.0 where NumPy's
    loop branches (NaN, 'invalid value'; -0.0), and pow's rounding where NumPy's is 1 / x or x * x. The
    constant's value is now read in the loop's dtype and a one-element array of a branched value takes
    the branch."""
    dt, c = _CONSTANTS[name]
    g = Graph()
    x = g.add_input("x", TensorType(dt, (2000,)))
    g.set_outputs([_node(g, "np.power", x, _const(g, c))])
    exe = _compiled(g, mode)
    xs = np.random.default_rng(1).uniform(0.1, 10, 2000).astype(dt)
    xs[:6] = [-np.inf, -0.0, 0.0, np.inf, np.nan, -2.0]
    _same(exe, lambda a: np.power(a, c), xs)
    stats = exe.stats()
    assert (stats["constant_powers"], stats["broadcast_powers"]) == ((1, 0) if np.ndim(c) == 0 else (0, 1))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("c", [np.array([3.0]), np.array([0.3]), np.array([0.5 + 2**-40]), 0.3,
                               np.array([0.5, 0.5])], ids=str)
def test_a_constant_exponent_numpy_does_not_branch_on_stays_pow(mode, c):
    """Guard: constants of other values (and of more elements) keep pow and generated kernels."""
    g = Graph()
    x = g.add_input("x", TensorType(F8, (2,)))
    g.set_outputs([_node(g, "np.power", x, _const(g, c))])
    exe = _compiled(g, mode)
    assert exe.stats()["broadcast_powers"] == 0
    _same(exe, lambda a: np.power(a, c), np.array([-np.inf, -0.0]))


# --- one-element results: which operand shapes NumPy's trivial loop takes (fixed) ----------------------

_ONES = [(), (1,), (1, 1), (1, 1, 1)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("x_shape", _ONES, ids=str)
@pytest.mark.parametrize("e_shape", _ONES, ids=str)
def test_a_one_element_result_branches_exactly_where_numpy_does(mode, x_shape, e_shape):
    """Fixed: for a one-element result NumPy calls pow only where its trivial loop reads e with e's own
    stride: a base of e's shape or a 0-d base, e not 0-d. A base of fewer dims that is not 0-d goes
    through its iterator, which hands the loop stride 0 (``x(1,) ** e(1, 1)`` is NaN at -inf ** 0.5);
    classify.broadcast_exponent called that pow (an e of the result's ndim). Counted as NumPy branches."""
    exe = _compiled(_graph(TensorType(F8, x_shape), TensorType(F8, e_shape)), mode)
    branches = _numpy_branches(_full(x_shape, -np.inf), _full(e_shape, 0.5))
    assert branches == (e_shape == () or 0 < len(x_shape) < len(e_shape) or len(e_shape) < len(x_shape))
    assert exe.stats()["broadcast_powers"] == int(branches)
    for xv, ev in ((-np.inf, 0.5), (-0.0, 0.5), (-np.inf, 3.0)):
        _same(exe, np.power, _full(x_shape, xv), _full(e_shape, ev))


# --- noticed beside the change ----------------------------------------------------------------------------

@pytest.mark.xfail(strict=True, reason=(
    "pre-existing, beside the change (sqrt shows it as well as power): np.add(s, x) of a 0-d s and an "
    "array x where both are NaN of different signs: NumPy's loop (x86 addsd) returns the first operand's "
    "NaN, -nan from sqrt(-1) or -inf ** 0.5; the interpreter returns x's +nan for a one-element x and "
    "generated kernels for a longer one (the operands swapped in a scalar loop). docs/cpu.md says NaN "
    "signs are not kept where NaNs meet only of the BLAS products"))
def test_a_nan_plus_nan_keeps_the_first_operands_sign():
    """sqrt(s) + x at one and three elements, in the interpreter and generated kernels."""
    for mode in MODES:
        for n in (1, 3):
            exe = _compiled(_graph(TensorType(F8, (n,)), TensorType(F8, ()),
                                   lambda g, x, e: _node(g, "np.add", _node(g, "np.sqrt", e), x)), mode)
            x = np.resize(np.array([np.nan, 1.0]), n)
            _same(exe, lambda a, b: np.add(np.sqrt(b), a), x, np.array(-1.0))
