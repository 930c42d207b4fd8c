"""The wording every backend uses to name the node an error comes from and where the user wrote it, so
that a failure reads the same on every backend: ``While executing node np.log (traced at model.py:12):
ValueError: ...``."""

from __future__ import annotations

from typing import Any

__all__ = ["ExecutionIndexError", "execution_error", "location", "traced_at", "while_executing"]


class ExecutionIndexError(RuntimeError, IndexError):
    """An index out of range met while running a node: NumPy's ``IndexError`` (``except IndexError``
    catches it as it catches NumPy's), with the node named as every run-time error is."""


def location(node: Any) -> str:
    """``traced at file:line``, or ``at an unknown location`` for a node without one."""
    return f"traced at {node.loc}" if node.loc else "at an unknown location"


def traced_at(node: Any) -> str:
    """`` (traced at file:line)`` for a node with a source location, else the empty string."""
    return f" ({location(node)})" if node.loc else ""


def while_executing(node: Any) -> str:
    """``While executing node <op> (traced at file:line)``: the prefix of a run-time error."""
    return f"While executing node {node.op}{traced_at(node)}"


def execution_error(node: Any, exc: BaseException) -> RuntimeError:
    """The RuntimeError to raise (``from exc``) when running `node` raised `exc`; also an IndexError
    when `exc` is one (an index out of range at run time)."""
    kind = ExecutionIndexError if isinstance(exc, IndexError) else RuntimeError
    return kind(f"{while_executing(node)}: {type(exc).__name__}: {exc}")
