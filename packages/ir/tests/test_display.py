"""The human-facing text (`str(graph)`): large constants abbreviated, locations shortened; the full
text (`format_graph`, canonical forms, pickles, saved files) keeps every value. Drawing (`to_dot`)."""

import copy
import os
import pickle
import shutil
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from numtrace_ir import (
    Graph,
    ParseError,
    TensorType,
    canonical_text,
    display_location,
    dot,
    format_graph,
    graphs_equal,
    parse,
    serialize,
)
from numtrace_ir.printer import SHOWN_ELEMENTS


def mlp_graph(loc):
    g = Graph()
    x = g.add_input("x", TensorType(np.float32, (64, 784)))
    w = np.arange(784 * 512, dtype=np.float32).reshape(784, 512)
    b = np.ones(512, np.float32)
    small = np.array([1.5, 2.5], np.float32)
    cw = g.create_node("prim.Constant", [], attrs={"value": w}, out_types=[TensorType(np.float32, w.shape)])
    cb = g.create_node("prim.Constant", [], attrs={"value": b}, out_types=[TensorType(np.float32, b.shape)])
    cs = g.create_node("prim.Constant", [], attrs={"value": small},
                       out_types=[TensorType(np.float32, small.shape)])
    h = g.create_node("np.matmul", [x, cw.output], loc=loc, out_types=[TensorType(np.float32, (64, 512))])
    y = g.create_node("np.add", [h.output, cb.output], loc=loc, out_types=[TensorType(np.float32, (64, 512))])
    g.set_outputs([y.output, cs.output])
    return g, w


def test_str_abbreviates_large_constants_and_fits_a_screen():
    g, w = mlp_graph("model.py:3")
    text = str(g)
    assert "prim.Constant[value=array(f32[784, 512]; ...)]()" in text
    assert "prim.Constant[value=array(f32[512]; ...)]()" in text
    assert "array(f32[2]; 1.5, 2.5)" in text          # small constants stay in full
    assert max(len(line) for line in text.splitlines()) < 120
    assert len(text) < 1000
    full = format_graph(g)
    assert len(full) > 784 * 512 and "..." not in full


def test_threshold_is_inclusive():
    g = Graph()
    for n in (SHOWN_ELEMENTS, SHOWN_ELEMENTS + 1):
        a = np.zeros(n, np.int32)
        g.create_node("prim.Constant", [], attrs={"value": a}, out_types=[TensorType(np.int32, a.shape)])
    lines = str(g).splitlines()
    assert "..." not in lines[1] and lines[2].endswith(f"array(i32[{SHOWN_ELEMENTS + 1}]; ...)]()")


def test_full_text_round_trips_and_abbreviated_text_is_refused_clearly():
    g, w = mlp_graph("model.py:3")
    back = parse(format_graph(g))
    assert graphs_equal(back, g)
    assert np.array_equal(back.nodes[0].attrs["value"], w)
    with pytest.raises(ParseError, match=r"abbreviated array f32\[784, 512\].*format_graph"):
        parse(str(g))


def test_canonical_text_pickle_copy_and_serialize_keep_full_values():
    g, w = mlp_graph("model.py:3")
    assert "..." not in canonical_text(g, strip_names=True, strip_locs=True)
    saved = serialize.loads(serialize.dumps({"f": g}))[0]["f"]
    for h in (pickle.loads(pickle.dumps(g)), copy.deepcopy(g), saved):
        assert graphs_equal(h, g)
        assert np.array_equal(h.nodes[0].attrs["value"], w)


def test_equality_sees_values_that_str_hides():
    g, _ = mlp_graph("model.py:3")
    h, _ = mlp_graph("model.py:3")
    h.nodes[0].attrs["value"][0, 0] = -1.0   # same type, one element differs
    assert str(g) == str(h) and not graphs_equal(g, h)


def test_node_str_abbreviates():
    g, _ = mlp_graph("model.py:3")
    assert str(g.nodes[0]).endswith("prim.Constant[value=array(f32[784, 512]; ...)]()")


def test_display_location():
    cwd = os.getcwd()
    here = os.path.join(cwd, "pkg", "model.py")
    assert display_location(f"{here}:12") == os.path.join("pkg", "model.py") + ":12"
    site = os.path.join(os.sep, "usr", "lib", "python3", "site-packages", "lib_x", "layers.py")
    assert display_location(f"{site}:7") == "lib_x/layers.py:7"
    dist = os.path.join(os.sep, "usr", "lib", "python3", "dist-packages", "m.py")
    assert display_location(f"{dist}:1") == "m.py:1"
    other = os.path.join(os.sep, "elsewhere-" + os.path.basename(cwd), "m.py")
    if not other.startswith(cwd + os.sep) and not any(p and other.startswith(p) for p in sys.path):
        assert display_location(f"{other}:4") == f"{other}:4"
    for unchanged in (None, "", "model.py:12", "<stdin>:1", "we#ird.py:9", f"{here}:x"):
        assert display_location(unchanged) == unchanged


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_display_location_under_sys_path(monkeypatch, tmp_path):
    src = tmp_path / "src"
    monkeypatch.setattr(sys, "path", [*sys.path, str(src)])
    monkeypatch.chdir(os.sep)
    assert display_location(f"{src / 'pkg' / 'nn.py'}:43") == os.path.join("pkg", "nn.py") + ":43"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")
def test_str_shortens_locations_but_nodes_keep_them():
    loc = os.path.join(os.getcwd(), "sub", "model.py") + ":3"
    g, _ = mlp_graph(loc)
    assert "  # sub/model.py:3" in str(g)
    assert f"# {loc}" in format_graph(g)
    assert g.nodes[3].loc == loc
    assert parse(format_graph(g)).nodes[3].loc == loc


def test_to_dot_structure():
    g, _ = mlp_graph("model.py:3")
    text = g.to_dot()
    assert text.startswith('digraph "graph" {') and text.rstrip().endswith("}")
    assert text.count("shape=box") == len(g)
    assert text.count("shape=ellipse") == len(g.inputs) + 1
    assert 'label="f32[64, 512]"' in text               # shapes on edges
    assert 'tooltip="%' in text and "model.py:3" in text  # source lines as tooltips
    assert "array(f32[784, 512]; ...)" in text            # constants abbreviated
    assert dot.to_dot(g, attrs=False).count("value=") == 0


def test_to_dot_quotes_hostile_text():
    g = Graph()
    x = g.add_input("x", TensorType(np.float32, (2,)))
    n = g.create_node("np.negative", [x], loc='a "b"\\c.py:1', out_types=[TensorType(np.float32, (2,))])
    g.set_outputs([n.output])
    text = dot.to_dot(g, name='my "graph"')
    assert '\\"' in text and "\\\\" in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")
def test_svg_has_one_node_per_op_input_and_return():
    g, _ = mlp_graph("model.py:3")
    svg = dot.to_svg(g)
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    nodes = [e for e in root.iter(f"{ns}g") if e.get("class") == "node"]
    edges = [e for e in root.iter(f"{ns}g") if e.get("class") == "edge"]
    assert len(nodes) == len(g) + len(g.inputs) + 1
    assert len(edges) == 6
    assert g._repr_svg_() is not None


def test_svg_without_dot(monkeypatch):
    monkeypatch.setattr(dot.shutil, "which", lambda name: None)
    g, _ = mlp_graph("model.py:3")
    assert dot.to_svg(g) is None and g._repr_svg_() is None and not dot.dot_available()
