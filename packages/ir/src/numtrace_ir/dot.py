"""Drawing a graph: Graphviz DOT text, and SVG when Graphviz's ``dot`` program is installed.

Ops are boxes (the op name, then its small attributes), graph inputs and the return are ellipses,
every edge is labelled with the type of the value it carries (``f32[B, 512]``) and every op box has
its source line as tooltip. ``to_dot`` needs nothing but the standard library; ``to_svg`` runs
``dot -Tsvg`` and returns ``None`` when ``dot`` is not on ``PATH``.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from numtrace_ir.attrs import Abbreviate, format_attr
from numtrace_ir.graph import Graph, register_presentation
from numtrace_ir.locations import display_location
from numtrace_ir.printer import value_names

__all__ = ["dot_available", "repr_svg", "to_dot", "to_svg"]

# Jupyter draws graphs up to this many nodes (bigger drawings are slow to lay out and unreadable).
REPR_MAX_NODES = 400


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _attr_text(value: Any) -> str:
    return format_attr(value, Abbreviate(4))


def to_dot(graph: Graph, *, name: str = "graph", attrs: bool = True, max_attr_chars: int = 40) -> str:
    """The DOT text of `graph`: one box per node, one ellipse per input and one for the return.

    `attrs=False` leaves node attributes out of the labels; each attribute's text is cut at
    `max_attr_chars` characters (large constants are abbreviated as in ``str(graph)``).
    """
    names = value_names(graph)
    producer: dict = {}
    lines = [f"digraph {_quote(name)} {{",
             '  node [fontname="Helvetica", fontsize=11];',
             '  edge [fontname="Helvetica", fontsize=9, color="#555555"];']
    for k, v in enumerate(graph.inputs):
        producer[v] = f"in{k}"
        label = f"%{names[v]}\n{v.type}"
        lines.append(f'  in{k} [shape=ellipse, style=filled, fillcolor="#dbe9f6", label={_quote(label)}];')
    for k, node in enumerate(graph):
        ident = f"n{k}"
        for v in node.outputs:
            producer[v] = ident
        label = node.op
        if attrs and node.attrs:
            label += "\n" + "\n".join(_short(f"{key}={_attr_text(a)}", max_attr_chars)
                                      for key, a in node.attrs.items())
        loc = display_location(node.loc) or "unknown location"
        outs = ", ".join(f"%{names[v]}" for v in node.outputs)
        tooltip = f"{outs} = {node.op}  # {loc}" if outs else f"{node.op}  # {loc}"
        fill = "#eeeeee" if node.op.startswith("prim.") else "#fff2cc"
        lines.append(f"  {ident} [shape=box, style=\"rounded,filled\", fillcolor=\"{fill}\", "
                     f"label={_quote(label)}, tooltip={_quote(tooltip)}];")
        for v in node.inputs:
            src = producer.get(v)
            if src is not None:
                lines.append(f"  {src} -> {ident} [label={_quote(str(v.type))}];")
    lines.append('  ret [shape=ellipse, style=filled, fillcolor="#d9ead3", label="return"];')
    for v in graph.outputs:
        src = producer.get(v)
        if src is not None:
            lines.append(f"  {src} -> ret [label={_quote(str(v.type))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_available() -> bool:
    """True when Graphviz's ``dot`` program is on ``PATH``."""
    return shutil.which("dot") is not None


def to_svg(graph_or_dot: Graph | str, *, timeout: float = 60.0) -> str | None:
    """SVG text of a graph (or of DOT text) via ``dot -Tsvg``; ``None`` when ``dot`` is not installed.

    Raises ``RuntimeError`` with Graphviz's message when ``dot`` fails.
    """
    exe = shutil.which("dot")
    if exe is None:
        return None
    text = graph_or_dot if isinstance(graph_or_dot, str) else to_dot(graph_or_dot)
    try:
        done = subprocess.run([exe, "-Tsvg"], input=text.encode("utf-8"), capture_output=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"Graphviz dot took more than {timeout:g} s") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(f"Graphviz dot failed: {message[0] if message else done.returncode}")
    return done.stdout.decode("utf-8")


def repr_svg(graph: Graph) -> str | None:
    """SVG for Jupyter's ``_repr_svg_``: ``None`` (text is shown instead) without ``dot`` or when the
    graph has more than `REPR_MAX_NODES` nodes."""
    if len(graph) > REPR_MAX_NODES or not dot_available():
        return None
    try:
        return to_svg(graph)
    except RuntimeError:
        return None


register_presentation("to_dot", to_dot)
register_presentation("repr_svg", repr_svg)
