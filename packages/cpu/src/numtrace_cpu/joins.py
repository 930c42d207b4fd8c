"""Joins written in place: the parts of `np.stack`/`np.concatenate`/`np.hstack`/`np.vstack`/
`np.column_stack` computed straight into the joined array.

A join copies each part into its place in a new array. When a part is an output of a fused pass,
that pass can write it there itself: the part's value becomes a view of the joined array (a
`PartViewStep` placed just before the pass), and the join step only copies the parts no pass wrote
(or disappears). ``np.stack([r * np.cos(t), r * np.sin(t)], axis=-1)`` is then one pass writing
both columns interleaved, with no intermediate buffers and no copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numtrace_ir import registry
from numtrace_ir.types import TensorType

from numtrace_cpu.lowering import FallbackStep, FusedStep, IntoStep, PartViewStep, Step

__all__ = ["JoinRestStep", "part_keys", "write_parts_in_place"]

# The joins handled here (a misspelt name fails at import).
_STACK, _CONCATENATE, _HSTACK, _VSTACK, _COLUMN_STACK = (registry.get(name).name for name in (
    "np.stack", "np.concatenate", "np.hstack", "np.vstack", "np.column_stack"))


@dataclass
class JoinRestStep(IntoStep):
    """What is left of a join once some parts are written in place: the other parts copied into
    their views of the result (`np.copyto` with the join's own unsafe-after-checking cast)."""


def _join_axis(node, ndim: int) -> int | None:
    """The axis of the join's result that its parts are laid along, or None (not a join handled here)."""
    op = node.op
    if op == _STACK or op == _CONCATENATE:
        axis = node.attrs.get("axis", 0)
        return None if axis is None or ndim == 0 else axis % ndim
    if op == _HSTACK:
        return 0 if ndim == 1 else 1
    if op == _VSTACK:
        return 0
    if op == _COLUMN_STACK:
        return 1
    return None


def part_keys(node) -> list[tuple] | None:
    """For each input of a join node, the index of the result where it goes (a stacked part takes one
    index of the join axis, a concatenated one a slice), or None when the node is not such a join or
    a part's place is not a view of its exact shape (a 0-d part of vstack is reshaped first)."""
    out_t = node.outputs[0].type if len(node.outputs) == 1 else None
    if not isinstance(out_t, TensorType) or not out_t.is_concrete:
        return None
    axis = _join_axis(node, out_t.ndim)
    if axis is None or not node.inputs:
        return None
    probe = np.broadcast_to(np.zeros((), np.uint8), out_t.shape)
    keys: list = []
    offset = 0
    for v in node.inputs:
        t = v.type
        if not isinstance(t, TensorType) or not t.is_concrete:
            return None
        pre = (slice(None),) * axis
        if node.op != _STACK and t.ndim == out_t.ndim:
            width = t.shape[axis]
            key = pre + (slice(offset, offset + width),)
        else:
            width = 1
            key = pre + (offset, Ellipsis)   # with the Ellipsis, a 0-d part's place is a view, not a scalar
        offset += width
        if probe[key].shape != tuple(t.shape):
            return None
        keys.append(key)
    return keys if offset == out_t.shape[axis] else None


def write_parts_in_place(steps: list[Step], types: dict, outputs: list[int]) -> list[Step]:
    """The steps with every join's fused-pass parts written into the joined array (see the module
    docstring). `types[number]` is a value number's IR type; `outputs` the graph's outputs.
    A part qualifies when a fused pass writes it as an output, it has the result's dtype, it is not a
    graph output, and it appears once in the join (and in no earlier join). A step that later writes
    the joined array in place (an assignment given its buffer) must come after the last read of such
    a part (or of a view of it): the part is that memory."""
    producer: dict[int, int] = {}
    writes: dict[int, list[int]] = {}   # value -> positions of the steps writing its memory
    for k, step in enumerate(steps):
        for v in step.outputs:
            if v in producer:
                writes.setdefault(v, []).append(k)
            else:
                producer[v] = k
    last_read = _last_reads(steps)
    before: dict[int, list[Step]] = {}   # step position -> view steps to place before it
    replaced: dict[int, Step | None] = {}
    taken: set = set()
    for k, step in enumerate(steps):
        if type(step) not in (IntoStep, FallbackStep) or len(step.nodes) != 1 or len(step.outputs) != 1:
            continue
        node = step.nodes[0]
        keys = part_keys(node)
        if keys is None:
            continue
        (out,) = step.outputs
        out_dt = node.outputs[0].type.dtype
        overwritten = min((w for w in writes.get(out, ()) if w > k), default=len(steps))
        rest: list[tuple[int, tuple]] = []
        for v, key in zip(step.inputs, keys):
            p = producer.get(v)
            if (p is None or not isinstance(steps[p], FusedStep) or v in outputs or v in taken
                    or step.inputs.count(v) != 1 or types[v].dtype != out_dt
                    or last_read.get(v, k) >= overwritten):
                rest.append((v, key))
                continue
            taken.add(v)
            before.setdefault(p, []).append(PartViewStep(inputs=[out], outputs=[v], nodes=[node],
                                                         fn=_viewer(key)))
        if len(rest) == len(keys):
            continue
        replaced[k] = None if not rest else JoinRestStep(
            inputs=[v for v, _ in rest], outputs=[out], nodes=[node], fn=_copier([key for _, key in rest]))
    if not before:
        return steps
    result: list[Step] = []
    for k, step in enumerate(steps):
        result.extend(before.get(k, ()))
        if k not in replaced:
            result.append(step)
            continue
        rest_step = replaced[k]
        if rest_step is not None:
            result.append(rest_step)
    return result


def _last_reads(steps: list[Step]) -> dict[int, int]:
    """value -> position of the last step reading it or a view of it (the value a view step's result
    shares memory with is its root)."""
    root: dict[int, int] = {}
    last: dict[int, int] = {}
    for k, step in enumerate(steps):
        for v in step.inputs:
            last[root.get(v, v)] = k
        if step.view:
            for v in step.outputs:
                root[v] = root.get(step.inputs[0], step.inputs[0])
    return last


def _viewer(key: tuple):
    return lambda a: a[key]


def _copier(keys: list):
    """Copy each remaining part into its place (the join's type rule already checked the cast)."""
    copyto = np.copyto

    def copy_parts(*parts, out):
        for part, key in zip(parts, keys):
            copyto(out[key], part, casting="unsafe")
    return copy_parts
