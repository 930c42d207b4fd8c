"""Dead-code and common-subexpression elimination, and decomposition."""

import math
import struct

import numpy as np
import pytest
from numtrace_ir import Graph, ScalarType, TensorType, passes, registry

V = TensorType("f32", ("N",))
_NAN_A = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
_NAN_B = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000002))[0]


def graph_with_inputs(n=2):
    g = Graph()
    return g, [g.add_input(f"x{i}", V) for i in range(n)]


def test_dce_removes_dead_chains_and_keeps_outputs():
    g, (x, y) = graph_with_inputs()
    live = g.create_node("np.add", [x, y])
    dead1 = g.create_node("np.exp", [x])
    g.create_node("np.negative", [dead1.output])
    out2 = g.create_node("np.modf", [y])  # one output used, one not: the node stays
    g.set_outputs([live.output, out2.outputs[1]])
    assert passes.dce(g) == 2
    assert [n.op for n in g] == ["np.add", "np.modf"]
    assert g.inputs == (x, y)  # inputs are never removed, even when unused
    assert passes.dce(g) == 0
    g.lint()


def test_dce_everything_dead():
    g, (x, _) = graph_with_inputs()
    a = g.create_node("np.exp", [x])
    g.create_node("np.add", [a.output, a.output])
    g.create_node("my.sink", [x], out_types=[])
    assert passes.dce(g) == 3 and len(g) == 0
    g.lint()


def test_cse_merges_identical_nodes_transitively():
    g, (x, y) = graph_with_inputs()
    a1 = g.create_node("np.add", [x, y])
    a2 = g.create_node("np.add", [x, y])
    b1 = g.create_node("np.exp", [a1.output])
    b2 = g.create_node("np.exp", [a2.output])  # identical once a2 is merged into a1
    c = g.create_node("np.add", [y, x])  # different input order: not the same expression
    m = g.create_node("np.multiply", [b1.output, b2.output])
    g.set_outputs([m.output, b2.output, c.output])
    assert passes.cse(g) == 2
    assert g.nodes == [a1, b1, c, m]
    assert m.inputs == (b1.output, b1.output) and g.outputs == (m.output, b1.output, c.output)
    g.lint()


def _combined(g, a, b):
    """One value read from both nodes' results (results that are both returned stay apart)."""
    return g.create_node("np.add", [a.output, b.output]).output


@pytest.mark.parametrize(("attrs1", "attrs2", "merged"), [
    ({"axis": (0,)}, {"axis": (0,)}, True),
    ({"axis": (0,)}, {"axis": None}, False),
    ({"axis": (0,), "keepdims": True}, {"axis": (0,), "keepdims": False}, False),
])
def test_cse_compares_attributes(attrs1, attrs2, merged):
    g, (x, _) = graph_with_inputs()
    a = g.create_node("np.sum", [x], attrs=attrs1)
    b = g.create_node("np.sum", [x], attrs=attrs2)
    g.set_outputs([_combined(g, a, b)])
    assert passes.cse(g) == int(merged)
    g.lint()


@pytest.mark.parametrize(("v1", "v2", "merged"), [
    (math.nan, math.nan, True),      # nan attrs are the same attribute
    (0.0, -0.0, False),              # but 0.0 and -0.0 differ
    (1.0, 1, False),                 # and so do a float and an int of the same value
    (np.array([1.0, math.nan]), np.array([1.0, math.nan]), True),
    (np.array([1.0, 2.0]), np.array([1.0, 2.0], np.float32), False),
    (np.array([1, 2]), np.array([[1, 2]]), False),
    (np.arange(4.0)[::2], np.array([0.0, 2.0]), True),  # layout does not matter
    (_NAN_A, _NAN_A, True),
    (_NAN_A, _NAN_B, False),         # NaNs differ by payload
    (_NAN_A, -_NAN_A, False),        # and by sign
    (np.array([_NAN_A]), np.array([_NAN_B]), False),
    (np.array([0.0]), np.array([-0.0]), False),
    (complex(0.0, 1.0), complex(-0.0, 1.0), False),
    ((1, (2.0,)), (1, (2.0,)), True),
    ((1, (2.0,)), (1, (2,)), False),
    (slice(None, 2), slice(None, 2), True),
    (slice(None, 2), slice(None, 2.0), False),
    (np.dtype("f4"), np.dtype("f4"), True),
    (np.dtype("f4"), np.dtype("f8"), False),
    (True, 1, False),
])
def test_cse_attribute_equality_is_exact(v1, v2, merged):
    g, (x, _) = graph_with_inputs()
    # Explicit out_types: the pass compares attributes and does not re-run the op's rule.
    a = g.create_node("np.nan_to_num", [x], attrs={"nan": v1}, out_types=[V])
    b = g.create_node("np.nan_to_num", [x], attrs={"nan": v2}, out_types=[V])
    g.set_outputs([_combined(g, a, b)])
    assert passes.cse(g) == int(merged)


def test_cse_never_merges_unknown_or_nondeterministic_ops():
    g, (x, _) = graph_with_inputs()
    a = g.create_node("my.random_thing", [x], out_types=[V])
    b = g.create_node("my.random_thing", [x], out_types=[V])
    g.set_outputs([a.output, b.output])
    assert passes.cse(g) == 0
    op = registry.get("np.random.standard_normal")
    assert op.nondeterministic
    h = Graph()
    n1 = h.create_node(op.name, [], attrs={"size": (3,)})
    n2 = h.create_node(op.name, [], attrs={"size": (3,)})
    h.set_outputs([*n1.outputs, *n2.outputs])
    assert passes.cse(h) == 0 and len(h) == 2
    # An unused draw may be dropped.
    h.set_outputs(n1.outputs)
    assert passes.dce(h) == 1 and h.nodes == [n1]


# -- decompose ---------------------------------------------------------------------------------------

_DECOMPOSABLE = [op for op in registry.all_ops() if op.decompose is not None]


@pytest.mark.parametrize("op", _DECOMPOSABLE, ids=lambda op: op.name)
def test_decompose_matches_the_reference_on_every_sample(op):
    from numtrace_ir import testing

    assert {o.name for o in _DECOMPOSABLE} >= {"np.clip", "np.divmod"}
    rewritten = 0
    for _, sample in testing.iter_cases([op]):
        g = testing.build_graph(op, sample)
        n = passes.decompose(g, set())
        g.lint()
        assert n == (0 if any(node.op == op.name for node in g) else 1)
        rewritten += n
        with np.errstate(all="ignore"):
            actual = testing.run_reference(g, sample.inputs)
            expected = testing.reference_outputs(op, sample)
        testing.assert_outputs_close(tuple(np.asarray(a) for a in actual), expected, what=op.name)
    assert rewritten, f"no sample of {op.name} was decomposed"


def test_decompose_keeps_supported_ops_and_runtime_int_bounds_of_integer_clip():
    g = Graph()
    x = g.add_input("x", TensorType("u8", (4,)))
    lo = g.add_input("lo", ScalarType("int"))  # NumPy drops -1 but rejects 300: decided by the value
    node = g.create_node("np.clip", [x, lo], attrs={"omitted": ("a_max",)}, loc="m.py:3")
    g.set_outputs([node.output])
    assert passes.decompose(g, set()) == 0
    assert [n.op for n in g] == ["np.clip"]
    h = Graph()
    a, b = h.add_input("a", V), h.add_input("b", V)
    h.set_outputs(h.create_node("np.divmod", [a, b]).outputs)
    assert passes.decompose(h, {registry.get("np.divmod")}) == 0
    assert passes.decompose(h, set()) == 1
    assert [(n.op, n.loc) for n in h] == [("np.floor_divide", None), ("np.remainder", None)]


@pytest.mark.parametrize("value, kept", [(-1, ["np.minimum"]), (0, ["np.minimum"]),
                                         (1, ["np.maximum", "np.minimum"]), (300, None)])
def test_decompose_clip_drops_constant_int_bounds_as_numpy_does(value, kept):
    from numtrace_ir import testing

    g = Graph()
    x = g.add_input("x", TensorType("u8", (4,)))
    lo = g.create_node("prim.Constant", [], attrs={"value": value}, out_types=[ScalarType("int")]).output
    hi = g.create_node("prim.Constant", [], attrs={"value": 3}, out_types=[ScalarType("int")]).output
    g.set_outputs([g.create_node("np.clip", [x, lo, hi]).output])
    passes.decompose(g, set())
    ops = [n.op for n in g if n.op != "prim.Constant"]
    assert ops == (kept or ["np.clip"])
    a = np.array([0, 2, 200, 255], np.uint8)
    if kept:
        (out,) = testing.run_reference(g, [a])
        np.testing.assert_array_equal(out, np.clip(a, value, 3))


def _twice(op_name):
    """A graph computing `op_name`'s first sample twice, both results read by one np.add."""
    from numtrace_ir import testing

    op = registry.get(op_name)
    sample = op.samples(np.random.default_rng(0))[0]
    g = Graph()
    attrs = op.normalize_attrs(sample.attrs)
    values = [g.add_input(f"a{i}", testing.type_of(v)) for i, v in enumerate(sample.inputs)]
    a = g.create_node(op.name, values, attrs=attrs)
    b = g.create_node(op.name, values, attrs=attrs)
    outs = [g.create_node("np.add", [p, q]).output for p, q in zip(a.outputs, b.outputs)]
    g.set_outputs(outs)
    return g


@pytest.mark.parametrize(("op_name", "merged"), [
    ("np.add", True), ("np.sum", True), ("prim.Constant", True),
    ("prim.host_call", False),   # calls any Python function: may do something each time
    ("np.setitem", False),       # a write
])
def test_cse_merges_pure_ops_only(op_name, merged):
    g = _twice(op_name)
    assert passes.cse(g) == int(merged)
    g.lint()
    assert registry.get(op_name).pure == merged


def test_cse_never_merges_guards():
    g = Graph()
    n = g.add_input("n", ScalarType("int"))
    for _ in range(2):
        g.create_node("prim.guard", [n], attrs={"expected": 3})
    g.set_outputs([n])
    assert passes.cse(g) == 0 and len(g) == 2
    assert not registry.get("prim.guard").pure and not registry.get("np.random.normal").pure


def test_cse_keeps_results_that_both_leave_the_graph_apart():
    g, (x, _) = graph_with_inputs()
    a = g.create_node("np.exp", [x])
    b = g.create_node("np.exp", [x])
    g.set_outputs([a.output, b.output])   # NumPy returns two arrays
    assert passes.cse(g) == 0
    # One returned and one viewed by a reshape that is returned: still two arrays.
    g, (x, _) = graph_with_inputs()
    a = g.create_node("np.exp", [x])
    b = g.create_node("np.exp", [x])
    r = g.create_node("np.reshape", [b.output], attrs={"shape": (-1,)})
    g.set_outputs([a.output, r.output])
    assert passes.cse(g) == 0
    # One returned, the other only computed with: one node.
    g, (x, y) = graph_with_inputs()
    a = g.create_node("np.exp", [x])
    b = g.create_node("np.exp", [x])
    c = g.create_node("np.add", [b.output, y])
    g.set_outputs([a.output, c.output])
    assert passes.cse(g) == 1 and c.inputs == (a.output, y)
    g.lint()


def _full(g, shape, dtype=bool):
    attrs = {"shape": shape, "fill_value": 1, "dtype": np.dtype(dtype)}
    return g.create_node("prim.full", [], attrs).output


def test_fold_constants_computes_a_mask_of_constants_once():
    """triu(ones((t, t))) at concrete t becomes one prim.Constant with NumPy's values; the fill it read
    is erased, and a fill alone (as cheap as copying a constant) is left to run."""
    g = Graph()
    x = g.add_input("x", TensorType("f64", (4, 4)))
    mask = g.create_node("np.triu", [_full(g, (4, 4))], {"k": 1}).output
    inf = g.create_node("prim.Constant", [], {"value": -math.inf}).output
    alone = _full(g, (4, 4), np.float64)
    out = g.create_node("np.where", [mask, inf, x]).output
    g.set_outputs([out, g.create_node("np.add", [alone, x]).output])
    assert passes.fold_constants(g) == 1
    assert [n.op for n in g] == ["prim.Constant", "prim.Constant", "prim.full", "np.where", "np.add"]
    folded = g.nodes[0].attrs["value"]
    np.testing.assert_array_equal(folded, np.triu(np.ones((4, 4), bool), k=1))
    assert folded.dtype == bool and not folded.flags.writeable
    assert passes.fold_constants(g) == 0
    g.lint()


def test_fold_constants_leaves_draws_views_warnings_and_large_results_to_run():
    g = Graph()
    x = g.add_input("x", TensorType("f64", (3,)))
    neg = g.create_node("prim.Constant", [], {"value": np.array([-1.0, 4.0])}).output
    sqrt_neg = g.create_node("np.sqrt", [neg]).output          # NumPy warns: runs, and warns, per call
    view = g.create_node("np.transpose", [_full(g, (2, 3), np.float64)]).output   # a view
    big = g.create_node("np.triu", [_full(g, (64, 64))]).output    # 4 KiB, over the limit below
    g.set_outputs([sqrt_neg, view, big, x])
    assert passes.fold_constants(g, max_bytes=1024) == 0
    assert [n.op for n in g].count("prim.full") == 2


def test_decomposed_clip_is_numpys_bit_for_bit():
    """Signed-zero ties, NaNs in x and the bounds, a_min > a_max, every kind of bound: the ops
    np.clip decomposes into give NumPy's clip loop's bits."""
    from numtrace_ir import testing
    from numtrace_ir.testing import clip_cases

    for what, inputs, attrs in clip_cases.cases():
        g, arrays = clip_cases.graph(inputs, attrs)
        passes.decompose(g, set())
        with np.errstate(all="ignore"):
            expected = registry.get("np.clip").reference(*inputs, **attrs)
            (actual,) = testing.run_reference(g, arrays)
        assert [n.op for n in g if n.op == "np.clip"] == [], what
        same = clip_cases.same_bits(actual, expected)
        assert same.all(), f"{what}: at {np.flatnonzero(~same.ravel())[:4]}"
