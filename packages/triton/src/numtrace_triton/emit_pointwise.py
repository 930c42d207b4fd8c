"""Source for a pointwise kernel: one flat index over the output elements, one program per block."""

from __future__ import annotations

from collections.abc import Callable

from .emit_body import (
    BodyEmitter,
    GeneratedKernel,
    IndexSpace,
    Pointers,
    Tuning,
    assemble,
    item_views,
    needs_int64,
    next_pow2,
)
from .kernel_plan import PointwiseKernel, View
from .source_writer import SourceWriter, flat_address

__all__ = ["emit_pointwise"]


class _FlatSpace(IndexSpace):
    def __init__(self, masked: bool) -> None:
        self.masked = masked

    def address(self, view: View, level: str) -> str:
        return with_offset(view.offset, tile_address("offs", view.shape, view.strides))

    def mask(self, level: str) -> str | None:
        return "mask" if self.masked else None


def tile_address(index: str, shape, strides) -> str:
    """:func:`flat_address`, but never a bare constant: the result keeps ``index``'s tile shape."""
    expr = flat_address(index, shape, strides)
    return f"{index} * 0" if expr == "0" else expr


def with_offset(offset: int, expr: str) -> str:
    if offset == 0:
        return expr
    return str(offset) if expr == "0" else f"{offset} + {expr}"


def emit_pointwise(
    kernel: PointwiseKernel, name: str, tuning: Tuning, describe: Callable[[int], str]
) -> GeneratedKernel:
    numel = kernel.numel
    block = min(next_pow2(numel), tuning.max_block)
    masked = numel % block != 0
    views = item_views(kernel.body, kernel.stores)
    ptrs = Pointers.of(views)
    w = SourceWriter(libdevice=tuning.libdevice)
    body = BodyEmitter(w, _FlatSpace(masked), ptrs.params)
    for item in kernel.body:
        body.op(item)
    for store in kernel.stores:
        body.store(store)
    pid = "tl.program_id(0).to(tl.int64)" if needs_int64(views, numel) else "tl.program_id(0)"
    lines = [f"    {c}" for c in w.const_lines] + [f"    {s}" for s in body.prelude]
    lines += [f"    pid = {pid}", "    offs = pid * BLOCK + tl.arange(0, BLOCK)"]
    if masked:
        lines.append(f"    mask = offs < {numel}")
    lines += w.lines
    return assemble(
        name,
        ptrs,
        describe,
        f"{numel} elements",
        lines,
        constexprs={"BLOCK": block},
        grid=(-(-numel // block),),
        num_warps=4 if block <= 1024 else 8,
    )
