"""Gathers and scatters lowered natively. Gathers: ``np.take`` (any axis, or the flattened array),
``np.take_along_axis`` and indexing with integer arrays among full slices (``x[idx]``, ``x[:, idx]``,
``x[i, j]``, ``x[i[:, None], j]``). Each is one op in a pointwise kernel that loads the indices, wraps
a negative one as NumPy does, and loads the source element at an address computed from them
(`GATHER`, emitted by `emit_body.BodyEmitter`).

An index out of range is never read: its lane is masked off and the kernel sets a per-call flag
buffer (role ``flag``), which the executable reads after the kernels and turns into NumPy's
``IndexError``. A gather's kernel stays pointwise (it never becomes a reduction's prologue or a
matmul's epilogue, which address memory differently).

Scatters: ``a[..., idx, ...] = value`` with one integer array index among full slices. ``a`` is copied,
then two pointwise kernels write: the first claims each target row for the last position of ``idx``
naming it (an atomic max of the position into a temporary of one int32 per row, which a kernel fills
with -1 first: on the device, so a call uploads nothing the size of ``a``), the second writes only the
claimed elements. So a repeated index keeps the value NumPy's sequential assignment leaves there (the
last), whatever order the GPU runs the lanes in. The atomics are relaxed: the kernel boundaries order
the fill, the claims and the writes, and no lane reads what another claims within a kernel.

``ufunc.at`` (`np.ufunc.at`) with one integer array index among full slices: ``a`` is copied, then one
pointwise kernel applies ``tl.atomic_add`` (``add``; ``subtract`` adds the negated value) or
``tl.atomic_max``/``tl.atomic_min`` (``maximum``/``minimum`` of integers) per index element (a float32
add: by a compare-and-swap loop where a GPU's atomic add would flush a subnormal, see
`emit_body.BodyEmitter._add_float32`). Integer results are NumPy's exactly; float sums of repeated
indices are added in the order the lanes run, not in index order as NumPy adds them, so they equal
NumPy's within the summation tolerance. Float maximum
and minimum (NumPy propagates NaN, which the atomics do not), other ufuncs, other keys and mixed-dtype
operands run as a host step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numtrace_ir import registry
from numtrace_ir.ops.foreign import resolve_ufunc
from numtrace_ir.ops.rules import ufunc_dtypes
from numtrace_ir.types import ScalarType, TensorType

from .groups import LogicalLoad, PlanArg, broadcast_strides
from .kernel_plan import Op, View, c_strides, numel
from .placement import NOTHING, Loc, Placement

__all__ = ["ATOMIC_UFUNCS", "EFFECTS", "GATHER", "GATHER_OPS", "SCATTER_ATOMIC", "SCATTER_CLAIM",
           "SCATTER_WRITE", "GatherRules"]


@dataclass(frozen=True)
class _Gather:
    """The op of a gather `Op`: attrs ``source`` (the source over the output's shape, the gathered
    axis at stride 0), ``stride`` and ``extent`` of that axis, ``flag`` (the out-of-range flag)."""

    name: str = "gather"


GATHER = _Gather()
SCATTER_CLAIM, SCATTER_WRITE = _Gather("scatter_claim"), _Gather("scatter_write")
# attrs as SCATTER_WRITE's, plus ``atomic`` (``add``, ``max`` or ``min``) and ``negate``.
SCATTER_ATOMIC = _Gather("scatter_atomic")
# Ops that write memory themselves (no store of their value): their kernels run though nothing is stored.
EFFECTS = frozenset({"scatter_claim", "scatter_write", "scatter_atomic"})
# ufunc.at's ufuncs lowered natively -> (atomic, negate the value, the dtype kinds it takes).
ATOMIC_UFUNCS = {"numpy.add": ("add", False, "iuf"), "numpy.subtract": ("add", True, "if"),
            "numpy.maximum": ("max", False, "iu"), "numpy.minimum": ("min", False, "iu")}
# The dtypes Triton's atomics take.
_ATOMIC_DTYPES = frozenset(map(np.dtype, ("f4", "f8", "i4", "i8", "u4", "u8")))
GATHER_OPS = frozenset({"np.take", "np.take_along_axis"})
_TAKE, _TAKE_ALONG = registry.get("np.take"), registry.get("np.take_along_axis")
_SUBSCRIPTS = ("np.getitem", "np.setitem", "np.ufunc.at")


class GatherRules(Placement):
    """The planner's gather lowering (see the module doc)."""

    def copy_contiguous(self, view: View, dtype: np.dtype, label: str) -> View:
        """``view`` copied C-contiguously (the lowering rules' copy kernel)."""
        raise NotImplementedError

    def write_into(self, loc: Loc, view: View, label: str, copies: dict, avoid=None) -> None:
        """``loc``'s value written into ``view`` (the lowering rules' copy)."""
        raise NotImplementedError

    def mergeable(self, group, other) -> bool:
        """Whether pointwise ``other`` can join ``group``'s kernel (the lowering rules' test)."""
        raise NotImplementedError

    def merge(self, group, other) -> None:
        """``other``'s work moved into ``group`` (the lowering rules' merge)."""
        raise NotImplementedError

    def scatter(self, node, label: str, a: Loc, idx: Loc, value: Loc, axis: int) -> None:
        """``node``'s output: ``a`` with ``a[(:,) * axis + (idx,)] = value`` (see the module doc)."""
        out = self.types[node.outputs[0]]
        if idx.dtype is None or idx.dtype.kind not in "iu" or not isinstance(out, TensorType):
            raise NotImplementedError(f"{label}: only integer index arrays are scattered natively")
        dtype = np.dtype(out.dtype)
        view = self.buffer(out.shape, dtype, "temp", doc=f"temporary {out}")
        if numel(a.shape):
            self.write_into(a, view, label, {})
        ix = self.materialize(idx, label)
        k, n = numel(ix.shape), out.shape[axis]
        if k == 0 or numel(out.shape) == 0:
            self.locs[node.outputs[0]] = Loc(out.shape, dtype, mem=view)
            return
        pre, post = out.shape[:axis], out.shape[axis + 1:]
        region = pre + ix.shape + post
        i32 = np.dtype(np.int32)
        iota = self.buffer(ix.shape, i32, "const", data=np.arange(k, dtype=np.int32).reshape(ix.shape),
                           doc=f"positions of the index of {label}")
        winner = self.buffer((n,), i32, "temp", doc=f"claims of {label}")
        fill = self.fill(winner, -1, label)
        # With as many rows as a's elements (a 1-d a), the copy's kernel does the fill too: one launch less.
        for copy in self.writers.get(view.buffer, []):
            if self.mergeable(copy, fill):
                self.merge(copy, fill)
                break
        flag = self.buffer((1,), i32, "flag", data=np.zeros(1, np.int32), doc=label)
        claim = self.new_group("pointwise", k)
        self.depend(claim, ix)
        self.depend(claim, winner)
        claim_args: list[PlanArg] = [LogicalLoad(ix, ix.shape), LogicalLoad(iota, ix.shape)]
        claim.items.append(Op(self.key(), SCATTER_CLAIM, claim_args,
                              {"winner": _spread(winner, ix.shape), "extent": n, "wrap": _wraps(node, idx),
                               "flag": _spread(flag, ix.shape)}, i32, label))
        self.writers.setdefault(winner.buffer, []).append(claim)
        write = self.new_group("pointwise", numel(region))
        zeros_pre, zeros_post = (0,) * len(pre), (0,) * len(post)
        index = View(ix.buffer, ix.dtype, ix.offset, region, zeros_pre + ix.strides + zeros_post)
        position = View(iota.buffer, i32, 0, region, zeros_pre + iota.strides + zeros_post)
        target = View(view.buffer, dtype, 0, region,
                      view.strides[:axis] + (0,) * len(ix.shape) + view.strides[axis + 1:])
        for v in (ix, iota, winner):
            self.depend(write, v)
        args = [LogicalLoad(index, region), LogicalLoad(position, region),
                self.read(write, value, region, label)]
        write.items.append(Op(self.key(), SCATTER_WRITE, args,
                              {"winner": _spread(winner, region), "extent": n, "wrap": _wraps(node, idx),
                               "target": target,
                               "stride": view.strides[axis]}, dtype, label))
        for w in self.writers.get(view.buffer, []):
            write.deps.add(w.gid)
        self.writers.setdefault(view.buffer, []).append(write)
        self.locs[node.outputs[0]] = Loc(out.shape, dtype, mem=view)

    def scatter_at(self, node, label: str, a: Loc, idx: Loc, value: Loc, axis: int) -> None:
        """``node``'s output: ``a`` with ``ufunc.at(a, (:,) * axis + (idx,), value)`` by atomics (see the
        module doc); `NotImplementedError` for a ufunc or dtype the atomics do not cover."""
        out = self.types[node.outputs[0]]
        how = ATOMIC_UFUNCS.get(node.attrs["ufunc"])
        dtype = np.dtype(out.dtype)
        if how is None or dtype.kind not in how[2] or dtype not in _ATOMIC_DTYPES:
            raise NotImplementedError(f"{label}: {node.attrs['ufunc']}.at on {dtype} has no atomic in Triton")
        if idx.dtype is None or idx.dtype.kind not in "iu":
            raise NotImplementedError(f"{label}: only integer index arrays are scattered natively")
        ufunc = resolve_ufunc(node.attrs["ufunc"])
        value_type = ScalarType(value.weak) if value.weak else TensorType(value.dtype, value.shape)
        if ufunc_dtypes(label, ufunc, (TensorType(dtype, ()), value_type))[0] != dtype:
            raise NotImplementedError(f"{label}: the ufunc computes in a wider dtype than the array's")
        if value.weak == "int" and dtype.kind in "iu" and not _fits(value.folded, dtype):
            raise NotImplementedError(f"{label}: a Python int the array's dtype may not hold")
        view = self.buffer(out.shape, dtype, "temp", doc=f"temporary {out}")
        if numel(a.shape):
            self.write_into(a, view, label, {})
        ix = self.materialize(idx, label)
        n = out.shape[axis]
        pre, post = out.shape[:axis], out.shape[axis + 1:]
        region = pre + ix.shape + post
        if numel(region) == 0:
            self.locs[node.outputs[0]] = Loc(out.shape, dtype, mem=view)
            return
        flag = self.buffer((1,), np.dtype(np.int32), "flag", data=np.zeros(1, np.int32), doc=label)
        group = self.new_group("pointwise", numel(region))
        self.depend(group, ix)
        index = View(ix.buffer, ix.dtype, ix.offset, region, (0,) * len(pre) + ix.strides + (0,) * len(post))
        target = View(view.buffer, dtype, 0, region,
                      view.strides[:axis] + (0,) * len(ix.shape) + view.strides[axis + 1:])
        args = [LogicalLoad(index, region), self.read(group, value, region, label)]
        attrs = {"extent": n, "target": target, "stride": view.strides[axis], "flag": _spread(flag, region),
                 "atomic": how[0], "negate": how[1], "wrap": _wraps(node, idx)}
        group.items.append(Op(self.key(), SCATTER_ATOMIC, args, attrs, dtype, label))
        for w in self.writers.get(view.buffer, []):
            group.deps.add(w.gid)
        self.writers.setdefault(view.buffer, []).append(group)
        self.locs[node.outputs[0]] = Loc(out.shape, dtype, mem=view)

    def gather(self, node, label: str, x: Loc, idx: Loc, axis: int | None, along: bool) -> None:
        """``node``'s output: ``x`` indexed along ``axis`` by ``idx`` (``take``; ``along``: as
        ``take_along_axis``, idx of x's rank, broadcast with it); ``axis=None``: the flattened x."""
        out = self.types[node.outputs[0]]
        if not isinstance(out, TensorType) or idx.dtype is None or idx.dtype.kind not in "iu":
            raise NotImplementedError(f"{label}: only integer index arrays are gathered natively")
        src = self.materialize(x, label)
        if axis is None:
            flat = (numel(src.shape),)
            if not _is_c_contiguous(src):
                src = self.copy_contiguous(src, x.known_dtype, label)
            src = View(src.buffer, src.dtype, src.offset, flat, (1,))
            axis = 0
        shape = tuple(out.shape)
        n, stride = src.shape[axis], src.strides[axis]
        ix = self.materialize(idx, label)
        if along:
            kept = src.shape[:axis] + (1,) + src.shape[axis + 1:]  # the gathered axis comes from idx
            strides = broadcast_strides(kept, src.strides[:axis] + (0,) + src.strides[axis + 1:], shape)
            source = View(src.buffer, src.dtype, src.offset, shape, strides)
            index = View(ix.buffer, ix.dtype, ix.offset, shape,
                         broadcast_strides(ix.shape, ix.strides, shape))
        else:
            pre, post = src.shape[:axis], src.shape[axis + 1:]
            k = len(ix.shape)
            source = View(src.buffer, src.dtype, src.offset, shape,
                          src.strides[:axis] + (0,) * k + src.strides[axis + 1:])
            index = View(ix.buffer, ix.dtype, ix.offset, shape,
                         (0,) * len(pre) + ix.strides + (0,) * len(post))
        group = self.new_group("pointwise", numel(shape))
        self.depend(group, src)
        self.depend(group, ix)
        flag = self.buffer((1,), np.dtype(np.int32), "flag", data=np.zeros(1, np.int32), doc=label)
        key = self.key()
        attrs = {"source": source, "stride": stride, "extent": n, "wrap": _wraps(node, idx),
                 "flag": View(flag.buffer, flag.dtype, 0, shape, (0,) * len(shape))}
        group.items.append(Op(key, GATHER, [LogicalLoad(index, shape)], attrs, out.dtype, label))
        self.locs[node.outputs[0]] = Loc(shape, out.dtype, group=group, key=key)

    def gather_many(self, node, label: str, x: Loc, idxs: list[Loc], axes: list[int]) -> None:
        """``node``'s output: ``x`` indexed by several integer arrays (broadcast together) on ``axes``,
        full slices elsewhere: NumPy puts the broadcast dims where the arrays are when they are
        adjacent, first otherwise. One load per element, at the sum of each wrapped index times its
        axis' stride; an index out of range for its own axis sets the flag."""
        out = self.types[node.outputs[0]]
        if not isinstance(out, TensorType) or any(
            i.weak is not None or i.dtype is None or i.dtype.kind not in "iu" for i in idxs
        ):
            raise NotImplementedError(f"{label}: only integer index arrays are gathered natively")
        src = self.materialize(x, label)
        ivs = [self.materialize(i, label) for i in idxs]
        shape = tuple(out.shape)
        b = tuple(np.broadcast_shapes(*(v.shape for v in ivs)))
        others = [d for d in range(len(src.shape)) if d not in axes]
        at = axes[0] if axes == list(range(axes[0], axes[0] + len(axes))) else 0
        src_strides = tuple(src.strides[d] for d in others[:at]) + (0,) * len(b) + tuple(
            src.strides[d] for d in others[at:])
        if len(src_strides) != len(shape):
            raise NotImplementedError(f"{label}: index shape {b} does not give the result {shape}")
        source = View(src.buffer, src.dtype, src.offset, shape, src_strides)
        after = (0,) * (len(shape) - at - len(b))
        index = [View(v.buffer, v.dtype, v.offset, shape,
                      (0,) * at + broadcast_strides(v.shape, v.strides, b) + after) for v in ivs]
        group = self.new_group("pointwise", numel(shape))
        for v in (src, *ivs):
            self.depend(group, v)
        flag = self.buffer((1,), np.dtype(np.int32), "flag", data=np.zeros(1, np.int32), doc=label)
        key = self.key()
        attrs = {"source": source, "stride": tuple(src.strides[d] for d in axes),
                 "extent": tuple(src.shape[d] for d in axes), "wrap": tuple(_wraps(node, i) for i in idxs),
                 "flag": View(flag.buffer, flag.dtype, 0, shape, (0,) * len(shape))}
        group.items.append(Op(key, GATHER, [LogicalLoad(v, shape) for v in index], attrs, out.dtype, label))
        self.locs[node.outputs[0]] = Loc(shape, out.dtype, group=group, key=key)

    def take(self, node, label: str) -> None:
        op = registry.get(node.op)
        x, idx = (self.locs[v] for v in node.inputs)
        if op is _TAKE:
            if node.attrs.get("mode", "raise") != "raise":
                raise NotImplementedError(f"{label}: np.take with mode={node.attrs['mode']!r} is not lowered")
            axis = node.attrs.get("axis")
            self.gather(node, label, x, idx, None if axis is None else axis % max(1, len(x.shape)), False)
            return
        axis = node.attrs.get("axis")
        if axis is None:
            raise NotImplementedError(f"{label}: np.take_along_axis with axis=None is not lowered")
        self.gather(node, label, x, idx, axis % len(x.shape), True)


def _wraps(node, idx: Loc) -> bool:
    """Whether a negative value of index ``idx`` (loaded as int64) counts from the end, as NumPy's: a
    signed index, or a uint64 one NumPy casts to intp (wrapping); but NumPy converts a 0-d index of
    ``x[...]`` (and of ``ufunc.at``) as a Python int, so a 0-d uint64 index of 2**63 or more is out of
    range."""
    dtype = np.dtype(idx.dtype)
    return dtype.kind == "i" or (dtype.itemsize == 8 and not (not idx.shape and node.op in _SUBSCRIPTS))


def _fits(value, dtype: np.dtype) -> bool:
    """Whether a Python int known at plan time lies in the integer dtype's range."""
    return value is not NOTHING and int(np.iinfo(dtype).min) <= int(value) <= int(np.iinfo(dtype).max)


def _spread(one: View, shape: tuple[int, ...]) -> View:
    """A buffer's view over ``shape`` at stride 0 (for its pointer only; addresses come from an index)."""
    return View(one.buffer, one.dtype, 0, shape, (0,) * len(shape))


def _is_c_contiguous(view: View) -> bool:
    return all(s == c or n == 1 for n, s, c in zip(view.shape, view.strides, c_strides(view.shape)))
