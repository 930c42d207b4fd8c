"""Hunted cases of the generated kernels' names and of generated passes on the thread team: programs
with many constants (0, -0.0, NaN, inf, ints, bools) in column mode, row blocks and elementwise passes,
compiled to C (sync mode) must give the interpreter's bits and NumPy's values; passes on two threads
written in place, from two Python threads at once, at sizes around the split."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import numtrace_cpu
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from numtrace_cpu import compile_graph, compiler
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
_CONSTS = [2.0, 0.0, -0.0, float("nan"), float("inf"), -float("inf"), 0.5, 3, 0, -1, True, False]
_BINARY = ["np.add", "np.subtract", "np.multiply", "np.maximum", "np.minimum", "np.divide"]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))


def _compiled(graph, types, mode, updates=None):
    old = compiler.set_mode(mode)
    try:
        return compile_graph(graph, types, updates=updates)
    finally:
        compiler.set_mode(old)


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
        g.create_node("np.multiply", [values[-1], _const(g, 2.0)]).output]
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


_REACHED = {"column": 0, "rows": 0}


@settings(max_examples=40, deadline=None, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
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
    _REACHED["column"] += stats["generated_column_runs"] > 0
    _REACHED["rows"] += stats["generated_row_block_runs"] > 0


def test_the_drawn_programs_reach_column_mode_and_row_blocks():
    """Runs after the property test (file order): enough of its programs took both generated paths."""
    assert _REACHED["column"] >= 5 and _REACHED["rows"] >= 3, _REACHED
