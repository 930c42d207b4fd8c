"""IR data-structure benchmark: build, lint, canonicalize, print and parse a 100k-node graph.

numtrace_ir (Cython Graph, registry inference as the tracer uses it) against a pure-Python baseline
defined here: slotted dataclasses for Value/Node/Graph, the same registry inference, a printer of the
same line layout and a regex + `ast.literal_eval` parser. Both build the same program: layers of
constants, elementwise ops, a reduction and reshapes/transposes over a symbolic batch dim.

    python benchmarks/ir_graph.py [--nodes 100000] [--repeat 5]

Targets on the 2-core project machine: build <= 0.2 s, print + parse <= 1.5 s for 100k nodes,
building at least 2x faster than the baseline.
"""

from __future__ import annotations

import argparse
import ast
import gc
import re
import statistics
import time
from dataclasses import dataclass, field

import numpy as np
import numtrace_ir as ir
from numtrace_ir import registry

X_TYPE = ir.TensorType("f32", ("B", 4))
W_TYPE = ir.TensorType("f32", (4,))
NODES_PER_LAYER = 12


def program(create_node, x, w, consts: list[np.ndarray], layers: int):
    """Emit `layers` layers of 12 nodes through `create_node(op, inputs, attrs, loc)`; returns the output."""
    h = x
    for i in range(layers):
        loc = f"model.py:{10 + i % 50}"
        c = create_node("prim.Constant", [], {"value": consts[i]}, loc)
        half = create_node("prim.Constant", [], {"value": 0.5}, loc)
        a = create_node("np.add", [h, c], None, loc)
        m = create_node("np.multiply", [a, w], None, loc)
        s = create_node("np.multiply", [m, half], None, loc)
        e = create_node("np.exp", [s], None, loc)
        r = create_node("np.sum", [e], {"axis": (1,), "keepdims": True}, loc)
        d = create_node("np.divide", [e, r], None, loc)
        t = create_node("np.reshape", [d], {"shape": (-1, 2, 2)}, loc)
        t = create_node("np.transpose", [t], None, loc)
        t = create_node("np.transpose", [t], None, loc)
        h = create_node("np.reshape", [t], {"shape": (-1, 4)}, loc)
    return h


# -- numtrace_ir -------------------------------------------------------------------------------------

def build_numtrace(consts, layers):
    g = ir.Graph()
    x = g.add_input("x", X_TYPE)
    w = g.add_input("w", W_TYPE)

    def create_node(op, inputs, attrs, loc):
        return g.create_node(op, inputs, attrs, loc).outputs[0]

    g.set_outputs([program(create_node, x, w, consts, layers)])
    return g


# -- pure-Python baseline ------------------------------------------------------------------------------

@dataclass(slots=True, eq=False)
class PyValue:
    type: ir.Type
    name: str | None
    node: PyNode | None
    index: int
    uses: list = field(default_factory=list)


@dataclass(slots=True, eq=False)
class PyNode:
    op: str
    inputs: tuple
    outputs: tuple
    attrs: dict
    loc: str | None


class PyGraph:
    def __init__(self):
        self.inputs: list[PyValue] = []
        self.nodes: list[PyNode] = []
        self.outputs: list[PyValue] = []
        self._values: set[int] = set()

    def add_input(self, name, type_):
        v = PyValue(type_, name, None, len(self.inputs))
        self.inputs.append(v)
        self._values.add(id(v))
        return v

    def create_node(self, op, inputs, attrs=None, loc=None, out_types=None):
        inputs = tuple(inputs)
        for v in inputs:
            if id(v) not in self._values:
                raise ValueError(f"{op}: input is not a value of this graph")
        attrs = dict(attrs) if attrs else {}
        if out_types is None:
            out_types = registry.get(op).infer(tuple(v.type for v in inputs), attrs)
        node = PyNode(op, inputs, (), attrs, loc)
        node.outputs = tuple(PyValue(t, None, node, i) for i, t in enumerate(out_types))
        for o in node.outputs:
            self._values.add(id(o))
        for v in inputs:
            v.uses.append(node)
        self.nodes.append(node)
        return node

    def lint(self):
        defined = {id(v) for v in self.inputs}
        uses: dict[int, list] = {id(v): [] for v in self.inputs}
        for n in self.nodes:
            for v in n.inputs:
                if id(v) not in defined:
                    raise ValueError(f"{n.op}: input used before definition")
                uses[id(v)].append(n)
            expected = registry.get(n.op).infer(tuple(v.type for v in n.inputs), n.attrs)
            if expected != tuple(v.type for v in n.outputs):
                raise ValueError(f"{n.op}: wrong output types")
            for v in n.outputs:
                defined.add(id(v))
                uses[id(v)] = []
        for v in [*self.inputs, *(o for n in self.nodes for o in n.outputs)]:
            if sorted(map(id, v.uses)) != sorted(map(id, uses[id(v)])):
                raise ValueError("use lists are inconsistent")

    def canonicalize(self):
        out = PyGraph()
        vmap = {id(v): out.add_input(None, v.type) for v in self.inputs}
        for n in self.nodes:
            m = out.create_node(n.op, [vmap[id(v)] for v in n.inputs], n.attrs, None,
                                [v.type for v in n.outputs])
            vmap.update({id(a): b for a, b in zip(n.outputs, m.outputs)})
        out.outputs = [vmap[id(v)] for v in self.outputs]
        return out


def py_attr(value):
    """Attributes as Python literals (arrays as tagged tuples) so that `ast.literal_eval` reads them."""
    if isinstance(value, np.ndarray):
        return repr(("__array__", value.dtype.str, value.shape, tuple(value.ravel().tolist())))
    return repr(value)


def py_format(g: PyGraph) -> str:
    names = {}
    for k, v in enumerate([*g.inputs, *(o for n in g.nodes for o in n.outputs)]):
        names[id(v)] = v.name or str(k)
    lines = ["graph(" + ", ".join(f"%{names[id(v)]} : {v.type}" for v in g.inputs) + "):"]
    for n in g.nodes:
        outs = ", ".join(f"%{names[id(v)]} : {v.type}" for v in n.outputs)
        attrs = "{" + ", ".join(f"{k!r}: {py_attr(a)}" for k, a in n.attrs.items()) + "}" if n.attrs else ""
        ins = ", ".join("%" + names[id(v)] for v in n.inputs)
        line = f"  {outs} = {n.op}{attrs}({ins})"
        lines.append(line if n.loc is None else f"{line}  # {n.loc}")
    lines.append("  return (" + ", ".join("%" + names[id(v)] for v in g.outputs) + ")")
    return "\n".join(lines) + "\n"


_LINE = re.compile(r"\s*(?P<outs>.*?) = (?P<op>[\w.]+)(?P<attrs>\{.*\})?\((?P<ins>[^()]*)\)"
                   r"(?:  # (?P<loc>.*))?$")
_DEF = re.compile(r"%(?P<name>[\w.]+) : (?P<type>\w+\[[^\]]*\]|\w+)")


def py_type(text: str, cache: dict) -> ir.Type:
    t = cache.get(text)
    if t is None:
        if "[" in text:
            dt, dims = text[:-1].split("[")
            shape = tuple(int(d) if d.isdigit() else d for d in dims.split(", ")) if dims else ()
            t = ir.TensorType(dt, shape)
        else:
            t = ir.ScalarType(text)
        cache[text] = t
    return t


def py_literal(value):
    if isinstance(value, tuple) and value and value[0] == "__array__":
        return np.array(value[3], dtype=value[1]).reshape(value[2])
    return value


def py_parse(text: str) -> PyGraph:
    g = PyGraph()
    values: dict[str, PyValue] = {}
    types: dict[str, ir.Type] = {}
    lines = text.splitlines()
    for m in _DEF.finditer(lines[0]):
        values[m["name"]] = g.add_input(None, py_type(m["type"], types))
    for line in lines[1:-1]:
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"cannot parse {line!r}")
        defs = list(_DEF.finditer(m["outs"]))
        attrs = {k: py_literal(v) for k, v in ast.literal_eval(m["attrs"]).items()} if m["attrs"] else {}
        ins = [values[s.strip()[1:]] for s in m["ins"].split(",")] if m["ins"] else []
        node = g.create_node(m["op"], ins, attrs, m["loc"], [py_type(d["type"], types) for d in defs])
        for d, v in zip(defs, node.outputs):
            values[d["name"]] = v
    g.outputs = [values[s.strip()[1:]] for s in lines[-1].strip()[len("return ("):-1].split(",")]
    return g


def build_baseline(consts, layers):
    g = PyGraph()
    x = g.add_input("x", X_TYPE)
    w = g.add_input("w", W_TYPE)

    def create_node(op, inputs, attrs, loc):
        return g.create_node(op, inputs, attrs, loc).outputs[0]

    g.outputs = [program(create_node, x, w, consts, layers)]
    return g


# -- timing ------------------------------------------------------------------------------------------

def median_time(fn, repeat):
    times, result = [], None
    for _ in range(repeat):
        result = None
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="10k nodes, 2 repeats (smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.repeat = 10_000, 2
    layers = max(1, args.nodes // NODES_PER_LAYER)
    rng = np.random.default_rng(0)
    consts = [rng.standard_normal(4).astype(np.float32) for _ in range(layers)]
    r = args.repeat

    nt, nt_g = {}, None
    nt["build"], nt_g = median_time(lambda: build_numtrace(consts, layers), r)
    nt["lint"], _ = median_time(nt_g.lint, r)
    nt["canonicalize"], _ = median_time(lambda: ir.canonicalize(nt_g, strip_names=True, strip_locs=True), r)
    nt["print"], text = median_time(lambda: ir.format_graph(nt_g), r)  # the full text parse reads
    nt["parse"], parsed = median_time(lambda: ir.parse(text), r)
    assert ir.graphs_equal(parsed, nt_g)

    py, py_g = {}, None
    py["build"], py_g = median_time(lambda: build_baseline(consts, layers), r)
    py["lint"], _ = median_time(py_g.lint, r)
    py["canonicalize"], _ = median_time(py_g.canonicalize, r)
    py["print"], py_text = median_time(lambda: py_format(py_g), r)
    py["parse"], py_parsed = median_time(lambda: py_parse(py_text), r)
    assert len(py_parsed.nodes) == len(py_g.nodes) == len(nt_g)

    print(f"{len(nt_g)} nodes ({layers} layers of {NODES_PER_LAYER}), median of {r} runs, seconds")
    print(f"{'step':<14}{'numtrace_ir':>12}{'baseline':>12}{'baseline/nt':>13}")
    for step in [*nt, "print+parse"]:
        a = nt[step] if step in nt else nt["print"] + nt["parse"]
        b = py[step] if step in py else py["print"] + py["parse"]
        print(f"{step:<14}{a:>12.3f}{b:>12.3f}{b / a:>12.2f}x")
    print(f"targets: build <= 0.2 s ({nt['build']:.3f}), print+parse <= 1.5 s "
          f"({nt['print'] + nt['parse']:.3f}), "
          f"build >= 2x faster than baseline ({py['build'] / nt['build']:.2f}x)")


if __name__ == "__main__":
    main()
