"""The built-in ``reference`` backend: `numtrace_ir.interpreter.Interpreter`, which runs each node's
NumPy reference one node at a time. It is the oracle of the tests and the fallback that is always
installed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numtrace_ir.interpreter import Interpreter

__all__ = ["ReferenceBackend", "ReferenceExecutable"]

ReferenceExecutable = Interpreter


class ReferenceBackend:
    """Backend protocol object (see docs/design/contract.md) for the reference interpreter."""

    name = "reference"

    def is_available(self) -> tuple[bool, str]:
        return True, ""

    def compile(self, graph: Any, input_types: Sequence[Any]) -> Interpreter:
        return Interpreter(graph)
