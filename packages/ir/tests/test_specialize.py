"""`specialize`: retyping a traced graph for the concrete types of a call."""

import pytest
from numtrace_ir import Graph, ScalarType, ShapeError, TensorType, specialize


def symbolic_graph():
    g = Graph()
    x = g.add_input("x", TensorType("f32", ("B", 4)))
    w = g.add_input("w", TensorType("f32", (4,)))
    a = g.create_node("np.add", [x, w], loc="model.py:3")
    e = g.create_node("np.exp", [a.output], loc="model.py:4")
    e.output.name = "act"
    s = g.create_node("np.sum", [e.output], attrs={"axis": (1,)}, loc="model.py:5")
    g.set_outputs([s.output, a.output])
    return g


def test_specialize_recomputes_types():
    g = symbolic_graph()
    h = specialize(g, [TensorType("f32", (3, 4)), TensorType("f32", (4,))])
    assert [str(v.type) for v in h.outputs] == ["f32[3]", "f32[3, 4]"]
    assert [n.op for n in h] == ["np.add", "np.exp", "np.sum"]
    assert [n.loc for n in h] == ["model.py:3", "model.py:4", "model.py:5"]
    assert h.nodes[1].output.name == "act" and h.inputs[0].name == "x"
    h.lint()
    assert str(g.outputs[0].type) == "f32[B]"  # the original is untouched
    # Broadcasting a size-1 dim is the rule's business, and other symbols are kept as given.
    k = specialize(g, [TensorType("f32", ("N", 4)), TensorType("f32", (4,))])
    assert str(k.outputs[0].type) == "f32[N]"


@pytest.mark.parametrize(("types", "err", "match"), [
    ([TensorType("f32", (3, 4))], ValueError, "has 2 inputs, got 1"),
    ([TensorType("f64", (3, 4)), TensorType("f32", (4,))], TypeError, "input 0 is declared f32.*dtype f64"),
    ([TensorType("f32", (3,)), TensorType("f32", (4,))], ShapeError, "input 0 .* rank 1"),
    ([TensorType("f32", (3, 5)), TensorType("f32", (4,))], ShapeError, "axis 1: expected 4, got 5"),
    ([TensorType("f32", (3, 4)), ScalarType("float")], TypeError, r"input 1 is declared f32\[4\] but given"),
    (["f32", TensorType("f32", (4,))], TypeError, "must be a numtrace_ir type"),
])
def test_specialize_checks_input_types(types, err, match):
    with pytest.raises(err, match=match):
        specialize(symbolic_graph(), types)


def test_symbols_bind_consistently_across_inputs():
    g = Graph()
    x = g.add_input("x", TensorType("f32", ("B",)))
    y = g.add_input("y", TensorType("f32", ("B",)))
    g.set_outputs([g.create_node("np.add", [x, y]).output])
    specialize(g, [TensorType("f32", (5,)), TensorType("f32", (5,))]).lint()
    with pytest.raises(ShapeError, match="symbol B is already 5, got 2"):
        specialize(g, [TensorType("f32", (5,)), TensorType("f32", (2,))])


def test_errors_name_the_node():
    g = Graph()
    x = g.add_input("x", TensorType("f32", ("B",)))
    y = g.add_input("y", TensorType("f32", ("C",)))
    n = g.create_node("np.add", [x, y], loc="net.py:9")
    g.set_outputs([n.output])
    with pytest.raises(ShapeError, match=r"np\.add\(%x, %y\)  # net\.py:9: .*do not broadcast"):
        specialize(g, [TensorType("f32", (3,)), TensorType("f32", (4,))])


def heads_graph():
    """``x.reshape(B, T, 4, C // 4)`` with the sizes read from the traced ``x.shape``."""
    g = Graph()
    x = g.add_input("x", TensorType("f32", (2, 8, 16)))
    b, t, c = (g.create_node("prim.dim", [x], attrs={"axis": i}).output for i in range(3))
    four = g.create_node("prim.Constant", [], attrs={"value": 4}).output
    q = g.create_node("prim.floordiv", [c, four]).output
    # The tracer knows the sizes it traced with, so it records the types (no symbolic proof needed).
    r = g.create_node("prim.reshape", [x, b, t, q], attrs={"shape": ("n0", "n1", 4, "n2")},
                      out_types=[TensorType("f32", (2, 8, 4, 4))])
    back = g.create_node("prim.reshape", [r.output, b, t, c], attrs={"shape": ("n0", "n1", "n3")},
                         out_types=[TensorType("f32", (2, 8, 16))])
    g.set_outputs([back.output])
    return g


def test_specialize_folds_shapes_read_from_inputs():
    g = heads_graph()
    with pytest.raises(ShapeError, match="axis 0: expected 2, got 3"):
        specialize(g, [TensorType("f32", (3, 5, 16))])
    h = specialize(g, [TensorType("f32", (3, 5, 16))], check_shapes=False)
    reshapes = [n for n in h if n.op == "prim.reshape"]
    assert [n.attrs["shape"] for n in reshapes] == [(3, 5, 4, 4), (3, 5, 16)]
    assert all(len(n.inputs) == 1 for n in reshapes)  # the folded scalars are no longer inputs
    assert not any(n.op in ("prim.dim", "prim.floordiv") for n in h)  # they became constants
    assert str(h.outputs[0].type) == "f32[3, 5, 16]"
    h.lint()


def test_specialize_keeps_unknown_dynamic_dims():
    g = Graph()
    x = g.add_input("x", TensorType("f32", (6,)))
    n = g.add_input("n", ScalarType("int"))
    r = g.create_node("prim.reshape", [x, n], attrs={"shape": ("k", -1)})
    g.set_outputs([r.output])
    h = specialize(g, [TensorType("f32", (6,)), ScalarType("int")])
    (node,) = h.nodes
    assert node.attrs["shape"] == ("k", -1) and len(node.inputs) == 2
