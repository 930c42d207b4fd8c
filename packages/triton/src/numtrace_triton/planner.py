"""From a specialized graph to kernels: where every value lives, and which values fuse into which kernel.

A value is *folded* (known at compile time: constants, shape arithmetic, empty
arrays), *in memory* (a strided view of a buffer: inputs, constants,
temporaries, and every movement op that NumPy would answer with a view), or
*in flight* in a group's registers. Walking the nodes in order, an
elementwise node joins the group of an in-flight input when it fits that
group's index space and no cycle between kernels results; a reduction takes
its input's pointwise group along as its prologue; a matmul starts a group
that its elementwise consumers join as the epilogue. A value leaves
registers (is stored) only when something outside its group needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numtrace_ir import registry
from numtrace_ir.types import ScalarType, TensorType

from .coverage import CONTRACTIONS, FOLDED_KINDS, REDUCTIONS, UNLOWERED, VIEW_OPS
from .dtypes import check_supported, storage_dtype
from .elementwise import LOWERINGS
from .emit_body import GeneratedKernel, Tuning
from .emit_matmul import emit_matmul
from .emit_pointwise import emit_pointwise
from .emit_reduction import emit_reduction
from .groups import Group, LogicalLoad, broadcast_strides
from .kernel_plan import Const, MatmulKernel, Op, PointwiseKernel, Reduce, Ref, View
from .movement import SAME_VALUE, VIEW_RULES

__all__ = ["BufferSpec", "OutputSpec", "Plan", "plan_graph"]

_NOTHING = object()
_WEAK_EXAMPLE = {"int": 1, "float": 1.0, "bool": True, "complex": 1j}


@dataclass
class BufferSpec:
    """A device buffer of the plan. ``role``: input, const, temp or output (``index`` of the input/output)."""

    nbytes: int
    dtype: np.dtype
    role: str
    index: int | None = None
    data: np.ndarray | None = None
    doc: str = ""


@dataclass
class OutputSpec:
    """A graph output: a buffer viewed C-contiguously, or a value folded at compile time."""

    dtype: np.dtype | None
    shape: tuple[int, ...]
    buffer: int | None = None
    folded: object = None


@dataclass
class Plan:
    buffers: list[BufferSpec]
    kernels: list[GeneratedKernel]
    inputs: list[int | None]
    outputs: list[OutputSpec]
    input_types: list = field(default_factory=list)


@dataclass
class _Loc:
    """Where a value is; more than one of folded / mem / group can hold (stored and still in flight)."""

    shape: tuple[int, ...]
    dtype: np.dtype | None
    folded: object = _NOTHING
    mem: View | None = None
    group: Group | None = None
    key: int = -1
    level: str = "full"
    weak: str | None = None  # kind of a Python scalar (NEP 50 weak operand)


def _c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def _numel(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def describe_node(node) -> str:
    """``np.tanh node %3 at model.py:12`` for error messages."""
    names = ", ".join(f"%{v.name}" if v.name else "%?" for v in node.outputs)
    return f"{node.op} (node {names} at {node.loc or 'unknown location'})"


class _Planner:
    def __init__(self, graph, tuning: Tuning) -> None:
        self.graph = graph
        self.tuning = tuning
        self.buffers: list[BufferSpec] = []
        self.groups: list[Group] = []
        self.producer: dict[int, Group] = {}  # temp buffer -> the group that writes it
        self.locs: dict = {}
        self._key = 0

    # -- bookkeeping ------------------------------------------------------------------------------
    def key(self) -> int:
        self._key += 1
        return self._key

    def buffer(self, shape: tuple[int, ...], dtype: np.dtype, role: str, index: int | None = None,
               data: np.ndarray | None = None, doc: str = "") -> View:
        sdt = storage_dtype(dtype)
        self.buffers.append(BufferSpec(_numel(shape) * sdt.itemsize, sdt, role, index, data, doc))
        return View(len(self.buffers) - 1, np.dtype(dtype), 0, tuple(shape), _c_strides(shape))

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

    def can_read(self, group: Group, loc: _Loc) -> bool:
        """Whether ``group`` may read ``loc`` from memory without creating a cycle of kernels."""
        writer = self.writer_of(loc)
        return writer is None or writer is group or not self.reaches(writer, group)

    def writer_of(self, loc: _Loc) -> Group | None:
        if loc.mem is not None:
            return self.producer.get(loc.mem.buffer)
        return loc.group

    # -- materialization --------------------------------------------------------------------------
    def materialize(self, loc: _Loc, label: str) -> View:
        """``loc`` in memory: folded arrays become constant buffers, in-flight values get stored."""
        if loc.mem is not None:
            return loc.mem
        if loc.folded is not _NOTHING:
            data = np.ascontiguousarray(np.asarray(loc.folded, dtype=loc.dtype))
            view = self.buffer(loc.shape, loc.dtype, "const", data=data.astype(storage_dtype(loc.dtype)),
                               doc=f"constant {loc.dtype}{list(loc.shape)}")
        else:
            group = loc.group
            view = self.buffer(loc.shape, loc.dtype, "temp", doc=f"temporary {loc.dtype}{list(loc.shape)}")
            group.stores.append((loc.key, view, loc.level, loc.shape))
            self.producer[view.buffer] = group
        loc.mem = view
        return view

    def read(self, group: Group, loc: _Loc, at: tuple[int, ...], label: str) -> LogicalLoad | Const | Ref:
        """An argument for an op in ``group`` whose output shape is ``at``."""
        if loc.group is group and loc.folded is _NOTHING:
            return Ref(loc.key)
        if loc.folded is not _NOTHING and np.ndim(loc.folded) == 0:
            return Const(np.asarray(loc.folded).item(), loc.dtype)
        view = self.materialize(loc, label)
        writer = self.producer.get(view.buffer)
        if writer is not None and writer is not group:
            group.deps.add(writer.gid)
        return LogicalLoad(view, at)

    # -- node kinds ---------------------------------------------------------------------------------
    def fold(self, node, values: list) -> None:
        op = registry.get(node.op)
        with np.errstate(all="ignore"):
            result = op.reference(*values, **node.attrs)
        results = result if len(node.outputs) > 1 else (result,)
        for v, r in zip(node.outputs, results):
            t = v.type
            if isinstance(t, TensorType):
                r = np.asarray(r)
                self.locs[v] = _Loc(t.shape, t.dtype, folded=r)
            else:
                self.locs[v] = _Loc((), None, folded=r, weak=t.kind)

    def elementwise(self, node, label: str) -> None:
        outs = node.outputs
        out_t = outs[0].type
        if not all(isinstance(v.type, TensorType) for v in outs):
            raise NotImplementedError(f"{label}: elementwise arithmetic on runtime Python scalars only "
                                      "(no array operand) is not lowered by the Triton backend")
        base = node.op[:-len(".outer")] if node.op.endswith(".outer") else node.op
        names = [base] if len(outs) == 1 else [f"{base}#{i}" for i in range(len(outs))]
        for name in names:
            if name not in LOWERINGS:
                raise NotImplementedError(f"the Triton backend has no lowering for {label}")
        for v in outs:
            check_supported(v.type.dtype, label)
        shape = out_t.shape
        locs = [self.locs[v] for v in node.inputs]
        for loc in locs:
            if loc.dtype is not None:
                check_supported(loc.dtype, label)
        if base != node.op:  # ufunc.outer: A's dims first, then B's; each operand from memory
            a, b = locs
            va, vb = self.materialize(a, label), self.materialize(b, label)
            nb = len(b.shape)
            a = _Loc(a.shape + (1,) * nb, a.dtype,
                     mem=View(va.buffer, va.dtype, va.offset, va.shape + (1,) * nb, va.strides + (0,) * nb))
            locs = [a, _Loc(b.shape, b.dtype, mem=vb)]
        group, level = self.choose_group(locs, shape)
        tensor_dtypes = [loc.dtype for loc in locs if loc.weak is None]
        args = []
        for loc in locs:
            arg = self.read(group, loc, shape, label)
            if loc.weak is not None:
                weak = np.result_type(*tensor_dtypes, loc.folded if loc.folded is not _NOTHING
                                      else _WEAK_EXAMPLE[loc.weak])
                if isinstance(arg, Const):
                    arg = Const(arg.value, weak)
                else:  # a runtime Python scalar, stored at its strong dtype: cast like NumPy would
                    key = self.key()
                    group.items.append(Op(key, "np.astype", [arg], {}, weak, label, level))
                    arg = Ref(key)
            args.append(arg)
        for v, name in zip(outs, names):
            key = self.key()
            group.items.append(Op(key, name, list(args), dict(node.attrs), v.type.dtype, label, level))
            self.locs[v] = _Loc(shape, v.type.dtype, group=group, key=key, level=level)

    def choose_group(self, locs: list[_Loc], shape: tuple[int, ...]) -> tuple[Group, str]:
        """The group of an in-flight input that can take an op of ``shape``, else a new pointwise one."""
        seen = []
        for loc in locs:
            if loc.group is not None and loc.folded is _NOTHING and loc.group not in seen:
                seen.append(loc.group)
        for group in seen:
            inside = [(loc.level, loc.shape) for loc in locs if loc.group is group]
            level = group.level_for(shape, inside)
            if level is None:
                continue
            if all(loc.group is group or loc.folded is not _NOTHING or self.can_read(group, loc) for loc in locs):
                return group, level
        return self.new_group("pointwise", _numel(shape)), "full"

    def reduction(self, node, label: str) -> None:
        kind = REDUCTIONS.get(node.op)
        if kind is None:
            raise NotImplementedError(f"the Triton backend has no lowering for {label}")
        (x,) = [self.locs[v] for v in node.inputs]
        out = node.outputs[0].type
        check_supported(x.dtype, label)
        full = x.shape
        axis = node.attrs.get("axis")
        if axis is None:
            red = tuple(range(len(full)))
        else:
            red = tuple(sorted({a % len(full) for a in ((axis,) if isinstance(axis, int) else axis)}))
        group = None
        g = x.group if x.folded is _NOTHING else None
        if g is not None and x.level == "full" and x.shape == full:
            if g.kind == "reduction" and g.full == full and g.reduced_axes == red:
                group = g
            elif g.kind == "pointwise" and g.can_become_reduction(full):
                g.kind, g.full, g.reduced_axes = "reduction", full, red
                group = g
        if group is None:
            group = self.new_group("reduction", _numel(full), full=full, reduced_axes=red)
        arg = self.read(group, x, full, label)
        dtype = out.dtype
        count = _numel([full[a] for a in red])
        key = self.key()
        if kind in ("mean", "var", "std"):
            group.items.append(Reduce(key, "sum", arg, dtype, label))
            mean = self.key()
            group.items.append(Op(mean, "np.divide", [Ref(key), Const(count, dtype)], {}, dtype, label, "row"))
            key = mean
            if kind != "mean":
                dev, sq, total, var = self.key(), self.key(), self.key(), self.key()
                ddof = int(node.attrs.get("ddof", 0))
                group.items += [
                    Op(dev, "np.subtract", [arg, Ref(mean)], {}, dtype, label, "full"),
                    Op(sq, "np.multiply", [Ref(dev), Ref(dev)], {}, dtype, label, "full"),
                    Reduce(total, "sum", Ref(sq), dtype, label),
                    Op(var, "np.divide", [Ref(total), Const(max(count - ddof, 0), dtype)], {}, dtype, label, "row"),
                ]
                key = var
                if kind == "std":
                    key = self.key()
                    group.items.append(Op(key, "np.sqrt", [Ref(var)], {}, dtype, label, "row"))
        else:
            group.items.append(Reduce(key, kind, arg, dtype, label))
        self.locs[node.outputs[0]] = _Loc(out.shape, dtype, group=group, key=key, level="row")

    def contraction(self, node, label: str) -> None:
        a, b = (self.locs[v] for v in node.inputs)
        if node.op == "np.dot" and (len(a.shape) > 2 or len(b.shape) > 2):
            raise NotImplementedError(f"{label}: np.dot of arrays with more than 2 dims is not lowered by the "
                                      "Triton backend (use np.matmul)")
        if node.op not in CONTRACTIONS or not a.shape or not b.shape:
            raise NotImplementedError(f"the Triton backend has no lowering for {label}")
        out = node.outputs[0].type
        dtype = check_supported(out.dtype, label)
        va, vb = self.materialize(a, label), self.materialize(b, label)
        a1, b1 = len(a.shape) == 1, len(b.shape) == 1
        if a1:
            va = View(va.buffer, va.dtype, va.offset, (1,) + va.shape, (0,) + va.strides)
        if b1:
            vb = View(vb.buffer, vb.dtype, vb.offset, vb.shape + (1,), vb.strides + (0,))
        batch = tuple(np.broadcast_shapes(va.shape[:-2], vb.shape[:-2]))
        m, k, n = va.shape[-2], va.shape[-1], vb.shape[-1]
        va = View(va.buffer, va.dtype, va.offset, batch + (m, k),
                  broadcast_strides(va.shape[:-2], va.strides[:-2], batch) + va.strides[-2:])
        vb = View(vb.buffer, vb.dtype, vb.offset, batch + (k, n),
                  broadcast_strides(vb.shape[:-2], vb.strides[:-2], batch) + vb.strides[-2:])
        nb = len(batch)
        coords = list(range(nb)) + ([] if a1 else [nb]) + ([] if b1 else [nb + 1])
        key = self.key()
        group = self.new_group("matmul", _numel(out.shape), full=out.shape, matmul=dict(
            batch=batch, m=m, n=n, k=k, a=va, b=vb, acc_key=key, dtype=dtype, label=label, out_coords=coords))
        for view in (va, vb):
            writer = self.producer.get(view.buffer)
            if writer is not None:
                group.deps.add(writer.gid)
        self.locs[node.outputs[0]] = _Loc(out.shape, dtype, group=group, key=key)

    def movement(self, node, label: str) -> None:
        if node.op not in VIEW_OPS:
            raise NotImplementedError(f"the Triton backend has no lowering for {label}")
        rule = VIEW_RULES.get(node.op)
        x, *rest = (self.locs[v] for v in node.inputs)
        if any(loc.folded is _NOTHING for loc in rest) or not all(isinstance(v.type, TensorType)
                                                                  for v in node.outputs):
            raise NotImplementedError(f"{label}: indexing with runtime arrays (a gather) is not lowered by "
                                      "the Triton backend")
        outs = node.outputs
        if node.op in SAME_VALUE:
            if outs[0].type.dtype != x.dtype:
                raise NotImplementedError(f"{label}: {node.op} with a dtype change is not lowered by the "
                                          "Triton backend (use astype)")
            self.locs[outs[0]] = x  # a copy of an immutable value is the value
            return
        out_shape = outs[0].type.shape
        if x.mem is None and len(outs) == 1 and self.relabel(node, rule, x):
            return
        view = self.materialize(x, label)
        try:
            results = _view_result(rule, out_shape, node.attrs, view, len(outs))
        except NotImplementedError as exc:
            raise NotImplementedError(f"{label}: {exc}") from None
        if results is None and len(outs) == 1 and _order_preserving(rule, out_shape, node.attrs, x.shape):
            # A reshape NumPy answers with a copy: copy to C order once, then view that.
            view = self.copy_contiguous(view, x.dtype, label)
            shape = outs[0].type.shape
            results = [View(view.buffer, view.dtype, 0, shape, _c_strides(shape))]
        if results is None:
            raise NotImplementedError(f"{label}: {node.op} copies data here (not a view); the Triton backend "
                                      "does not lower it")
        for v, r in zip(outs, results):
            self.locs[v] = _Loc(v.type.shape, v.type.dtype, mem=r)

    def relabel(self, node, rule, x: _Loc) -> bool:
        """An in-flight value reshaped in C order keeps its registers, if its group can index the new shape."""
        new = node.outputs[0].type.shape
        if not _order_preserving(rule, new, node.attrs, x.shape):
            return False
        g = x.group
        ok = g.kind == "pointwise" or (g.kind == "matmul" and new == g.full) or \
            (g.kind == "reduction" and (new == g.full if x.level == "full" else new in g.row_forms()))
        if ok:
            self.locs[node.outputs[0]] = _Loc(new, x.dtype, group=g, key=x.key, level=x.level)
        return ok

    def copy_contiguous(self, view: View, dtype: np.dtype, label: str) -> View:
        """A pointwise kernel copying ``view`` to a fresh C-contiguous temporary."""
        group = self.new_group("pointwise", _numel(view.shape))
        src = _Loc(view.shape, dtype, mem=view)
        arg = self.read(group, src, view.shape, label)
        key = self.key()
        group.items.append(Op(key, "np.positive", [arg], {}, dtype, label))
        loc = _Loc(view.shape, dtype, group=group, key=key)
        return self.materialize(loc, label)

    # -- driver -----------------------------------------------------------------------------------------
    def run(self) -> Plan:
        inputs: list[int | None] = []
        for i, v in enumerate(self.graph.inputs):
            t = v.type
            if isinstance(t, ScalarType):
                dtype = {"int": np.dtype(np.int64), "float": np.dtype(np.float64), "bool": np.dtype(bool)}.get(t.kind)
                if dtype is None:
                    raise NotImplementedError(f"input {i}: Python {t.kind} scalars are not supported by the "
                                              "Triton backend")
                view = self.buffer((), dtype, "input", i, doc=f"input {i} ({v.name}): Python {t.kind}")
                self.locs[v] = _Loc((), dtype, mem=view, weak=t.kind)
                inputs.append(view.buffer)
                continue
            check_supported(t.dtype, f"input {i} ({v.name})")
            if _numel(t.shape) == 0:
                self.locs[v] = _Loc(t.shape, t.dtype, folded=np.empty(t.shape, t.dtype))
                inputs.append(None)
                continue
            view = self.buffer(t.shape, t.dtype, "input", i, doc=f"input {i} ({v.name}) {t}")
            self.locs[v] = _Loc(t.shape, t.dtype, mem=view)
            inputs.append(view.buffer)
        for node in self.graph.nodes:
            self.node(node)
        outputs = [self.output(j, v) for j, v in enumerate(self.graph.outputs)]
        return Plan(self.buffers, self.emit(), inputs, outputs, [v.type for v in self.graph.inputs])

    def node(self, node) -> None:
        label = describe_node(node)
        if node.op in UNLOWERED:
            raise NotImplementedError(f"{label}: {UNLOWERED[node.op]}")
        op = registry.get(node.op)
        locs = [self.locs[v] for v in node.inputs]
        outs_empty = all(isinstance(v.type, TensorType) and _numel(v.type.shape) == 0 for v in node.outputs)
        if node.op == "prim.Constant":
            value = node.attrs["value"]
            self.fold_values(node, [value])
            return
        if op.nondeterministic:
            raise NotImplementedError(f"{label}: random ops are not lowered by the Triton backend "
                                      "(NumPy's generators cannot be reproduced on the GPU)")
        if all(loc.folded is not _NOTHING for loc in locs) or outs_empty:
            if outs_empty:
                for v in node.outputs:
                    self.locs[v] = _Loc(v.type.shape, v.type.dtype, folded=np.empty(v.type.shape, v.type.dtype))
                return
            self.fold(node, [loc.folded for loc in locs])
            return
        shape_only = op.kind in ("prim", "scalar") and all(isinstance(v.type, ScalarType) for v in node.outputs)
        if shape_only or (op.kind == "creation" and all(loc.folded is not _NOTHING for loc in locs[1:])):
            # Shape arithmetic and *_like creation: only shapes matter, and they are concrete now.
            self.fold(node, [loc.folded if loc.folded is not _NOTHING else _shape_only(loc) for loc in locs])
            return
        handler: Callable | None = {"elementwise": self.elementwise, "reduction": self.reduction,
                                    "contraction": self.contraction, "movement": self.movement,
                                    "index": self.movement}.get(op.kind)
        if handler is None:
            raise NotImplementedError(f"the Triton backend has no lowering for {label} ({op.kind} op)")
        handler(node, label)

    def fold_values(self, node, values: list) -> None:
        for v, r in zip(node.outputs, values):
            t = v.type
            if isinstance(t, TensorType):
                self.locs[v] = _Loc(t.shape, t.dtype, folded=np.asarray(r, dtype=t.dtype))
            else:
                self.locs[v] = _Loc((), None, folded=r, weak=t.kind)

    def output(self, j: int, v) -> OutputSpec:
        loc = self.locs[v]
        t = v.type
        if loc.folded is not _NOTHING:
            return OutputSpec(getattr(t, "dtype", None), getattr(t, "shape", ()), folded=loc.folded)
        if isinstance(t, ScalarType):
            raise NotImplementedError(f"output {j}: a runtime Python scalar output is not supported by the "
                                      "Triton backend")
        doc = f"output {j} {t}"
        mem = loc.mem
        if mem is not None and self.buffers[mem.buffer].role == "temp" and mem.offset == 0 \
                and mem.strides == _c_strides(mem.shape) and self.buffers[mem.buffer].nbytes == \
                _numel(mem.shape) * storage_dtype(mem.dtype).itemsize:
            spec = self.buffers[mem.buffer]
            spec.role, spec.index, spec.doc = "output", j, doc
            return OutputSpec(t.dtype, t.shape, buffer=mem.buffer)
        if mem is None:
            view = self.buffer(t.shape, t.dtype, "output", j, doc=doc)
            loc.group.stores.append((loc.key, view, loc.level, loc.shape))
            self.producer[view.buffer] = loc.group
            loc.mem = view
            return OutputSpec(t.dtype, t.shape, buffer=view.buffer)
        # An input, a constant, a view, or a buffer already returned: copy into a fresh output.
        group = self.new_group("pointwise", _numel(t.shape))
        arg = self.read(group, loc, t.shape, f"output {j}")
        key = self.key()
        group.items.append(Op(key, "np.positive", [arg], {}, t.dtype, f"output {j}"))
        view = self.buffer(t.shape, t.dtype, "output", j, doc=doc)
        group.stores.append((key, view, "full", t.shape))
        self.producer[view.buffer] = group
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
        kernels = []
        emitters = {PointwiseKernel: emit_pointwise, MatmulKernel: emit_matmul}
        for g in order:
            if not g.stores or g.numel == 0:
                continue
            kernel = g.finish()
            name = f"{g.kind}_{len(kernels)}_{_summary(g)}"
            emit = emitters.get(type(kernel), emit_reduction)
            kernels.append(emit(kernel, name, self.tuning, lambda b: self.buffers[b].doc))
        return kernels


def _summary(group: Group) -> str:
    """A few op names for the kernel's name, so listings read ``pointwise_0_add_tanh``."""
    names = []
    for item in group.items:
        op = item.op.split(".")[-1].split("#")[0] if isinstance(item, Op) else item.op
        if op not in names and op not in ("astype", "positive"):
            names.append(op)
    text = "_".join(names[:3]) or "copy"
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text)


def _shape_only(loc: _Loc) -> np.ndarray:
    """A stand-in array with ``loc``'s shape and dtype whose elements are never read."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, loc.dtype), loc.shape, (0,) * len(loc.shape))


def _view_result(rule, out_shape: tuple, attrs: dict, view: View, n_out: int) -> list[View] | None:
    """The views ``rule`` gives for an array laid out like ``view``, or None if NumPy copies."""
    itemsize = view.dtype.itemsize
    lo = view.offset + sum(s * (n - 1) for s, n in zip(view.strides, view.shape) if s < 0)
    hi = view.offset + sum(s * (n - 1) for s, n in zip(view.strides, view.shape) if s > 0) + 1
    if lo < 0:
        raise AssertionError("view reaches before its buffer")
    backing = np.empty(hi, dtype=view.dtype)  # virtual memory: view ops never touch it
    base_ptr = backing.ctypes.data
    array = np.lib.stride_tricks.as_strided(backing[view.offset:], view.shape,
                                            tuple(s * itemsize for s in view.strides))
    result = rule(array, out_shape, attrs)
    results = list(result) if n_out > 1 else [result]
    out = []
    for r in results:
        if not isinstance(r, np.ndarray) or r.dtype != view.dtype or not np.may_share_memory(r, backing):
            return None
        offset_bytes = r.ctypes.data - base_ptr
        if offset_bytes % itemsize or any(s % itemsize for s in r.strides):
            return None
        out.append(View(view.buffer, view.dtype, offset_bytes // itemsize, r.shape,
                        tuple(s // itemsize for s in r.strides)))
    return out


def _order_preserving(rule, out_shape: tuple, attrs: dict, shape: tuple[int, ...]) -> bool:
    """Whether ``rule`` on a C-contiguous array gives the same elements in the same C order (a reshape)."""
    view = View(0, np.dtype(np.uint8), 0, shape, _c_strides(shape))
    try:
        results = _view_result(rule, out_shape, attrs, view, 1)
    except NotImplementedError:
        return False
    if not results:
        return False
    (r,) = results
    return r.offset == 0 and _numel(r.shape) == _numel(shape) and \
        all(s == c for s, c, n in zip(r.strides, _c_strides(r.shape), r.shape) if n != 1)


def plan_graph(graph, tuning: Tuning) -> Plan:
    """Plan a graph whose input types are concrete (see ``numtrace_ir.specialize``)."""
    return _Planner(graph, tuning).run()
