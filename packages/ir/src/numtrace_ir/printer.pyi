# What printer.pyx exports, for type checkers (mypy cannot read Cython); kept beside the .pyx it describes.
from collections.abc import Callable
from typing import Any

from numtrace_ir.attrs import Abbreviate
from numtrace_ir.graph import Graph, Node, Value

__all__ = ["SHOWN_ELEMENTS", "display_text", "format_graph", "format_node", "value_names"]

SHOWN_ELEMENTS: int

def value_names(g: Graph, debug_names: bool = True) -> dict[Value, str]: ...
def format_graph(
    g: Graph,
    array_ref: Callable[[Any], str] | Abbreviate | None = None,
    debug_names: bool = True,
    locs: bool = True,
    display: bool = False,
) -> str: ...
def format_node(n: Node, display: bool = False) -> str: ...
def display_text(g: Graph) -> str: ...
