"""The lowering rules of the Triton planner, one per kind of registry op (`RULES`): each places a
node's outputs, in flight in a kernel group or in memory. An elementwise node joins the group of an
in-flight input when it fits that group's index space and no cycle between kernels results; a
reduction takes its input's pointwise group along as its prologue; a matmul starts a group that its
elementwise consumers join as the epilogue; movement ops are views of their input where NumPy's are.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from numtrace_ir import registry
from numtrace_ir.types import TensorType

from .coverage import CONTRACTIONS, PARTIAL, REDUCTIONS, VIEW_OPS, outer_base
from .dtypes import check_supported
from .elementwise import COMPARISONS, LOWERINGS
from .gathers import ATOMIC_UFUNCS, GATHER_OPS, GatherRules
from .groups import Group, broadcast_strides
from .kernel_plan import Const, Op, Reduce, Ref, View, c_strides, numel
from .movement import (
    SAME_VALUE,
    order_preserving_shapes,
    permuted_layout,
    view_result,
)
from .placement import NOTHING, POSITIVE, Loc

__all__ = ["RULES", "LoweringRules"]
# The ops the planner emits itself, around the nodes it lowers (copies, casts, mean/var/std parts).
_ASTYPE, _MULTIPLY, _DIVIDE, _SUBTRACT, _SQRT, _POWER = map(
    registry.get, ("np.astype", "np.multiply", "np.divide", "np.subtract", "np.sqrt", "np.power")
)
# Ops with a lowering of their own: np.dot (its N-d form is not matmul's), the joins, np.pad, np.setitem,
# and np.getitem (whose view the setitem lowering writes into).
_DOT, _CONCATENATE, _STACK, _PAD, _SETITEM, _GETITEM, _AT = map(
    registry.get,
    ("np.dot", "np.concatenate", "np.stack", "np.pad", "np.setitem", "np.getitem", "np.ufunc.at"),
)
_WEAK_EXAMPLE = {"int": 1, "float": 1.0, "bool": True, "complex": 1j}


# Op kind -> the name of the `LoweringRules` method that lowers a node of that kind.
RULES: dict[str, str] = {}


def lowers(*kinds: str) -> Callable:
    """Register the decorated method as the rule for registry op kinds `kinds`."""

    def deco(fn: Callable) -> Callable:
        for kind in kinds:
            RULES[kind] = fn.__name__
        return fn

    return deco


def _read_with_stride_0(x_shape: tuple, e_shape: tuple, shape: tuple) -> bool:
    """Whether NumPy's loop reads an exponent of `e_shape` with stride 0 in a result of `shape`: one
    element, 0-d, of fewer dims, broadcast to more than one element, or of more dims than a base that is
    not 0-d (``x(1,) ** e(1, 1)``); a one-element result whose base is 0-d or of e's shape takes NumPy's
    trivial loop (``np.power(np.array([-inf]), np.array([0.5]))`` reads e with its own stride and calls
    pow: +inf, not sqrt's NaN). The cpu backend's classify.broadcast_exponent says the same."""
    return numel(e_shape) == 1 and (len(e_shape) == 0 or len(e_shape) < len(shape) or numel(shape) > 1
                                    or 0 < len(x_shape) < len(e_shape))


def _exponent_read_by_layout(e: Loc, shape: tuple, dtype: np.dtype) -> bool:
    """Whether NumPy's float power loop reads an exponent of more than one element broadcast along an axis
    of the result with stride 0 or with its own by run-time state (the operands' memory order, casts, the
    buffer size): such a node runs NumPy's np.power on the host, unless e is a constant without 0.5 in the
    loop's dtype (pow and the branches agree there within pow's ulp bound). The cpu backend's
    classify.exponent_read_by_layout says the same."""
    if dtype not in (np.float32, np.float64) or numel(e.shape) <= 1:
        return False
    e_shape = (1,) * (len(shape) - len(e.shape)) + tuple(e.shape)
    if not any(n > 1 and d == 1 for n, d in zip(shape, e_shape)):
        return False
    if e.folded is not NOTHING:
        return bool(np.any(np.asarray(e.folded).astype(dtype) == 0.5))
    return True


class LoweringRules(GatherRules):
    """Placement plus one lowering rule per op kind."""

    def fold_values(self, node, values) -> None:
        """Record ``node``'s outputs as the constants ``values`` (the planner's, which owns constants)."""
        raise NotImplementedError

    # -- node kinds ---------------------------------------------------------------------------------
    def fold(self, node, values: list) -> None:
        op = registry.get(node.op)
        with np.errstate(all="ignore"):
            result = op.reference(*values, **node.attrs)
        self.fold_values(node, result if len(node.outputs) > 1 else (result,))

    @lowers("elementwise")
    def elementwise(self, node, label: str, as_op: registry.OpDef | None = None) -> None:
        """Add ``node`` (computed as op ``as_op`` when given) to a pointwise-compatible group."""
        outs = node.outputs
        out_t = self.types[outs[0]]
        if not all(isinstance(self.types[v], TensorType) for v in outs):
            raise NotImplementedError(
                f"{label}: elementwise arithmetic on runtime Python scalars only "
                "(no array operand) is not lowered by the Triton backend"
            )
        op = as_op or registry.get(node.op)
        base = outer_base(op) or op
        names: list[Any] = [base] if len(outs) == 1 else [(base, i) for i in range(len(outs))]
        for name in names:
            if name not in LOWERINGS:
                if op.name in PARTIAL:
                    raise NotImplementedError(f"{label}: {PARTIAL[op.name]}")
                raise NotImplementedError(f"the Triton backend has no lowering for {label}")
        for v in outs:
            check_supported(self.types[v].dtype, label)
        shape = out_t.shape
        locs = [self.locs[v] for v in node.inputs]
        for loc in locs:
            if loc.dtype is not None:
                check_supported(loc.dtype, label)
        if base is not op:  # ufunc.outer: A's dims first, then B's; each operand from memory
            a, b = locs
            va, vb = self.materialize(a, label), self.materialize(b, label)
            nb = len(b.shape)
            a = Loc(
                a.shape + (1,) * nb,
                a.dtype,
                mem=View(va.buffer, va.dtype, va.offset, va.shape + (1,) * nb, va.strides + (0,) * nb),
            )
            locs = [a, Loc(b.shape, b.dtype, mem=vb)]
        if base is _POWER and out_t.dtype.kind in "iu" and _maybe_negative(locs[1]):
            raise NotImplementedError(f"{label}: an integer power whose exponent may be negative (NumPy "
                                      "raises ValueError for one) runs on the host")
        if base is _POWER and _exponent_read_by_layout(locs[1], shape, out_t.dtype):
            raise NotImplementedError(f"{label}: an exponent broadcast along an axis of the result (NumPy's "
                                      "loop takes sqrt at 0.5 or pow by the operands' layout and its buffer "
                                      "size) runs on the host")
        tensor_dtypes = [loc.dtype for loc in locs if loc.weak is None]
        weak = [None if loc.weak is None else _weak_operand(loc, tensor_dtypes, base in COMPARISONS, label)
                for loc in locs]
        group, level = self.choose_group(locs, shape)
        args = []
        for loc, operand in zip(locs, weak):
            arg = self.read(group, loc, shape, label)
            if operand is not None:
                dtype, value = operand
                if isinstance(arg, Const):
                    arg = Const(value, dtype)
                elif dtype != loc.dtype:  # a runtime Python scalar, stored at its strong dtype
                    key = self.key()
                    group.items.append(Op(key, _ASTYPE, [arg], {}, dtype, label, level))
                    arg = Ref(key)
            args.append(arg)
        attrs = {} if as_op else dict(node.attrs)
        if base is _POWER and _read_with_stride_0(locs[0].shape, locs[1].shape, shape):
            attrs["scalar_exponent"] = True  # NumPy's float loop branches on its value (sqrt at 0.5, ...)
        for v, name in zip(outs, names):
            key = self.key()
            dtype = self.types[v].dtype
            group.items.append(Op(key, name, list(args), attrs, dtype, label, level))
            self.locs[v] = Loc(shape, dtype, group=group, key=key, level=level)

    def choose_group(self, locs: list[Loc], shape: tuple[int, ...]) -> tuple[Group, str]:
        """The group of an in-flight input that can take an op of ``shape`` (absorbing the other inputs'
        independent pointwise groups), else a new pointwise one."""
        seen = []
        for loc in locs:
            if loc.group is not None and loc.folded is NOTHING and loc.group not in seen:
                seen.append(loc.group)
        for group in seen:
            merge = [h for h in seen if h is not group and self.mergeable(group, h)]
            members = [group, *merge]
            inside = [(loc.level, loc.shape) for loc in locs if loc.group in members]
            level = group.level_for(shape, inside)
            if level is None:
                continue
            # Loaded from memory: computed elsewhere, or a folded array (a scalar is a constant).
            outside = [loc for loc in locs if loc.group not in members
                       and (loc.folded is NOTHING or np.ndim(loc.folded) > 0)]
            views = [
                loc.mem or View(0, loc.known_dtype, 0, loc.shape, c_strides(loc.shape)) for loc in outside
            ]
            if level == "full" and not all(group.accepts_load(v, shape) for v in views):
                continue
            if all(self.can_read(m, loc) for m in members for loc in outside):
                for h in merge:
                    self.merge(group, h)
                return group, level
        return self.new_group("pointwise", numel(shape)), "full"

    def mergeable(self, group: Group, other: Group) -> bool:
        """Whether pointwise ``other`` can join ``group``'s kernel: same index space, no path between them."""
        if other.kind != "pointwise":
            return False
        fits = (
            group.numel == other.numel
            if group.kind == "pointwise"
            else other.can_become_reduction(group.full)
        )
        return fits and not self.reaches(group, other) and not self.reaches(other, group)

    def merge(self, group: Group, other: Group) -> None:
        """Move everything ``other`` computes and stores into ``group``; ``other`` is left empty."""
        group.items += other.items
        group.stores += other.stores
        group.deps |= other.deps
        other.items, other.stores, other.deps = [], [], set()
        for g in self.groups:
            if other.gid in g.deps:
                g.deps.discard(other.gid)
                if g is not group:
                    g.deps.add(group.gid)
        for writers in self.writers.values():
            if other in writers:
                i = writers.index(other)
                writers[i : i + 1] = [] if group in writers else [group]
        for loc in self.locs.values():
            if loc.group is other:
                loc.group = group

    @lowers("reduction")
    def reduction(self, node, label: str) -> None:
        kind = registry.get(node.op).reduction
        if kind not in REDUCTIONS:
            raise NotImplementedError(f"the Triton backend has no lowering for {label}")
        if node.attrs.get("initial") is not None:
            raise NotImplementedError(f"{label}: {PARTIAL[node.op]}")
        (x,) = [self.locs[v] for v in node.inputs]
        out = self.types[node.outputs[0]]
        check_supported(x.dtype, label)
        full = x.shape
        axis = node.attrs.get("axis")
        if axis is None or not full:  # a 0-d input's cumsum(axis=0) is that of its one element
            red = tuple(range(len(full)))
        else:
            red = tuple(sorted({a % len(full) for a in ((axis,) if isinstance(axis, int) else axis)}))
        group = None
        g = x.group if x.folded is NOTHING else None
        if g is not None and x.level == "full" and x.shape == full:
            if g.kind == "reduction" and g.full == full and g.reduced_axes == red:
                group = g
            elif g.kind == "pointwise" and g.can_become_reduction(full):
                g.kind, g.full, g.reduced_axes = "reduction", full, red
                group = g
        if group is None:  # a sibling over the same rows: one kernel reads the input for both
            group = next(
                (
                    g
                    for g in reversed(self.groups)
                    if g.kind == "reduction"
                    and g.full == full
                    and g.reduced_axes == red
                    and self.can_read(g, x)
                ),
                None,
            )
        if group is None:
            group = self.new_group("reduction", numel(full), full=full, reduced_axes=red)
        arg = self.read(group, x, full, label)
        dtype = out.dtype
        if kind in ("var", "std") and dtype.kind != "f":
            raise NotImplementedError(f"{label}: {PARTIAL[node.op]}")
        if kind == "mean" and dtype == np.float16:
            dtype = np.dtype(np.float32)  # summed and divided in float32 as NumPy does, rounded once
        # NumPy divides an integer (or bool) sum by the count in float64, then casts it to the dtype.
        quotient = np.dtype(np.float64) if dtype.kind != "f" else dtype
        count = numel([full[a] for a in red])
        key = self.key()
        if kind in ("mean", "var", "std"):
            group.items.append(Reduce(key, "sum", arg, dtype, label))
            mean = self.key()
            group.items.append(
                Op(mean, _DIVIDE, [Ref(key), Const(count, quotient)], {}, quotient, label, "row")
            )
            key = mean
            if kind != "mean":
                dev, sq, total, var = self.key(), self.key(), self.key(), self.key()
                ddof = int(node.attrs.get("ddof", 0))
                group.items += [
                    Op(dev, _SUBTRACT, [arg, Ref(mean)], {}, dtype, label, "full"),
                    Op(sq, _MULTIPLY, [Ref(dev), Ref(dev)], {}, dtype, label, "full"),
                    Reduce(total, "sum", Ref(sq), dtype, label),
                    Op(
                        var,
                        _DIVIDE,
                        [Ref(total), Const(max(count - ddof, 0), dtype)],
                        {},
                        dtype,
                        label,
                        "row",
                    ),
                ]
                key = var
                if kind == "std":
                    key = self.key()
                    group.items.append(Op(key, _SQRT, [Ref(var)], {}, dtype, label, "row"))
            if quotient != out.dtype:
                cast = self.key()
                group.items.append(Op(cast, _ASTYPE, [Ref(key)], {}, out.dtype, label, "row"))
                key = cast
        elif kind in ("cumsum", "cumprod"):  # a scan: one output per input element, at the full level
            group.items.append(Reduce(key, kind, arg, dtype, label, level="full"))
            self.locs[node.outputs[0]] = Loc(out.shape, dtype, group=group, key=key, level="full")
            return
        else:
            group.items.append(Reduce(key, kind, arg, dtype, label))
        self.locs[node.outputs[0]] = Loc(out.shape, out.dtype, group=group, key=key, level="row")

    @lowers("contraction")
    def contraction(self, node, label: str) -> None:
        if node.op not in CONTRACTIONS:  # an einsum form `rewrites` left whole
            raise NotImplementedError(f"{label}: {PARTIAL.get(node.op, 'no lowering in the Triton backend')}")
        a, b = (self.locs[v] for v in node.inputs)
        if registry.get(node.op) is _DOT and (len(a.shape) > 2 or len(b.shape) > 2):
            raise NotImplementedError(f"{label}: {PARTIAL['np.dot']} by the Triton backend (use np.matmul)")
        if not a.shape or not b.shape:  # np.dot with a 0-d operand is a product
            self.elementwise(node, label, as_op=_MULTIPLY)
            return
        out = self.types[node.outputs[0]]
        dtype = check_supported(out.dtype, label)
        va, vb = self.materialize(a, label), self.materialize(b, label)
        a1, b1 = len(a.shape) == 1, len(b.shape) == 1
        if a1:
            va = View(va.buffer, va.dtype, va.offset, (1,) + va.shape, (0,) + va.strides)
        if b1:
            vb = View(vb.buffer, vb.dtype, vb.offset, vb.shape + (1,), vb.strides + (0,))
        batch = tuple(np.broadcast_shapes(va.shape[:-2], vb.shape[:-2]))
        m, k, n = va.shape[-2], va.shape[-1], vb.shape[-1]
        va, vb = _batched(va, batch), _batched(vb, batch)
        nb = len(batch)
        coords = list(range(nb)) + ([] if a1 else [nb]) + ([] if b1 else [nb + 1])
        key = self.key()
        group = self.new_group(
            "matmul",
            numel(out.shape),
            full=out.shape,
            matmul=dict(
                batch=batch,
                m=m,
                n=n,
                k=k,
                a=va,
                b=vb,
                acc_key=key,
                dtype=dtype,
                label=label,
                out_coords=coords,
            ),
        )
        for view in (va, vb):
            self.depend(group, view)
        self.locs[node.outputs[0]] = Loc(out.shape, dtype, group=group, key=key)

    @lowers("movement", "index")
    def movement(self, node, label: str) -> None:
        op = registry.get(node.op)
        if op is _CONCATENATE or op is _STACK:
            self.join(node, label)
            return
        if op is _PAD:
            self.pad(node, label)
            return
        if op is _SETITEM:
            self.setitem(node, label)
            return
        if op is _AT:
            self.ufunc_at(node, label)
            return
        if node.op in GATHER_OPS:
            self.take(node, label)
            return
        if node.op not in VIEW_OPS:
            raise NotImplementedError(f"the Triton backend has no lowering for {label}")
        rule = op.as_view
        x, *rest = (self.locs[v] for v in node.inputs)
        attrs = node.attrs
        gather = False
        if op.kind == "index" and rest:  # the trailing inputs fill the index's "input" placeholders
            index, rest = _static_index(attrs["index"], rest)
            attrs = {**attrs, "index": index}
            gather = bool(rest)  # array indices left: NumPy gathers (copies), no view
            axis = _one_array_axis(index, len(x.shape)) if len(rest) == 1 else None
            if axis is not None:
                self.gather(node, label, x, rest[0], axis, False)
                return
            axes = _array_axes(index, len(x.shape)) if len(rest) > 1 else None
            if axes is not None:
                self.gather_many(node, label, x, rest, axes)
                return
        if gather:
            raise NotImplementedError(f"{label}: {PARTIAL['np.getitem']} by the Triton backend")
        if any(loc.folded is NOTHING for loc in rest) or not all(
            isinstance(self.types[v], TensorType) for v in node.outputs
        ):
            raise NotImplementedError(f"{label}: a shape or index known only at run time is not lowered")
        outs = node.outputs
        extra = [loc.folded for loc in rest]
        if node.op in SAME_VALUE:
            if self.types[outs[0]].dtype != x.dtype:
                self.elementwise(node, label, as_op=_ASTYPE)
            else:
                self.locs[outs[0]] = x  # a copy of an immutable value is the value
            return
        out_shape = self.types[outs[0]].shape
        if x.mem is None and len(outs) == 1 and self.relabel(node, rule, attrs, extra, x):
            return
        if x.mem is None and x.folded is NOTHING and len(outs) == 1:
            layout = permuted_layout(rule, out_shape, attrs, extra, x.shape)
            stored = None if layout is None else View(0, x.known_dtype, 0, x.shape, layout[1])
            if layout is not None and stored is not None and (
                x.level != "full" or x.in_flight.accepts_load(stored, x.shape)
            ):
                # Store x so that the permuted result is C-contiguous: a later reshape stays free.
                shape, x_strides = layout
                view = self.buffer(shape, x.known_dtype, "temp", doc=f"temporary {x.dtype}{list(shape)}")
                x.mem = View(view.buffer, x.known_dtype, 0, x.shape, x_strides)
                self.store(x.in_flight, x.key, x.mem, x.level, x.shape)
                self.locs[outs[0]] = Loc(shape, x.dtype, mem=view)
                self.types[outs[0]] = TensorType(x.dtype, shape)
                return
        view = self.materialize(x, label)
        try:
            results = view_result(rule, out_shape, attrs, extra, view, len(outs))
        except NotImplementedError as exc:
            raise NotImplementedError(f"{label}: {exc}") from None
        in_order = order_preserving_shapes(rule, out_shape, attrs, extra, x.shape) if len(outs) == 1 else None
        if results is None and in_order is not None:
            # A reshape NumPy answers with a copy: copy to C order once, then view that.
            view = self.copy_contiguous(view, x.dtype, label)
            (shape,) = in_order
            results = [View(view.buffer, view.dtype, 0, shape, c_strides(shape))]
        if results is None:
            raise NotImplementedError(
                f"{label}: {node.op} {PARTIAL['np.ravel']}; the Triton backend does not lower it"
            )
        for v, r in zip(outs, results):
            self.locs[v] = Loc(r.shape, r.dtype, mem=r)
            self.types[v] = TensorType(r.dtype, r.shape)

    def write_into(
        self, loc: Loc, view: View, label: str, copies: dict[int, Group], avoid: Group | None = None
    ) -> None:
        """Make ``loc``'s value land in ``view``: stored by its own group when in flight (and not
        ``avoid``), else copied, broadcasting, by a pointwise group shared with the other copies of
        the same size (``copies``)."""
        if (
            loc.mem is None
            and loc.folded is NOTHING
            and loc.shape == view.shape
            and loc.group is not avoid
            and self.can_write(loc.in_flight, view)
        ):
            self.store(loc.in_flight, loc.key, view, loc.level, loc.shape)
            return
        size = numel(view.shape)
        group = copies.get(size)
        if group is None or not self.can_read(group, loc) or not self.can_write(group, view):
            group = copies[size] = self.new_group("pointwise", size)
        key = self.key()
        dtype = loc.dtype if loc.dtype is not None else view.dtype
        group.items.append(
            Op(key, POSITIVE, [self.read(group, loc, view.shape, label)], {}, dtype, label)
        )
        self.store(group, key, view, "full", view.shape)

    def setitem(self, node, label: str) -> None:
        """Functional ``a[index] = value``: ``a`` copied into a fresh buffer, then ``value`` written into
        the indexed view of it by a later kernel (never the copying one: its blocks are unordered)."""
        a, *indices, value = (self.locs[v] for v in node.inputs)
        index, indices = _static_index(node.attrs["index"], indices)
        axis = _one_array_axis(index, len(a.shape)) if len(indices) == 1 else None
        if axis is not None:
            self.scatter(node, label, a, indices[0], value, axis)
            return
        if indices:
            raise NotImplementedError(f"{label}: {PARTIAL['np.setitem']} by the Triton backend")
        out = self.types[node.outputs[0]]
        dtype = check_supported(out.dtype, label)
        view = self.buffer(out.shape, dtype, "temp", doc=f"temporary {out}")
        if numel(a.shape):
            self.write_into(a, view, label, {})
        regions = view_result(_GETITEM.as_view, (), {"index": index}, [], view, 1)
        if regions is None:
            raise AssertionError(f"{label}: a static index of a C-contiguous buffer is not a strided view")
        (region,) = regions
        if numel(region.shape):
            copier = self.writers.get(view.buffer, [None])[0]
            self.write_into(value, region, label, {}, avoid=copier)
        self.locs[node.outputs[0]] = Loc(out.shape, dtype, mem=view)

    def ufunc_at(self, node, label: str) -> None:
        """``ufunc.at(a, key, value)`` with one integer array among full slices: atomics (`scatter_at`)."""
        a, *operands = (self.locs[v] for v in node.inputs)
        if node.attrs["ufunc"] not in ATOMIC_UFUNCS:   # (every one of them takes two operands)
            raise NotImplementedError(f"{label}: {PARTIAL['np.ufunc.at']}")
        index, indices = _static_index(node.attrs["index"], operands[:-1])
        axis = _one_array_axis(index, len(a.shape)) if len(indices) == 1 else None
        if axis is None:
            raise NotImplementedError(f"{label}: {PARTIAL['np.ufunc.at']}")
        self.scatter_at(node, label, a, indices[0], operands[-1], axis)

    def join(self, node, label: str) -> None:
        """np.concatenate / np.stack: every input written into its slice of one fresh buffer."""
        out = self.types[node.outputs[0]]
        dtype = check_supported(out.dtype, label)
        view = self.buffer(out.shape, dtype, "temp", doc=f"temporary {out}")
        axis = node.attrs.get("axis")
        stack = registry.get(node.op) is _STACK
        offset = 0
        copies: dict[int, Group] = {}
        for v in node.inputs:
            loc = self.locs[v]
            if stack:
                ax = axis % len(out.shape)
                strides = view.strides[:ax] + view.strides[ax + 1 :]
                sub = View(view.buffer, dtype, offset, loc.shape, strides)
                offset += view.strides[ax]
            elif axis is None:
                sub = View(view.buffer, dtype, offset, loc.shape, c_strides(loc.shape))
                offset += numel(loc.shape)
            else:
                ax = axis % len(out.shape)
                sub = View(view.buffer, dtype, offset, loc.shape, view.strides)
                offset += loc.shape[ax] * view.strides[ax]
            if numel(loc.shape):
                self.write_into(loc, sub, label, copies)
        self.locs[node.outputs[0]] = Loc(out.shape, dtype, mem=view)

    def pad(self, node, label: str) -> None:
        """np.pad with a constant (or mode 'empty', zeros as in the reference): fill a fresh buffer, then
        write the input into its interior."""
        mode = node.attrs.get("mode", "constant")
        if mode not in ("constant", "empty"):
            raise NotImplementedError(f"{label}: {PARTIAL['np.pad']}")
        out = self.types[node.outputs[0]]
        (x,) = (self.locs[v] for v in node.inputs)
        dtype = check_supported(out.dtype, label)
        view = self.buffer(out.shape, dtype, "temp", doc=f"temporary {out}")
        value = node.attrs.get("constant_values", 0) if mode == "constant" else 0
        if not np.isscalar(value):
            raise NotImplementedError(f"{label}: {PARTIAL['np.pad']}")
        if not isinstance(value.item() if isinstance(value, np.generic) else value, (bool, int, float)):
            raise NotImplementedError(f"{label}: np.pad with constant_values={value!r} is not lowered")
        self.fill(view, _pad_constant(value, dtype, label), label)
        # Where the input starts in each dim: pad a one-element array and find it.
        marker = np.pad(np.ones((1,) * len(out.shape), bool), node.attrs["pad_width"])
        before = [int(i[0]) for i in np.nonzero(marker)] if marker.ndim else []
        start = sum(b * s for b, s in zip(before, view.strides))
        if numel(x.shape):
            self.write_into(x, View(view.buffer, dtype, start, x.shape, view.strides), label, {})
        self.locs[node.outputs[0]] = Loc(out.shape, dtype, mem=view)

    def relabel(self, node, rule, attrs: dict, extra: list, x: Loc) -> bool:
        """An in-flight value reshaped in C order keeps its registers if its group can index the new shape."""
        shapes = order_preserving_shapes(rule, self.types[node.outputs[0]].shape, attrs, extra, x.shape)
        if shapes is None:
            return False
        (new,) = shapes
        g = x.in_flight
        ok = g.kind in ("pointwise", "matmul") or (
            new == g.full if x.level == "full" else new in g.row_forms()
        )
        if ok:
            self.locs[node.outputs[0]] = Loc(new, x.dtype, group=g, key=x.key, level=x.level)
        return ok

    def copy_contiguous(self, view: View, dtype: np.dtype, label: str) -> View:
        """A pointwise kernel copying ``view`` to a fresh C-contiguous temporary."""
        group = self.new_group("pointwise", numel(view.shape))
        src = Loc(view.shape, dtype, mem=view)
        arg = self.read(group, src, view.shape, label)
        key = self.key()
        group.items.append(Op(key, POSITIVE, [arg], {}, dtype, label))
        return self.materialize(Loc(view.shape, dtype, group=group, key=key), label)

def _one_array_axis(index: tuple, ndim: int) -> int | None:
    """The axis of ``x[..., idx, ...]`` when ``index`` is one array placeholder among full slices."""
    if len(index) > ndim or index.count("input") != 1:
        return None
    if any(e != "input" and e != slice(None) for e in index):
        return None
    return index.index("input")


def _array_axes(index: tuple, ndim: int) -> list[int] | None:
    """The axes of ``x[..., i, ..., j, ...]`` when ``index`` is array placeholders among full slices."""
    if len(index) > ndim or any(e != "input" and e != slice(None) for e in index):
        return None
    return [k for k, e in enumerate(index) if e == "input"]


def _maybe_negative(loc: Loc) -> bool:
    """Whether a value of signed integer type may hold a negative number at run time."""
    if loc.folded is not NOTHING:
        return bool(np.any(np.asarray(loc.folded) < 0))
    return loc.weak == "int" or (loc.dtype is not None and loc.dtype.kind == "i")


def _weak_operand(loc: Loc, tensor_dtypes: list, comparison: bool, label: str) -> tuple[np.dtype, Any]:
    """The dtype (and value, where folded) a Python scalar operand takes next to arrays of
    ``tensor_dtypes`` (NEP 50: the arrays' kind decides). An int outside an integer array's range is
    compared by value, as NumPy does: held in int64 or uint64, or as +-inf beyond both; in arithmetic
    NumPy raises OverflowError, so the node runs on the host, where it does."""
    value = loc.folded
    dtype = np.result_type(*tensor_dtypes, _WEAK_EXAMPLE[loc.weak or "int"] if value is NOTHING else value)
    if loc.weak != "int" or dtype.kind not in "iu":
        return dtype, value
    if value is NOTHING:  # stored as int64: compare it so, as the value it is
        return (np.dtype(np.int64) if comparison else dtype), value
    value = int(value)
    if np.iinfo(dtype).min <= value <= np.iinfo(dtype).max:
        return dtype, value
    if not comparison:
        raise NotImplementedError(f"{label}: the Python int {value} is out of bounds for {dtype} "
                                  "(NumPy raises OverflowError)")
    for wide in (np.dtype(np.int64), np.dtype(np.uint64)):
        if np.iinfo(wide).min <= value <= np.iinfo(wide).max:
            return wide, value
    return np.dtype(np.float64), math.inf if value > 0 else -math.inf


def _batched(view: View, batch: tuple[int, ...]) -> View:
    """``view``'s leading dims broadcast to ``batch``; its last two dims kept."""
    strides = broadcast_strides(view.shape[:-2], view.strides[:-2], batch) + view.strides[-2:]
    return View(view.buffer, view.dtype, view.offset, batch + view.shape[-2:], strides)


def _static_index(index: tuple, indices: list[Loc]) -> tuple[tuple, list[Loc]]:
    """``index`` with each ``"input"`` placeholder whose index is a Python int known at compile time
    (``x[x.shape[0] - 1]``) replaced by that int, and the index inputs still placeholders (arrays)."""
    it = iter(indices)
    out, left = [], []
    for entry in index:
        if entry == "input":
            loc = next(it)
            value = loc.folded
            if loc.weak == "int" and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
                entry = int(value)
            else:
                left.append(loc)
        out.append(entry)
    return tuple(out), left


def _pad_constant(value: Any, dtype: np.dtype, label: str) -> bool | int | float:
    """``value`` as np.pad stores it in a ``dtype`` array (truncated, wrapped: NumPy's own cast of it);
    NotImplementedError where that store raises or warns, so the pad runs on the host and does the same."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            with np.errstate(all="warn"):
                stored = np.pad(np.zeros(1, dtype), 1, constant_values=value)[0]
        except Exception as exc:  # OverflowError, ValueError (NaN to int), RuntimeWarning (overflow)
            raise NotImplementedError(
                f"{label}: np.pad raises or warns storing constant_values={value!r} in {dtype} "
                f"({type(exc).__name__})") from None
    return stored.item()
