"""Gathers lowered natively: ``np.take`` (any axis, or the flattened array), ``np.take_along_axis`` and
indexing with one integer array (``x[idx]``, ``x[:, idx]``). Each is one op in a pointwise kernel that
loads the index, wraps a negative one as NumPy does, and loads the source element at an address
computed from it (`GATHER`, emitted by `emit_body.BodyEmitter`).

An index out of range is never read: its lane is masked off and the kernel sets a per-call flag
buffer (role ``flag``), which the executable reads after the kernels and turns into NumPy's
``IndexError``. A gather's kernel stays pointwise (it never becomes a reduction's prologue or a
matmul's epilogue, which address memory differently).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numtrace_ir import registry
from numtrace_ir.types import TensorType

from .groups import LogicalLoad, broadcast_strides
from .kernel_plan import Op, View, c_strides, numel
from .placement import Loc, Placement

__all__ = ["GATHER", "GATHER_OPS", "GatherRules"]


@dataclass(frozen=True)
class _Gather:
    """The op of a gather `Op`: attrs ``source`` (the source over the output's shape, the gathered
    axis at stride 0), ``stride`` and ``extent`` of that axis, ``flag`` (the out-of-range flag)."""

    name: str = "gather"


GATHER = _Gather()
GATHER_OPS = frozenset({"np.take", "np.take_along_axis"})
_TAKE, _TAKE_ALONG = registry.get("np.take"), registry.get("np.take_along_axis")


class GatherRules(Placement):
    """The planner's gather lowering (see the module doc)."""

    def copy_contiguous(self, view: View, dtype: np.dtype, label: str) -> View:
        """``view`` copied C-contiguously (the lowering rules' copy kernel)."""
        raise NotImplementedError

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
        flag = self.buffer((1,), np.dtype(np.int32), "flag", doc=label)
        key = self.key()
        attrs = {"source": source, "stride": stride, "extent": n,
                 "flag": View(flag.buffer, flag.dtype, 0, shape, (0,) * len(shape))}
        group.items.append(Op(key, GATHER, [LogicalLoad(index, shape)], attrs, out.dtype, label))
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


def _is_c_contiguous(view: View) -> bool:
    return all(s == c or n == 1 for n, s, c in zip(view.shape, view.strides, c_strides(view.shape)))
