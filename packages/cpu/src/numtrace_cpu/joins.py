"""Joins written in place: the parts of `np.stack`/`np.concatenate`/`np.hstack`/`np.vstack`/
`np.column_stack` computed straight into the joined array, and the value of an in-place
``a[1:-1] = expr`` computed straight into ``a[1:-1]``.

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

from numtrace_cpu.steps import (
    AssignedViewStep,
    FallbackStep,
    FusedStep,
    IntoStep,
    PartViewStep,
    SetitemStep,
    Step,
)

__all__ = ["JoinRestStep", "part_keys", "producers_and_writes", "splice", "write_assigned_in_place",
           "write_parts_in_place"]

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
    producer, writes = producers_and_writes(steps)
    last_read = _last_reads(steps, outputs)
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
        overwritten = min((w for w in writes.get(out, ()) if w > k), default=len(steps) + 1)
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


def write_assigned_in_place(steps: list[Step], types: dict, outputs: list[int]) -> list[Step]:
    """The steps with the value of every in-place ``a[key] = value`` (a SetitemStep whose result is
    `a`'s own buffer, a static basic key) computed by its fused pass straight into ``a[key]``: an
    AssignedViewStep placed before that pass, and the assignment dropped. The value qualifies when a
    fused pass writes it, it has ``a[key]``'s exact shape and dtype, it is not a graph output and is
    read by nothing after `a` is next written; `a` was computed before that pass; and from that pass
    to the assignment no step reads `a`'s memory (which then holds part of the new values already)
    nor writes it."""
    producer, writes = producers_and_writes(steps)
    root: dict[int, int] = {}
    reads: dict[int, list[int]] = {}   # root value -> positions of the steps reading it or a view of it
    for k, step in enumerate(steps):
        for v in step.inputs:
            reads.setdefault(root.get(v, v), []).append(k)
        if step.view:
            for v in step.outputs:
                root[v] = root.get(step.inputs[0], step.inputs[0])
    last_read = _last_reads(steps, outputs)
    before: dict[int, Step] = {}
    dropped: set = set()
    taken: set = set()
    for k, step in enumerate(steps):
        if type(step) is not SetitemStep or len(step.inputs) != 2 or step.inputs[0] != step.outputs[0]:
            continue
        a, v = step.inputs
        p, q = producer.get(v), producer.get(a)
        key = _basic_key(step.index)
        if (key is None or p is None or q is None or not q < p < k or p in before
                or not isinstance(steps[p], FusedStep) or v in outputs or v in taken or a in root):
            continue
        ta, tv = types[a], types[v]
        probe = np.broadcast_to(np.zeros((), np.uint8), ta.shape)
        if tv.dtype != ta.dtype or probe[key].shape != tuple(tv.shape):
            continue
        if any(p <= r < k for r in reads.get(a, ())) or any(p <= w < k for w in writes.get(a, ())):
            continue
        overwritten = min((w for w in writes.get(a, ()) if w > k), default=len(steps) + 1)
        if last_read.get(v, k) >= overwritten:
            continue
        taken.add(v)
        dropped.add(k)
        before[p] = AssignedViewStep(inputs=[a], outputs=[v], nodes=step.nodes, fn=_viewer(key))
    return splice(steps, before, dropped)


def splice(steps: list[Step], before: dict[int, Step], dropped: set[int]) -> list[Step]:
    """`steps` with ``before[k]`` put in front of step k and the steps in `dropped` left out: how a
    rewrite that moves work onto an earlier producer edits the plan."""
    if not before:
        return steps
    result: list[Step] = []
    for k, step in enumerate(steps):
        if k in before:
            result.append(before[k])
        if k not in dropped:
            result.append(step)
    return result


def _basic_key(index: tuple) -> tuple | None:
    """A setitem key of slices and ints only (a view of the array), with a trailing Ellipsis so that
    an all-int key still gives a 0-d view; None for other keys."""
    if not all(type(e) in (slice, int) for e in index):
        return None
    return (*index, Ellipsis)


def producers_and_writes(steps: list) -> tuple[dict[int, int], dict[int, list[int]]]:
    """Per value number: the position of the step that first computes it, and the positions of the
    later steps that write its memory again (assignments given its buffer)."""
    producer: dict[int, int] = {}
    writes: dict[int, list[int]] = {}
    for k, step in enumerate(steps):
        for v in step.outputs:
            if v in producer:
                writes.setdefault(v, []).append(k)
            else:
                producer[v] = k
    return producer, writes


def _last_reads(steps: list[Step], outputs: list[int]) -> dict[int, int]:
    """value -> position of the last step reading it or a view of it (the value a view step's result
    shares memory with is its root); len(steps) for one that a graph output is or views (the caller's
    copy of a view output is made after the last step, so it reads the memory as the steps left it)."""
    root: dict[int, int] = {}
    last: dict[int, int] = {}
    for k, step in enumerate(steps):
        for v in step.inputs:
            last[root.get(v, v)] = k
        if step.view:
            for v in step.outputs:
                root[v] = root.get(step.inputs[0], step.inputs[0])
    for v in outputs:
        last[root.get(v, v)] = len(steps)
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
