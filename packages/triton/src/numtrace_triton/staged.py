"""A graph with boolean-mask reads, run in stages on the device.

A mask read's length is known only once the mask is: no single kernel plan can size its buffers. The
graph is split where the lengths are needed (`split_at_masks`):

* the prefix: every node that does not depend on a mask read, planned and run as one kernel plan;
* the stage: the mask reads whose inputs the prefix computes, each a prefix-sum compaction
  (`compaction`); their counts come back to the host in one small copy per call;
* the rest: a graph over the values the prefix and the stage left on the device, specialized to the
  counts and compiled once per distinct set of counts (cached), by the backend's own compile, so a
  mask read that depends on another one is a further stage.

Nothing but the counts crosses to the host, except for a mask read whose key the compaction does not
take (slices or integer arrays beside the mask), which runs NumPy's indexing on the host in its stage.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numtrace_ir import registry
from numtrace_ir.exactness import guard_reference_nodes
from numtrace_ir.graph import Graph
from numtrace_ir.types import ScalarType, TensorType

from .compaction import MaskRead, plan_mask_read, storage_of
from .device_memory import DeviceAllocator, DeviceBuffer
from .emit_body import Tuning
from .executable import TritonExecutable, kernel_info, launch_kernels
from .host_graph import HostGraphExecutable
from .planner import describe_node, plan_graph

__all__ = ["Split", "StagedExecutable", "split_at_masks"]

# How a Python scalar input is stored on the device (`planner`: its input buffers).
_SCALAR_STORAGE = {"int": np.dtype(np.int64), "float": np.dtype(np.float64), "bool": np.dtype(bool)}


@dataclass
class Split:
    """The parts of a graph around its first stage of mask reads (see the module doc)."""

    prefix: list[Any]  # nodes, in program order
    reads: list[Any]  # the stage's np.getitem_mask nodes
    rest: list[Any]  # nodes after the stage
    carried: list[Any]  # prefix values (not graph inputs) the stage or the rest read, or graph outputs
    rest_inputs: list[Any]  # values the rest reads (graph inputs, carried values, read results)


def _is_mask_read(node: Any) -> bool:
    return node.op == "np.getitem_mask" and not all(
        isinstance(v.type, TensorType) and v.type.is_concrete for v in node.outputs)


def split_at_masks(graph: Graph) -> Split | None:
    """The split of ``graph`` (specialized) at its first mask reads; None when it has none."""
    if not any(_is_mask_read(node) for node in graph.nodes):
        return None
    late: set = set()  # values that depend on a mask read of this stage
    prefix: list = []
    reads: list = []
    rest: list = []
    for node in graph.nodes:
        depends = any(v in late for v in node.inputs)
        if not depends and _is_mask_read(node):
            reads.append(node)
        elif depends or (reads and registry.get(node.op).nondeterministic):
            rest.append(node)  # a draw stays after the draws before it: NumPy's stream order
        else:
            prefix.append(node)
            continue
        late.update(node.outputs)
    # Constants the rest reads are copied into it, not passed: a folded value lowers as a constant.
    used_later = {v for node in rest for v in node.inputs} | set(graph.outputs)
    rest = [n for n in prefix if n.op == "prim.Constant" and n.outputs[0] in used_later] + rest
    made_early = {v for node in prefix for v in node.outputs}
    made_late = {v for node in rest for v in node.outputs}
    wanted = [v for node in reads for v in node.inputs]
    wanted += [v for node in rest for v in node.inputs if v not in made_late]
    wanted += [v for v in graph.outputs if v not in made_late]
    carried = list(dict.fromkeys(v for v in wanted if v in made_early))
    needed = {v for node in rest for v in node.inputs} | set(graph.outputs)
    read_outputs = [v for node in reads for v in node.outputs]
    rest_inputs = list(dict.fromkeys(
        v for v in [*graph.inputs, *carried, *read_outputs] if v in needed and v not in made_late))
    return Split(prefix, reads, rest, carried, rest_inputs)


def _subgraph(inputs: list, types: list, nodes: list, outputs: list, copies: dict | None = None) -> Graph:
    """A graph of copies of ``nodes`` over new inputs standing for ``inputs`` (of ``types``);
    ``copies`` gets each copy by the id of its node."""
    g = Graph()
    env = {v: g.add_input(v.name, t) for v, t in zip(inputs, types)}
    for node in nodes:
        new = g.create_node(node.op, [env[v] for v in node.inputs], dict(node.attrs), node.loc,
                            [v.type for v in node.outputs])
        if copies is not None:
            copies[id(node)] = new
        for old, v in zip(node.outputs, new.outputs):
            env[old] = v
            v.name = old.name
    g.set_outputs([env[v] for v in outputs])
    return g


def _type_of(spec: Any, value: Any) -> Any:
    """A prefix output's concrete type (its plan's `OutputSpec`)."""
    if spec.dtype is None:
        return value.type if isinstance(value.type, ScalarType) else ScalarType("float")
    return TensorType(spec.dtype, tuple(spec.shape))


class StagedExecutable:
    """A graph run as prefix, mask-read stage and rest (see the module doc); ``compile_rest(graph, types)``
    compiles the rest for one set of counts."""

    def __init__(self, graph: Graph, split: Split, input_types: list, tuning: Tuning,
                 allocator: DeviceAllocator, compile_rest: Callable[[Graph, list], Any]) -> None:
        self.graph = graph
        self.split = split
        self.input_types = list(input_types)
        self.allocator = allocator
        self._compile_rest = compile_rest
        copies: dict = {}
        prefix = _subgraph(list(graph.inputs), self.input_types, split.prefix, split.carried, copies)
        # A guard on data after the reads still needs NumPy's own bits from the prefix nodes it reads.
        by_reference = {id(copies[key]) for key in guard_reference_nodes(graph) if key in copies}
        self.prefix = TritonExecutable(plan_graph(prefix, tuning, by_reference), allocator)
        self._types = dict(zip(graph.inputs, self.input_types))
        for v, spec in zip(split.carried, self.prefix.plan.outputs):
            self._types[v] = _type_of(spec, v)
        self.reads: list[MaskRead] = []
        for node in split.reads:
            slot = sum(r.counts for r in self.reads)
            shapes = [tuple(self._types[v].shape) for v in node.inputs[:2]]
            read = plan_mask_read(node, shapes, slot, f"mask_{len(self.reads)}", tuning)
            twin = next((r for r in self.reads if r.counts and read.kernels
                         and r.node.inputs[1] == node.inputs[1]
                         and r.kernels[0].constexprs == read.kernels[0].constexprs), None)
            if twin is not None:  # np.nonzero: one read of the same mask per axis
                read.share(twin)
            self.reads.append(read)
        loaded = {id(k): kernel_info(k) for r in self.reads for k in r.kernels}
        self._fns = {key: fn for key, (fn, _) in loaded.items()}
        self.stage_kernels = [k for r in self.reads for k in r.kernels]
        self.kernels = self.prefix.kernels + tuple(info for _, info in loaded.values())
        self._interpret = self.prefix._interpret
        self._rests: dict[tuple, Any] = {}
        self._last: Any = None
        self._lock = threading.Lock()

    def __call__(self, *inputs: Any, out: tuple | None = None) -> tuple:
        if out is not None and len(out) != len(self.graph.outputs):
            raise TypeError(f"out= needs {len(self.graph.outputs)} arrays, got {len(out)}")
        bound, like = self.prefix.bind(inputs)
        return self.run_bound(bound, like, out)

    def run_bound(self, bound: list, like: object = None, out: tuple | None = None) -> tuple:
        """Run on inputs already in device memory (see `TritonExecutable.bind`)."""
        values: dict = {}
        for v, t, b in zip(self.graph.inputs, self.input_types, bound):
            values[v] = np.empty(t.shape, t.dtype) if b is None else b  # None: an empty input
        bufs = self.prefix.execute(bound)
        for v, spec in zip(self.split.carried, self.prefix.plan.outputs):
            values[v] = bufs[spec.buffer] if spec.buffer is not None else (
                spec.folded if spec.dtype is None else np.asarray(spec.folded, spec.dtype))
        types = dict(self._types)
        self._run_stage(values, types)
        key = tuple(tuple(types[r.node.outputs[0]].shape) for r in self.reads)
        rest = self._rest_for(key, [types[v] for v in self.split.rest_inputs])
        args = [values[v] for v in self.split.rest_inputs]
        if isinstance(rest, HostGraphExecutable):
            return rest(*[self._to_host(a, types[v]) for a, v in zip(args, self.split.rest_inputs)], out=out)
        return rest.run_bound(args, like, out)

    def _run_stage(self, values: dict, types: dict) -> None:
        """Every mask read of the stage: counts, one copy of them to the host, then the writes."""
        def launch(kernels: list, bufs: dict) -> None:
            launch_kernels([(k, self._fns[id(k)]) for k in kernels], self.allocator, bufs, self._interpret)

        slots = sum(r.counts for r in self.reads)
        totals = self.allocator.empty(8 * slots)
        states: list = []
        for r in self.reads:
            twin = None if r.twin is None else states[self.reads.index(r.twin)]
            states.append(r.count(launch, self.allocator, [self._to_device(values[v]) for v in r.node.inputs],
                                  totals, twin) if r.native else None)
        counts = np.zeros(slots, np.int64)
        if slots:
            self.allocator.download(totals, counts)
        for r, state in zip(self.reads, states):
            v = r.node.outputs[0]
            if not r.native:
                result = r.on_host([self._to_host(values[u], types[u]) for u in r.node.inputs])
                values[v], types[v] = result, TensorType(r.dtype, result.shape)
                continue
            total = int(counts[r.slot]) if r.kernels else 0
            values[v] = r.write(launch, self.allocator, state, total) if state else np.empty(
                (total, *r.row), r.dtype)
            types[v] = TensorType(r.dtype, (total, *r.row))

    def _rest_for(self, key: tuple, types: list) -> Any:
        with self._lock:
            rest = self._rests.get(key)
        if rest is None:
            rest = self._compile_rest(
                _subgraph(self.split.rest_inputs, types, self.split.rest, list(self.graph.outputs)), types)
            with self._lock:
                rest = self._rests.setdefault(key, rest)
        self._last = rest
        return rest

    def _to_device(self, value: Any) -> DeviceBuffer | None:
        if value is None or isinstance(value, DeviceBuffer):
            return value
        array = np.ascontiguousarray(value)
        return self.allocator.upload(array.view(storage_of(array.dtype)))

    def _to_host(self, value: Any, t: Any) -> Any:
        if not isinstance(value, DeviceBuffer):
            return value
        store = storage_of(t.dtype) if isinstance(t, TensorType) else _SCALAR_STORAGE[t.kind]
        shape = tuple(t.shape) if isinstance(t, TensorType) else ()
        host = np.empty(shape, store)
        self.allocator.download(value, host)
        return host.view(t.dtype) if isinstance(t, TensorType) else host.item()

    def explain(self) -> str:
        lines = [self.prefix.explain().rstrip("\n"),
                 "  then the boolean-mask reads, each a prefix-sum compaction on the device; their counts "
                 "come back to the host in one copy per call:"]
        for r in self.reads:
            label = describe_node(r.node)
            if not r.native:
                lines.append(f"  mask read on the host (NumPy's indexing, copies in and out): {label}")
                continue
            lines.append(f"  mask read: {label}")
            for k in r.kernels:
                lines.append(f"  kernel: {k.name}, grid {k.grid}")
                lines.extend("      " + line if line.strip() else ""
                             for line in k.source.rstrip().splitlines())
        lines.append(f"  then the rest of the graph, compiled per set of counts ({len(self._rests)} so far)")
        if self._last is not None:
            lines.append("  the last one run:")
            lines.extend("    " + line for line in self._last.explain().rstrip("\n").splitlines())
        return "\n".join(lines) + "\n"

    def stats(self) -> dict:
        stats = dict(self.prefix.stats())
        stats["kernel_names"] = [k.name for k in self.kernels]
        stats["kernels"] = len(self.kernels)
        stats["mask_reads"] = len(self.reads)
        stats["mask_reads_on_host"] = sum(not r.native for r in self.reads)
        stats["rest_plans"] = len(self._rests)
        if self._last is not None:
            last = self._last.stats()
            stats["rest"] = last
        return stats
