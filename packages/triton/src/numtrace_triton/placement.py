"""Where every value of a graph being planned lives, and the order kernels must run in.

A value is *folded* (known at compile time: constants, shape arithmetic, empty arrays), *in memory* (a
strided view of a buffer: inputs, constants, temporaries, and every movement op that NumPy would answer
with a view), or *in flight* in a group's registers. `Placement` holds those locations, the buffers and
the kernel groups, and the dependencies between groups that reads and writes of buffers create; a
value leaves registers (is stored) only when something outside its group needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numtrace_ir import registry
from numtrace_ir.printer import value_names

from .dtypes import storage_dtype
from .emit_body import Tuning
from .groups import Group, LogicalLoad
from .kernel_plan import Const, Op, Ref, View, c_strides, numel

__all__ = ["NOTHING", "POSITIVE", "BufferSpec", "Loc", "Placement"]

NOTHING = object()
# A copy (np.positive is the identity on every dtype the backend lowers): relayouts and stores.
POSITIVE = registry.get("np.positive")


@dataclass
class BufferSpec:
    """A device buffer of the plan. ``role``: input, const, temp or output (``index`` of the input/output)."""

    nbytes: int
    dtype: np.dtype
    role: str
    index: int | None = None
    data: np.ndarray | None = None
    doc: str = ""

    @property
    def const_data(self) -> np.ndarray:
        """The contents of a const buffer (every const buffer is planned with its data)."""
        if self.data is None:
            raise AssertionError(f"const buffer {self.doc!r} has no data")
        return self.data


@dataclass
class Loc:
    """Where a value is; more than one of folded / mem / group can hold (stored and still in flight)."""

    shape: tuple[int, ...]
    dtype: np.dtype | None
    folded: Any = NOTHING  # a constant folded at plan time: a NumPy array or a Python scalar
    mem: View | None = None
    group: Group | None = None
    key: int = -1
    level: str = "full"
    weak: str | None = None  # kind of a Python scalar (NEP 50 weak operand)

    @property
    def in_flight(self) -> Group:
        """The group computing this value, for a value known to be in flight (in registers)."""
        if self.group is None:
            raise AssertionError(f"value {self.key} of shape {self.shape} is not in flight")
        return self.group

    @property
    def known_dtype(self) -> np.dtype:
        """The dtype of a value known to be an array (only a Python scalar's may be unknown)."""
        if self.dtype is None:
            raise AssertionError(f"value {self.key} of shape {self.shape} has no dtype")
        return self.dtype


class Placement:
    """The planner's state: locations, buffers, groups and their dependencies (see the module doc)."""

    def __init__(self, graph, tuning: Tuning) -> None:
        self.graph = graph
        self.tuning = tuning
        self.names = value_names(graph)  # as the text IR prints them, for error messages
        self.buffers: list[BufferSpec] = []
        self.groups: list[Group] = []
        self.writers: dict[int, list[Group]] = {}  # buffer -> the groups writing it, in write order
        self.locs: dict = {}
        self.types: dict = {}  # value -> its concrete type
        self._key = 0

    # -- bookkeeping ------------------------------------------------------------------------------
    def key(self) -> int:
        self._key += 1
        return self._key

    def buffer(
        self,
        shape: tuple[int, ...],
        dtype: np.dtype,
        role: str,
        index: int | None = None,
        data: np.ndarray | None = None,
        doc: str = "",
    ) -> View:
        sdt = storage_dtype(dtype)
        self.buffers.append(BufferSpec(numel(shape) * sdt.itemsize, sdt, role, index, data, doc))
        return View(len(self.buffers) - 1, np.dtype(dtype), 0, tuple(shape), c_strides(shape))

    def new_group(self, kind: str, numel: int, **kw) -> Group:
        g = Group(len(self.groups), kind, numel, **kw)
        self.groups.append(g)
        return g

    def reaches(self, src: Group, dst: Group) -> bool:
        """Whether ``src`` (transitively) reads something ``dst`` writes."""
        seen, stack = set(), [src.gid]
        while stack:
            gid = stack.pop()
            if gid == dst.gid:
                return True
            if gid not in seen:
                seen.add(gid)
                stack.extend(self.groups[gid].deps)
        return False

    def can_read(self, group: Group, loc: Loc) -> bool:
        """Whether ``group`` may read ``loc`` from memory without creating a cycle of kernels.

        Never a buffer ``group`` writes itself: its programs run unordered, so a load could see the
        element before (or after) another program stores it."""
        if loc.mem is not None:
            writers = self.writers.get(loc.mem.buffer, [])
        elif loc.group is not None:
            writers = [loc.group]
        else:  # a folded constant: it becomes a buffer that only the reading group's kernel follows
            return True
        return not any(self.reaches(w, group) for w in writers)

    def can_write(self, group: Group, view: View) -> bool:
        """Whether ``group`` may write into ``view``'s buffer after its earlier writers without a cycle
        (an earlier writer that already runs after ``group``, such as a copy of a value ``group``
        also wrote elsewhere)."""
        return not any(w is not group and self.reaches(w, group) for w in self.writers.get(view.buffer, []))

    def store(self, group: Group, key: int, view: View, level: str, shape: tuple[int, ...]) -> None:
        """``group`` writes value ``key`` through ``view``, after every earlier writer of that buffer.

        A matmul or reduction kernel addresses memory through its full shape; a view of a relabelled
        value that does not reshape to it (a transposed layout, a slice of a concatenation) is written
        C-contiguously (which always reshapes) and copied into ``view`` by a pointwise kernel."""
        if level == "full" and not group.accepts_load(view, shape):
            temp = self.buffer(shape, view.dtype, "temp", doc=f"temporary {view.dtype}{list(shape)}")
            self._record_store(group, key, temp, level, shape)
            copy = self.new_group("pointwise", numel(shape))
            arg = self.read(copy, Loc(shape, view.dtype, mem=temp), shape, "relayout")
            copy_key = self.key()
            copy.items.append(Op(copy_key, POSITIVE, [arg], {}, view.dtype, "relayout"))
            group = copy
            key = copy_key
        self._record_store(group, key, view, level, shape)

    def fill(self, view: View, value: bool | int | float, label: str) -> Group:
        """A pointwise kernel group that writes ``value`` into every element of ``view`` (a kernel, so the
        fill runs on the device in launch order, per call)."""
        group = self.new_group("pointwise", numel(view.shape))
        key = self.key()
        group.items.append(Op(key, POSITIVE, [Const(value, view.dtype)], {}, view.dtype, label))
        self.store(group, key, view, "full", view.shape)
        return group

    def _record_store(self, group: Group, key: int, view: View, level: str, shape: tuple[int, ...]) -> None:
        writers = self.writers.setdefault(view.buffer, [])
        for w in writers:
            if w is not group:
                group.deps.add(w.gid)
        group.stores.append((key, view, level, shape))
        if group not in writers:
            writers.append(group)

    def depend(self, group: Group, view: View) -> None:
        """``group`` reads ``view``: it runs after every writer of the buffer."""
        for w in self.writers.get(view.buffer, []):
            if w is not group:
                group.deps.add(w.gid)

    # -- materialization --------------------------------------------------------------------------
    def materialize(self, loc: Loc, label: str) -> View:
        """``loc`` in memory: folded arrays become constant buffers, in-flight values get stored."""
        if loc.mem is not None:
            return loc.mem
        if loc.folded is not NOTHING:
            data = np.ascontiguousarray(np.asarray(loc.folded, dtype=loc.dtype))
            view = self.buffer(
                loc.shape,
                data.dtype,  # a Python scalar (no dtype of its own) stored at NumPy's default for it
                "const",
                data=data.astype(storage_dtype(data.dtype)),
                doc=f"constant {loc.dtype}{list(loc.shape)}",
            )
        else:
            group = loc.in_flight
            doc = f"temporary {loc.dtype}{list(loc.shape)}"
            view = self.buffer(loc.shape, loc.known_dtype, "temp", doc=doc)
            self.store(group, loc.key, view, loc.level, loc.shape)
        loc.mem = view
        return view

    def read(self, group: Group, loc: Loc, at: tuple[int, ...], label: str) -> LogicalLoad | Const | Ref:
        """An argument for an op in ``group`` whose output shape is ``at``."""
        if loc.group is group and loc.folded is NOTHING:
            return Ref(loc.key)
        if loc.folded is not NOTHING and np.ndim(loc.folded) == 0:
            value = np.asarray(loc.folded)  # a Python scalar takes its default dtype unless NEP 50 says else
            return Const(value.item(), loc.dtype if loc.dtype is not None else value.dtype)
        view = self.materialize(loc, label)
        self.depend(group, view)
        return LogicalLoad(view, at)

