"""Fusion groups under construction: which values a kernel computes, at which level, from which loads.

The planner adds graph nodes to groups; a group only checks whether a node
*fits* (same index space) and records it with logical loads (a view over the
loaded value's own shape, plus the shape of the op that reads it). Turning
logical loads into kernel coordinates happens once, in :meth:`Group.finish`,
when the group's final kind is known (a pointwise group may still become a
reduction's prologue).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .kernel_plan import (
    A,
    Arg,
    Const,
    Load,
    MatmulKernel,
    Op,
    PointwiseKernel,
    Reduce,
    ReductionKernel,
    Ref,
    Store,
    View,
    numel,
)

__all__ = ["Group", "LogicalLoad", "broadcast_strides", "reshape_strides"]


@dataclass(frozen=True)
class LogicalLoad:
    """Value ``view`` (over its own shape) read by an op whose output shape is ``at``."""

    view: View
    at: tuple[int, ...]


# What an op of a group being built reads (`Group.finish` turns each LogicalLoad into a `Load`).
PlanArg = Ref | Const | LogicalLoad


def broadcast_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], to: tuple[int, ...]
) -> tuple[int, ...]:
    """Strides of a ``shape`` view broadcast (NumPy rules, right-aligned) to ``to``."""
    pad = len(to) - len(shape)
    if pad < 0:
        raise ValueError(f"cannot broadcast {shape} to {to}")
    out = [0] * pad
    for n, s, t in zip(shape, strides, to[pad:]):
        if n == t:
            out.append(s if n != 1 else 0)
        elif n == 1:
            out.append(0)
        else:
            raise ValueError(f"cannot broadcast {shape} to {to}")
    return tuple(out)


def reshape_strides(
    shape: tuple[int, ...], strides: tuple[int, ...], new: tuple[int, ...]
) -> tuple[int, ...] | None:
    """Strides viewing the same elements in C order with shape ``new``, or None if that needs a copy.

    NumPy's no-copy reshape rule: each run of old dims that multiplies out to a
    run of new dims must be contiguous with itself.
    """
    if int(np.prod(shape, dtype=np.int64)) != int(np.prod(new, dtype=np.int64)):
        return None
    if 0 in new:
        return tuple(0 for _ in new)
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out = [0] * len(new)
    oi = ni = 0
    while ni < len(new) and oi < len(old):
        oj, nj = oi + 1, ni + 1
        new_prod, old_prod = new[ni], old[oi][0]
        while new_prod != old_prod:
            if new_prod < old_prod:
                new_prod *= new[nj]
                nj += 1
            else:
                old_prod *= old[oj][0]
                oj += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        out[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            out[k - 1] = out[k] * new[k]
        ni, oi = nj, oj
    return tuple(out)


@dataclass(eq=False)  # groups are compared (and hashed) by identity
class Group:
    """A kernel being built. ``kind``: ``pointwise``, ``reduction`` or ``matmul``."""

    gid: int
    kind: str
    numel: int
    full: tuple[int, ...] = ()  # reduction: the shape being reduced; matmul: the output shape
    reduced_axes: tuple[int, ...] = ()  # reduction only
    items: list[Op[PlanArg] | Reduce[PlanArg]] = field(default_factory=list)
    stores: list[tuple[int, View, str, tuple[int, ...]]] = field(default_factory=list)
    deps: set[int] = field(default_factory=set)
    matmul: dict | None = None  # matmul only: batch, m, n, k, a, b, acc_key, dtype, label, out_coords

    @property
    def mm(self) -> dict:
        """The matmul facts of a matmul group."""
        if self.matmul is None:
            raise AssertionError(f"group {self.gid} ({self.kind}) has no matmul facts")
        return self.matmul

    # -- shapes and levels ------------------------------------------------------------------------
    @property
    def kept_axes(self) -> tuple[int, ...]:
        return tuple(i for i in range(len(self.full)) if i not in self.reduced_axes)

    def row_forms(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The two shapes a row-level value may have: with and without the reduced axes (as 1s)."""
        keep = tuple(1 if i in self.reduced_axes else d for i, d in enumerate(self.full))
        return keep, tuple(self.full[i] for i in self.kept_axes)

    def row_aligned(self, shape: tuple[int, ...]) -> bool:
        """Whether a row-level value of ``shape`` broadcasts against the full shape row by row."""
        keep, squeezed = self.row_forms()
        if shape == keep:
            return True
        if shape != squeezed:
            return False
        # NumPy right-aligns: the squeezed form lines up only when the reduced axes lead.
        return self.kept_axes == tuple(range(len(self.full) - len(shape), len(self.full)))

    def level_for(
        self, out_shape: tuple[int, ...], in_levels: list[tuple[str, tuple[int, ...]]]
    ) -> str | None:
        """The level an elementwise op with ``out_shape`` and in-group inputs would run at, or None."""
        if self.kind == "pointwise":
            return "full" if numel(out_shape) == self.numel else None
        if self.kind == "matmul":  # every value is the output tile, maybe relabelled by a reshape
            ok = numel(out_shape) == self.numel and all(numel(shape) == self.numel for _, shape in in_levels)
            return "full" if ok else None
        if out_shape == self.full and all(
            lvl == "full" or self.row_aligned(shape) for lvl, shape in in_levels
        ):
            return "full"
        if out_shape in self.row_forms() and all(lvl == "row" for lvl, _ in in_levels):
            return "row"
        return None

    # -- finishing ------------------------------------------------------------------------------------
    def _coords(self, load: LogicalLoad, level: str) -> View:
        """``load`` in kernel coordinates (see :mod:`numtrace_triton.kernel_plan`)."""
        v = load.view
        if self.kind == "pointwise":
            strides = broadcast_strides(v.shape, v.strides, load.at)
            return View(v.buffer, v.dtype, v.offset, load.at, strides)
        at = load.at
        if self.kind == "matmul":
            strides = self._full_strides(load)
            coords = self.mm["out_coords"]  # output dim -> coordinate
            shape = self.mm["batch"] + (self.mm["m"], self.mm["n"])
            out = [0] * len(shape)
            for dim, c in enumerate(coords):
                out[c] = strides[dim]
            return View(v.buffer, v.dtype, v.offset, shape, tuple(out))
        # reduction: broadcast to the consumer's shape, spread over the full shape, kept axes first.
        if level == "full":
            strides = self._full_strides(load)
        else:
            b = broadcast_strides(v.shape, v.strides, at)
            if len(at) == len(self.full):
                strides = tuple(0 if i in self.reduced_axes else s for i, s in enumerate(b))
            else:
                spread = dict(zip(self.kept_axes, b))
                strides = tuple(spread.get(i, 0) for i in range(len(self.full)))
        order = self.kept_axes + self.reduced_axes
        return View(
            v.buffer, v.dtype, v.offset, tuple(self.full[i] for i in order), tuple(strides[i] for i in order)
        )

    def accepts_load(self, view: View, at: tuple[int, ...]) -> bool:
        """Whether this group can read (or write) ``view`` for an op of shape ``at`` at the full level."""
        if self.kind == "pointwise" or at == self.full:
            return True
        return reshape_strides(at, broadcast_strides(view.shape, view.strides, at), self.full) is not None

    def _full_strides(self, load: LogicalLoad) -> tuple[int, ...]:
        """Strides of ``load`` over the group's full shape (its consumer's shape may be a reshape of it)."""
        v, at = load.view, load.at
        strides = broadcast_strides(v.shape, v.strides, at)
        if at == self.full:
            return strides
        full = reshape_strides(at, strides, self.full)
        if full is None:
            raise AssertionError(f"load over {at} cannot be viewed as {self.full}")
        return full

    def _arg(self, arg: PlanArg, level: str) -> Arg:
        return Load(self._coords(arg, level)) if isinstance(arg, LogicalLoad) else arg

    def finish(self) -> PointwiseKernel | ReductionKernel | MatmulKernel:
        body: list[Op[Arg] | Reduce[Arg]] = []
        for item in self.items:
            if isinstance(item, Op):
                body.append(
                    Op(
                        item.key,
                        item.op,
                        [self._arg(a, item.level) for a in item.args],
                        item.attrs,
                        item.dtype,
                        item.label,
                        item.level,
                    )
                )
            else:
                arg = self._arg(item.arg, "full")
                body.append(Reduce(item.key, item.op, arg, item.dtype, item.label, item.level))
        stores = [
            Store(key, self._coords(LogicalLoad(view, at), level), level)
            for key, view, level, at in self.stores
        ]
        if self.kind == "pointwise":
            return PointwiseKernel(self.numel, _ops_only(body, self.gid), stores)
        if self.kind == "reduction":
            kept = tuple(self.full[i] for i in self.kept_axes)
            red = tuple(self.full[i] for i in self.reduced_axes)
            return ReductionKernel(kept, red, body, stores)
        mm = self.mm
        return MatmulKernel(
            mm["batch"],
            mm["m"],
            mm["n"],
            mm["k"],
            mm["a"],
            mm["b"],
            mm["acc_key"],
            mm["dtype"],
            mm["label"],
            _ops_only(body, self.gid),
            stores,
        )

    def can_become_reduction(self, full: tuple[int, ...]) -> bool:
        """A pointwise group can become (part of) a reduction prologue or matmul epilogue over ``full``
        when all its accesses reshape to ``full``."""
        if self.kind != "pointwise" or numel(full) != self.numel:
            return False
        if any(isinstance(item, Op) and getattr(item.op, "name", None) == "gather" for item in self.items):
            return False  # a gather addresses its source in the pointwise index space only
        ops = _ops_only(self.items, self.gid)
        loads = [a for item in ops for a in item.args if isinstance(a, LogicalLoad)]
        loads += [LogicalLoad(view, at) for _, view, _, at in self.stores]
        return all(
            reshape_strides(ld.at, broadcast_strides(ld.view.shape, ld.view.strides, ld.at), full) is not None
            for ld in loads
        )


def _ops_only(items: list[Op[A] | Reduce[A]], gid: int) -> list[Op[A]]:
    """The items of a pointwise or matmul group, which hold no reductions (one would be a planner bug)."""
    for item in items:
        if isinstance(item, Reduce):
            raise AssertionError(f"group {gid}: reduction {item.label} outside a reduction kernel")
    return [item for item in items if isinstance(item, Op)]
