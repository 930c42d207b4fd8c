"""Hunted cases of the generated kernels' names and of generated passes on the thread team: programs
with many constants (0, -0.0, NaN, inf, ints, bools) in column mode, row blocks and elementwise passes,
compiled to C (sync mode) must give the interpreter's bits and NumPy's values; passes on two threads
written in place, from two Python threads at once, at sizes around the split."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace_cpu
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType
from test_codegen import _cache, _compiled  # noqa: F401  (the kernel cache fixture, autouse)
from threaded import run_threads

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
_CONSTS = [2.0, 0.0, -0.0, float("nan"), float("inf"), -float("inf"), 0.5, 3, 0, -1, True, False]
_BINARY = ["np.add", "np.subtract", "np.multiply", "np.maximum", "np.minimum", "np.divide"]




def _const(g, value):
    return g.create_node("prim.Constant", [], attrs={"value": value}).output


@st.composite
def _column_programs(draw):
    """(graph, input arrays): an expression of one or two inputs and several constants, reduced over
    a middle or first axis (column mode) or the short last axis (row blocks), maybe kept dims."""
    shape = draw(st.sampled_from([(300, 7), (40, 2), (20, 30, 3), (5, 64, 9), (3, 11, 1), (9, 4, 5)]))
    dt = draw(st.sampled_from([F64, F32]))
    g = Graph()
    x = g.add_input("x", TensorType(dt, shape))
    values = [x]
    if draw(st.booleans()):
        other = draw(st.sampled_from([F64, F32, np.dtype(np.int32), np.dtype(np.int64)]))
        values.append(g.add_input("y", TensorType(other, shape[-1:] if draw(st.booleans()) else shape)))
    for _ in range(draw(st.integers(1, 6))):
        a = draw(st.sampled_from(values))
        kind = draw(st.sampled_from(["const", "const", "const", "binary", "where", "cast"]))
        if kind == "const":
            pair = [a, _const(g, draw(st.sampled_from(_CONSTS)))]
            node = g.create_node(draw(st.sampled_from(_BINARY)), pair[::draw(st.sampled_from([1, -1]))])
        elif kind == "binary":
            node = g.create_node(draw(st.sampled_from(_BINARY)), [a, draw(st.sampled_from(values))])
        elif kind == "where":
            cond = g.create_node("np.greater", [a, _const(g, draw(st.sampled_from([0.0, 0, -0.5])))]).output
            node = g.create_node("np.where", [cond, _const(g, draw(st.sampled_from(_CONSTS))), a])
        else:
            node = g.create_node("np.astype", [a], attrs={"dtype": draw(st.sampled_from([F64, F32]))})
        values.append(node.output)
    floats = [v for v in values[1:] if v.type.dtype.kind == "f" and v.type.shape == shape] or [
        g.create_node("np.multiply", [x, _const(g, 2.0)]).output]
    nd = len(shape)
    axis = draw(st.sampled_from([0, 1] if nd == 2 else [0, 1, 2, (0, 1)]))
    outs = []
    for v in draw(st.lists(st.sampled_from(floats), min_size=1, max_size=3)):
        op = draw(st.sampled_from(["np.sum", "np.mean"]))
        outs.append(g.create_node(op, [v], attrs={"axis": axis, "keepdims": draw(st.booleans())}).output)
    if draw(st.booleans()):
        outs.append(floats[-1])   # an elementwise output in the same program
    g.set_outputs(outs)
    rng = np.random.default_rng(len(g.nodes))
    inputs = []
    for v in g.inputs:
        a = (rng.integers(-8, 9, size=v.type.shape) / 4).astype(v.type.dtype)
        if a.dtype.kind == "f" and a.size > 3:
            a.flat[:: max(1, a.size // 5)] = -0.0
            a.flat[1] = np.nan if draw(st.booleans()) else a.flat[1]
        inputs.append(a)
    return g, inputs


_REACHED = {"programs": 0, "column": 0, "rows": 0}


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
@given(_column_programs())
def test_generated_column_and_row_block_passes_with_constants(case):
    """Each program's generated kernels against the interpreter (bit for bit) and the reference."""
    g, inputs = case
    types = [testing.type_of(a) for a in inputs]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gen, interp = _compiled(g, types, "sync"), _compiled(g, types, "off")
        got, want = gen(*inputs), interp(*inputs)
        expected = testing.run_reference(g, inputs)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes(), (f"{g}\n{inputs}\n{a}\n{b}\n{expected}: generated kernel "
                                            "differs from the interpreter")
    testing.assert_outputs_close(got, expected, what=str(g),
                                 computed_in=F32 if any(a.dtype == F32 for a in inputs) else None)
    stats = gen.stats()
    _REACHED["programs"] += 1
    _REACHED["column"] += stats["generated_column_runs"] > 0
    _REACHED["rows"] += stats["generated_row_block_runs"] > 0


def test_the_drawn_programs_reach_column_mode_and_row_blocks():
    """Runs after the property test (file order): enough of its programs took both generated paths."""
    if not _REACHED["programs"]:
        pytest.skip("the property test did not run in this session")
    assert _REACHED["column"] >= 5 and _REACHED["rows"] >= 3, _REACHED


def _scaled_pass(n, dt=F32):
    """y = where(x > 0, x * 2.0, -0.0) - z * 3 + 0.5: one generated elementwise pass with constants."""
    g = Graph()
    x, z = (g.add_input(name, TensorType(dt, (n,))) for name in ("x", "z"))

    def node(op, *args):
        return g.create_node(op, list(args)).output

    pos = node("np.where", node("np.greater", x, _const(g, 0.0)), node("np.multiply", x, _const(g, 2.0)),
               _const(g, -0.0))
    diff = node("np.subtract", pos, node("np.multiply", z, _const(g, 3)))
    g.set_outputs([node("np.add", diff, _const(g, 0.5))])
    return g, [x.type, z.type]


def _numpy_scaled(x, z):
    return np.where(x > 0, x * np.float32(2.0), np.float32(-0.0)) - z * np.float32(3) + np.float32(0.5)


def _scaled_inputs(n, seed):
    rng = np.random.default_rng(seed)
    x, z = rng.standard_normal(n).astype(F32), rng.standard_normal(n).astype(F32)
    x[::97], z[1::89] = -0.0, np.inf
    return x, z


@pytest.mark.parametrize("n", [(1 << 20) - 1, 1 << 20, (1 << 20) + 1, 2_097_157])
def test_team_pass_around_the_split_keeps_numpys_bits(team, numpy_quiet, n):
    """Sizes just below, at and above PARALLEL_MIN_WORK, and an odd size two threads split unevenly,
    at thread counts changed between calls."""
    graph, types = _scaled_pass(n)
    exe = _compiled(graph, types, "sync")
    x, z = _scaled_inputs(n, n)
    want = _numpy_scaled(x, z).tobytes()
    for threads in (2, 1, 3, 2):
        numtrace_cpu.set_num_threads(threads)
        (got,) = exe(x, z)
        assert got.tobytes() == want, f"n={n} on {threads} threads"
    assert exe.stats()["interpreted_runs"] == 0


def test_empty_and_tiny_passes_on_two_threads(team, numpy_quiet):
    numtrace_cpu.set_num_threads(2)
    for n in (0, 1, 3):
        graph, types = _scaled_pass(n)
        x, z = _scaled_inputs(n, 7)
        (got,) = _compiled(graph, types, "sync")(x, z)
        assert got.shape == (n,) and got.tobytes() == _numpy_scaled(x, z).tobytes()


def test_team_pass_from_two_python_threads_at_once(team, numpy_quiet):
    """Two Python threads call one executable together: one holds the team, the other runs its chunks
    alone (nt_team.h's busy lock); every call gives NumPy's bits."""
    n = 1_500_001
    numtrace_cpu.set_num_threads(2)
    graph, types = _scaled_pass(n)
    exe = _compiled(graph, types, "sync")
    errors: list = []

    def calls(seed):
        for k in range(6):
            x, z = _scaled_inputs(n, seed * 10 + k)
            (got,) = exe(x, z)
            if got.tobytes() != _numpy_scaled(x, z).tobytes():
                errors.append((seed, k))

    run_threads(calls, range(2))
    assert not errors
    assert exe.stats()["generated_runs"] == 12


@pytest.mark.parametrize("kind", ["divide", "invalid"])
def test_team_pass_raises_a_workers_error(team, kind):
    """A divide by zero or an invalid op in the chunks a worker runs (the pass's second half) raises
    under np.errstate(all='raise') as NumPy does, and warns under the default."""
    n = 2_000_003
    numtrace_cpu.set_num_threads(2)
    g = Graph()
    x, y = (g.add_input(name, TensorType(F64, (n,))) for name in ("x", "y"))
    q = g.create_node("np.divide", [x, y]).output
    q = g.create_node("np.subtract", [q, _const(g, 1.0)]).output
    g.set_outputs([g.create_node("np.sqrt", [q]).output])
    exe = _compiled(g, [x.type, y.type], "sync")
    a, b = np.full(n, 2.0), np.ones(n)
    (b if kind == "divide" else a)[n - 3] = 0.0
    message = "divide by zero" if kind == "divide" else "invalid value"
    with np.errstate(all="raise"), pytest.raises(FloatingPointError, match=message):
        exe(a, b)
    with pytest.warns(RuntimeWarning, match=message):
        (got,) = exe(a, b)
    with np.errstate(all="ignore"):
        assert got.tobytes() == np.sqrt(a / b - 1.0).tobytes()
    assert exe.stats()["generated_team_runs"] == 2


def test_column_pass_with_constants_on_the_team(team, numpy_quiet):
    """A middle-axis sum of an expression with constants over enough rows for two threads: the team's
    chunks give one thread's bits, and the constants are the kernel's (not a column index)."""
    shape = (20_000, 20, 3)
    g = Graph()
    x = g.add_input("x", TensorType(F64, shape))
    e = g.create_node("np.multiply", [_const(g, 2.0), x]).output
    e = g.create_node("np.add", [e, _const(g, -0.0)]).output
    g.set_outputs([g.create_node("np.sum", [e], attrs={"axis": 1}).output])
    xs = np.random.default_rng(3).integers(-8, 9, size=shape) / 4
    exe = _compiled(g, [testing.type_of(xs)], "sync")
    got = []
    for threads in (1, 2):
        numtrace_cpu.set_num_threads(threads)
        got.append(exe(xs)[0].tobytes())
    assert got[0] == got[1] == np.sum(2.0 * xs + -0.0, axis=1).tobytes()   # quarter-integers: exact sums
    stats = exe.stats()
    assert stats["generated_column_runs"] == 2 and stats["generated_team_runs"] == 1
