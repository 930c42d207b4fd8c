"""``TritonExecutable.explain()``: the kernels launched per call, with their source (the optional part of
the backend contract that ``traced.explain()`` calls)."""

import numpy as np
import pytest
from numtrace_ir.graph import Graph
from numtrace_ir.types import TensorType
from numtrace_triton import TritonExecutable, generate, select_allocator


def test_explain_lists_each_kernel_with_its_source():
    a = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    g = Graph()
    x = g.add_input("x", TensorType("float32", a.shape))
    t = g.create_node("np.tanh", [x]).output
    s = g.create_node("np.sum", [t], attrs={"axis": -1, "keepdims": False}).output
    g.set_outputs([t, s])
    plan = generate(g, [TensorType(a.dtype, a.shape)])
    exe = TritonExecutable(plan, select_allocator())
    text = exe.explain()
    assert text.startswith("triton executable for (f32[4, 6])")
    assert f"{len(plan.kernels)} kernel launch" in text and "buffers: " in text
    for k, info in enumerate(exe.kernels, 1):
        assert f"kernel {k}: {info.name}" in text
        first = next(line for line in info.source.splitlines() if line.strip())
        assert "      " + first in text
    assert "@triton.jit" in text


def test_traced_function_explain_on_triton():
    nt = pytest.importorskip("numtrace")  # not a dependency of this package

    traced = nt.trace(lambda x: np.tanh(x) * 2.0, (np.ones((3, 5), np.float32),), backend="triton")
    text = traced.explain()
    assert "on backend 'triton'" in text and "triton executable for (f32[3, 5])" in text


def _explain(op, arrays, **attrs):
    from numtrace_ir.testing import type_of

    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(a)) for i, a in enumerate(arrays)]
    g.set_outputs(g.create_node(op, xs, attrs=attrs).outputs)
    exe = TritonExecutable(generate(g, [type_of(a) for a in arrays]), select_allocator())
    return exe, exe.explain()


@pytest.mark.parametrize(("op", "attrs", "ndims"), [
    ("np.diff", {"n": 2, "axis": 0}, (2,)), ("np.roll", {"shift": 3}, (2,)),
    ("np.tile", {"reps": (2, 1, 3)}, (2,)), ("np.repeat", {"repeats": (3,), "axis": 1}, (2,)),
    ("np.triu", {"k": -1}, (3,)), ("np.tril", {"k": 2}, (2,)), ("np.outer", {}, (2, 1)),
    ("np.hstack", {}, (2, 2)), ("np.vstack", {}, (1, 1)), ("np.column_stack", {}, (1, 1)),
    ("np.atleast_2d", {}, (1, 0)), ("np.atleast_3d", {}, (2,)),
    ("np.tensordot", {"axes": 0}, (2, 2)), ("np.inner", {}, (3, 1)),
])
def test_movement_ops_run_as_kernels_not_host_steps(op, attrs, ndims):
    """They are rewritten into views, joins and elementwise ops: explain() lists no host step."""
    from numtrace_ir import registry

    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((4, 3, 5)[3 - d:] if d else ()) for d in ndims]
    exe, text = _explain(op, arrays, **registry.get(op).normalize_attrs(attrs))
    assert "host step" not in text, text
    got = exe(*arrays)
    expected = registry.get(op).reference(*arrays, **registry.get(op).normalize_attrs(attrs))
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    for a, b in zip(got, expected):  # contractions sum in another order than BLAS
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_explain_names_each_host_step_with_its_reason():
    a = np.arange(12.0).reshape(3, 4)
    exe, text = _explain("np.sort", [a], axis=-1)
    assert "host step: np.sort" in text and "sorting is not lowered" in text
    np.testing.assert_array_equal(exe(a)[0], np.sort(a))


def test_a_numpy_ufunc_without_an_op_runs_on_the_host_named_as_numpys():
    """np.ldexp records as a generic ufunc node: a host step whose reason does not call it foreign."""
    from numtrace_ir import registry

    a, e = np.array([1.0, -2.5, 3.0]), np.array([1, 2, -3])
    g = Graph()
    va, ve = g.add_input("a", TensorType(a.dtype, a.shape)), g.add_input("e", TensorType(e.dtype, e.shape))
    op = registry.get("np.ufunc")
    node = g.create_node("np.ufunc", [va, ve], attrs=op.normalize_attrs({"ufunc": "numpy.ldexp"}))
    g.set_outputs(node.outputs)
    exe = TritonExecutable(generate(g, [va.type, ve.type]), select_allocator())
    text = exe.explain()
    assert "host step: np.ufunc[ufunc=numpy.ldexp]" in text and "np.ldexp" in text, text
    np.testing.assert_array_equal(exe(a, e)[0], np.ldexp(a, e))
