"""Host calls and guards on array data on the Triton backend: the kernel plan splits at the node, its
inputs are copied to the host, the node runs there as on the other backends, and its results are
uploaded for the kernels after it. Every result equals eager NumPy's, at the traced shape and others."""

import io
import warnings

import numpy as np
import pytest
from numtrace_ir.graph import Graph
from numtrace_ir.guards import GuardError
from numtrace_ir.types import TensorType
from numtrace_triton import TritonExecutable, generate, select_allocator

F8 = np.dtype(np.float64)


def _compile(g: Graph, *inputs: np.ndarray) -> TritonExecutable:
    return TritonExecutable(generate(g, [TensorType(a.dtype, a.shape) for a in inputs]), select_allocator())


def _host_call_graph(n: int) -> Graph:
    """``np.cross(-a, b) * 2`` and ``-a`` around a host call, built as the tracer records it."""
    g = Graph()
    a = g.add_input("a", TensorType(F8, (n, 3)))
    b = g.add_input("b", TensorType(F8, (n, 3)))
    t = g.create_node("np.negative", [a]).output
    c = g.create_node("prim.host_call", [t, b], {
        "func": "numpy.cross", "call": (("$0", "$1"), ()), "outputs": ((F8, (n, 3)),), "writes": (),
        "shapes": ((n, 3), (n, 3))}).output
    two = g.create_node("prim.Constant", [], {"value": 2.0}).output
    g.set_outputs([g.create_node("np.multiply", [c, two]).output, t])
    return g


def test_host_call_runs_between_kernels_on_copies():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    exe = _compile(_host_call_graph(5), a, b)
    assert [s.node.op for s in exe.plan.host_steps] == ["prim.host_call"]
    assert 0 < exe.plan.host_steps[0].after < len(exe.plan.kernels) + 1
    for _ in range(2):
        a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
        got, t = exe(a, b)
        np.testing.assert_array_equal(t, -a)  # a kernel computes the host call's input
        np.testing.assert_allclose(got, np.cross(t, b) * 2.0, rtol=1e-15)
    stats = exe.stats()
    assert stats["host_calls"] == ["numpy.cross"] and stats["calls"] == 2
    text = exe.explain()
    assert "host call: numpy.cross (runs on the host: copies in and out)" in text
    lines = text.splitlines()
    host = next(i for i, line in enumerate(lines) if "host call:" in line)
    assert any(line.startswith("  kernel 1:") for line in lines[:host])  # after the kernel of -a


def test_results_of_the_wrong_type_are_a_guard_error():
    g = Graph()
    x = g.add_input("x", TensorType(F8, (6,)))
    y = g.create_node("np.add", [x, g.create_node("prim.Constant", [], {"value": 1.0}).output]).output
    u = g.create_node("prim.host_call", [y], {"func": "numpy.unique", "call": (("$0",), ()),
                                              "outputs": ((F8, (6,)),), "shapes": ((6,),)}).output
    g.set_outputs([u])
    exe = _compile(g, np.arange(6.0))
    np.testing.assert_array_equal(exe(np.arange(6.0))[0], np.arange(1.0, 7.0))
    with pytest.raises(GuardError):
        exe(np.zeros(6))


def test_guard_on_data_is_read_back_and_compared():
    g = Graph()
    x = g.add_input("x", TensorType(F8, (4,)))
    s = g.create_node("np.sum", [x], {"axis": None, "keepdims": False}).output
    zero = g.create_node("prim.Constant", [], {"value": 0.0}).output
    positive = g.create_node("np.greater", [s, zero]).output
    g.create_node("prim.guard", [positive], {"expected": np.array(True), "what": "bool(x.sum() > 0)"})
    g.set_outputs([g.create_node("np.exp", [x]).output])
    exe = _compile(g, np.ones(4))
    total, guard = exe.plan.host_steps   # the float sum feeding the guard is NumPy's own, on the host
    assert (total.node.op, guard.node.op) == ("np.sum", "prim.guard")
    assert "guard: bool(x.sum() > 0)" in exe.explain() and "np.sum with NumPy on the host" in exe.explain()
    np.testing.assert_allclose(exe(np.arange(4.0))[0], np.exp(np.arange(4.0)), rtol=1e-15)
    with pytest.raises(GuardError, match=r"bool\(x.sum\(\) > 0\)"):
        exe(-np.arange(4.0))
    assert exe.stats()["host_calls"] == []


# -- traced through the frontend ------------------------------------------------------------------------

HOST_CALL = "is not in numtrace's op registry: it runs as a host call"


def _add_at(x, y):
    np.add.at(x, [0, 2, 0], y)
    return x * 2.0


def _branch(x):
    if x.sum() > 0:
        return np.tanh(x) + 1.0
    return x * 3.0


CASES = {  # name: (function, the shapes of its arguments for a length n)
    "fft.rfft": (lambda x: np.fft.irfft(np.fft.rfft(x * 2.0), x.shape[0]) + 1.0, lambda n: [(n,)]),
    "fft.rfft-complex-output": (lambda x: np.fft.rfft(np.exp(x)), lambda n: [(n,)]),
    "cross": (lambda a, b: np.cross(a, b) * 2.0, lambda n: [(n, 3), (n, 3)]),
    "interp": (lambda x, fp: np.interp(x * 2.0, np.linspace(-1.0, 1.0, 5), fp ** 2), lambda n: [(n,), (5,)]),
    "convolve": (lambda x, y: np.convolve(x + 1.0, y), lambda n: [(n,), (3,)]),
    "pad-edge": (lambda x: np.pad(x * 2.0, 2, mode="edge") - 1.0, lambda n: [(n,)]),
    "add.at": (_add_at, lambda n: [(n,), (3,)]),
    "transposed-input": (lambda a: np.cross(a.T, a.T[::-1]) + a.T, lambda n: [(3, n)]),
    "branch": (_branch, lambda n: [(n,)]),
}


def _nt():
    return pytest.importorskip("numtrace")  # not a dependency of this package


def _trace(nt, f, args):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", f".*{HOST_CALL}", nt.TracerWarning)
        warnings.filterwarnings("ignore", "Converting a traced array", nt.TracerWarning)
        return nt.trace(f, args, backend="triton")


def _check(got, expected):
    for g, e in zip(got if isinstance(got, tuple) else (got,),
                    expected if isinstance(expected, tuple) else (expected,)):
        assert np.asarray(g).dtype == np.asarray(e).dtype
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_traced_host_calls_follow_new_values_and_shapes(name):
    nt = _nt()
    rng = np.random.default_rng(1)
    f, shapes = CASES[name]
    traced = _trace(nt, f, tuple(rng.standard_normal(s) for s in shapes(8)))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "numtrace: re-tracing", nt.TracerWarning)
        for n in (8, 8, 11, 8):
            for sign in (1.0, -1.0):  # both sides of a data-dependent branch
                args = tuple(sign * np.abs(rng.standard_normal(s)) for s in shapes(n))
                _check(traced(*[a.copy() for a in args]), f(*[a.copy() for a in args]))
    assert any(s["host_calls"] or s["kernels"] for s in traced.stats()["signatures"].values())


def test_guard_miss_on_data_traces_again():
    nt = _nt()
    traced = _trace(nt, _branch, (np.ones(6),))
    assert any(n.op == "prim.guard" for n in traced.graph.nodes)
    np.testing.assert_allclose(traced(np.arange(6.0)), _branch(np.arange(6.0)), rtol=1e-12)
    assert traced.stats()["retraces"] == 0
    with pytest.warns(nt.TracerWarning, match="re-tracing"):
        np.testing.assert_allclose(traced(-np.arange(6.0)), _branch(-np.arange(6.0)), rtol=1e-12)
    assert traced.stats()["retraces"] == 1


def test_writes_of_host_calls_reach_the_caller():
    nt = _nt()
    rng = np.random.default_rng(2)

    def f(x):
        np.multiply.at(x, [1, 1], 3.0)
        return x.sum()

    traced = _trace(nt, f, (rng.standard_normal(6),))
    for _ in range(3):
        x = rng.standard_normal(6)
        got, expected = x.copy(), x.copy()
        np.testing.assert_allclose(traced(got), f(expected), rtol=1e-12)
        np.testing.assert_array_equal(got, expected)


def test_saved_host_call_loads_and_runs_on_triton():
    nt = _nt()
    rng = np.random.default_rng(3)

    def f(x):
        return np.fft.irfft(np.fft.rfft(x), 8) * 2.0 + np.interp(x, [0.0, 1.0], [1.0, 3.0])

    traced = _trace(nt, f, (np.ones(8),))
    buffer = io.BytesIO()
    traced.save(buffer)
    loaded = nt.load(io.BytesIO(buffer.getvalue()), backend="triton")
    x = rng.standard_normal(8)
    np.testing.assert_allclose(loaded(x), f(x), rtol=1e-12, atol=1e-12)
    with pytest.raises(nt.GuardError, match=r"x.shape\[0\] == 8"):
        loaded(np.ones(6))


def test_traced_explain_and_stats_name_the_host_call():
    nt = _nt()
    traced = _trace(nt, lambda x: np.convolve(np.tanh(x), x) + 1.0, (np.ones(8),))
    assert "host call: numpy.convolve (runs on the host: copies in and out)" in traced.explain()
    traced(np.ones(8))
    [stats] = traced.stats()["signatures"].values()
    assert stats["host_calls"] == ["numpy.convolve"]
