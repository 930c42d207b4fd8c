"""What one fused kernel computes, before it becomes source: the planner's output, the emitters' input.

All shapes are concrete (the graph was specialized) and every memory access is
a :class:`View` in the kernel's own coordinates, so emitters never reason
about broadcasting or the graph again:

* pointwise kernels: one flat index over ``numel`` elements; each access's
  view has the shape of the op that reads it (C-order reshapes of values in
  registers are free, since they keep the flat index);
* reduction kernels: ``kept`` extents (one row per output element) followed
  by ``reduced`` extents; values live at the ``"full"`` or ``"row"`` level;
* matmul kernels: ``batch`` extents, then ``M``, then ``N``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

__all__ = [
    "Const",
    "c_strides",
    "numel",
    "op_name",
    "Load",
    "MatmulKernel",
    "Op",
    "PointwiseKernel",
    "Reduce",
    "ReductionKernel",
    "Ref",
    "Store",
    "View",
]


def op_name(op: Any) -> str:
    """The registry name of an `Op`'s op (for listings and kernel names)."""
    return op[0].name if isinstance(op, tuple) else op.name


def c_strides(shape) -> tuple[int, ...]:
    """C-contiguous strides (in elements) of ``shape``."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def numel(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


@dataclass(frozen=True)
class View:
    """A strided window on a buffer, in elements, over the kernel's coordinates (stride 0 broadcasts)."""

    buffer: int
    dtype: np.dtype
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.shape) != len(self.strides):
            raise ValueError(f"View: shape {self.shape} and strides {self.strides} differ in length")


@dataclass(frozen=True)
class Ref:
    """A value computed earlier in the same kernel."""

    key: int


@dataclass(frozen=True)
class Const:
    """A compile-time scalar, already of the dtype the op computes in."""

    value: bool | int | float
    dtype: np.dtype


@dataclass(frozen=True)
class Load:
    """A value read from memory at every point of the consumer's index space."""

    view: View


Arg = Ref | Const | Load
# What an op reads: an `Arg` in a finished kernel, a `groups.LogicalLoad` in place of a `Load` while
# its group is being built (`Group.finish` maps one to the other).
A = TypeVar("A")


@dataclass
class Op(Generic[A]):
    """One elementwise op; ``label`` names the graph node for error messages."""

    key: int
    op: Any  # a key of `elementwise.LOWERINGS`: an OpDef, or (OpDef, output index)
    args: list[A]
    attrs: dict
    dtype: np.dtype
    label: str
    level: str = "full"


@dataclass
class Reduce(Generic[A]):
    """A reduction over the reduced extents of a reduction kernel: ``sum prod max min any all argmax
    argmin`` give one value per row (level ``"row"``); the scans ``cumsum cumprod`` one per element
    (level ``"full"``)."""

    key: int
    op: str
    arg: A
    dtype: np.dtype
    label: str
    level: str = "row"


@dataclass(frozen=True)
class Store:
    """Write value ``key`` (at ``level``) through ``view``."""

    key: int
    view: View
    level: str = "full"


@dataclass
class PointwiseKernel:
    numel: int
    body: list[Op[Arg]] = field(default_factory=list)
    stores: list[Store] = field(default_factory=list)


@dataclass
class ReductionKernel:
    kept: tuple[int, ...]
    reduced: tuple[int, ...]
    body: list[Op[Arg] | Reduce[Arg]] = field(default_factory=list)
    stores: list[Store] = field(default_factory=list)


@dataclass
class MatmulKernel:
    """``acc = a @ b`` per batch index (fp32 accumulation for floats), then an elementwise epilogue.

    ``a`` has coordinates ``batch + (M, K)``, ``b`` ``batch + (K, N)``; the
    accumulator is value ``acc_key`` of dtype ``dtype``.
    """

    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    a: View
    b: View
    acc_key: int
    dtype: np.dtype
    label: str
    body: list[Op[Arg]] = field(default_factory=list)
    stores: list[Store] = field(default_factory=list)
