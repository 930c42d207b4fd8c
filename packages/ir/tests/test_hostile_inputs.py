"""Hostile inputs to every public entry point: each is a clear Python exception, never a crash or a
silently broken graph (the graph still lints afterwards)."""

import random

import pytest
from numtrace_ir import Graph, LintError, ParseError, TensorType, graphs_equal, parse
from numtrace_ir.printer import format_graph

F = TensorType("f32", (3,))


def chain():
    """x -> negative -> exp, output exp."""
    g = Graph()
    x = g.add_input("x", F)
    neg = g.create_node("np.negative", [x], loc="m.py:1")
    exp = g.create_node("np.exp", [neg.output], loc="m.py:2")
    g.set_outputs([exp.output])
    return g, x, neg, exp


def detached_node():
    """A node (and its input value) whose graph has been freed."""
    g, x, neg, _ = chain()
    return neg, x


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda g, x, n, e: g.create_node("np.add", None), TypeError, "not iterable"),
    (lambda g, x, n, e: g.create_node("np.add", 3), TypeError, "not iterable"),
    (lambda g, x, n, e: g.create_node("np.add", "ab"), ValueError, "input 0 is not a value of this graph"),
    (lambda g, x, n, e: g.create_node("np.add", [x, n]), ValueError, "input 1 is not a value of this graph"),
    (lambda g, x, n, e: g.create_node(None, [x]), ValueError, "invalid op name None"),
    (lambda g, x, n, e: g.create_node(3, [x]), TypeError, "'op' has incorrect type"),
    (lambda g, x, n, e: g.create_node("np.add", [x, x], attrs=[1]), TypeError, "'attrs' has incorrect type"),
    (lambda g, x, n, e: g.create_node("np.add", [x, x], loc=3), TypeError, "'loc' has incorrect type"),
    (lambda g, x, n, e: g.create_node("np.add", [x, x], out_types=[1]), TypeError, "numtrace_ir types"),
    (lambda g, x, n, e: g.create_node("np.add", [x, x], out_types="f32"), TypeError, "sequence of types"),
    (lambda g, x, n, e: g.add_input("z", "f32"), TypeError, "'type' has incorrect type"),
    (lambda g, x, n, e: g.add_input(3, F), ValueError, "invalid value name 3"),
    (lambda g, x, n, e: g.set_outputs(None), TypeError, "not iterable"),
    (lambda g, x, n, e: g.set_outputs([n]), ValueError, "output 0 is not a value of this graph"),
    (lambda g, x, n, e: g.set_outputs([Graph().add_input("y", F)]), ValueError, "not a value of this graph"),
    (lambda g, x, n, e: g.erase_node(g), TypeError, "'node' has incorrect type"),
    (lambda g, x, n, e: g.erase_node(None), TypeError, "'node' has incorrect type"),
    (lambda g, x, n, e: g.erase_node(n), ValueError, "still has 1 use"),
    (lambda g, x, n, e: g.erase_node(e), ValueError, "is a graph output"),
    (lambda g, x, n, e: g.inserting_before(None), TypeError, "'node' has incorrect type"),
    (lambda g, x, n, e: g.inserting_after(chain()[2]), ValueError, "not in this graph"),
    (lambda g, x, n, e: x.replace_all_uses_with(None), TypeError, "'other' has incorrect type"),
    (lambda g, x, n, e: x.replace_all_uses_with(3), TypeError, "'other' has incorrect type"),
    (lambda g, x, n, e: x.replace_all_uses_with(Graph().add_input("y", F)), ValueError, "same graph"),
    # Cycles: a value computed from x (directly or not) cannot replace x's uses.
    (lambda g, x, n, e: x.replace_all_uses_with(n.output), ValueError, "is defined at or after <Node np.neg"),
    (lambda g, x, n, e: x.replace_all_uses_with(e.output), ValueError, "is defined at or after <Node np.neg"),
    (lambda g, x, n, e: n.output.replace_all_uses_with(e.output), ValueError, "after <Node np.exp"),
    (lambda g, x, n, e: n.replace_input(0, e.output), ValueError, "replace_input: .* defined at or after"),
    (lambda g, x, n, e: n.replace_input(0, n.output), ValueError, "replace_input: .* defined at or after"),
    (lambda g, x, n, e: n.replace_input(1, x), IndexError, "input index 1 is out of range"),
    (lambda g, x, n, e: n.replace_input(-1, x), IndexError, "input index -1 is out of range"),
    (lambda g, x, n, e: n.replace_input("0", x), TypeError, "cannot be interpreted as an integer"),
    (lambda g, x, n, e: n.replace_input(2**70, x), OverflowError, "too large"),
    (lambda g, x, n, e: n.replace_input(0, None), TypeError, "'value' has incorrect type"),
    (lambda g, x, n, e: n.replace_input(0, Graph().add_input("y", F)), ValueError, "same graph"),
    (lambda g, x, n, e: setattr(n.output, "name", "12"), ValueError, "all digits"),
    (lambda g, x, n, e: setattr(n, "loc", "a\nb"), ValueError, "invalid source location"),
])
def test_bad_calls_raise_and_leave_the_graph_intact(call, err, match):
    g, x, n, e = chain()
    before = str(g)
    with pytest.raises(err, match=match):
        call(g, x, n, e)
    assert str(g) == before
    g.lint()


def test_an_insertion_point_refuses_inputs_defined_after_it():
    g, x, neg, exp = chain()
    with g.inserting_before(neg), pytest.raises(ValueError, match="np.add: .* after <Node np.neg"):
        g.create_node("np.add", [x, exp.output])
    with g.inserting_after(neg):
        g.create_node("np.add", [x, neg.output])  # defined before the insertion point: fine
    g.lint()


def test_erased_nodes_and_their_values_are_refused_everywhere():
    g, x, neg, exp = chain()
    extra = g.create_node("np.negative", [x])
    g.erase_node(extra)
    for call in (lambda: g.erase_node(extra), lambda: g.create_node("np.exp", [extra.output]),
                 lambda: extra.replace_input(0, x), lambda: extra.output.replace_all_uses_with(x),
                 lambda: x.replace_all_uses_with(extra.output), lambda: g.set_outputs([extra.output]),
                 lambda: g.inserting_before(extra), lambda: g.inserting_after(extra)):
        with pytest.raises(ValueError, match="not in this graph|not a value of this graph|same graph"):
            call()
    assert extra.graph is None and extra.output.graph is None and "np.negative" in str(extra)
    g.lint()


def test_values_and_nodes_of_a_freed_graph_are_detached_not_dangling():
    node, value = detached_node()
    assert node.graph is None and value.graph is None and node.output.node is node
    assert value.users == [node] and "np.negative" in str(node)
    with pytest.raises(ValueError, match="same graph"):
        value.replace_all_uses_with(node.output)
    with pytest.raises(ValueError, match="same graph"):
        node.replace_input(0, value)
    with pytest.raises(ValueError, match="not a value of this graph"):
        Graph().create_node("np.negative", [value])


def test_long_replace_chains_and_deep_graphs_are_fine():
    g = Graph()
    x = g.add_input("x", F)
    v = x
    for _ in range(20000):
        v = g.create_node("np.negative", [v]).output
    g.set_outputs([v])
    y = g.add_input("y", F)
    x.replace_all_uses_with(y)
    g.lint()
    assert x.users == [] and len(y.users) == 1
    assert str(parse(str(g))) == str(g)


@pytest.mark.parametrize("text", [
    "", "graph", "graph(", "\x00", "graph(%x : f32[3]):\n  return (%x)\n" * 2,
    "graph(%x : f32[" + "3," * 100000 + "]):\n  return (%x)\n",
    "graph(%x : f32[3]):\n  %1 : f32[3] = np.add(%x, %x){a=" + "(" * 100000 + "}\n  return (%1)\n",
    "graph(%x : f32[3]):\n  %1 : f32[3] = np.add(%1, %x)\n  return (%1)\n",
    "graph(%x : f32[3]):\n  return (%y)\n",
    "graph(%x : f32[99999999999999999999999]):\n  return (%x)\n",
    "graph(%x : f32[" + "9" * 5000 + "]):\n  return (%x)\n",
    "graph(%x : f32[3]):\n  %1 : f32[3] = np.add(%x, %x){a=" + "9" * 5000 + "}\n  return (%1)\n",
    "graph(%x : f32[3], %x : f32[3]):\n  return (%x)\n",
    "graph(%x : f32[3]):\n  %1 : f32[3] = np.add(%x, %x)\n  %1 : f32[3] = np.add(%x, %x)\n  return (%1)\n",
])
def test_garbage_text_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse(text)


@pytest.mark.parametrize("seed", range(4))
def test_mutated_text_parses_or_raises_a_parse_error(seed):
    g, *_ = chain()
    g.create_node("prim.Constant", [], attrs={"value": (1, 2.5, "s", None, slice(1, None))},
                  out_types=[TensorType("f32", ("B", 2))], loc="m.py:3")
    text = str(g)
    rng = random.Random(seed)
    for _ in range(150):
        chars = list(text)
        for _ in range(rng.randrange(1, 4)):
            chars[rng.randrange(len(chars))] = chr(rng.randrange(1, 128))
        try:
            parsed = parse("".join(chars))
        except ParseError:
            continue
        # What parses is a graph: its text reads back as the same graph, and lint passes or says what
        # is wrong (well-formed text may still describe ill-typed nodes).
        assert graphs_equal(parse(format_graph(parsed)), parsed)
        try:
            parsed.lint()
        except LintError as exc:
            assert str(exc)


def test_parse_rejects_non_text():
    for bad in (None, b"graph(", 3):
        with pytest.raises(TypeError, match="'text' has incorrect type"):
            parse(bad)


def test_dims_beyond_int64_are_refused():
    with pytest.raises(ValueError, match="dims must fit in int64"):
        TensorType("f32", (2**63,))
    assert TensorType("f32", (2**63 - 1,)).shape == (2**63 - 1,)


def test_locations_must_be_utf8_so_that_graphs_serialize():
    g, x, neg, _ = chain()
    with pytest.raises(ValueError, match="one-line UTF-8 string"):
        g.create_node("np.negative", [x], loc="a\ud800.py:1")
    with pytest.raises(ValueError, match="one-line UTF-8 string"):
        neg.loc = "b\udfff.py:2"
    g.lint()


def test_objects_made_by_bare_new_are_inert_not_crashing():
    from numtrace_ir import Node, Value

    g, x, neg, _ = chain()
    point = type(g.inserting_before(neg))
    with pytest.raises(TypeError, match="created by Graph.inserting_before"):
        point()
    with pytest.raises(TypeError, match="created by Graph.inserting_before"), point.__new__(point):
        pass
    value, node = Value.__new__(Value), Node.__new__(Node)
    assert value.graph is None and value.users == [] and node.graph is None
    with pytest.raises(ValueError, match="not a value of this graph"):
        g.create_node("np.negative", [value])
    with pytest.raises(ValueError, match="same graph"):
        x.replace_all_uses_with(value)
    with pytest.raises(ValueError, match="same graph"):
        neg.replace_input(0, value)
    with pytest.raises(ValueError, match="not in this graph"):
        g.erase_node(node)
    with pytest.raises(ValueError, match="not in this graph"):
        g.inserting_after(node)
    with pytest.raises(TypeError):
        node.replace_input(0, x)
    g.lint()


def test_the_abstract_type_and_the_parser_cannot_be_made_empty():
    from numtrace_ir.parser import _Parser
    from numtrace_ir.types import Type

    with pytest.raises(TypeError, match="Type is abstract"):
        Type()
    with pytest.raises(TypeError):
        _Parser.__new__(_Parser)
