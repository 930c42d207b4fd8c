"""The text IR: printer layout, `parse(str(g))` round trips (hypothesis), parse errors, canonical form."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numtrace_ir import (
    DTYPE_NAMES,
    Graph,
    ParseError,
    ScalarType,
    TensorType,
    TupleType,
    canonical_text,
    canonicalize,
    format_graph,
    graphs_equal,
    parse,
)

# -- strategies ----------------------------------------------------------------------------------

dims = st.one_of(st.integers(0, 6), st.sampled_from(["B", "T", "n_1", "B*4", "max(B,T)", "(B+1)//2"]))
tensor_types = st.builds(TensorType, st.sampled_from(list(DTYPE_NAMES)), st.lists(dims, max_size=3))
scalar_types = st.sampled_from(["int", "float", "bool", "complex"]).map(ScalarType)
types = st.one_of(tensor_types, scalar_types,
                  st.lists(st.one_of(tensor_types, scalar_types), max_size=3).map(TupleType))

array_dtypes = st.sampled_from(list(DTYPE_NAMES.values()))
arrays = array_dtypes.flatmap(lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0,
                                                                        max_side=3)))
floats = st.floats(allow_nan=True, allow_infinity=True)
leaf_attrs = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), floats,
    st.builds(complex, floats, floats), st.text(max_size=8), st.just(Ellipsis),
    st.builds(slice, st.none() | st.integers(-5, 5), st.none() | st.integers(-5, 5),
              st.none() | st.integers(-3, 3)),
    array_dtypes, arrays,
)
attr_values = st.recursive(leaf_attrs, lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=6)
names = st.none() | st.sampled_from(["x", "y", "x.1", "w", "layers.0.weight", "_t"])
locs = st.none() | st.sampled_from(["model.py:12", "dir with space/a.py:3", "we#ird.py:9", "<stdin>:1"])
ops = st.sampled_from(["np.add", "prim.Constant", "my.op", "np.linalg.norm", "a_b"])
attr_keys = st.sampled_from(["axis", "value", "k", "dtype", "keepdims"])
attr_dicts = st.dictionaries(attr_keys, attr_values, max_size=3)


@st.composite
def graphs(draw):
    g = Graph()
    values = [g.add_input(draw(names), draw(types)) for _ in range(draw(st.integers(0, 3)))]
    for _ in range(draw(st.integers(0, 6))):
        ins = draw(st.lists(st.sampled_from(values), max_size=3)) if values else []
        out_types = draw(st.lists(types, max_size=3))
        n = g.create_node(draw(ops), ins, attrs=draw(attr_dicts), loc=draw(locs), out_types=out_types)
        for v in n.outputs:
            v.name = draw(names)
        values.extend(n.outputs)
    g.set_outputs(draw(st.lists(st.sampled_from(values), max_size=3)) if values else [])
    return g


# -- exact comparison, independent of the printer ---------------------------------------------------

def same_attr(a, b):
    if isinstance(a, np.ndarray):
        if not (isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape):
            return False
        if a.dtype.kind in "fc":
            scalar = complex if a.dtype.kind == "c" else float
            return all(same_attr(scalar(x), scalar(y)) for x, y in zip(a.ravel(), b.ravel()))
        return np.array_equal(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, complex):
        return same_attr(a.real, b.real) and same_attr(a.imag, b.imag)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same_attr(x, y) for x, y in zip(a, b))
    if isinstance(a, slice):
        return same_attr((a.start, a.stop, a.step), (b.start, b.stop, b.step))
    return a == b


def assert_same_structure(g, h):
    index = {v: i for i, v in enumerate([*g.inputs, *(o for n in g for o in n.outputs)])}
    index_h = {v: i for i, v in enumerate([*h.inputs, *(o for n in h for o in n.outputs)])}
    assert [v.type for v in g.inputs] == [v.type for v in h.inputs]
    assert len(g) == len(h)
    for n, m in zip(g, h):
        assert (n.op, n.loc, list(n.attrs)) == (m.op, m.loc, list(m.attrs))
        assert all(same_attr(n.attrs[k], m.attrs[k]) for k in n.attrs), (n.attrs, m.attrs)
        assert [index[v] for v in n.inputs] == [index_h[v] for v in m.inputs]
        assert [v.type for v in n.outputs] == [v.type for v in m.outputs]
    assert [index[v] for v in g.outputs] == [index_h[v] for v in h.outputs]


def debug_names(g):
    return [v.name for v in [*g.inputs, *(o for n in g for o in n.outputs)]]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_parse_round_trips_random_graphs(g):
    text = str(g)
    h = parse(text)
    assert str(h) == text
    assert graphs_equal(g, h)
    assert_same_structure(g, h)
    names = [n for n in debug_names(g) if n is not None]
    if len(names) == len(set(names)):  # clashing names come back disambiguated (x, x.1), as printed
        assert debug_names(h) == debug_names(g)
    h.lint(check_types=False)
    c = canonicalize(g, strip_names=True, strip_locs=True)
    assert str(c) == canonical_text(g, strip_names=True, strip_locs=True)
    assert all(n is None for n in debug_names(c))
    assert graphs_equal(parse(str(c)), g, strip_names=True, strip_locs=True)


# -- fixed examples ------------------------------------------------------------------------------

def example():
    g = Graph()
    x = g.add_input("x", TensorType("f32", ("B", 4)))
    y = g.add_input("y", TensorType("f32", ("B", 4)))
    a = g.create_node("np.add", [x, y], loc="model.py:12")
    s = g.create_node("np.sum", [a.output], attrs={"axis": (0, 1), "keepdims": False}, loc="model.py:13",
                      out_types=[TensorType("f32", ())])
    g.create_node("prim.Constant", [], attrs={"value": np.array([1.0, 2.0, 3.0], np.float32)},
                  out_types=[TensorType("f32", (3,))])
    g.set_outputs([s.output, a.output])
    return g


EXAMPLE = """graph(%x : f32[B, 4], %y : f32[B, 4]):
  %2 : f32[B, 4] = np.add(%x, %y)  # model.py:12
  %3 : f32[] = np.sum[axis=(0, 1), keepdims=False](%2)  # model.py:13
  %4 : f32[3] = prim.Constant[value=array(f32[3]; 1.0, 2.0, 3.0)]()
  return (%3, %2)
"""


def test_printer_layout():
    assert str(example()) == EXAMPLE


def test_every_attribute_kind_prints_exactly():
    g = Graph()
    attrs = {"n": None, "t": True, "i": -3, "big": 2**80, "f": 0.1, "negzero": -0.0, "inf": math.inf,
             "ninf": -math.inf, "nan": math.nan, "c": complex(1.5, -math.inf), "s": "a'b\"\n#",
             "tup": (1, (2.0,), ()), "sl": slice(None, -1, 2), "e": Ellipsis, "d": np.dtype("complex64"),
             "a0": np.array(np.int8(-7)), "ae": np.zeros((2, 0), np.uint16),
             "ab": np.array([True, False]), "ac": np.array([1 + 2j, complex(0, math.nan)], np.complex64),
             "ah": np.array([0.1, 65504.0, -0.0], np.float16), "au": np.array([2**64 - 1], np.uint64),
             "nc": np.arange(6, dtype=np.int32).reshape(2, 3)[:, ::2], "be": np.array([1.5, 2.5], ">f8")}
    n = g.create_node("my.op", [], attrs=attrs, out_types=[ScalarType("int")])
    line = str(n)
    for piece in ["n=None", "t=True", "i=-3", f"big={2**80}", "f=0.1", "negzero=-0.0", "inf=inf",
                  "ninf=-inf", "nan=nan", "c=complex(1.5, -inf)", "tup=(1, (2.0,), ())",
                  "sl=slice(None, -1, 2)", "e=...", "d=dtype(c64)", "a0=array(i8[]; -7)",
                  "ae=array(u16[2, 0]; )",
                  "ab=array(bool[2]; True, False)", "ac=array(c64[2]; complex(1.0, 2.0), complex(0.0, nan))",
                  "ah=array(f16[3]; 0.1, 6.55e+04, -0.0)", "au=array(u64[1]; 18446744073709551615)",
                  "nc=array(i32[2, 2]; 0, 2, 3, 5)", "be=array(f64[2]; 1.5, 2.5)"]:
        assert piece in line
    g.set_outputs(n.outputs)
    h = parse(str(g))
    back = h.nodes[0].attrs
    assert all(same_attr(attrs[k], back[k]) for k in attrs if k not in ("nc", "be"))
    assert np.array_equal(back["nc"], attrs["nc"]) and back["be"].dtype == np.float64


def test_float_arrays_round_trip_bit_exactly():
    rng = np.random.default_rng(0)
    for dt, it in [(np.float16, np.uint16), (np.float32, np.uint32), (np.float64, np.uint64)]:
        bits = rng.integers(0, np.iinfo(it).max, size=2000, dtype=it, endpoint=True)
        a = bits.view(dt)
        a = np.where(np.isnan(a), dt(1), a)  # NaN payloads are not kept; every other bit pattern is
        g = Graph()
        n = g.create_node("prim.Constant", [], attrs={"value": a}, out_types=[TensorType(dt, a.shape)])
        back = parse(format_graph(g)).nodes[0].attrs["value"]  # str(g) abbreviates 2000 elements
        assert back.dtype == a.dtype and back.tobytes() == a.tobytes(), n.op


def test_name_clashes_are_disambiguated_like_torchscript():
    g = Graph()
    x = g.add_input("x", ScalarType("int"))
    x1 = g.add_input("x.1", ScalarType("int"))
    a = g.create_node("p.op", [x], out_types=[ScalarType("int")])
    a.output.name = "x"
    b = g.create_node("p.op", [x1], out_types=[ScalarType("int")])
    b.output.name = "x"
    g.set_outputs([a.output, b.output])
    text = str(g)
    assert "graph(%x : int, %x.1 : int)" in text and "%x.2 : int = p.op(%x)" in text
    assert "%x.3 : int = p.op(%x.1)" in text and "return (%x.2, %x.3)" in text
    assert str(parse(text)) == text


def test_multi_output_and_zero_output_lines():
    g = Graph()
    x = g.add_input(None, TensorType("f64", (2,)))
    n = g.create_node("np.modf", [x], loc="m.py:1")
    g.create_node("my.sink", [x], out_types=[])
    g.set_outputs(n.outputs)
    text = str(g)
    assert "  %1 : f64[2], %2 : f64[2] = np.modf(%0)  # m.py:1\n  = my.sink(%0)\n  return (%1, %2)" in text
    assert str(parse(text)) == text


def test_parser_tolerates_spacing_and_blank_lines():
    text = ("\n\ngraph( %a:f32[ 2 ,B ] ) :\n\n  %b:f32[2, B]=np.negative( %a )#here.py:3\n"
            "  return ( %b , )\n\n")
    g = parse(text)
    assert str(g) == ("graph(%a : f32[2, B]):\n  %b : f32[2, B] = np.negative(%a)  # here.py:3\n"
                      "  return (%b)\n")
    g.lint()


H = "graph(%x : f32[3]):\n"  # header and return line around the node lines of the error cases
R = "\n  return (%1)"


@pytest.mark.parametrize(("text", "line", "col", "match"), [
    ("", 1, 1, "missing 'graph"),
    ("graph(%x : f32[3]):\n  %y : f32[3] = np.negative(%x)\n", 3, 1, "missing 'return"),
    ("grph(%x : f32[3]):", 1, 1, "expected 'graph'"),
    ("graph(%x : f33[3]):\n  return (%x)", 1, 12, "unknown dtype name 'f33'"),
    ("graph(%x : float[3]):\n  return (%x)", 1, 12, "unknown dtype name"),
    ("graph(%x : str):\n  return (%x)", 1, 12, "unknown type 'str'"),
    ("graph(%x : f32[3, -1]):\n  return (%x)", 1, 16, "bad dim '-1'"),
    ("graph(%x : f32[3):\n  return (%x)", 1, 15, "unclosed"),
    ("graph(%x : f32[3], %x : f32[3]):\n  return (%x)", 1, 20, r"%x is defined twice"),
    (H + "  %1 : f32[3] = np.add(%x, %y)" + R, 2, 28, "%y is used before"),
    (H + "  %1 : f32[3] = np.add[a=1, a=2](%x)" + R, 2, 29, "given twice"),
    (H + "  %1 : f32[3] = np.add[a=foo](%x)" + R, 2, 26, "unknown attribute value"),
    (H + "  %1 : f32[3] = np.add[a='abc](%x)" + R, 2, 26, "unterminated string"),
    (H + "  %1 : f32[3] = np.add[a=1.2.3](%x)" + R, 2, 26, "bad number"),
    (H + "  %1 : f32[3] = np.add[a=array(i8[1]; 300)](%x)" + R, 2, 39, "do not fit"),
    (H + "  %1 : f32[3] = np.add[a=array(i8[2]; 1)](%x)" + R, 2, 39, "needs 2"),
    (H + "  %1 : f32[3] = np.add[a=array(i8[1]; 1.5)](%x)" + R, 2, 39, "not a i8"),
    (H + "  %1 : f32[3] = np.add[a=array(f32[B]; 1.5)](%x)" + R, 2, 32, "concrete"),
    (H + "  %1 : f32[3] = np.add[a=array(f32[1]; @'m')](%x)" + R, 2, 41,
     "no arrays were given"),
    (H + "  %1 : f32[3] = np.add[a=dtype(f99)](%x)" + R, 2, 32, "unknown dtype"),
    (H + "  %1 : f32[3] = np..add(%x)" + R, 2, 17, "invalid op name"),
    (H + "  %1 : f32[3] = np.add(%x) extra" + R, 2, 28, "unexpected 'extra'"),
    (H + "  %12 : f32[3], %12 : f32[3] = np.modf(%x)" + R, 2, 17, "defined twice"),
    (H + "  %1 : f32[3] np.add(%x)" + R, 2, 15, "expected '='"),
    ("graph(%x : f32[3]):\n  return (%x)\n  %1 : f32[3] = np.add(%x)", 3, 3, "after the return"),
    ("graph(%x : f32[3]):\n  return (%x) (%x)", 2, 15, "unexpected"),
])
def test_parse_errors_give_line_and_column(text, line, col, match):
    with pytest.raises(ParseError, match=match) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (line, col), str(info.value)
    assert str(info.value).startswith(f"line {line}, column {col}: ")


@pytest.mark.parametrize("text", [
    H + "  %1 : f32[3] = my.op[a=" + "(" * 100_000 + "](%x)" + R,
    H + "  %1 : f32[3] = my.op[a=" + "slice(" * 100_000 + "](%x)" + R,
    H + "  %1 : " + "(" * 100_000 + " = my.op(%x)" + R,
])
def test_deep_nesting_is_an_error_not_a_crash(text):
    with pytest.raises(ParseError, match="nest at most 64 levels"):
        parse(text)


def test_parse_resolves_array_references():
    text = "graph():\n  %0 : f32[2] = prim.Constant[value=array(f32[2]; @'c0')]()\n  return (%0)\n"
    arr = np.array([1, 2], np.float32)
    g = parse(text, arrays={"c0": arr})
    assert g.nodes[0].attrs["value"] is arr
    with pytest.raises(ParseError, match="names no stored array"):
        parse(text, arrays={})
    with pytest.raises(ParseError, match=r"stored array 'c0' is float64\[2\], but the text says f32\[2\]"):
        parse(text, arrays={"c0": arr.astype(np.float64)})


def test_graphs_equal_and_canonicalize():
    g, h = example(), example()
    assert graphs_equal(g, h)
    h.nodes[0].loc = "other.py:1"
    assert not graphs_equal(g, h) and graphs_equal(g, h, strip_locs=True)
    h.inputs[0].name = "z"
    assert not graphs_equal(g, h, strip_locs=True)
    assert graphs_equal(g, h, strip_locs=True, strip_names=True)
    c = canonicalize(h, strip_names=True, strip_locs=True)
    assert str(c).startswith("graph(%0 : f32[B, 4], %1 : f32[B, 4]):\n  %2 : f32[B, 4] = np.add(%0, %1)\n")
    assert h.inputs[0].name == "z" and h.nodes[0].loc == "other.py:1"  # the original is untouched
    for attrs in [{"axis": (0, 1), "keepdims": True}, {"axis": (0, 1), "keepdims": 1}]:
        k = example()
        k.nodes[1].attrs.update(attrs)
        assert not graphs_equal(g, k)
    one = example()
    one.nodes[2].attrs["value"] = np.array([1.0, 2.0, math.nan], np.float32)
    two = example()
    two.nodes[2].attrs["value"] = np.array([1.0, 2.0, math.nan], np.float32)
    assert graphs_equal(one, two) and not graphs_equal(one, g)
    with pytest.raises(TypeError, match="two Graphs"):
        graphs_equal(g, str(g))


# -- error state of a node -------------------------------------------------------------------------

def test_errstate_round_trips_and_copies():
    g = Graph()
    x = g.add_input("x", TensorType("f64", [3]))
    n = g.create_node("np.log", [x], loc="f.py:3")
    n.errstate = "divide=ignore,invalid=raise"
    m = g.create_node("np.exp", [n.output])
    g.set_outputs([m.output])
    text = format_graph(g)
    assert "np.log(%x) errstate(divide=ignore,invalid=raise)  # f.py:3" in text
    back = parse(text)
    assert [k.errstate for k in back.nodes] == ["divide=ignore,invalid=raise", None]
    assert [k.errstate for k in g.copy().nodes] == ["divide=ignore,invalid=raise", None]
    assert format_graph(back) == text


@pytest.mark.parametrize("bad", ["", "divide", "divide=loud", "tiny=ignore", "over=warn,divide=warn",
                                 "divide=warn,divide=raise"])
def test_errstate_rejects_malformed_text(bad):
    g = Graph()
    x = g.add_input("x", TensorType("f64", [3]))
    n = g.create_node("np.log", [x])
    with pytest.raises(ValueError, match="invalid error state"):
        n.errstate = bad
