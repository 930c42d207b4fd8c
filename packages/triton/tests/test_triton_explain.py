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
