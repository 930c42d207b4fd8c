"""The built-in ``reference`` backend: runs each node's NumPy reference, one node at a time.

It is the oracle of the tests and the fallback that is always installed. Like an
fx Interpreter it keeps values in slots, frees each value after its last use, and
on failure says which node failed and where the user wrote it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numtrace_ir import registry


class ReferenceBackend:
    """Backend protocol object (see docs/design/contract.md) for the reference interpreter."""

    name = "reference"

    def is_available(self) -> tuple[bool, str]:
        return True, ""

    def compile(self, graph: Any, input_types: Sequence[Any]) -> ReferenceExecutable:
        return ReferenceExecutable(graph)


class _Step:
    """One node's work: its reference, where its inputs live, where its outputs go, what dies after it."""

    __slots__ = ("node", "fn", "attrs", "inputs", "outputs", "free")

    def __init__(self, node, fn, attrs, inputs, outputs):
        self.node = node
        self.fn = fn
        self.attrs = attrs
        self.inputs = inputs
        self.outputs = outputs
        self.free: list[int] = []


def _constant(value):
    """The reference of prim.Constant: the stored value itself (copied on output)."""
    return value


class ReferenceExecutable:
    """Interprets a graph node by node; values are freed after their last use."""

    def __init__(self, graph: Any):
        self.graph = graph
        slot: dict[Any, int] = {}
        for value in graph.inputs:
            slot[value] = len(slot)
        self.num_inputs = len(slot)
        self.steps: list[_Step] = []
        for node in graph.nodes:
            inputs = [slot[v] for v in node.inputs]
            for value in node.outputs:
                slot[value] = len(slot)
            attrs = dict(node.attrs)
            if node.op == "prim.Constant":
                fn, inputs, attrs = _constant, [], {"value": attrs["value"]}
            else:
                fn = registry.get(node.op).reference
            self.steps.append(_Step(node, fn, attrs, inputs, [slot[v] for v in node.outputs]))
        self.output_slots = [slot[v] for v in graph.outputs]
        self.num_slots = len(slot)
        # A slot is freed after the last step that reads it, unless it is a graph output.
        last_use: dict[int, int] = {}
        for index, step in enumerate(self.steps):
            for s in step.inputs:
                last_use[s] = index
        keep = set(self.output_slots)
        for s, index in last_use.items():
            if s not in keep:
                self.steps[index].free.append(s)
        # Outputs that are not freshly computed (inputs, constants, repeats) are copied; computed ones
        # are copied when they share memory with an input, a constant or an earlier output (a reference
        # may return a view: np.reshape, np.transpose...), checked per call (see __call__).
        fresh: set[int] = set()
        self.copy_output: list[bool] = []
        computed = {s for step in self.steps if step.fn is not _constant for s in step.outputs}
        for s in self.output_slots:
            self.copy_output.append(s not in computed or s in fresh)
            fresh.add(s)
        self.constants = [np.asarray(step.attrs["value"]) for step in self.steps if step.fn is _constant
                          and isinstance(step.attrs["value"], (np.ndarray, np.generic))]

    def __call__(self, *inputs: Any, out: Sequence[np.ndarray] | None = None) -> tuple:
        env: list[Any] = [None] * self.num_slots
        env[: self.num_inputs] = inputs
        for step in self.steps:
            try:
                result = step.fn(*[env[s] for s in step.inputs], **step.attrs)
            except Exception as exc:
                node = step.node
                where = f" (traced at {node.loc})" if node.loc else ""
                raise RuntimeError(f"While executing node {node.op}{where}: {type(exc).__name__}: "
                                   f"{exc}") from exc
            if len(step.outputs) == 1:
                env[step.outputs[0]] = result
            else:
                for s, r in zip(step.outputs, result):
                    env[s] = r
            for s in step.free:
                env[s] = None
        # Contract: every output is a fresh array, sharing memory with no input and no other output.
        held = [a for a in inputs if isinstance(a, np.ndarray)] + self.constants
        results = []
        for s, copy in zip(self.output_slots, self.copy_output):
            value = np.asarray(env[s])
            if copy or any(np.may_share_memory(value, h) for h in held):
                value = np.array(value, copy=True)
            results.append(value)
            held.append(value)
        if out is not None:
            return _write_outputs(results, out)
        return tuple(results)

    def stats(self) -> dict:
        return {"backend": "reference", "nodes": len(self.steps)}

    def explain(self) -> str:
        """The node list: each node runs as its op's NumPy reference, one after the other."""
        from numtrace_ir.printer import format_node, value_names

        names = value_names(self.graph)
        sig = ", ".join(f"%{names[v]} : {v.type}" for v in self.graph.inputs)
        lines = [f"reference executable for ({sig})",
                 f"  {len(self.steps)} nodes, each run as its op's NumPy reference (no fusion, no planning)"]
        for k, step in enumerate(self.steps, 1):
            lines.append(f"  {k}: {format_node(step.node, True)}")
        return "\n".join(lines) + "\n"


def _write_outputs(results: list[np.ndarray], out: Sequence[np.ndarray]) -> tuple:
    if len(out) != len(results):
        raise ValueError(f"out= needs {len(results)} arrays, got {len(out)}")
    for i, (r, o) in enumerate(zip(results, out)):
        if not isinstance(o, np.ndarray) or o.shape != r.shape or o.dtype != r.dtype:
            raise ValueError(f"out[{i}] must be an array of dtype {r.dtype} and shape {r.shape}")
        np.copyto(o, r)
    return tuple(out)
