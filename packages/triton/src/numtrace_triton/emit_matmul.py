"""Source for a (batched) matmul with its elementwise epilogue fused into the store.

One program computes a ``[BLOCK_M, BLOCK_N]`` output tile of one batch entry,
looping over K in ``BLOCK_K`` steps with ``tl.dot`` into a float32
accumulator (float64 stays float64; integers multiply-and-sum exactly in
their own type, as NumPy does). The epilogue (bias, activation, residual)
runs on the accumulator tile before the single store, so the product never
goes to memory. All programs sit on grid axis 0, which has no 65535 limit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .dtypes import tl_type
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
from .emit_pointwise import with_offset
from .kernel_plan import MatmulKernel, View
from .source_writer import SourceWriter, flat_address

__all__ = ["emit_matmul"]

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) candidates for triton.autotune on a GPU. float32
# products stay IEEE (no tf32), so tl.dot runs on the FMA units: a thread's share of the tile is its
# register reuse per shared-memory load, hence the 128 x 128 tile on 4 warps (128 accumulators each).
_GPU_CONFIGS = (
    (128, 128, 32, 8, 3),
    (128, 128, 16, 4, 4),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (64, 64, 32, 4, 4),
    (32, 64, 32, 4, 4),
    (16, 64, 64, 4, 3),
    (16, 32, 64, 4, 3),
)
# Added for at most 16 columns (a classifier's outputs), where a tile of 32 columns is mostly masked off.
_NARROW_CONFIGS = ((64, 16, 32, 4, 4), (16, 16, 64, 4, 3))


class _TileSpace(IndexSpace):
    def __init__(self, n_batch: int) -> None:
        self.n_batch = n_batch

    def address(self, view: View, level: str) -> str:
        return _operand_address(view, self.n_batch, "rm", "rn")

    def mask(self, level: str) -> str | None:
        return "mask"


def _operand_address(view: View, n_batch: int, rows: str, cols: str) -> str:
    b = n_batch
    batch = with_offset(view.offset, flat_address("pid_b", view.shape[:b], view.strides[:b]))
    # Both index terms stay even with stride 0: they give the address its 2-D tile shape.
    tile = f"{rows}[:, None] * {view.strides[b]} + {cols}[None, :] * {view.strides[b + 1]}"
    return tile if batch == "0" else f"{batch} + {tile}"


def _bool_load(expr: str, dtype: np.dtype) -> str:
    """Booleans are stored as bytes: a load gives uint8, compared to 0 to make a bool."""
    return f"({expr} != 0)" if np.dtype(dtype).kind == "b" else expr


def emit_matmul(
    kernel: MatmulKernel, name: str, tuning: Tuning, describe: Callable[[int], str]
) -> GeneratedKernel:
    out = np.dtype(kernel.dtype)
    # Booleans: NumPy's matmul is an OR of ANDs, i.e. a nonzero count of (a & b).
    work = np.dtype(np.int32) if out.kind == "b" else out
    nb = len(kernel.batch)
    batch = int(np.prod(kernel.batch, dtype=np.int64))
    views = [kernel.a, kernel.b] + item_views(kernel.body, kernel.stores)
    ptrs = Pointers.of(views)
    w = SourceWriter(libdevice=tuning.libdevice)
    body = BodyEmitter(w, _TileSpace(nb), ptrs.params)
    pa, pb = ptrs.params[kernel.a.buffer], ptrs.params[kernel.b.buffer]
    if work.kind == "f":
        acc_dtype = work if work.itemsize == 8 else np.dtype(np.float32)
    else:  # tl.sum widens integers under 32 bits: a 32-bit sum, cast back (the same bits, mod 2**n)
        acc_dtype = work if work.itemsize >= 4 else np.dtype(f"{work.kind}4")
    w.emit(f"acc = tl.zeros([BLOCK_M, BLOCK_N], {tl_type(acc_dtype)})")
    w.emit(f"for k0 in range(0, {kernel.k}, BLOCK_K):")
    w.indent += 1
    w.emit("rk = k0 + tl.arange(0, BLOCK_K)")
    a_mask = f"(rm[:, None] < {kernel.m}) & (rk[None, :] < {kernel.k})"
    b_mask = f"(rk[:, None] < {kernel.k}) & (rn[None, :] < {kernel.n})"
    a = f"tl.load({pa} + {_operand_address(kernel.a, nb, 'rm', 'rk')}, mask={a_mask}, other=0)"
    b = f"tl.load({pb} + {_operand_address(kernel.b, nb, 'rk', 'rn')}, mask={b_mask}, other=0)"
    # Operands are converted to the result type first, as NumPy's matmul loop does.
    w.emit(f"a = {SourceWriter.cast(_bool_load(a, kernel.a.dtype), kernel.a.dtype, work)}")
    w.emit(f"b = {SourceWriter.cast(_bool_load(b, kernel.b.dtype), kernel.b.dtype, work)}")
    if work.kind == "f":
        # out_dtype names the accumulator's type: Triton 3.6 takes float32 unless told, and then
        # rejects a float64 accumulator.
        precision = ', input_precision="ieee"' if work == np.float32 else ""
        w.emit(f"acc = tl.dot(a, b, acc{precision}, out_dtype={tl_type(acc_dtype)})")
    else:
        w.emit(f"acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1).to({tl_type(acc_dtype)})")
    w.indent -= 1
    w.emit(f"v{kernel.acc_key} = {SourceWriter.cast('acc', acc_dtype, out)}")
    body.bind(kernel.acc_key, f"v{kernel.acc_key}", "full", out)
    for item in kernel.body:
        body.op(item)
    for store in kernel.stores:
        body.store(store)

    tiles = "tiles_m * tiles_n"
    i64 = needs_int64(views, batch * kernel.m * kernel.n)
    lines = [f"    {c}" for c in w.const_lines]
    lines += [
        f"    tiles_m = tl.cdiv({kernel.m}, BLOCK_M)",
        f"    tiles_n = tl.cdiv({kernel.n}, BLOCK_N)",
        "    pid = tl.program_id(0)" + (".to(tl.int64)" if i64 else ""),
        f"    pid_b = pid // ({tiles})",
        f"    pid_m = (pid % ({tiles})) // tiles_n",
        "    pid_n = pid % tiles_n",
        "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        f"    mask = (rm[:, None] < {kernel.m}) & (rn[None, :] < {kernel.n})",
    ]
    lines += [f"    {s}" for s in body.prelude] + w.lines
    summary = f"batch {kernel.batch}: [{kernel.m}, {kernel.k}] @ [{kernel.k}, {kernel.n}] -> {out}"
    block_m = min(max(16, next_pow2(kernel.m)), tuning.mm_block)
    block_n = min(max(16, next_pow2(kernel.n)), tuning.mm_block)
    block_k = min(max(16, next_pow2(kernel.k)), 32 if tuning.autotune else tuning.mm_block)
    autotune = None
    if tuning.autotune:
        configs = _configs(kernel.m, kernel.n)
        block_m, block_n, block_k = configs[0][:3]
        autotune = [({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, nw, ns) for m, n, k, nw, ns in configs]
    m, n = kernel.m, kernel.n

    def grid_fn(meta: dict) -> tuple[int, ...]:
        return (batch * -(-m // meta["BLOCK_M"]) * -(-n // meta["BLOCK_N"]),)

    return assemble(
        name,
        ptrs,
        describe,
        summary,
        lines,
        constexprs={"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k},
        grid=grid_fn({"BLOCK_M": block_m, "BLOCK_N": block_n}),
        num_warps=4,
        autotune=autotune,
        grid_fn=grid_fn,
    )


def _configs(m: int, n: int) -> list[tuple[int, int, int, int, int]]:
    """The autotune candidates for an ``m`` x ``n`` output: none with a tile over twice its padded size
    (every one is compiled and timed at the first launch); the 16 x 32 one always fits."""
    candidates = _GPU_CONFIGS + (_NARROW_CONFIGS if next_pow2(n) <= 16 else ())
    return [c for c in candidates if c[0] <= max(16, next_pow2(m)) * 2 and c[1] <= max(16, next_pow2(n)) * 2]
