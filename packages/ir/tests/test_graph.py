"""The editing API of Graph / Node / Value and `Graph.lint`."""

import numpy as np
import pytest
from numtrace_ir import Graph, LintError, ScalarType, TensorType, UnknownOpError

F = TensorType("f32", ("B", 4))
ROW = TensorType("f32", (4,))


def small_graph():
    g = Graph()
    x = g.add_input("x", F)
    y = g.add_input("y", ROW)
    a = g.create_node("np.add", [x, y], loc="model.py:12")
    m = g.create_node("np.multiply", [a.output, a.output], loc="model.py:13")
    g.set_outputs([m.output, a.output])
    return g, x, y, a, m


def test_create_node_infers_types_and_records_everything():
    g, x, y, a, m = small_graph()
    assert a.op == "np.add" and a.inputs == (x, y) and a.attrs == {} and a.loc == "model.py:12"
    assert a.output.type == F and a.output.node is a and a.output.index == 0 and a.output.name is None
    assert x.node is None and x.index == 0 and y.index == 1 and x.name == "x"
    assert g.inputs == (x, y) and g.outputs == (m.output, a.output)
    assert g.nodes == [a, m] and list(g) == [a, m] and len(g) == 2
    assert x.users == [a] and x.uses == [(a, 0)]
    assert a.output.uses == [(m, 0), (m, 1)] and a.output.users == [m]
    assert m.output.users == [] and a.graph is g and x.graph is g
    g.lint()


def test_multi_output_nodes():
    g = Graph()
    x = g.add_input("x", ROW)
    n = g.create_node("np.modf", [x])
    assert len(n.outputs) == 2 and [v.index for v in n.outputs] == [0, 1]
    assert all(v.type == ROW for v in n.outputs)
    with pytest.raises(ValueError, match="np.modf has 2 outputs"):
        n.output  # noqa: B018
    g.set_outputs(n.outputs)
    g.lint()


def test_explicit_out_types_skip_the_registry():
    g = Graph()
    x = g.add_input(None, F)
    n = g.create_node("custom.op", [x], attrs={"k": 3}, out_types=[ScalarType("int"), F])
    assert [str(v.type) for v in n.outputs] == ["int", "f32[B, 4]"]
    z = g.create_node("custom.none", [], out_types=())
    assert z.outputs == ()
    with pytest.raises(UnknownOpError, match="custom.op"):
        g.create_node("custom.op", [x])


@pytest.mark.parametrize(("kwargs", "err", "match"), [
    ({"op": "bad op"}, ValueError, "invalid op name"),
    ({"op": "np..add"}, ValueError, "invalid op name"),
    ({"attrs": {"x y": 1}}, ValueError, "not an identifier"),
    ({"attrs": {"k": [1, 2]}}, TypeError, "list .* is not an attribute value"),
    ({"attrs": {"k": (1, {2})}}, TypeError, "set"),
    ({"attrs": {"k": np.float32(1)}}, TypeError, "float32"),
    ({"attrs": {"k": np.array(["a"])}}, TypeError, "not supported"),
    ({"attrs": {"k": np.dtype("O")}}, TypeError, "not supported"),
    ({"loc": "a.py:1\nb"}, ValueError, "invalid source location"),
    ({"loc": ""}, ValueError, "invalid source location"),
    ({"out_types": ["f32"]}, TypeError, "must be numtrace_ir types"),
    ({"out_types": F}, TypeError, "sequence of types"),
])
def test_create_node_rejects_bad_arguments(kwargs, err, match):
    g = Graph()
    x = g.add_input("x", F)
    args = {"op": "my.op", "inputs": [x], "attrs": None, "loc": None, "out_types": [F]} | kwargs
    with pytest.raises(err, match=match):
        g.create_node(args["op"], args["inputs"], attrs=args["attrs"], loc=args["loc"],
                      out_types=args["out_types"])
    assert len(g) == 0 and x.users == []


def test_deeply_nested_attributes_are_refused():
    deep = ()
    for _ in range(100_000):
        deep = (deep,)
    g = Graph()
    with pytest.raises(TypeError, match="my.op: attribute k: attribute values may nest at most 64"):
        g.create_node("my.op", [], attrs={"k": deep}, out_types=[])
    ok = g.create_node("my.op", [], attrs={"k": ((((1,),),),)}, out_types=[])
    ok.attrs["k"] = deep  # attrs stay editable; printing then refuses instead of crashing
    with pytest.raises(TypeError, match="nest at most"):
        str(g)


def test_inputs_must_belong_to_the_graph():
    g, h = Graph(), Graph()
    x = h.add_input("x", F)
    with pytest.raises(ValueError, match="input 0 is not a value of this graph"):
        g.create_node("np.negative", [x])
    with pytest.raises(ValueError, match="input 1 is not a value of this graph"):
        g.create_node("np.add", [g.add_input("a", F), "b"])
    with pytest.raises(ValueError, match="output 0 is not a value of this graph"):
        g.set_outputs([x])


def test_shape_errors_carry_the_location():
    g = Graph()
    x = g.add_input("x", TensorType("f32", (3,)))
    y = g.add_input("y", TensorType("f32", (4,)))
    with pytest.raises(ValueError) as info:
        g.create_node("np.add", [x, y], loc="m.py:7")
    assert "m.py:7" in "".join(getattr(info.value, "__notes__", []))


def test_bad_names():
    g = Graph()
    for bad in ["", "12", "a b", ".x", "x.", "%x", 3]:
        with pytest.raises(ValueError, match="invalid value name"):
            g.add_input(bad, F)
    v = g.add_input("layers.0.weight", F)
    v.name = "w_1"
    assert v.name == "w_1"
    with pytest.raises(ValueError, match="invalid value name"):
        v.name = "7"
    with pytest.raises(TypeError):
        g.add_input("x", "f32")


def test_values_and_nodes_are_not_constructible():
    from numtrace_ir import Node, Value

    with pytest.raises(TypeError, match="Graph.add_input"):
        Value()
    with pytest.raises(TypeError, match="Graph.create_node"):
        Node()


def test_insertion_points():
    g, x, y, a, m = small_graph()
    with g.inserting_before(m):
        b = g.create_node("np.exp", [a.output])
        c = g.create_node("np.exp", [b.output])
    with g.inserting_after(a):
        d = g.create_node("np.negative", [x])
        e = g.create_node("np.negative", [d.output])
        with g.inserting_before(a):
            f = g.create_node("np.negative", [y])
        h = g.create_node("np.negative", [e.output])
    tail = g.create_node("np.negative", [x])
    assert g.nodes == [f, a, d, e, h, b, c, m, tail]
    assert x.users == [a, d, tail]
    g.lint()
    with pytest.raises(ValueError, match="not in this graph"):
        Graph().inserting_before(a)


def test_many_insertions_at_one_point_keep_order():
    # Exhausts the gap between two positions, forcing a renumbering.
    g = Graph()
    x = g.add_input("x", ROW)
    first = g.create_node("np.negative", [x])
    last = g.create_node("np.negative", [x])
    made = []
    for _ in range(60):
        with g.inserting_before(last):
            made.append(g.create_node("np.negative", [x]))
    assert g.nodes == [first, *made, last]
    assert x.users == [first, *made, last]
    g.lint()


def test_replace_all_uses_and_replace_input():
    g, x, y, a, m = small_graph()
    with g.inserting_before(m):
        n = g.create_node("np.negative", [a.output])
    # n uses a's output: redirecting that use to n's own output would make a cycle, so nothing changes.
    with pytest.raises(ValueError, match="replace_all_uses_with: .* at or after <Node np.negative"):
        a.output.replace_all_uses_with(n.output)
    assert n.inputs == (a.output,) and m.inputs == (a.output, a.output)
    g.lint()
    n.replace_input(0, x)
    a.output.replace_all_uses_with(n.output)  # also rewires the graph outputs
    assert m.inputs == (n.output, n.output) and g.outputs == (m.output, n.output)
    assert a.output.users == [] and x.users == [a, n] and n.output.users == [m]
    g.lint()
    with pytest.raises(IndexError, match="input index 3 is out of range"):
        n.replace_input(3, x)
    with pytest.raises(ValueError, match="same graph"):
        n.replace_input(0, Graph().add_input("z", F))
    with pytest.raises(ValueError, match="same graph"):
        x.replace_all_uses_with(Graph().add_input("z", F))


def test_erase_node():
    g, x, y, a, m = small_graph()
    with pytest.raises(ValueError, match="still has 2 use"):
        g.erase_node(a)
    with pytest.raises(ValueError, match="is a graph output"):
        g.erase_node(m)
    g.set_outputs([a.output])
    g.erase_node(m)
    assert m.graph is None and m.output.graph is None
    assert g.nodes == [a] and len(g) == 1 and a.output.users == []
    g.lint()
    with pytest.raises(ValueError, match="not in this graph"):
        g.erase_node(m)


def test_erasing_the_insertion_anchor_moves_on():
    g, x, y, a, m = small_graph()
    g.set_outputs([a.output])
    with g.inserting_before(m):
        g.erase_node(m)
        n = g.create_node("np.negative", [x])
    assert g.nodes == [a, n]
    assert g.create_node("np.negative", [x]) is g.nodes[-1]
    g.lint()


def test_iteration_is_a_snapshot():
    g, x, y, a, m = small_graph()
    g.set_outputs([a.output])
    seen = []
    for n in g:
        seen.append(n)
        if n is a:
            g.erase_node(m)
    assert seen == [a, m] and g.nodes == [a]


def test_copy_is_independent():
    g, x, y, a, m = small_graph()
    c = g.copy()
    assert str(c) == str(g)
    assert c.nodes[0] is not a and c.inputs[0] is not x and c.inputs[0].name == "x"
    c.create_node("np.negative", [c.inputs[0]])
    assert len(c) == 3 and len(g) == 2
    c.lint()
    g.lint()


def test_lint_type_mismatch_names_node_and_location():
    g = Graph()
    x = g.add_input("x", ROW)
    g.create_node("np.negative", [x], loc="net.py:42", out_types=[TensorType("f64", (4,))])
    with pytest.raises(LintError, match=r"(?s)np\.negative\(%x\).*net\.py:42.*rule gives \(f32\[4\]\)"):
        g.lint()
    g.lint(check_types=False)


def test_lint_unknown_op():
    g = Graph()
    x = g.add_input("x", ROW)
    g.create_node("no.such_op", [x], out_types=[ROW], loc="a.py:1")
    with pytest.raises(LintError, match="rule fails: UnknownOpError"):
        g.lint()


def test_lint_detects_outputs_of_erased_nodes():
    g, x, y, a, m = small_graph()
    n = g.create_node("np.negative", [x])
    g.set_outputs([a.output])
    g.erase_node(m)
    # An output of an erased node cannot be set as a graph output, nor used.
    with pytest.raises(ValueError, match="not a value of this graph"):
        g.set_outputs([m.output])
    with pytest.raises(ValueError, match="not a value of this graph"):
        g.create_node("np.negative", [m.output])
    g.erase_node(n)
    g.lint()


def test_repr():
    g, x, y, a, m = small_graph()
    assert repr(g) == "<Graph: 2 inputs, 2 nodes, 2 outputs>"
    assert repr(a) == "<Node np.add at model.py:12>"
    assert str(a) == "%2 : f32[B, 4] = np.add(%x, %y)  # model.py:12"
    assert "input" in repr(x) and "output 0 of np.add" in repr(a.output)
