"""Binding traced shape arithmetic to the actual call's sizes before planning.

A trace that reads ``x.shape`` records `prim.dim` and scalar int arithmetic, and reshapes by
``prim.reshape(x, n)`` whose output dims stay symbolic after `specialize` (a type rule sees the
scalar's type, not its value). Planning needs sizes: for one input signature every such scalar is
a constant, so this pass evaluates them, rewrites `prim.reshape`/`prim.broadcast_to`/`prim.full`
to their all-int form, and lets the registry rules recompute every type downstream. Everything
the pass cannot evaluate is left as it was (and runs as a fallback with a data-dependent shape).
"""

from __future__ import annotations

import numpy as np
from numtrace_ir import Graph, registry
from numtrace_ir.types import ScalarType, TensorType

__all__ = ["bind_shape_scalars"]

_SHAPE_READS = ("prim.dim", "prim.size")
_DYNAMIC_SHAPE_OPS = ("prim.reshape", "prim.broadcast_to", "prim.full")


def bind_shape_scalars(g: Graph) -> Graph:
    """`g` with shape scalars folded to constants and dynamic-shape ops made static (a new graph), or
    `g` itself when it reads no shapes."""
    if not any(n.op in _SHAPE_READS or n.op in _DYNAMIC_SHAPE_OPS for n in g.nodes):
        return g
    out = Graph()
    vmap: dict = {}
    known: dict = {}   # new value -> Python scalar
    for v in g.inputs:
        vmap[v] = out.add_input(v.name, v.type)
    for node in g.nodes:
        ins = [vmap[v] for v in node.inputs]
        value = _evaluate(node, ins, known)
        if value is not None:
            new = out.create_node("prim.Constant", [], attrs={"value": value}, loc=node.loc)
            known[new.output] = value
        elif node.op in _DYNAMIC_SHAPE_OPS and all(v in known for v in ins if isinstance(v.type, ScalarType)):
            tensors = [v for v in ins if not isinstance(v.type, ScalarType)]
            dims = iter(known[v] for v in ins if isinstance(v.type, ScalarType))
            attrs = dict(node.attrs)
            attrs["shape"] = tuple(int(next(dims)) if isinstance(d, str) else d for d in attrs["shape"])
            new = out.create_node(node.op, tensors, attrs=attrs, loc=node.loc)
        else:
            new = out.create_node(node.op, ins, attrs=dict(node.attrs), loc=node.loc)
        for old, nv in zip(node.outputs, new.outputs):
            nv.name = old.name
            vmap[old] = nv
    out.set_outputs([vmap[v] for v in g.outputs])
    return out


def _evaluate(node, ins: list, known: dict):
    """The node's int/float/bool result when it is computable now, else None."""
    if len(node.outputs) != 1 or not isinstance(node.outputs[0].type, ScalarType):
        return None
    op = registry.get(node.op)
    if op.nondeterministic or node.outputs[0].type.kind == "complex":
        return None
    if node.op == "prim.Constant":
        value = node.attrs["value"]
        return value if isinstance(value, (bool, int, float)) else None
    if node.op in _SHAPE_READS:
        t = ins[0].type
        if not (isinstance(t, TensorType) and t.is_concrete):
            return None
        # A zero-strided stand-in has the shape without the memory.
        args = [np.broadcast_to(np.zeros((), t.dtype), t.shape)]
    elif op.kind == "scalar" and all(v in known for v in ins):
        args = [known[v] for v in ins]
    else:
        return None
    try:
        value = op.reference(*args, **node.attrs)
    except (ArithmeticError, ValueError, TypeError):
        return None   # e.g. a division by zero: left for the call to report
    return value if isinstance(value, (bool, int, float)) else None
