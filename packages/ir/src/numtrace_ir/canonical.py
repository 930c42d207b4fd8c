"""Canonical form and graph equality: what the trace checker compares.

The text IR is already canonical up to debug names and source locations (unnamed values print as
their position, attributes print exactly), so two graphs are equal when their texts are equal.
"""

from __future__ import annotations

from numtrace_ir.graph import Graph
from numtrace_ir.printer import format_graph

__all__ = ["canonical_text", "canonicalize", "graphs_equal"]


def canonicalize(g: Graph, *, strip_names: bool = False, strip_locs: bool = False) -> Graph:
    """A new graph equal to `g`, values renumbered in order, optionally without debug names/locations."""
    out = g.copy()
    if strip_names:
        for v in out.inputs:
            v.name = None
    for n in out:
        if strip_locs:
            n.loc = None
        if strip_names:
            for v in n.outputs:
                v.name = None
    return out


def canonical_text(g: Graph, *, strip_names: bool = False, strip_locs: bool = False) -> str:
    """The text of `canonicalize(g, ...)`, computed without copying the graph."""
    return format_graph(g, None, not strip_names, not strip_locs)


def graphs_equal(a: Graph, b: Graph, *, strip_names: bool = False, strip_locs: bool = False) -> bool:
    """True when `a` and `b` have the same canonical text (same ops, types, attrs, structure)."""
    if not isinstance(a, Graph) or not isinstance(b, Graph):
        raise TypeError(f"graphs_equal expects two Graphs, got {type(a).__name__} and {type(b).__name__}")
    if len(a) != len(b) or len(a.inputs) != len(b.inputs) or len(a.outputs) != len(b.outputs):
        return False
    kw = {"strip_names": strip_names, "strip_locs": strip_locs}
    return canonical_text(a, **kw) == canonical_text(b, **kw)
