"""Guards: what a trace was specialized on, and the error raised when a call breaks it.

A guard is a ``prim.guard`` node: a scalar computed from the input shapes (``x.shape[0] == 1``,
``int(0.8 * x.shape[0])``) and the value it had while tracing, where the traced program left the graph
as a plain Python value (a branch, ``range(n)``, ``math.sqrt(n)``, a slice bound). `specialize`
evaluates every guard for the shapes of a call; a broken guard raises `GuardError` before anything
runs, so a graph is never run for shapes it was not recorded for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["GuardError", "expression", "guard_text"]

_INFIX = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
          "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


class GuardError(ValueError):
    """A call whose input shapes break a guard of the trace. ``guard`` is the guard's text, ``loc`` the
    user's source line that made it, ``traced`` and ``now`` the guarded value then and for this call."""

    def __init__(self, guard: str, loc: str | None, traced: Any, now: Any, subject: str = "input shapes"):
        self.guard, self.loc, self.traced, self.now = guard, loc, traced, now
        where = f" (recorded at {loc})" if loc else ""
        super().__init__(f"guard {guard} == {traced!r}{where} does not hold for these {subject}: "
                         f"it is {now!r}")


def expression(value: Any, depth: int = 0) -> str:
    """Python-like text of the scalar expression computing `value` (``x.shape[0] // 2``)."""
    node = value.node
    if node is None or depth > 12:
        return value.name or "?"
    op, attrs, ins = node.op, node.attrs, node.inputs
    if op == "prim.Constant":
        return repr(attrs["value"]) if not hasattr(attrs["value"], "shape") else "<array>"
    if op == "prim.dim":
        return f"{expression(ins[0], depth + 1)}.shape[{attrs['axis']}]"
    if op == "prim.size":
        return f"{expression(ins[0], depth + 1)}.size"
    short = op.removeprefix("prim.")
    args = [expression(v, depth + 1) for v in ins]
    if short in _INFIX and len(args) == 2:
        text = f"{args[0]} {_INFIX[short]} {args[1]}"
        return f"({text})" if depth else text
    if short == "neg" and len(args) == 1:
        return f"-{args[0]}"
    if short in ("int", "float", "floor", "ceil", "round") and len(args) == 1:
        inner = args[0][1:-1] if args[0].startswith("(") and args[0].endswith(")") else args[0]
        return f"{'math.' if short in ('floor', 'ceil') else ''}{short}({inner})"
    return f"{op}({', '.join(args)})"


def guard_text(node: Any) -> str:
    """The guarded expression of a ``prim.guard`` node (``what`` it says, for a guard on array data)."""
    return node.attrs.get("what") or expression(node.inputs[0])
