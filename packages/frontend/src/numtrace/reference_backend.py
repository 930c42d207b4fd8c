"""The built-in ``reference`` backend: `numtrace_ir.interpreter.Interpreter`, which runs each node's
NumPy reference one node at a time. It is the oracle of the tests and the fallback that is always
installed. It runs only the graph: a traced call's convention (write-back, returned arguments,
aliasing) is `numtrace_ir.run_call`'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numtrace_ir import CallSpec, specialize
from numtrace_ir.interpreter import Interpreter

__all__ = ["ReferenceBackend", "ReferenceExecutable"]

ReferenceExecutable = Interpreter


class ReferenceBackend:
    """Backend protocol object (see docs/design/contract.md) for the reference interpreter."""

    name = "reference"

    def is_available(self) -> tuple[bool, str]:
        return True, ""

    def compile(self, graph: Any, input_types: Sequence[Any], call_spec: CallSpec | None = None
                ) -> Interpreter:
        """The interpreter of `graph` specialized to `input_types` (its guards checked, its types and
        shape arithmetic folded for them), as every backend does first."""
        return Interpreter(specialize(graph, input_types, check_shapes=False))
