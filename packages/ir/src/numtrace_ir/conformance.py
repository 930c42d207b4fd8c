"""The conformance suite of the backend contract (`numtrace_ir.backend`): checks any backend package runs
on itself, so a third-party backend is one package, one entry point and this suite green.

Each check takes a backend instance and raises ``AssertionError`` naming what broke. Besides the graph
contract (outputs, ``out=``, guards, threads, ops) they check the call convention a backend receives
with each graph (`numtrace_ir.CallSpec`): written arguments copied back, returned arguments being the
caller's arrays, aliased arguments refused, on the shared `run_call` and on the backend's own
``exact_caller`` where it has one. A backend's tests
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
from numtrace_ir.call_spec import CallSpec, run_call
from numtrace_ir.graph import Graph
from numtrace_ir.guards import GuardError
from numtrace_ir.specialize import specialize
from numtrace_ir.testing import assert_outputs_close, build_graph, iter_cases, reference_outputs, type_of
from numtrace_ir.types import TensorType

__all__ = ["CHECKS", "check_aliased_arguments", "check_fresh_outputs", "check_op_samples", "check_out",
           "check_protocol", "check_returned_arguments", "check_shape_programs", "check_threads",
           "check_written_arguments"]

F32 = np.dtype(np.float32)


def _compile(backend: Backend, graph: Graph, types: list, call_spec: CallSpec | None = None) -> Executable:
    exe = backend.compile(graph, types) if call_spec is None else backend.compile(graph, types, call_spec)
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
    """Guards, shape arithmetic and ``prim.dynamic`` run at the traced shapes and at others: the frontend
    hands over the graph as recorded (at its example shapes) with the call's types, and the backend
    specializes it, once; a graph specialized already compiles the same. A broken guard is a
    `GuardError`."""
    g = _shape_program()
    for rows in (5, 9, 1):
        x = np.arange(rows * 3, dtype=F32).reshape(rows, 3)
        types = [TensorType(F32, x.shape)]
        for graph in (g, specialize(g, types, check_shapes=False)):
            (got,) = _compile(backend, graph, types)(x)
            np.testing.assert_array_equal(got, x[: rows - 1] * 2.0, err_msg=f"{backend.name}: {rows} rows")
    try:
        _compile(backend, g, [TensorType(F32, (5, 4))])
    except GuardError:
        pass
    else:
        raise AssertionError(f"{backend.name}: compiled a graph whose guard the input types break")


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


def _update_graph() -> Graph:
    """``w -= 0.5 * g; return w.sum(), w`` as the tracer records it: the result, then w's new contents."""
    g = Graph()
    w, grad = (g.add_input(n, TensorType(F32, (6,))) for n in ("w", "g"))
    half = g.create_node("prim.Constant", [], {"value": 0.5}).output
    new_w = g.create_node("np.subtract", [w, g.create_node("np.multiply", [grad, half]).output]).output
    g.set_outputs([g.create_node("np.sum", [new_w], {"axis": None}).output, new_w])
    return g


def _calls(exe: Executable, spec: CallSpec, make_args: Callable[[], tuple]) -> list[tuple[str, tuple, Any]]:
    """``(path, args, flat results)`` of one call on each path the frontend takes: `run_call`, and the
    executable's ``exact_caller`` where it has one and takes the call. Each gets fresh ``make_args()``."""
    args = make_args()
    done = [("run_call", args, run_call(exe, spec, args))]
    make = getattr(exe, "exact_caller", None)
    if make is not None:
        args = make_args()
        result = make(spec, (), None).run(args)
        if result is not NotImplemented:
            done.append(("exact_caller", args, (result,) if spec.single else result))
    return done


def _update_args(seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(6).astype(F32), rng.standard_normal(6).astype(F32)


def _expected_update(w: np.ndarray, grad: np.ndarray) -> np.ndarray:
    return w - grad * np.float32(0.5)


def check_written_arguments(backend: Backend) -> None:
    """An argument the function writes into gets its new contents after the call (the executable may
    compute them in its memory, `CallSpec.in_place_updates`), and the results leave them out."""
    g = _update_graph()
    spec = CallSpec(num_args=2, num_results=1, written=(0,), name="update", input_names=("w", "g"))
    exe = _compile(backend, g, [v.type for v in g.inputs], spec)
    w0, g0 = _update_args()
    want = _expected_update(w0, g0)
    for path, (w, grad), results in _calls(exe, spec, lambda: tuple(a.copy() for a in (w0, g0))):
        what = f"{backend.name} ({path})"
        assert len(results) == 1, f"{what}: {len(results)} results for 1"
        np.testing.assert_allclose(w, want, rtol=1e-6, err_msg=f"{what}: written argument")
        np.testing.assert_array_equal(grad, g0, err_msg=f"{what}: an argument not written changed")
        np.testing.assert_allclose(results[0], want.sum(dtype=F32), rtol=1e-5, err_msg=f"{what}: result")
        assert not np.shares_memory(results[0], w), f"{what}: a result shares the written argument's memory"


def check_returned_arguments(backend: Backend) -> None:
    """A result that is a written argument itself (``return w`` after ``w -= ...``) is the caller's own
    array, with its new contents, at its place among the results."""
    g = _update_graph()
    spec = CallSpec(num_args=2, num_results=1, written=(0,), returned=((1, 0),), name="update")
    exe = _compile(backend, g, [v.type for v in g.inputs], spec)
    w0, g0 = _update_args(1)
    want = _expected_update(w0, g0)
    for path, (w, _), results in _calls(exe, spec, lambda: tuple(a.copy() for a in (w0, g0))):
        what = f"{backend.name} ({path})"
        assert len(results) == 2 and results[1] is w, \
            f"{what}: the returned argument is not the caller's array"
        np.testing.assert_allclose(w, want, rtol=1e-6, err_msg=f"{what}: returned argument")
    single = CallSpec(num_args=2, num_results=0, written=(0,), returned=((0, 0),), single=True)
    only = _update_graph()
    only.set_outputs([only.outputs[1]])
    exe = _compile(backend, only, [v.type for v in only.inputs], single)
    for path, (w, _), results in _calls(exe, single, lambda: tuple(a.copy() for a in (w0, g0))):
        assert results[0] is w, f"{backend.name} ({path}): the single returned argument is not the caller's"
        np.testing.assert_allclose(w, want, rtol=1e-6, err_msg=f"{backend.name} ({path}): single")


def check_aliased_arguments(backend: Backend) -> None:
    """A written argument that shares memory with another argument is refused before anything runs
    (the fast path declines it, `run_call` raises naming both); arguments that only lie in one buffer
    (disjoint, or interleaved so that only their bounds overlap) run as separate arrays."""
    g = _update_graph()
    spec = CallSpec(num_args=2, num_results=1, written=(0,), name="update", input_names=("w", "g"))
    exe = _compile(backend, g, [v.type for v in g.inputs], spec)
    buf = np.arange(12, dtype=F32)
    for w, grad in ((buf[:6], buf[:6]), (buf[:6], buf[3:9]), (buf[5::-1], buf[:6])):
        before = buf.copy()
        make = getattr(exe, "exact_caller", None)
        if make is not None:
            assert make(spec, (), None).run((w, grad)) is NotImplemented, \
                f"{backend.name}: exact_caller ran a call whose written argument overlaps another"
        try:
            run_call(exe, spec, (w, grad))
        except ValueError as exc:
            assert "'w'" in str(exc) and "'g'" in str(exc), \
                f"{backend.name}: the refusal does not name both arguments: {exc}"
        else:
            raise AssertionError(f"{backend.name}: a written argument sharing memory with another ran")
        np.testing.assert_array_equal(buf, before, err_msg=f"{backend.name}: a refused call wrote")
    for w_at, g_at in ((slice(0, 6), slice(6, 12)), (slice(0, None, 2), slice(1, None, 2))):
        def make_args(w_at: slice = w_at, g_at: slice = g_at) -> tuple:
            b = np.arange(12, dtype=F32)
            return b[w_at], b[g_at]
        w0, g0 = (a.copy() for a in make_args())
        for path, (w, _), _ in _calls(exe, spec, make_args):
            np.testing.assert_allclose(w, _expected_update(w0, g0), rtol=1e-6,
                                       err_msg=f"{backend.name} ({path}): arguments in one buffer")


CHECKS: dict[str, Callable[[Backend], None]] = {
    "protocol": check_protocol,
    "fresh_outputs": check_fresh_outputs,
    "out": check_out,
    "shape_programs": check_shape_programs,
    "threads": check_threads,
    "op_samples": check_op_samples,
    "written_arguments": check_written_arguments,
    "returned_arguments": check_returned_arguments,
    "aliased_arguments": check_aliased_arguments,
}
