"""Traced shape arithmetic (`x.shape[0]`, `prim.reshape`) is bound to the call's sizes by
`specialize`, so what follows a `prim.reshape` is still planned and fused."""

import numpy as np
from numtrace_cpu import compile_graph
from numtrace_ir import Graph
from numtrace_ir.types import ScalarType, TensorType

F32 = np.dtype(np.float32)


def _graph():
    g = Graph()
    x = g.add_input("x", TensorType(F32, ("B", 4)))
    rows = g.create_node("prim.dim", [x], attrs={"axis": 0}).output
    two = g.create_node("prim.Constant", [], attrs={"value": 2}).output
    doubled = g.create_node("prim.mul", [rows, two]).output
    flat = g.create_node("prim.reshape", [x, doubled], attrs={"shape": ("n", -1)}).output
    half = g.create_node("prim.Constant", [], attrs={"value": 0.5}).output
    g.set_outputs([g.create_node("np.multiply", [flat, half]).output, doubled])
    return g


def test_shape_scalars_fold_and_downstream_fuses():
    g = _graph()
    exe = compile_graph(g, [TensorType(F32, (6, 4))])
    x = np.arange(24, dtype=F32).reshape(6, 4)
    y, n = exe(x)
    assert n == 12 and type(n) is int
    np.testing.assert_array_equal(y, x.reshape(12, 2) * 0.5)
    st = exe.stats()   # specialize folded the shape arithmetic into constants: nothing runs for it
    assert st["fused_groups"] == 1 and st["views"] == 1 and st["fallback_ops"] == []


def test_scalar_graph_inputs_and_outputs():
    g = Graph()
    s = g.add_input("s", ScalarType("int"))
    g.set_outputs([g.create_node("prim.mul", [s, s]).output])
    exe = compile_graph(g, [ScalarType("int")])
    assert exe(7) == (49,)
    assert exe.stats()["fallbacks"] == 1
