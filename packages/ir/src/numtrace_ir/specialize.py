"""`specialize`: a graph retyped for the concrete input types of an actual call.

Backends compile a traced graph (possibly with symbolic dims) for the shapes they are called with;
every node's output types are recomputed by its op's registry rule, so a shape the program cannot
take fails here, naming the node, before any kernel is planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from numtrace_ir import dims
from numtrace_ir.graph import Graph, infer_types
from numtrace_ir.guards import GuardError, guard_text
from numtrace_ir.ops.prim import check_decided, dynamic_call
from numtrace_ir.registry import UnknownOpError, get
from numtrace_ir.types import ScalarType, TensorType, Type

# Shape-generic ops whose `shape` attr names one dynamic dim per trailing scalar input; random draws
# do the same with their `size` attr (see `_dynamic_shape_attr`).
_DYNAMIC_SHAPE_OPS = {"prim.reshape": "shape", "prim.broadcast_to": "shape", "prim.full": "shape"}
_dynamic_attr_of: dict[str, str | None] = {}


def _dynamic_shape_attr(op: str) -> str | None:
    """The attr of `op` naming dims that trailing scalar inputs supply, or None."""
    if op not in _dynamic_attr_of:
        try:
            opdef = get(op)
        except UnknownOpError:
            opdef = None
        random_size = opdef is not None and opdef.kind == "random" and "size" in opdef.attr_names
        _dynamic_attr_of[op] = _DYNAMIC_SHAPE_OPS.get(op) or ("size" if random_size else None)
    return _dynamic_attr_of[op]
# Ops that read only the *type* of their tensor input, so their value is known once it is concrete.
_SHAPE_READS = ("prim.dim", "prim.size")

__all__ = ["specialize"]


def _check_input(i: int, declared: Type, given: Type, bindings: dict, check_shapes: bool) -> None:
    if not isinstance(given, Type):
        raise TypeError(f"specialize: input type {i} must be a numtrace_ir type, got {given!r}")
    if isinstance(declared, TensorType) and isinstance(given, TensorType):
        if declared.dtype != given.dtype:
            raise TypeError(f"specialize: input {i} is declared {declared} "
                            f"but given dtype {given.dtype_name}")
        if declared.ndim != given.ndim:
            raise dims.ShapeError(f"specialize: input {i} is declared {declared} but given rank {given.ndim}")
        if check_shapes and given.is_concrete:
            try:
                dims.match_shape(declared.shape, given.shape, bindings)
            except dims.ShapeError as e:
                raise dims.ShapeError(f"specialize: input {i} ({declared} given {given}): {e}") from None
    elif type(declared) is not type(given):
        raise TypeError(f"specialize: input {i} is declared {declared} but given {given}")


def specialize(g: Graph, input_types: Sequence[Type], *, check_shapes: bool = True) -> Graph:
    """A copy of `g` whose input types are `input_types` and whose other types follow by the op rules.

    With `check_shapes`, concrete input shapes must agree with the declared ones: equal concrete dims,
    and each symbol bound to one size across all inputs. Without it only dtypes and ranks must agree,
    for a graph traced at example shapes and run at others (the ops' rules still check every node).
    Shape scalars the concrete types determine are folded into the dynamic-shape ops that use them,
    and every guard they decide is checked: a broken one raises `GuardError` (naming the guard and the
    user's line that made it); a kept one becomes a constant. Errors name the node and its location.
    """
    types = tuple(input_types)
    if len(types) != len(g.inputs):
        raise ValueError(f"specialize: the graph has {len(g.inputs)} inputs, got {len(types)} input types")
    bindings: dict[str, int] = {}
    out = Graph()
    vmap = {}
    for i, (v, t) in enumerate(zip(g.inputs, types)):
        _check_input(i, v.type, t, bindings, check_shapes)
        vmap[v] = out.add_input(v.name, t)
    known: dict = {}  # new Value -> its Python value, for scalars computable from the input types
    for n in g:
        inputs = [vmap[x] for x in n.inputs]
        attrs = n.attrs
        op = n.op
        shape_attr = _dynamic_shape_attr(op)
        if shape_attr is not None and isinstance(attrs.get(shape_attr), tuple):
            inputs, attrs = _fold_dynamic_shape(shape_attr, inputs, attrs, known)
        elif op == "prim.dynamic":
            op, inputs, attrs = _fold_dynamic_attrs(inputs, attrs, known)
        elif op == "prim.check":
            inputs, attrs = _fold_check(inputs, attrs, known)
        try:
            new_types = infer_types(op, tuple(x.type for x in inputs), attrs)
            if len(new_types) != len(n.outputs):
                raise ValueError(f"the rule gives {len(new_types)} outputs, the node has {len(n.outputs)}")
        except (dims.ShapeError, TypeError, ValueError, UnknownOpError) as e:
            where = "" if n.loc else "  # unknown location"  # the node's text ends with its location
            raise type(e)(f"specialize: {n}{where}: {e}") from e
        if op == "prim.guard":
            value = _check_guard(n, inputs[0], known)
        elif op == "prim.check":  # its rule has just checked the shapes; what they do not decide runs
            value = (all(x in known for x in inputs if not isinstance(x.type, TensorType))
                     and check_decided([x.type for x in inputs], attrs)) or None
        else:
            value = _scalar_value(op, inputs, attrs, new_types, known)
        if value is not None and op != "prim.Constant":
            # A scalar the call's types determine is a constant of the specialized program.
            m = out.create_node("prim.Constant", [], {"value": value}, n.loc, new_types)
        else:
            m = out.create_node(op, inputs, attrs, n.loc, new_types)
            m.errstate = n.errstate
        if value is not None:
            known[m.output] = value
        for old, new in zip(n.outputs, m.outputs):
            new.name = old.name
            vmap[old] = new
    out.set_outputs([vmap[v] for v in g.outputs])
    return out


def _check_guard(node: Any, guarded: Any, known: dict) -> bool | None:
    """True when the guard holds for the call's types; None when they do not decide it (kept as a
    run-time check); `GuardError` when it is broken. A guard on array data is broken by a call whose
    concrete shape differs from the traced value's: no data of that shape equals it, and the constants
    the trace derived from that value keep the traced shape."""
    expected = node.attrs["expected"]
    t = guarded.type
    if isinstance(expected, np.ndarray) and isinstance(t, TensorType) and t.is_concrete \
            and tuple(t.shape) != expected.shape:
        raise GuardError(guard_text(node), node.loc, f"{expected.dtype}{list(expected.shape)} array",
                         f"{expected.dtype}{list(t.shape)} array", "inputs")
    if guarded not in known:
        return None
    now = known[guarded]
    if now != expected:
        raise GuardError(guard_text(node), node.loc, expected, now)
    return True


def _scalar_value(op: str, inputs: Sequence, attrs: dict, out_types: tuple, known: dict) -> Any:
    """The value of a scalar node when the concrete types determine it (a shape read, a constant, or
    scalar arithmetic on known values), else None. Folding these lets a shape computed from traced
    shapes (``x.reshape(B, T, C // 4, 4)``) become concrete for the call being planned."""
    if len(out_types) != 1 or not isinstance(out_types[0], ScalarType):
        return None
    if op == "prim.Constant":
        value = attrs.get("value")
        return value if isinstance(value, (bool, int, float)) else None
    opdef = get(op)
    if op in _SHAPE_READS:
        t = inputs[0].type
        if not (isinstance(t, TensorType) and t.is_concrete):
            return None
        # A zero-strided view has the shape without owning any memory.
        args = [np.lib.stride_tricks.as_strided(np.zeros(1, t.dtype), t.shape, (0,) * t.ndim)]
    elif opdef.kind == "scalar" and inputs and all(v in known for v in inputs):
        args = [known[v] for v in inputs]
    else:
        return None
    try:
        value = opdef.reference(*args, **attrs)
    except (ArithmeticError, ValueError, TypeError):
        return None  # e.g. a division by zero: left for the run to report
    value = value.item() if isinstance(value, np.generic) else value
    return value if isinstance(value, (bool, int, float)) else None


def _fold_dynamic_attrs(inputs: list, attrs: dict, known: dict) -> tuple[str, list, dict]:
    """A `prim.dynamic` node whose numbers the call's types determine becomes its target op."""
    k = attrs["scalars"]
    numbers = inputs[len(inputs) - k :]
    if not all(v in known for v in numbers):
        return "prim.dynamic", inputs, attrs
    op, op_inputs, filled = dynamic_call(attrs, [*inputs[: len(inputs) - k], *(known[v] for v in numbers)])
    return op.name, op_inputs, filled


def _fold_check(inputs: list, attrs: dict, known: dict) -> tuple[list, dict]:
    """A check of a node of sizes the program computes, with the numbers the call's types determine
    folded in as they are into the node's op."""
    op, checked = attrs["op"], dict(attrs["attrs"])
    shape_attr = _dynamic_shape_attr(op)
    if shape_attr is not None and isinstance(checked.get(shape_attr), tuple):
        inputs, checked = _fold_dynamic_shape(shape_attr, inputs, checked, known)
    elif op == "prim.dynamic":
        op, inputs, checked = _fold_dynamic_attrs(inputs, checked, known)
    return inputs, {"op": op, "attrs": tuple(checked.items())}


def _fold_dynamic_shape(shape_attr: str, inputs: list, attrs: dict, known: dict) -> tuple[list, dict]:
    """Replace the dynamic dims of a shape-generic op whose (trailing) scalar inputs are known by their
    values."""
    n_tensors = len(inputs) - sum(isinstance(d, str) for d in attrs[shape_attr])
    scalars = iter(inputs[n_tensors:])
    kept, shape = list(inputs[:n_tensors]), []
    for d in attrs[shape_attr]:
        if not isinstance(d, str):
            shape.append(d)
            continue
        v = next(scalars)
        if v in known and isinstance(known[v], int):
            shape.append(int(known[v]))
        else:
            shape.append(d)
            kept.append(v)
    if len(kept) == len(inputs):
        return inputs, attrs
    return kept, {**attrs, shape_attr: tuple(shape)}
