"""From a specialized graph to kernels. `plan_graph` walks the nodes in program order and lowers each
by the rule of its op's kind (`lowering_rules`), which places its values (`placement`: folded, in
memory, or in flight in a kernel group); then it emits one kernel per group. The result, a `Plan`, is
what an executable runs: the buffers, the kernels in a valid order, and where inputs and outputs live.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numtrace_ir import registry
from numtrace_ir.errors import location
from numtrace_ir.exactness import guard_reference_nodes
from numtrace_ir.types import ScalarType, TensorType

from .coverage import HOST_OPS, unlowered_reason
from .dtypes import check_supported
from .emit_body import GeneratedKernel, Tuning
from .emit_matmul import emit_matmul
from .emit_pointwise import emit_pointwise
from .emit_reduction import emit_reduction
from .gathers import EFFECTS, GATHER_OPS
from .groups import Group
from .host_steps import HostStep, plan_host_step
from .kernel_plan import MatmulKernel, Op, PointwiseKernel, c_strides, numel, op_name
from .lowering_rules import RULES, LoweringRules
from .placement import NOTHING, POSITIVE, BufferSpec, Loc

__all__ = ["BufferSpec", "OutputSpec", "Plan", "describe_node", "plan_graph"]


@dataclass
class OutputSpec:
    """A graph output: a buffer viewed C-contiguously, or a value folded at compile time."""

    dtype: np.dtype | None
    shape: tuple[int, ...]
    buffer: int | None = None
    folded: object = None


@dataclass
class Plan:
    """Everything needed to run a graph: its buffers, its kernels (in an order that respects every
    dependency), the buffer of each input (None: empty, never read) and each output."""

    buffers: list[BufferSpec]
    kernels: list[GeneratedKernel]
    inputs: list[int | None]
    outputs: list[OutputSpec]
    input_types: list = field(default_factory=list)
    # Nodes run on the host between kernels (host calls, guards on data), each after its `after` kernels.
    host_steps: list[HostStep] = field(default_factory=list)


def describe_node(node, names: dict | None = None) -> str:
    """``np.tanh (node %h traced at model.py:12)`` for error messages: outputs as the text IR prints them
    (``names``, from ``value_names``), else the named ones only."""
    if names is not None:
        outputs = ", ".join(f"%{names[v]}" for v in node.outputs if v in names)
    else:
        outputs = ", ".join(f"%{v.name}" for v in node.outputs if v.name)
    where = location(node)
    # String attrs name what a generic op stands for (``np.ufunc[ufunc=scipy.special.expit]``).
    named = ", ".join(f"{k}={v}" for k, v in node.attrs.items() if isinstance(v, str) and len(v) < 80)
    node_part = f"node {outputs} " if outputs else ""
    return f"{node.op}{'[' + named + ']' if named else ''} ({node_part}{where})"


class _Planner(LoweringRules):
    """Walks the graph: every node by its kind's rule, then every group into a kernel."""

    # -- driver -----------------------------------------------------------------------------------------
    def run(self, by_reference: set | None = None) -> Plan:
        self.host_steps: dict[int, HostStep] = {}  # by the gid of its host group
        self.ordered_host_steps: list[HostStep] = []
        # Nodes feeding a guard on data whose kernels are only within ulps of NumPy: host steps, so
        # that the guard sees NumPy's own value (``by_reference``: more such nodes, by id, whose guard
        # is in a later part of a staged graph).
        self.by_reference = guard_reference_nodes(self.graph) | (by_reference or set())
        inputs: list[int | None] = []
        for i, v in enumerate(self.graph.inputs):
            t = v.type
            if isinstance(t, ScalarType):
                dtype = {
                    "int": np.dtype(np.int64),
                    "float": np.dtype(np.float64),
                    "bool": np.dtype(bool),
                }.get(t.kind)
                if dtype is None:
                    raise NotImplementedError(
                        f"input {i}: Python {t.kind} scalars are not supported by the Triton backend"
                    )
                view = self.buffer((), dtype, "input", i, doc=f"input {i} ({v.name}): Python {t.kind}")
                self.locs[v] = Loc((), dtype, mem=view, weak=t.kind)
                inputs.append(view.buffer)
                continue
            check_supported(t.dtype, f"input {i} ({v.name})")
            if numel(t.shape) == 0:
                self.locs[v] = Loc(t.shape, t.dtype, folded=np.empty(t.shape, t.dtype))
                inputs.append(None)
                continue
            view = self.buffer(t.shape, t.dtype, "input", i, doc=f"input {i} ({v.name}) {t}")
            self.locs[v] = Loc(t.shape, t.dtype, mem=view)
            inputs.append(view.buffer)
        for node in self.graph.nodes:
            self.node(node)
        outputs = [self.output(j, v) for j, v in enumerate(self.graph.outputs)]
        kernels = self.emit()
        return Plan(self.buffers, kernels, inputs, outputs, [v.type for v in self.graph.inputs],
                    self.ordered_host_steps)

    def node(self, node) -> None:
        label = describe_node(node, self.names)
        op = registry.get(node.op)
        locs = [self.locs[v] for v in node.inputs]
        if node.op == "prim.Constant":
            self.fold_values(node, [node.attrs["value"]])
            return
        unfolded = any(loc.folded is NOTHING for loc in locs)
        if id(node) in self.by_reference and unfolded:
            gid = len(self.groups)  # the host group plan_host_step makes
            self.host_steps[gid] = plan_host_step(
                self, node, label, "it feeds a guard on data, which needs NumPy's own bits")
            return
        if (node.op in HOST_OPS and unfolded) or unlowered_reason(op) is not None and (
            unfolded or op.nondeterministic
        ):
            self.host_step(node, op, label)
            return
        if all(loc.folded is not NOTHING for loc in locs):
            self.fold(node, [loc.folded for loc in locs])
            return
        shape_only = op.kind in ("prim", "scalar") and all(
            isinstance(v.type, ScalarType) for v in node.outputs
        )
        if shape_only or (op.kind == "creation" and all(loc.folded is not NOTHING for loc in locs[1:])):
            # Shape arithmetic and *_like creation: only shapes matter, and they are concrete now.
            self.fold(node, [loc.folded if loc.folded is not NOTHING else _shape_only(loc) for loc in locs])
            return
        self.infer_types(node, op, locs, label)
        types = [self.types[v] for v in node.outputs]
        if all(isinstance(t, TensorType) and t.is_concrete and numel(t.shape) == 0 for t in types):
            if _reads_an_index(node, locs):  # nothing to compute, but NumPy checks the index
                self.host_step(node, op, label)
                return
            for v, t in zip(node.outputs, types):  # nothing to compute
                self.locs[v] = Loc(t.shape, t.dtype, folded=np.empty(t.shape, t.dtype))
            return
        rule = RULES.get(op.kind)
        if rule is None:
            self.host_step(node, op, label)
            return
        try:
            getattr(self, rule)(node, label)
        except NotImplementedError as exc:  # a variant the rule does not lower (PARTIAL, dtypes)
            self.host_step(node, op, label, str(exc))

    def host_step(self, node, op, label: str, why: str | None = None) -> None:
        """Run ``node`` on the host between kernels, as the other backends run it (`host_steps`).

        A random draw runs there too: on NumPy's own generator, so its stream is NumPy's. Refused only
        where a host step cannot carry the node: a Python scalar result computed at run time, or an
        input of a dtype Triton has no buffer for (reported by the planner's input checks)."""
        if node.op not in HOST_OPS and not all(isinstance(v.type, TensorType) for v in node.outputs):
            raise NotImplementedError(
                f"{label}: {why or unlowered_reason(op)}; its Python scalar result cannot run as a host step"
            )
        if node.op not in HOST_OPS and any(v not in self.types for v in node.outputs):
            self.infer_types(node, op, [self.locs[v] for v in node.inputs], label)
        gid = len(self.groups)  # the host group plan_host_step makes
        self.host_steps[gid] = plan_host_step(self, node, label, why or unlowered_reason(op))

    def infer_types(self, node, op, locs: list[Loc], label: str) -> None:
        """Concrete output types: the specialized graph's, or re-inferred from the planned input shapes
        (a shape computed from traced dims is symbolic in the graph but known here)."""
        types = [v.type for v in node.outputs]
        if any(isinstance(t, TensorType) and not t.is_concrete for t in types):
            ins = [ScalarType(loc.weak) if loc.weak else TensorType(loc.dtype, loc.shape) for loc in locs]
            types = list(op.infer(ins, node.attrs))
            if (
                any(isinstance(t, TensorType) and not t.is_concrete for t in types)
                and op.as_view is None
            ):
                raise NotImplementedError(
                    f"{label}: its output shape depends on runtime values; the Triton "
                    "backend plans kernels for concrete shapes only"
                )
        self.types.update(zip(node.outputs, types))

    def fold_values(self, node, values) -> None:
        """The node's outputs are known now: ``values``, one per output."""
        for v, r in zip(node.outputs, values):
            t = v.type
            if isinstance(t, TensorType):  # the shape from the value: the graph's may be symbolic
                r = np.asarray(r, dtype=t.dtype)
                self.locs[v] = Loc(r.shape, t.dtype, folded=r)
                self.types[v] = TensorType(t.dtype, r.shape)
            else:
                self.locs[v] = Loc((), None, folded=r, weak=t.kind)

    def output(self, j: int, v) -> OutputSpec:
        loc = self.locs[v]
        t = self.types.get(v, v.type)
        if loc.folded is not NOTHING:
            return OutputSpec(getattr(t, "dtype", None), getattr(t, "shape", ()), folded=loc.folded)
        if isinstance(t, ScalarType):
            raise NotImplementedError(
                f"output {j}: a runtime Python scalar output is not supported by the Triton backend"
            )
        doc = f"output {j} {t}"
        mem = loc.mem
        if (
            mem is not None
            and self.buffers[mem.buffer].role == "temp"
            and mem.offset == 0
            and mem.strides == c_strides(mem.shape)
            and self.buffers[mem.buffer].nbytes == numel(mem.shape) * np.dtype(mem.dtype).itemsize
        ):
            spec = self.buffers[mem.buffer]
            spec.role, spec.index, spec.doc = "output", j, doc
            return OutputSpec(t.dtype, t.shape, buffer=mem.buffer)
        if loc.group is not None and (mem is None or self.writers.get(mem.buffer) == [loc.group]):
            # Still computed by its group: that kernel also stores it, C-contiguous, as the output.
            view = self.buffer(t.shape, t.dtype, "output", j, doc=doc)
            self.store(loc.group, loc.key, view, loc.level, loc.shape)
            loc.mem = loc.mem or view
            return OutputSpec(t.dtype, t.shape, buffer=view.buffer)
        # An input, a constant, a view, or a buffer already returned: copy into a fresh output.
        group = self.new_group("pointwise", numel(t.shape))
        arg = self.read(group, loc, t.shape, f"output {j}")
        key = self.key()
        group.items.append(Op(key, POSITIVE, [arg], {}, t.dtype, f"output {j}"))
        view = self.buffer(t.shape, t.dtype, "output", j, doc=doc)
        self.store(group, key, view, "full", t.shape)
        return OutputSpec(t.dtype, t.shape, buffer=view.buffer)

    def emit(self) -> list[GeneratedKernel]:
        order: list[Group] = []
        state: dict[int, int] = {}

        def visit(g: Group) -> None:
            if state.get(g.gid) == 2:
                return
            if state.get(g.gid) == 1:
                raise AssertionError("kernel dependency cycle")
            state[g.gid] = 1
            for d in sorted(g.deps):
                visit(self.groups[d])
            state[g.gid] = 2
            order.append(g)

        for g in self.groups:
            visit(g)
        kernels: list[GeneratedKernel] = []
        emitters: dict[type, Callable[..., GeneratedKernel]] = {PointwiseKernel: emit_pointwise,
                                                                MatmulKernel: emit_matmul}
        for g in order:
            if g.gid in self.host_steps:
                step = self.host_steps[g.gid]
                step.after = len(kernels)
                self.ordered_host_steps.append(step)
                continue
            effects = any(getattr(item.op, "name", None) in EFFECTS for item in g.items)
            if (not g.stores and not effects) or g.numel == 0:
                continue
            kernel = g.finish()
            name = "_".join(filter(None, (g.kind, str(len(kernels)), _summary(g))))
            emit = emitters.get(type(kernel), emit_reduction)
            kernels.append(emit(kernel, name, self.tuning, lambda b: self.buffers[b].doc))
        return kernels


def _summary(group: Group) -> str:
    """A few op names for the kernel's name, so listings read ``pointwise_0_add_tanh``."""
    names = []
    for item in group.items:
        op = op_name(item.op).split(".")[-1] if isinstance(item, Op) else item.op
        if op not in names and op not in ("astype", "positive"):
            names.append(op)
    text = "_".join(names[:3]) or ("" if group.kind == "matmul" else "copy")
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text)


def _shape_only(loc: Loc) -> np.ndarray:
    """A stand-in array with ``loc``'s shape and dtype whose elements are never read."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, loc.dtype), loc.shape, (0,) * len(loc.shape))


def plan_graph(graph, tuning: Tuning, by_reference: set | None = None) -> Plan:
    """Plan a graph whose input types are concrete (see ``numtrace_ir.specialize``); ``by_reference``:
    nodes (by id) to run by their NumPy reference besides those feeding the graph's own data guards."""
    return _Planner(graph, tuning).run(by_reference)


_INDEXING_OPS = GATHER_OPS | {"np.getitem", "np.setitem", "np.ufunc.at"}


def _reads_an_index(node, locs: list[Loc]) -> bool:
    """Whether ``node`` indexes with a non-empty integer array: even with an empty result NumPy raises
    IndexError for an index out of range, so the node runs where that check happens."""
    return node.op in _INDEXING_OPS and any(
        loc.dtype is not None and loc.dtype.kind in "iu" and loc.shape is not None and numel(loc.shape) > 0
        for loc in locs
    )
