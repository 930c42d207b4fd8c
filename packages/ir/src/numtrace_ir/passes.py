"""Graph passes, in place: dead-code elimination and common-subexpression elimination.

Nondeterministic ops (random draws) follow trace semantics: an unused draw may be dropped (its value
can never be observed), but two draws are never merged, however alike.
"""

from __future__ import annotations

import hashlib

import numpy as np

from numtrace_ir.attrs import format_attr
from numtrace_ir.graph import Graph
from numtrace_ir.registry import UnknownOpError, get

__all__ = ["cse", "dce"]


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
    seen: dict[tuple, object] = {}
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
