"""Boolean-mask reads (``x[m]``, and so ``np.nonzero``, ``np.where(c)``, ``np.flatnonzero``, ``np.extract``)
as a device prefix-sum compaction.

For a mask ``m`` of ``x.shape[:k]`` (``n`` elements, ``r`` elements of ``x`` per mask element):

1. ``mask_count``: one program per block of the mask stores the block's count of True;
2. ``mask_scan``: one program turns the counts into exclusive offsets (``tl.cumsum`` carried over
   chunks) and stores the total into its slot of a small ``totals`` buffer;
3. the totals of every mask read of the stage come back to the host in one copy: they size the
   results (the data-dependent dims);
4. ``mask_write``: one program per block again; each kept element (row of ``r`` elements) goes to its
   block's offset plus its rank among the block's True, so the result is in NumPy's row-major order.

The kernels only move bits: every dtype is read and written as its storage type. A mask read whose key
is not one bare mask (slices or integer arrays beside it, a 0-d mask) runs on the host, in the same
stage: its inputs downloaded, NumPy's own indexing, its result uploaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numtrace_ir.errors import execution_error
from numtrace_ir.interpreter import reference_call
from numtrace_ir.ops.indexing import INPUT

from .device_memory import DeviceAllocator, DeviceBuffer
from .dtypes import storage_dtype
from .emit_body import GeneratedKernel, Pointers, Tuning, assemble, next_pow2
from .kernel_plan import View, numel

__all__ = ["MaskRead", "is_native", "plan_mask_read", "storage_of"]

_I64 = np.dtype(np.int64)
# Buffer ids inside one mask read's kernels (they index `MaskRead.run`'s local table).
_MASK, _DATA, _COUNTS, _OFFSETS, _TOTALS, _OUT = range(6)
_DOCS = {_MASK: "the mask (storage bytes)", _DATA: "the array read through the mask",
         _COUNTS: "per-block counts of True", _OFFSETS: "per-block exclusive offsets",
         _TOTALS: "the count of True of each mask read of the stage", _OUT: "the kept elements, in order"}


def storage_of(dtype: np.dtype) -> np.dtype:
    return storage_dtype(np.dtype(dtype))


def is_native(node: Any) -> bool:
    """Whether the kernels below compute ``node`` (a key that is one boolean mask of the leading dims)."""
    index = tuple(node.attrs["index"])
    if node.op != "np.getitem_mask" or index != (INPUT,) or len(node.inputs) != 2:
        return False
    a, m = (v.type for v in node.inputs)
    dtype = getattr(m, "dtype", None)
    return dtype is not None and dtype.kind == "b" and 0 < m.ndim <= a.ndim


def _view(buffer: int, dtype: np.dtype, n: int) -> View:
    return View(buffer, np.dtype(dtype), 0, (max(n, 1),), (1,))


def _kernels(name: str, slot: int, n: int, r: int, data: np.dtype, tuning: Tuning
             ) -> tuple[list[GeneratedKernel], int]:
    """The three kernels of one mask read of ``n`` mask elements and ``r``-element rows, and their
    number of programs."""
    rblock = 1 if r == 1 else min(max(next_pow2(r), 16), 128)
    cap = tuning.max_block if r == 1 else max(16, tuning.tile_elems // rblock)
    block = min(max(next_pow2(n), 16), cap)
    nblocks = -(-n // block)
    sblock = min(max(next_pow2(nblocks), 16), tuning.loop_block)
    u8 = np.dtype(np.uint8)

    def describe(b: int) -> str:
        return _DOCS[b]

    count_ptrs = Pointers.of([_view(_MASK, u8, n), _view(_COUNTS, _I64, nblocks)])
    count = assemble(
        f"{name}_count", count_ptrs, describe, f"counts True per block of {block} of {n} mask elements", [
            "    pid = tl.program_id(0)",
            "    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            f"    m = tl.load(p0 + offs, mask=offs < {n}, other=0)",
            "    tl.store(p1 + pid, tl.sum((m != 0).to(tl.int64), axis=0))",
        ], constexprs={"BLOCK": block}, grid=(nblocks,), num_warps=4 if block <= 1024 else 8)
    scan_ptrs = Pointers.of([_view(_COUNTS, _I64, nblocks), _view(_OFFSETS, _I64, nblocks),
                             _view(_TOTALS, _I64, slot + 1)])
    scan = assemble(
        f"{name}_scan", scan_ptrs, describe, f"exclusive prefix sum of {nblocks} block counts", [
            "    carry = tl.program_id(0).to(tl.int64) * 0",
            f"    for start in range(0, {nblocks}, SBLOCK):",
            "        offs = start + tl.arange(0, SBLOCK)",
            f"        c = tl.load(p0 + offs, mask=offs < {nblocks}, other=0)",
            f"        tl.store(p1 + offs, carry + tl.cumsum(c, axis=0) - c, mask=offs < {nblocks})",
            "        carry += tl.sum(c, axis=0)",
            f"    tl.store(p2 + {slot}, carry)",
        ], constexprs={"SBLOCK": sblock}, grid=(1,), num_warps=4)
    write_ptrs = Pointers.of([_view(_MASK, u8, n), _view(_OFFSETS, _I64, nblocks),
                              _view(_DATA, storage_of(data), n * r), _view(_OUT, storage_of(data), n * r)])
    lines = [
        "    pid = tl.program_id(0)",
        "    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        f"    keep = tl.load(p0 + offs, mask=offs < {n}, other=0) != 0",
        "    k = keep.to(tl.int64)",
        "    pos = tl.load(p1 + pid) + tl.cumsum(k, axis=0) - k",
    ]
    if r == 1:
        lines += ["    tl.store(p3 + pos, tl.load(p2 + offs, mask=keep), mask=keep)"]
    else:
        lines += [
            f"    src = offs[:, None] * {r}",
            f"    dst = pos[:, None] * {r}",
            f"    for c0 in range(0, {r}, RBLOCK):",
            "        cols = c0 + tl.arange(0, RBLOCK)[None, :]",
            f"        ok = keep[:, None] & (cols < {r})",
            "        tl.store(p3 + dst + cols, tl.load(p2 + src + cols, mask=ok), mask=ok)",
        ]
    write = assemble(
        f"{name}_write", write_ptrs, describe,
        f"writes the kept rows of {r} element(s) of {n} mask elements in order", lines,
        constexprs={"BLOCK": block, "RBLOCK": rblock}, grid=(nblocks,),
        num_warps=4 if block * rblock <= 1024 else 8)
    return [count, scan, write], nblocks


@dataclass
class MaskRead:
    """One mask read of a stage: its node, its slot in the stage's ``totals``, its kernels (none: it runs
    on the host)."""

    node: Any
    slot: int
    n: int
    r: int
    row: tuple[int, ...]  # the result's dims after the data-dependent one
    dtype: np.dtype
    kernels: list[GeneratedKernel]
    native: bool = True
    nblocks: int = 0  # programs of the count and write kernels
    twin: MaskRead | None = None  # an earlier read of the same mask and blocks: its offsets are reused

    @property
    def counts(self) -> bool:
        """Whether this read runs steps 1 and 2 itself (and has a slot of its own)."""
        return bool(self.kernels) and self.twin is None

    def share(self, twin: MaskRead) -> None:
        """Read through ``twin``'s offsets and count: only the write kernel is left."""
        self.kernels, self.twin, self.slot = self.kernels[2:], twin, twin.slot

    def count(self, launch: Any, allocator: DeviceAllocator, inputs: list[Any], totals: DeviceBuffer,
              twin: dict[int, DeviceBuffer] | None = None) -> dict[int, DeviceBuffer]:
        """Steps 1 and 2 (the count lands in ``totals``); the buffers step 4 reads (``twin``: the
        twin's, whose offsets serve)."""
        if twin is not None:
            return {**twin, _DATA: inputs[0]}
        if not self.kernels:
            return {}
        bufs = {_MASK: inputs[1], _DATA: inputs[0], _TOTALS: totals,
                _COUNTS: allocator.empty(self.nblocks * 8), _OFFSETS: allocator.empty(self.nblocks * 8)}
        launch(self.kernels[:2], bufs)
        return bufs

    def write(self, launch: Any, allocator: DeviceAllocator, bufs: dict[int, DeviceBuffer], total: int
              ) -> DeviceBuffer:
        """Step 4: the result's buffer, ``total`` rows."""
        out = allocator.empty(total * self.r * storage_of(self.dtype).itemsize)
        if total * self.r:
            launch(self.kernels[-1:], {**bufs, _OUT: out})
        return out

    def on_host(self, values: list[Any]) -> np.ndarray:
        """The read computed by NumPy (a key the kernels do not take)."""
        fn, attrs = reference_call(self.node)
        try:
            return np.ascontiguousarray(fn(*values, **attrs))
        except Exception as exc:
            raise execution_error(self.node, exc) from exc


def plan_mask_read(node: Any, shapes: list[tuple[int, ...]], slot: int, name: str, tuning: Tuning
                   ) -> MaskRead:
    """The kernels of mask read ``node`` of an array and a mask of ``shapes``, its count going to slot
    ``slot``. A mask whose shape is not the array's leading dims reads on the host (NumPy raises)."""
    dtype = np.dtype(node.inputs[0].type.dtype)
    shape, mask = shapes
    k = len(mask)
    if not is_native(node) or tuple(shape[:k]) != tuple(mask):
        return MaskRead(node, slot, 0, 0, (), dtype, [], native=False)
    n, row = numel(shape[:k]), tuple(shape[k:])
    r = numel(row)
    kernels, nblocks = _kernels(name, slot, n, r, dtype, tuning) if n else ([], 0)  # none: count 0
    return MaskRead(node, slot, n, r, row, dtype, kernels, nblocks=nblocks)
