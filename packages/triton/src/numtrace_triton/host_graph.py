"""The executable of a graph no kernel plan can hold: every node run on the host by its NumPy
reference (`numtrace_ir.interpreter.Interpreter`), as the reference backend runs it.

Kernel plans need every buffer's size at compile time; a value whose shape depends on array data (a
boolean-mask read, a draw sized by data) or a Python scalar computed at run time has none, and an
input of a dtype Triton has no type for (complex) has no buffer. Such a graph runs here, whole, rather
than being refused: slower, never different from NumPy. `explain()` says which node sent it here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numtrace_ir.interpreter import Interpreter
from numtrace_ir.types import TensorType

from .device_arrays import is_device_array

__all__ = ["HostGraphExecutable"]


class HostGraphExecutable:
    """A specialized graph run node by node on the host; ``reason``: why it has no kernel plan."""

    def __init__(self, graph: Any, input_types: list, reason: str) -> None:
        self.graph = graph
        self.input_types = list(input_types)
        self.reason = reason
        self.kernels: tuple = ()
        self._run = Interpreter(graph)
        self._calls = 0

    def __call__(self, *inputs: Any, out: tuple | None = None) -> tuple:
        if len(inputs) != len(self.input_types):
            raise TypeError(f"expected {len(self.input_types)} inputs, got {len(inputs)}")
        for i, (value, t) in enumerate(zip(inputs, self.input_types)):
            if is_device_array(value):
                raise TypeError(f"input {i}: this graph runs on the host ({self.reason}); pass NumPy arrays")
            if isinstance(t, TensorType):
                array = np.asarray(value)
                if array.dtype != t.dtype or array.shape != tuple(t.shape):
                    raise TypeError(f"input {i}: got {array.dtype}{list(array.shape)}, but this executable "
                                    f"was compiled for {t}")
        self._calls += 1
        return self._run(*inputs, out=out)

    def explain(self) -> str:
        sig = ", ".join(str(t) for t in self.input_types)
        nodes = "\n".join(f"    {node.op}" for node in self.graph.nodes if node.op != "prim.Constant")
        return (f"triton executable for ({sig})\n  0 kernel launches: the whole graph runs on the host "
                f"(NumPy), because {self.reason}\n  host nodes:\n{nodes}\n")

    def stats(self) -> dict:
        return {"backend": "triton", "kernels": 0, "kernel_names": [], "calls": self._calls, "launches": 0,
                "fallbacks": len(self.graph.nodes), "host_graph": self.reason}
