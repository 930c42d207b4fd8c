"""`specialize`: a graph retyped for the concrete input types of an actual call.

Backends compile a traced graph (possibly with symbolic dims) for the shapes they are called with;
every node's output types are recomputed by its op's registry rule, so a shape the program cannot
take fails here, naming the node, before any kernel is planned.
"""

from __future__ import annotations

from collections.abc import Sequence

from numtrace_ir import dims
from numtrace_ir.graph import Graph, infer_types
from numtrace_ir.registry import UnknownOpError
from numtrace_ir.types import TensorType, Type

__all__ = ["specialize"]


def _check_input(i: int, declared: Type, given: Type, bindings: dict) -> None:
    if not isinstance(given, Type):
        raise TypeError(f"specialize: input type {i} must be a numtrace_ir type, got {given!r}")
    if isinstance(declared, TensorType) and isinstance(given, TensorType):
        if declared.dtype != given.dtype:
            raise TypeError(f"specialize: input {i} is declared {declared} "
                            f"but given dtype {given.dtype_name}")
        if declared.ndim != given.ndim:
            raise dims.ShapeError(f"specialize: input {i} is declared {declared} but given rank {given.ndim}")
        if given.is_concrete:
            try:
                dims.match_shape(declared.shape, given.shape, bindings)
            except dims.ShapeError as e:
                raise dims.ShapeError(f"specialize: input {i} ({declared} given {given}): {e}") from None
    elif type(declared) is not type(given):
        raise TypeError(f"specialize: input {i} is declared {declared} but given {given}")


def specialize(g: Graph, input_types: Sequence[Type]) -> Graph:
    """A copy of `g` whose input types are `input_types` and whose other types follow by the op rules.

    Concrete input shapes must agree with the declared ones: equal concrete dims, and each symbol
    bound to one size across all inputs. Errors name the node and its source location.
    """
    types = tuple(input_types)
    if len(types) != len(g.inputs):
        raise ValueError(f"specialize: the graph has {len(g.inputs)} inputs, got {len(types)} input types")
    bindings: dict[str, int] = {}
    out = Graph()
    vmap = {}
    for i, (v, t) in enumerate(zip(g.inputs, types)):
        _check_input(i, v.type, t, bindings)
        vmap[v] = out.add_input(v.name, t)
    for n in g:
        inputs = [vmap[x] for x in n.inputs]
        try:
            new_types = infer_types(n.op, tuple(x.type for x in inputs), n.attrs)
            if len(new_types) != len(n.outputs):
                raise ValueError(f"the rule gives {len(new_types)} outputs, the node has {len(n.outputs)}")
        except (dims.ShapeError, TypeError, ValueError, UnknownOpError) as e:
            where = "" if n.loc else "  # unknown location"  # the node's text ends with its location
            raise type(e)(f"specialize: {n}{where}: {e}") from e
        m = out.create_node(n.op, inputs, n.attrs, n.loc, new_types)
        for old, new in zip(n.outputs, m.outputs):
            new.name = old.name
            vmap[old] = new
    out.set_outputs([vmap[v] for v in g.outputs])
    return out
