"""`guard_reference_nodes`: the nodes feeding a guard on data whose kernels may give other bits than
NumPy (math-library ufuncs on floats, products, float sums), and only those."""

import numpy as np
from numtrace_ir import Graph
from numtrace_ir.exactness import data_guard_cone, guard_reference_nodes
from numtrace_ir.types import TensorType

F8, I8 = np.dtype("f8"), np.dtype("i8")


def _names(graph, ids):
    return sorted(n.op for n in graph.nodes if id(n) in ids)


def test_only_inexact_nodes_feeding_a_data_guard_run_as_numpy():
    g = Graph()
    x = g.add_input("x", TensorType(F8, (4,)))
    i = g.add_input("i", TensorType(I8, (4,)))
    e = g.create_node("np.exp", [x]).output                        # feeds the guard, math library
    d = g.create_node("np.multiply", [e, x]).output                # feeds the guard, exact
    s = g.create_node("np.sum", [d], {"axis": None, "keepdims": False}).output  # float sum: order
    k = g.create_node("np.sum", [i], {"axis": None, "keepdims": False}).output  # int sum: exact
    m = g.create_node("np.add", [s, g.create_node("np.astype", [k], {"dtype": F8}).output]).output
    g.create_node("prim.guard", [m], {"expected": np.array(1.0), "what": "float(x)"})
    out = g.create_node("np.sin", [x]).output                      # an output only: stays a kernel
    g.set_outputs([out])
    assert _names(g, data_guard_cone(g)) == sorted(
        ["np.exp", "np.multiply", "np.sum", "np.sum", "np.astype", "np.add"])
    assert _names(g, guard_reference_nodes(g)) == ["np.exp", "np.sum"]


def test_a_guard_on_shapes_has_no_cone():
    g = Graph()
    x = g.add_input("x", TensorType(F8, (4,)))
    n = g.create_node("prim.dim", [x], {"axis": 0}).output
    g.create_node("prim.guard", [n], {"expected": 4})
    g.set_outputs([g.create_node("np.exp", [x]).output])
    assert guard_reference_nodes(g) == set() and data_guard_cone(g) == set()
