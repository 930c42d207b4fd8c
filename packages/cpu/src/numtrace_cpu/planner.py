"""Buffer planning: where every value of an executable lives, and which buffers are reused.

Each tensor value a step computes gets a slot in an arena unless it is a graph output (written
straight into the caller's fresh array). A slot is released after the last step that reads its
value and handed to the next value that fits (best fit, growing the largest free slot otherwise),
so peak memory follows liveness rather than graph size. A slot is never handed out during the step
that frees it: a step's outputs never alias its inputs.

Updates (the new contents of an input the caller writes back, as after ``x += g``) may instead be
computed straight into that input's memory: see `write_updates_in_place`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numtrace_ir.types import TensorType

from numtrace_cpu.steps import FusedStep

__all__ = ["BufferPlan", "plan_buffers", "write_updates_in_place"]


@dataclass
class BufferPlan:
    """`slot_of[value] = slot index`, `slot_bytes[slot]` the capacity of each slot; `output_values` the
    graph's outputs and `copied_outputs[j]` whether output j must be copied (it is an input, a constant,
    a repeat, or a value no step writes into the output buffer); `in_place_outputs` the positions of
    outputs computed into their input's memory (the output is the input array itself)."""

    slot_of: dict
    slot_bytes: list
    output_values: list
    copied_outputs: list
    in_place_outputs: frozenset = frozenset()


def write_updates_in_place(steps: list, n_inputs: int, outputs: list[int], updates: dict[int, int],
                           after: int = 0) -> dict:
    """Make the steps write output `j` into input `updates[j]`'s memory where that is safe, renaming the
    output value to the input's number in `steps` and `outputs` (both edited); returns the applied
    ``{j: input}``. Safe: a fused pass computes the output and may overwrite that input
    (`FusedStep.overwritable`), the output is not among the inputs' own values, and no later step (or
    graph output) reads the input or a view of it, so nothing sees its old contents after the pass;
    and the pass is step `after` or a later one (the steps before it may raise, leaving the input as is).
    """
    root: dict[int, int] = {}
    for step in steps:
        if step.view:
            for v in step.outputs:
                root[v] = root.get(step.inputs[0], step.inputs[0])
    producer = {v: k for k, step in enumerate(steps) for v in step.outputs}
    applied: dict[int, int] = {}
    for j, i in updates.items():
        v = outputs[j]
        k = producer.get(v)
        if (v < n_inputs or k is None or k < after or not isinstance(steps[k], FusedStep)
                or (i, v) not in steps[k].overwritable or i in outputs
                or any(root.get(w, w) == i for w in outputs)
                or any(root.get(w, w) == i for step in steps[k + 1:] for w in step.inputs)
                or any(root.get(w) == i for w in steps[k].inputs)):
            continue
        for step in steps[k:]:
            step.inputs[:] = [i if w == v else w for w in step.inputs]
        steps[k].outputs[:] = [i if w == v else w for w in steps[k].outputs]
        outputs[:] = [i if w == v else w for w in outputs]
        applied[j] = i
    return applied


def plan_buffers(steps: list, types: dict, n_inputs: int, outputs: list[int], constants: set,
                 in_place: frozenset = frozenset()) -> BufferPlan:
    """Assign slots to the steps' tensor values. `types[value]` is its IR type; `outputs` the graph's
    output values in order; `constants` the values held by the executable. A step with `view` set
    may return views of its first input: its outputs get no slot, and every read of them counts as
    a read of the value whose memory they share (their root), which keeps that buffer alive.
    `in_place`: positions of outputs that `write_updates_in_place` moved into their input's memory.
    A step with `opens_input` set (a view of a join's result that a pass fills) is where its input
    gets its slot: the first step to touch it."""
    root: dict[int, int] = {}
    last_use: dict[int, int] = {}
    for i, step in enumerate(steps):
        for v in step.inputs:
            last_use[root.get(v, v)] = i
        if step.view:
            for v in step.outputs:
                root[v] = root.get(step.inputs[0], step.inputs[0])
    for v in outputs:   # the caller gets a copy of a view, made after the last step
        if v in root:
            last_use[root[v]] = len(steps)
    seen: set = set()
    copied = []
    direct: set = set()
    for v in outputs:
        produced = v >= n_inputs and v not in constants and v not in root
        copied.append(not produced or v in seen)
        if produced and v not in seen:
            direct.add(v)
        seen.add(v)
    slot_of: dict[int, int] = {}
    slot_bytes: list[int] = []
    free: list[int] = []
    released: set = set()
    for i, step in enumerate(steps):
        for v in ([step.inputs[0], *step.outputs] if step.opens_input else step.outputs):
            t = types[v]
            if (v < n_inputs or v in direct or v in constants or v in root or v in slot_of
                    or not isinstance(t, TensorType) or not t.is_concrete):
                continue   # (< n_inputs: an update written in place; in slot_of: an in-place setitem)
            slot_of[v] = _take(free, slot_bytes, _nbytes(t))
        for v in set(step.inputs) | set(step.outputs):
            r = root.get(v, v)
            if r in slot_of and r not in released and last_use.get(r, i) <= i:
                released.add(r)
                free.append(slot_of[r])
    for j in in_place:
        copied[j] = False
    return BufferPlan(slot_of, slot_bytes, list(outputs), copied, frozenset(in_place))


def _nbytes(t: TensorType) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize


def _take(free: list[int], slot_bytes: list[int], size: int) -> int:
    """A free slot for `size` bytes: the smallest that fits, else the largest grown, else a new one."""
    fitting = [s for s in free if slot_bytes[s] >= size]
    if fitting:
        best = min(fitting, key=lambda s: slot_bytes[s])
    elif free:
        best = max(free, key=lambda s: slot_bytes[s])
        slot_bytes[best] = size
    else:
        slot_bytes.append(size)
        return len(slot_bytes) - 1
    free.remove(best)
    return best
