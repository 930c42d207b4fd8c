"""Host steps: the nodes a plan runs between kernels, on the host, on copies of device buffers.

A host call (``prim.host_call``: a NumPy function the registry lacks), a guard on array data
(``prim.guard`` of a traced value), a check of dead code that its data decides (``prim.check``) and
a node feeding such a guard whose kernel is only within ulps of
NumPy (`numtrace_ir.exactness.guard_reference_nodes`: the guard must see NumPy's own bits, so NumPy
computes it) split the kernel plan: the kernels writing their inputs run
first, the inputs are copied to host NumPy arrays, the node runs as the other backends run it
(`numtrace_ir.interpreter.reference_call`: the host function resolved once per executable, the
guard compared by the op's own check), and a host call's results are uploaded as fresh buffers that
the later kernels read. In the interpreter the copies are host-to-host; on a GPU they are the
allocator's transfers, and a download waits for the kernels before it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numtrace_ir.errors import execution_error
from numtrace_ir.fp_errors import node_errstate
from numtrace_ir.guards import GuardError
from numtrace_ir.interpreter import at_location, reference_call
from numtrace_ir.types import ScalarType, TensorType

from .device_memory import DeviceAllocator, DeviceBuffer
from .dtypes import storage_dtype
from .kernel_plan import View, c_strides, numel
from .placement import NOTHING, BufferSpec, Loc, Placement

__all__ = ["HostInput", "HostRunner", "HostStep", "plan_host_step"]


@dataclass
class HostInput:
    """One input of a host step: a view of a buffer copied back per run, or a value known at plan time."""

    view: View | None = None
    value: Any = None
    scalar: bool = False  # a Python scalar input: passed as one, not as a 0-d array


@dataclass
class HostStep:
    """A node run on the host after the plan's first ``after`` kernels; ``outputs``: the buffer each
    result is uploaded as (None: an empty result, nothing to upload)."""

    node: Any
    inputs: list[HostInput]
    outputs: list[int | None]
    after: int = 0
    why: str | None = None  # for a registry op run here: why the backend does not lower it
    label: str = ""  # the node as errors name it (op, node, source line)

    @property
    def description(self) -> str:
        """One line for `explain`."""
        if self.node.op == "prim.host_call":
            return f"host call: {self.node.attrs['func']} (runs on the host: copies in and out)"
        if self.node.op == "prim.guard":
            what = self.node.attrs.get("what") or "the guarded value"
            return f"guard: {what} (read back to the host and compared, every run)"
        if self.node.op == "prim.check":
            return (f"check: {self.node.attrs['op']} of dead code, run by NumPy on the host (copies in): "
                    "its data decides whether NumPy raises")
        return f"host step: {self.label} runs NumPy on the host (copies in and out): {self.why}"


def _host_storage(dtype: np.dtype) -> np.dtype:
    """The dtype a host-written buffer holds: a kernel's storage dtype, or the value's own for dtypes
    only host steps and outputs carry (complex results of np.fft)."""
    try:
        return storage_dtype(dtype)
    except NotImplementedError:
        return np.dtype(dtype)


def plan_host_step(planner: Placement, node: Any, label: str, why: str | None = None) -> HostStep:
    """Place ``node`` as a host step: a group of kind ``host`` (no kernel) that runs after the writers
    of its inputs and is the only writer of its outputs' buffers, so fusion never crosses it."""
    group = planner.new_group("host", 0)
    inputs = []
    for v in node.inputs:
        loc: Loc = planner.locs[v]
        scalar = isinstance(v.type, ScalarType)
        if loc.folded is not NOTHING:
            inputs.append(HostInput(value=loc.folded, scalar=scalar))
            continue
        view = planner.materialize(loc, label)
        planner.depend(group, view)
        inputs.append(HostInput(view=view, scalar=scalar))
    outputs: list[int | None] = []
    for v in node.outputs:
        t = planner.types.get(v, v.type)
        if not isinstance(t, TensorType):  # a guard's True: a run that continues has it
            planner.locs[v] = Loc((), None, folded=True, weak="bool")
            continue
        if not t.is_concrete:  # no buffer can be planned for it: the whole graph runs on the host
            raise NotImplementedError(f"{label}: its output shape depends on values known only at run time")
        shape = tuple(t.shape)
        planner.types[v] = TensorType(t.dtype, shape)
        if numel(shape) == 0:
            planner.locs[v] = Loc(shape, t.dtype, folded=np.empty(shape, t.dtype))
            outputs.append(None)
            continue
        sdt = _host_storage(t.dtype)
        planner.buffers.append(BufferSpec(numel(shape) * sdt.itemsize, sdt, "temp",
                                          doc=f"result of {node.attrs.get('func', node.op)} {t}"))
        b = len(planner.buffers) - 1
        planner.writers[b] = [group]
        planner.locs[v] = Loc(shape, np.dtype(t.dtype), mem=View(b, np.dtype(t.dtype), 0, shape,
                                                                 c_strides(shape)))
        outputs.append(b)
    return HostStep(node, inputs, outputs, why=why, label=label)


class HostRunner:
    """Runs one host step of an executable: the node's call prepared once, per run the copies."""

    def __init__(self, step: HostStep, buffers: list[BufferSpec]) -> None:
        self.step = step
        fn, self.attrs = reference_call(step.node)
        self.fn = at_location(fn, step.node)   # NumPy warns at the user's line, as on the other backends
        self.errstate = node_errstate(step.node)   # the traced function's own np.errstate around the op
        self._buffers = buffers

    def __call__(self, allocator: DeviceAllocator, bufs: dict[int, DeviceBuffer]) -> None:
        args = [self._fetch(i, allocator, bufs) for i in self.step.inputs]
        try:
            if self.errstate is None:
                result = self.fn(*args, **self.attrs)
            else:
                with np.errstate(**self.errstate):
                    result = self.fn(*args, **self.attrs)
        except GuardError:
            raise
        except Exception as exc:
            raise execution_error(self.step.node, exc) from exc
        if self.step.node.op in ("prim.guard", "prim.check"):   # a check: NumPy's call did not raise
            return
        results = result if len(self.step.node.outputs) != 1 else (result,)
        for b, r in zip(self.step.outputs, results):
            if b is not None:
                data = np.ascontiguousarray(r)
                bufs[b] = allocator.upload(data.view(self._buffers[b].dtype))

    def _fetch(self, inp: HostInput, allocator: DeviceAllocator, bufs: dict[int, DeviceBuffer]) -> Any:
        view = inp.view
        if view is None:
            return inp.value
        spec = self._buffers[view.buffer]
        flat = np.empty(spec.nbytes // spec.dtype.itemsize, spec.dtype)
        allocator.download(bufs[view.buffer], flat)
        flat = flat.view(view.dtype)
        item = flat.itemsize
        # The view's own layout over this run's private copy: NumPy's loops for strided and contiguous
        # operands may differ in the last bit, and a guard fed by the node compares NumPy's bits.
        array = np.lib.stride_tricks.as_strided(flat[view.offset:], view.shape,
                                                tuple(s * item for s in view.strides), writeable=False)
        return array.item() if inp.scalar else array
