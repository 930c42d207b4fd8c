"""Graph passes, in place: dead-code elimination, common-subexpression elimination, constant folding,
and decomposition of the ops a backend does not lower into the simpler ops they are made of.

Nondeterministic ops (random draws) follow trace semantics: an unused draw may be dropped (its value
can never be observed), but two draws are never merged, however alike.
"""

from __future__ import annotations

import hashlib
import struct
import warnings
from collections.abc import Collection
from typing import Any

import numpy as np

from numtrace_ir.graph import Graph, Node
from numtrace_ir.ops.prim import checkable
from numtrace_ir.registry import OpDef, UnknownOpError, get
from numtrace_ir.types import TensorType

__all__ = ["cse", "dce", "decompose", "fold_constants"]


def _opdef(op: str) -> OpDef | None:
    try:
        return get(op)
    except UnknownOpError:
        return None


def _effect(op: str) -> bool:
    opdef = _opdef(op)
    return opdef is not None and opdef.effect


def dce(g: Graph, *, keep_checks: bool = False, unchecked: Collection = ()) -> int:
    """Erase nodes none of whose outputs is used or returned; returns how many were erased. Guards
    (ops with an ``effect``) are kept: the checks they make are what they are for.

    With `keep_checks` (a traced program), a dead node whose NumPy call could refuse other input
    shapes (``x[0]`` of an empty array, the max of an empty array, a broadcast that does not fit)
    becomes a ``prim.check`` of its op on the same inputs: a call with such shapes still raises as
    NumPy would, and the value is not computed (`specialize` decides the check from the shapes);
    A dead host call (a function the registry lacks) is kept whole: what it refuses depends on the data
    too (``np.choose`` with an entry out of range), so every call still makes it, as NumPy would.
    `unchecked`: nodes that are no call of the program's (an attempt the tracer discarded)."""
    live_outputs = set(g.outputs)
    effects: dict[str, bool] = {}
    removed = 0
    # Reverse program order: erasing a node may leave its producers unused, and they come earlier.
    for n in reversed(g.nodes):
        effect = effects.get(n.op)
        if effect is None:
            effect = effects[n.op] = _effect(n.op)
        if not effect and all(not v.uses and v not in live_outputs for v in n.outputs):
            if keep_checks and n not in unchecked and n.op == "prim.host_call":
                continue   # a function NumPy's code calls: it may raise for the call's data, as it would
            if keep_checks and n not in unchecked and _may_refuse_shapes(n):
                with g.inserting_before(n):
                    g.create_node("prim.check", list(n.inputs),
                                  {"op": n.op, "attrs": tuple(n.attrs.items())}, n.loc)
            g.erase_node(n)
            removed += 1
    return removed


def _may_refuse_shapes(n: Node) -> bool:
    """Whether `n` is a call whose NumPy function may raise for some shapes of its array inputs: a
    deterministic array op with an array input (not a one-input ufunc, which takes every shape) and
    attrs that print as text."""
    op = n.attrs["op"] if n.op == "prim.dynamic" else n.op   # an op of sizes the program computes
    opdef = _opdef(op)
    # A write (np.setitem, the scatters: not `pure`, so never merged) is a functional op: checked too
    if opdef is None or opdef.nondeterministic or opdef.effect or not checkable(n.op):
        return False
    if opdef.ufunc is not None and opdef.ufunc.nin == 1:
        return False
    return any(isinstance(v.type, TensorType) for v in n.inputs) and not _holds_array(tuple(n.attrs.values()))


def _holds_array(v: Any) -> bool:
    if isinstance(v, np.ndarray):
        return True
    if isinstance(v, (tuple, list)):
        return any(_holds_array(x) for x in v)
    if isinstance(v, slice):
        return _holds_array((v.start, v.stop, v.step))
    return False


class _AttrKeys:
    """Hashable keys of attribute values that are equal exactly when the values are the same bits: a
    float by its IEEE bits (0.0 is not -0.0, NaNs differ by payload), 1 is not 1.0 nor True, an array by
    dtype, shape and the bytes of its elements (not its layout). Array digests are cached by identity:
    nodes share their attribute arrays."""

    def __init__(self) -> None:
        self._digests: dict[int, tuple] = {}

    def key(self, v: Any) -> Any:
        t = type(v)
        if t is float:
            return (float, struct.pack("<d", v))
        if t is complex:
            return (complex, struct.pack("<dd", v.real, v.imag))
        if t is tuple:
            return (tuple, tuple(self.key(x) for x in v))
        if t is slice:
            return (slice, self.key(v.start), self.key(v.stop), self.key(v.step))
        if t is np.ndarray:
            hit = self._digests.get(id(v))
            if hit is None or hit[0] is not v:
                data = hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()
                hit = self._digests[id(v)] = (v, (np.ndarray, v.dtype.str, v.shape, data))
            return hit[1]
        if isinstance(v, np.dtype):
            return (np.dtype, v.str)
        return (t, v)   # None, bool, int, str, Ellipsis: equal by value within one type

    def of(self, attrs: dict) -> tuple:
        return tuple((k, self.key(attrs[k])) for k in sorted(attrs))


def _escapes(node: Node, outputs: set, views: dict[str, bool]) -> bool:
    """Whether a result of `node` is returned, or read by an op that may keep it as a view (which may
    then be returned): two such nodes stay apart, or one array would be returned as two results that
    NumPy gives as independent arrays (a backend may compute a returned value into an argument's memory
    and keep views as views)."""
    for v in node.outputs:
        if v in outputs:
            return True
        for user in v.users:
            view = views.get(user.op)
            if view is None:
                opdef = _opdef(user.op)
                view = views[user.op] = opdef is None or opdef.view is not None or opdef.as_view is not None
            if view:
                return True
    return False


def cse(g: Graph) -> int:
    """Merge each node into an earlier one with the same op, inputs, output types, attributes (the
    same bits: see `_AttrKeys`) and error state (`Node.errstate`: it decides what the op reports);
    returns how many nodes were erased. Only pure ops (`OpDef.pure`) are merged: never random draws,
    guards, host calls or writes, nor ops the registry does not know. Two nodes whose results both leave
    the graph (returned, or viewed) stay apart, so merging never makes two results one array."""
    seen: dict[tuple, Node] = {}
    pure: dict[str, bool] = {}
    views: dict[str, bool] = {}
    keys = _AttrKeys()
    outputs = set(g.outputs)
    removed = 0
    for n in g:
        ok = pure.get(n.op)
        if ok is None:
            opdef = _opdef(n.op)
            ok = pure[n.op] = opdef is not None and opdef.pure
        if not ok:
            continue
        key = (n.op, tuple(map(id, n.inputs)), keys.of(n.attrs), tuple(v.type for v in n.outputs), n.errstate)
        first = seen.get(key)
        if first is None:
            seen[key] = n
            continue
        if _escapes(first, outputs, views) and _escapes(n, outputs, views):
            continue
        for old, new in zip(n.outputs, first.outputs):
            old.replace_all_uses_with(new)
        g.erase_node(n)
        outputs = set(g.outputs)
        removed += 1
    return removed


def _foldable(n: Node, max_bytes: int) -> bool:
    """A pure, non-view node with one concrete array result of at most `max_bytes`."""
    opdef = _opdef(n.op)
    if (opdef is None or not opdef.pure or opdef.view is not None or opdef.as_view is not None
            or n.op == "prim.Constant" or len(n.outputs) != 1):
        return False
    t = n.outputs[0].type
    return (isinstance(t, TensorType) and t.is_concrete
            and t.dtype.itemsize * int(np.prod(t.shape)) <= max_bytes)


def _evaluate(n: Node, args: list) -> np.ndarray | None:
    """`n`'s reference on `args` as an array of its output type; None when NumPy raises or warns (the
    node then runs, and raises or warns, at run time) or returns another type. NumPy's floating-point
    reports are on whatever the compiling caller's np.errstate: under errstate ignore (a trace made in
    one) a node that warns would fold silently, and every later call would skip its warning or error."""
    from numtrace_ir.interpreter import reference_call

    fn, attrs = reference_call(n)
    t = n.outputs[0].type
    assert isinstance(t, TensorType)   # _foldable's condition
    try:
        with warnings.catch_warnings(), np.errstate(all="warn"):
            warnings.simplefilter("error")
            result = np.asarray(fn(*args, **attrs))
    except Exception:
        return None
    if result.dtype != t.dtype or result.shape != tuple(t.shape):
        return None
    result = np.array(result, copy=True)   # owns its memory: never a view of an input constant
    result.flags.writeable = False
    return result


def fold_constants(g: Graph, max_bytes: int = 1 << 26) -> int:
    """Compute once, with its NumPy reference, each pure node whose inputs are all constant and make it
    a ``prim.Constant``; returns how many nodes became constants. Inputs count as constant when made by
    ``prim.Constant`` or by a pure node with no inputs (``prim.full`` sized by the call's shapes), which
    alone is not folded: filling a buffer costs no more than copying a constant. So a causal mask
    ``triu(ones((t, t)))`` is computed once per input signature instead of on every call. Views, results
    over `max_bytes`, and nodes whose reference raises or warns are left to run."""
    values: dict = {}
    sources: dict = {}   # value -> its input-free node, computed when a node that folds reads it
    folded = 0
    for n in list(g.nodes):
        if n.op == "prim.Constant":
            values[n.outputs[0]] = n.attrs["value"]
            continue
        if not _foldable(n, max_bytes):
            continue
        if not n.inputs:
            sources[n.outputs[0]] = n
            continue
        if not all(v in values or v in sources for v in n.inputs):
            continue
        for v in n.inputs:
            if v not in values and v in sources:
                value = _evaluate(sources[v], [])
                if value is None:
                    del sources[v]   # left to run (and raise or warn) per call
                else:
                    values[v] = value
        if not all(v in values for v in n.inputs):
            continue
        value = _evaluate(n, [values[v] for v in n.inputs])
        if value is None:
            continue
        with g.inserting_before(n):
            c = g.create_node("prim.Constant", [], {"value": value}, n.loc, [n.outputs[0].type])
        c.outputs[0].name = n.outputs[0].name
        n.outputs[0].replace_all_uses_with(c.outputs[0])
        g.erase_node(n)
        values[c.outputs[0]] = value
        folded += 1
    outputs = set(g.outputs)
    for v, n in reversed(list(sources.items())):   # the sources only folded nodes read
        if not v.uses and v not in outputs:
            g.erase_node(n)
    return folded


def replace_node(g: Graph, node: Node, build: Any) -> bool:
    """Put the values ``build(g, node)`` inserts before `node` in its place (its uses rewired, the node
    erased). When it returns None, or values of other types than the node's outputs, everything it
    inserted is erased and the graph is left as it was: False."""
    before = {id(n) for n in g.nodes}
    with g.inserting_before(node):
        new = build(g, node)
    if new is None or [v.type for v in new] != [v.type for v in node.outputs]:
        for n in reversed([n for n in g.nodes if id(n) not in before]):
            g.erase_node(n)
        return False
    for old, value in zip(node.outputs, new):
        old.replace_all_uses_with(value)
    g.erase_node(node)
    return True


def decompose(g: Graph, supported: Collection) -> int:
    """Rewrite every node whose op (an `OpDef`) has a ``decompose`` and is not in `supported` (the ops
    the calling backend lowers itself) into the simpler ops it is made of, until none is left (a
    decomposition may use ops that decompose further); returns how many nodes were rewritten.

    Rewriting once here, before a backend sees the graph, means no backend special-cases ``clip`` or
    ``divmod``. A node with no exact rewrite for its inputs (``decompose`` returns None, or values of
    other types than the node's) is left as it is, for the backend to run or refuse by name."""
    from numtrace_ir.registry import UnknownOpError, get

    total = 0
    while True:
        rewritten = 0
        for node in list(g.nodes):
            try:
                op = get(node.op)
            except UnknownOpError:
                continue
            if op.decompose is None or op in supported:
                continue
            rewritten += replace_node(g, node, op.decompose)
        total += rewritten
        if not rewritten:
            return total
