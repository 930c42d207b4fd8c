"""Graph passes, in place: dead-code elimination, common-subexpression elimination, and decomposition
of the ops a backend does not lower into the simpler ops they are made of.

Nondeterministic ops (random draws) follow trace semantics: an unused draw may be dropped (its value
can never be observed), but two draws are never merged, however alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection

import numpy as np

from numtrace_ir.attrs import format_attr
from numtrace_ir.graph import Graph, Node
from numtrace_ir.registry import UnknownOpError, get

__all__ = ["cse", "dce", "decompose"]


def _nondeterministic(op: str) -> bool:
    try:
        return get(op).nondeterministic
    except UnknownOpError:
        return True  # an op we know nothing about is never merged


def _effect(op: str) -> bool:
    try:
        return get(op).effect
    except UnknownOpError:
        return False


def _array_digest(a: np.ndarray) -> str:
    # Stands in for the elements in CSE keys: printing a large weight in full would dominate the pass.
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def dce(g: Graph) -> int:
    """Erase nodes none of whose outputs is used or returned; returns how many were erased. Guards
    (ops with an ``effect``) are kept: the checks they make are what they are for."""
    live_outputs = set(g.outputs)
    effects: dict[str, bool] = {}
    removed = 0
    # Reverse program order: erasing a node may leave its producers unused, and they come earlier.
    for n in reversed(g.nodes):
        effect = effects.get(n.op)
        if effect is None:
            effect = effects[n.op] = _effect(n.op)
        if not effect and all(not v.uses and v not in live_outputs for v in n.outputs):
            g.erase_node(n)
            removed += 1
    return removed


def cse(g: Graph) -> int:
    """Merge nodes with the same op, inputs and attributes (compared by exact text, arrays included)
    into the first one; returns how many were erased. Nondeterministic ops are never merged."""
    seen: dict[tuple, Node] = {}
    cache: dict[str, bool] = {}
    removed = 0
    for n in g:
        nondet = cache.get(n.op)
        if nondet is None:
            nondet = cache[n.op] = _nondeterministic(n.op)
        if nondet:
            continue
        key = (n.op, tuple(map(id, n.inputs)),
               tuple((k, format_attr(v, _array_digest)) for k, v in n.attrs.items()),
               tuple(v.type for v in n.outputs))
        first = seen.get(key)
        if first is None:
            seen[key] = n
            continue
        for old, new in zip(n.outputs, first.outputs):
            old.replace_all_uses_with(new)
        g.erase_node(n)
        removed += 1
    return removed


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
            before = {id(n) for n in g.nodes}
            with g.inserting_before(node):
                new = op.decompose(g, node)
            if new is None or [v.type for v in new] != [v.type for v in node.outputs]:
                for n in reversed([n for n in g.nodes if id(n) not in before]):
                    g.erase_node(n)
                continue
            for old, value in zip(node.outputs, new):
                old.replace_all_uses_with(value)
            g.erase_node(node)
            rewritten += 1
        total += rewritten
        if not rewritten:
            return total
