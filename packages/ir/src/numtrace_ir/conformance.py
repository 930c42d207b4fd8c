"""The conformance suite of the backend contract (`numtrace_ir.backend`): checks any backend package runs
on itself, so a third-party backend is one package, one entry point and this suite green.

Each check takes a backend instance and raises ``AssertionError`` naming what broke. A backend's tests
run them all with::

    @pytest.mark.parametrize("check", sorted(conformance.CHECKS))
    def test_conformance(check):
        conformance.CHECKS[check](MyBackend())
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from numtrace_ir.backend import Backend, Executable
from numtrace_ir.graph import Graph
from numtrace_ir.specialize import specialize
from numtrace_ir.testing import assert_outputs_close, build_graph, iter_cases, reference_outputs, type_of
from numtrace_ir.types import TensorType

__all__ = ["CHECKS", "check_fresh_outputs", "check_op_samples", "check_out", "check_protocol",
           "check_shape_programs", "check_threads"]

F32 = np.dtype(np.float32)


def _compile(backend: Backend, graph: Graph, types: list) -> Executable:
    exe = backend.compile(graph, types)
    assert isinstance(exe, Executable), \
        f"{backend.name}: compile returned {type(exe).__name__}, not an Executable"
    return exe


def check_protocol(backend: Any) -> None:
    """The entry point's object is a `Backend`; it says whether it can run here."""
    assert isinstance(backend, Backend), f"{type(backend).__name__} does not implement numtrace_ir.Backend"
    ok, why = backend.is_available()
    assert isinstance(ok, bool) and isinstance(why, str), "is_available() must return (bool, str)"


def _movement_graph() -> Graph:
    g = Graph()
    x = g.add_input("x", TensorType(F32, (4, 3)))
    t = g.create_node("np.transpose", [x], {"axes": None}).output
    r = g.create_node("np.reshape", [x], {"shape": (12,), "order": "C"}).output
    c = g.create_node("prim.Constant", [], {"value": np.arange(3, dtype=F32)}).output
    g.set_outputs([x, t, r, t, c])
    return g


def check_fresh_outputs(backend: Backend) -> None:
    """Outputs are fresh arrays: never the input, a view of it, a constant's storage or each other."""
    g = _movement_graph()
    x = np.arange(12, dtype=F32).reshape(4, 3)
    exe = _compile(backend, g, [v.type for v in g.inputs])
    outs = exe(x)
    assert len(outs) == 5, f"{backend.name}: {len(outs)} outputs for 5"
    expected = (x, x.T, x.reshape(12), x.T, np.arange(3, dtype=F32))
    for i, (got, want) in enumerate(zip(outs, expected)):
        np.testing.assert_array_equal(got, want, err_msg=f"{backend.name}: output {i}")
        assert not np.shares_memory(got, x), f"{backend.name}: output {i} shares memory with the input"
        for j in range(i):
            assert not np.shares_memory(got, outs[j]), f"{backend.name}: outputs {j} and {i} share memory"
    outs[4][0] = 99.0  # a constant handed out must not be the graph's own storage
    np.testing.assert_array_equal(exe(x)[4], np.arange(3, dtype=F32), err_msg=f"{backend.name}: constant")


def check_out(backend: Backend) -> None:
    """``out=`` receives the results and is what the call returns."""
    g = Graph()
    a, b = (g.add_input(n, TensorType(F32, (5,))) for n in "ab")
    s = g.create_node("np.add", [a, b]).output
    p = g.create_node("np.multiply", [s, a]).output
    g.set_outputs([s, p])
    exe = _compile(backend, g, [v.type for v in g.inputs])
    x, y = np.arange(5, dtype=F32), np.full(5, 2.0, F32)
    out = (np.empty(5, F32), np.empty(5, F32))
    result = exe(x, y, out=out)
    assert all(r is o for r, o in zip(result, out)), f"{backend.name}: out= arrays were not returned"
    np.testing.assert_array_equal(out[0], x + y, err_msg=f"{backend.name}: out[0]")
    np.testing.assert_array_equal(out[1], (x + y) * x, err_msg=f"{backend.name}: out[1]")


def _shape_program() -> Graph:
    """``x[: x.shape[0] - 1] * 2`` with a guard on ``x.shape[1] == 3``, as the tracer records them."""
    g = Graph()
    x = g.add_input("x", TensorType(F32, (5, 3)))
    n = g.create_node("prim.dim", [x], {"axis": 0}).output
    m = g.create_node("prim.dim", [x], {"axis": 1}).output
    g.create_node("prim.guard", [m], {"expected": 3})
    one = g.create_node("prim.Constant", [], {"value": 1}).output
    k = g.create_node("prim.sub", [n, one]).output
    head = g.create_node("prim.dynamic", [x, k], {
        "op": "np.getitem", "attrs": (("index", (slice(None, "$0", None),)),), "scalars": 1,
        "shape": ("v1_0", 3), "dtype": F32}, out_types=(TensorType(F32, (4, 3)),)).output
    two = g.create_node("prim.Constant", [], {"value": 2.0}).output
    g.set_outputs([g.create_node("np.multiply", [head, two]).output])
    return g


def check_shape_programs(backend: Backend) -> None:
    """Guards, shape arithmetic and ``prim.dynamic`` run at the traced shapes (the graph as recorded)
    and at others (the graph retyped by `specialize`, as the frontend hands it over)."""
    g = _shape_program()
    for rows in (5, 9, 1):
        x = np.arange(rows * 3, dtype=F32).reshape(rows, 3)
        types = [TensorType(F32, x.shape)]
        graph = g if rows == 5 else specialize(g, types, check_shapes=False)
        (got,) = _compile(backend, graph, types)(x)
        np.testing.assert_array_equal(got, x[: rows - 1] * 2.0, err_msg=f"{backend.name}: {rows} rows")


def check_threads(backend: Backend, threads: int = 4, calls: int = 50) -> None:
    """One executable called from several threads at once gives the serial results."""
    g = Graph()
    x = g.add_input("x", TensorType(F32, (64,)))
    e = g.create_node("np.exp", [x]).output
    g.set_outputs([g.create_node("np.sum", [e], {"axis": None}).output, e])
    exe = _compile(backend, g, [x.type])
    inputs = [np.linspace(-1, 1, 64, dtype=F32) * (i + 1) for i in range(threads)]
    serial = [exe(a) for a in inputs]
    failures: list[str] = []

    def work(i: int) -> None:
        for _ in range(calls):
            for got, want in zip(exe(inputs[i]), serial[i]):
                if not np.array_equal(got, want):
                    failures.append(f"thread {i}")
                    return

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not failures, f"{backend.name}: results differ from serial calls in {failures}"


def check_op_samples(backend: Backend, per_op: int = 1) -> None:
    """The first ``per_op`` samples of every registry op equal the NumPy reference, or the op is refused
    when compiling with a ``NotImplementedError`` that names it."""
    seen: dict[str, int] = {}
    for op, sample in iter_cases():
        if seen.get(op.name, 0) >= per_op or op.nondeterministic:
            continue
        seen[op.name] = seen.get(op.name, 0) + 1
        graph = build_graph(op, sample)
        inputs = [np.asarray(v) if isinstance(v, (np.ndarray, np.generic)) else v for v in sample.inputs]
        if not all(isinstance(v, np.ndarray) for v in inputs) or \
                not all(isinstance(v.type, TensorType) for v in graph.outputs):
            continue  # Python-number inputs and outputs are the frontend's to fold; backends take arrays
        try:
            exe = backend.compile(graph, [type_of(v) for v in inputs])
        except NotImplementedError as exc:
            assert op.name in str(exc), f"{backend.name}: refusing {op.name} must name it: {exc}"
            continue
        expected = reference_outputs(op, sample)
        got = exe(*inputs)
        assert len(got) == len(expected), f"{backend.name}: {op.name} gave {len(got)} outputs"
        for g, e in zip(got, expected):
            assert_outputs_close(g, e, what=f"{backend.name}: {op.name}", op=op, inputs=inputs)


CHECKS: dict[str, Callable[[Backend], None]] = {
    "protocol": check_protocol,
    "fresh_outputs": check_fresh_outputs,
    "out": check_out,
    "shape_programs": check_shape_programs,
    "threads": check_threads,
    "op_samples": check_op_samples,
}
