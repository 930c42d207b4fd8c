"""Source for a reduction kernel: tiles of ``BLOCK_M`` rows by ``BLOCK_R`` reduced elements.

Values live at two levels: ``full`` (one per input element, a ``[BLOCK_M,
BLOCK_R]`` tile) and ``row`` (one per output element, ``[BLOCK_M]``). When the
reduced extent fits one tile the kernel is *persistent*: each row is loaded
once and every reduction, prologue and epilogue (a whole softmax or
layernorm) runs on registers. Otherwise it *loops* over the reduced extent in
passes: a reduction whose input needs another reduction's result runs in a
later pass (softmax: max, then sum, then the normalised store), recomputing
its cheap elementwise prologue from memory instead of keeping a full row.
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
from .emit_pointwise import tile_address, with_offset
from .kernel_plan import Const, Load, Op, Reduce, ReductionKernel, Ref, View
from .source_writer import SourceWriter, literal

__all__ = ["emit_reduction"]

_PROD_HELPER = "@triton.jit\ndef _multiply(a, b):\n    return a * b\n\n"


class _RowSpace(IndexSpace):
    # Masks are always applied: with autotuned BLOCK_M no tile size is known to divide the extents.
    def __init__(self, n_kept: int) -> None:
        self.n_kept = n_kept

    def address(self, view: View, level: str) -> str:
        k = self.n_kept
        rows = tile_address("rows", view.shape[:k], view.strides[:k])
        if level == "row":
            return with_offset(view.offset, rows)
        red = tile_address("r", view.shape[k:], view.strides[k:])
        full = f"({with_offset(view.offset, rows)})[:, None] + ({red})[None, :]"
        return f"tl.broadcast_to({full}, [BLOCK_M, BLOCK_R])"

    def mask(self, level: str) -> str | None:
        return "row_mask" if level == "row" else "mask"

    def lift(self, expr: str, from_level: str, to_level: str) -> str:
        if from_level == to_level:
            return expr
        if (from_level, to_level) != ("row", "full"):
            raise AssertionError(f"cannot use a {from_level}-level value at level {to_level}")
        return f"{expr}[:, None]"


def _identity(op: str, dtype: np.dtype) -> bool | int | float:
    """The value masked-off lanes take so that they cannot change the result."""
    if op in ("sum", "any", "cumsum"):
        return 0
    if op in ("prod", "all", "cumprod"):
        return 1
    if dtype.kind == "f":
        return -np.inf if op in ("max", "argmax") else np.inf
    if dtype.kind == "b":
        return op in ("min", "argmin")
    info = np.iinfo(dtype)
    return int(info.min) if op in ("max", "argmax") else int(info.max)


def _narrowed(total: str, acc: np.dtype) -> str:
    """``total``, a ``tl.sum``/``tl.cumsum`` of ``acc`` values, back in ``acc``: Triton sums booleans and
    integers under 32 bits in 32 bits, where NumPy's ``sum(dtype=int8)`` wraps and ``sum(dtype=bool)``
    is a logical or; a store would narrow it, an op fused after the sum would not."""
    narrow = acc.kind in "iub" and acc.itemsize < 4
    return SourceWriter.cast(total, np.dtype(np.int32), acc) if narrow else total


def _acc_dtype(item: Reduce, arg_dtype: np.dtype) -> np.dtype:
    if item.op in ("any", "all"):
        return np.dtype(bool)
    if item.op in ("argmax", "argmin") and arg_dtype.kind == "b":
        return np.dtype(np.int8)  # compared as 0/1
    if item.op in ("max", "min", "argmax", "argmin"):
        return arg_dtype
    return np.dtype(np.float32) if item.dtype.kind == "f" and item.dtype.itemsize < 4 else item.dtype


class _ReductionWriter:
    """Emits one reduction kernel; ``body`` holds the items in program order."""

    def __init__(self, kernel: ReductionKernel, params: dict[int, str], persistent: bool,
                 libdevice: bool) -> None:
        self.kernel = kernel
        self.persistent = persistent
        self.w = SourceWriter(libdevice=libdevice)
        rows = int(np.prod(kernel.kept, dtype=np.int64))
        self.rows, self.red = rows, int(np.prod(kernel.reduced, dtype=np.int64))
        self.space = _RowSpace(len(kernel.kept))
        self.body = BodyEmitter(self.w, self.space, params)
        self.level = {item.key: item.level for item in kernel.body}
        self.items = {item.key: item for item in kernel.body}

    # -- reductions ---------------------------------------------------------------------------
    def _masked(self, item: Reduce, x: str, acc: np.dtype, x_dtype: np.dtype) -> str:
        x = self.w.astype(x, x_dtype, acc)   # NumPy's cast of a float to an integer dtype= on a GPU too
        return self.w.let(f"tl.where(mask, {x}, {self.w.const(_identity(item.op, acc), acc)})")

    def _final(self, item: Reduce, tile: str, acc: np.dtype) -> str:
        """The ``[BLOCK_M]`` result of reducing the lanes of ``tile`` along axis 1."""
        w = self.w
        if item.op == "sum":
            return _narrowed(f"tl.sum({tile}, axis=1)", acc)
        if item.op == "prod":
            return f"tl.reduce({tile}, 1, _multiply)"
        if item.op in ("any", "all"):
            fn = "max" if item.op == "any" else "min"
            return f"tl.{fn}({tile}.to(tl.int8), axis=1) != 0"
        if item.op in ("max", "min"):
            best = (
                f"tl.{item.op}({tile}.to(tl.int8), axis=1) != 0"
                if acc.kind == "b"
                else f"tl.{item.op}({tile}, axis=1)"
            )
            if acc.kind != "f":
                return best
            # Triton's max/min skip NaN; NumPy's propagate it.
            has_nan = f"tl.max(({tile} != {tile}).to(tl.int8), axis=1) != 0"
            return f"tl.where({has_nan}, {w.const(np.nan, acc)}, {best})"
        raise NotImplementedError(f"{item.label}: reduction {item.op!r} is not lowered by the Triton backend")

    def _combine(self, item: Reduce, acc: str, x: str, dtype: np.dtype) -> str:
        if item.op == "sum":  # booleans: an or (a GPU adds int1 modulo 2; the interpreter's NumPy ors)
            return f"{acc} | {x}" if dtype.kind == "b" else f"{acc} + {x}"
        if item.op == "prod":
            return f"{acc} * {x}"
        if item.op == "any":
            return f"{acc} | {x}"
        if item.op == "all":
            return f"{acc} & {x}"
        if item.op in ("max", "min"):
            fn = "maximum" if item.op == "max" else "minimum"
            if dtype.kind == "b":
                return f"{acc} | {x}" if item.op == "max" else f"{acc} & {x}"
            nan = ", propagate_nan=tl.PropagateNan.ALL" if dtype.kind == "f" else ""
            return f"tl.{fn}({acc}, {x}{nan})"
        raise NotImplementedError(f"{item.label}: reduction {item.op!r} is not lowered by the Triton backend")

    def _bind_reduce(self, item: Reduce, expr: str, acc: np.dtype) -> None:
        name = f"v{item.key}"
        self.w.emit(f"{name} = {SourceWriter.cast(expr, acc, item.dtype)}")
        self.body.bind(item.key, name, "row", item.dtype)

    # -- cumsum / cumprod: full-level values, with a per-row carry between chunks when looping ----
    def _scan(self, item: Reduce, suffix: str | None) -> None:
        """Emit scan ``item``; ``suffix`` names the pass of a looped kernel (None: persistent)."""
        x, x_dtype = self.body.operand(item.arg, "full")
        acc = _acc_dtype(item, x_dtype)
        xm = self._masked(item, x, acc, x_dtype)
        expr = f"tl.{item.op}({xm}, axis=1)"
        name = f"v{item.key}{suffix or ''}"
        if suffix is not None:
            carry = f"carry{item.key}{suffix}"
            sign, total = (
                ("+", f"tl.sum({xm}, axis=1)")
                if item.op == "cumsum"
                else ("*", f"tl.reduce({xm}, 1, _multiply)")
            )
            running = _narrowed(f"{expr} {sign} {carry}[:, None]", acc)
            self.w.emit(f"{name} = {SourceWriter.cast(running, acc, item.dtype)}")
            # tl.sum widens integers under 32 bits: the carry keeps its type across iterations.
            self.w.emit(f"{carry} = {_narrowed(f'({carry} {sign} {total})', acc)}")
        else:
            self.w.emit(f"{name} = {SourceWriter.cast(_narrowed(expr, acc), acc, item.dtype)}")
        self.body.bind(item.key, name, "full", item.dtype)

    # -- argmax / argmin: per-lane best value and its index, then the first best lane ---------------
    _NO_INDEX = 2**31 - 1  # an index no element has (reduced extents stay below int32)

    def _arg_init(self, item: Reduce, acc: np.dtype) -> None:
        self.w.emit(
            f"acc{item.key} = tl.full([BLOCK_M, BLOCK_R], {literal(_identity(item.op, acc), acc)}, "
            f"{tl_type(acc)})"
        )
        self.w.emit(f"idx{item.key} = tl.full([BLOCK_M, BLOCK_R], {self._NO_INDEX}, tl.int32)")

    def _arg_combine(self, item: Reduce, x: str, acc: np.dtype) -> None:
        """Lanes see increasing indices, so a strict comparison keeps the first best; the first NaN wins."""
        a, i = f"acc{item.key}", f"idx{item.key}"
        better = f"({x} > {a})" if item.op == "argmax" else f"({x} < {a})"
        if acc.kind == "f":
            better = f"{better} | (({x} != {x}) & ({a} == {a}))"
        take = self.w.let(f"({better} | ({i} == {self._NO_INDEX})) & mask")
        self.w.emit(f"{a} = tl.where({take}, {x}, {a})")
        self.w.emit(f"{i} = tl.where({take}, tl.broadcast_to(r[None, :], [BLOCK_M, BLOCK_R]), {i})")

    def _arg_final(self, item: Reduce, acc: np.dtype) -> str:
        a, i, none = f"acc{item.key}", f"idx{item.key}", self._NO_INDEX
        best = self.w.let(f"tl.{item.op[3:]}({a}, axis=1)")
        first = self.w.let(
            f"tl.min(tl.where(({a} == {best}[:, None]) & ({i} != {none}), {i}, {none}), axis=1)"
        )
        if acc.kind == "f":  # NumPy: the first NaN, if any
            nan_at = f"tl.min(tl.where({a} != {a}, {i}, {none}), axis=1)"
            first = self.w.let(f"tl.where({nan_at} != {none}, {nan_at}, {first})")
        return first

    def _bind_arg(self, item: Reduce, acc: np.dtype) -> None:
        self._bind_reduce(item, self._arg_final(item, acc), np.dtype(np.int32))

    # -- structure ------------------------------------------------------------------------------
    def emit_persistent(self) -> None:
        self.w.emit("r = tl.arange(0, BLOCK_R)")
        self.w.emit(f"mask = row_mask[:, None] & (r < {self.red})[None, :]")
        for item in self.kernel.body:
            if isinstance(item, Op):
                self.body.op(item)
                continue
            if item.level == "full":
                self._scan(item, None)
                continue
            x, x_dtype = self.body.operand(item.arg, "full")
            acc = _acc_dtype(item, x_dtype)
            if item.op in ("argmax", "argmin"):
                self._arg_init(item, acc)
                self._arg_combine(item, self._masked(item, x, acc, x_dtype), acc)
                self._bind_arg(item, acc)
                continue
            self._bind_reduce(item, self._final(item, self._masked(item, x, acc, x_dtype), acc), acc)
        for store in self.kernel.stores:
            self.body.store(store)

    def _ready(self) -> dict[int, int]:
        """For each value, the pass after which it is known (0: from memory alone)."""
        ready: dict[int, int] = {}
        for item in self.kernel.body:
            args = item.args if isinstance(item, Op) else [item.arg]
            deps = max((ready[a.key] for a in args if isinstance(a, Ref)), default=0)
            ready[item.key] = deps + 1 if isinstance(item, Reduce) and item.level == "row" else deps
        return ready

    def _needed(self, roots: list[int]) -> list[Op | Reduce]:
        """The full-level ops and scans (in program order) that ``roots`` depend on, roots included."""
        need: set[int] = set()
        stack = list(roots)
        while stack:
            key = stack.pop()
            item = self.items[key]
            if key in need or item.level != "full":
                continue
            need.add(key)
            stack.extend(
                a.key for a in (item.args if isinstance(item, Op) else [item.arg]) if isinstance(a, Ref)
            )
        return [item for item in self.kernel.body if item.key in need]

    def emit_looped(self) -> None:
        ready = self._ready()
        reduces = [i for i in self.kernel.body if isinstance(i, Reduce) and i.level == "row"]
        full_stores = [s for s in self.kernel.stores if s.level == "full"]
        passes = 1 + max(
            [ready[r.arg.key] if isinstance(r.arg, Ref) else 0 for r in reduces]
            + [ready[s.key] for s in full_stores],
            default=0,
        )
        row_ops = [i for i in self.kernel.body if isinstance(i, Op) and i.level == "row"]
        self._emit_row_ops(row_ops, ready, 0)
        for p in range(passes):
            mine = [r for r in reduces if (ready[r.arg.key] if isinstance(r.arg, Ref) else 0) == p]
            stores = [s for s in full_stores if ready[s.key] == p]
            if not mine and not stores:
                continue
            accs = {}
            for item in mine:
                x_dtype = self._arg_dtype(item.arg)
                acc = _acc_dtype(item, x_dtype)
                accs[item.key] = (f"acc{item.key}", acc, x_dtype)
                if item.op in ("argmax", "argmin"):
                    self._arg_init(item, acc)
                    continue
                init = literal(_identity(item.op, acc), acc)  # tl.full takes a scalar, not a [1] tensor
                self.w.emit(f"acc{item.key} = tl.full([BLOCK_M, BLOCK_R], {init}, {tl_type(acc)})")
            roots = [r.arg.key for r in mine if isinstance(r.arg, Ref)] + [s.key for s in stores]
            needed = self._needed(roots)
            for scan in needed:
                if isinstance(scan, Reduce):  # a running total per row, carried across chunks
                    acc = _acc_dtype(scan, self._arg_dtype(scan.arg))
                    init = literal(_identity(scan.op, acc), acc)
                    self.w.emit(f"carry{scan.key}_{p} = tl.full([BLOCK_M], {init}, {tl_type(acc)})")
            self.w.emit(f"for r0 in range(0, {self.red}, BLOCK_R):")
            self.w.indent += 1
            self.body.new_scope()
            self.w.emit("r = r0 + tl.arange(0, BLOCK_R)")
            self.w.emit(f"mask = row_mask[:, None] & (r < {self.red})[None, :]")
            for op in needed:
                if isinstance(op, Reduce):
                    self._scan(op, f"_{p}")
                else:
                    self.body.op(op, suffix=f"_{p}")
            for item in mine:
                name, acc, x_dtype = accs[item.key]
                x, _ = self.body.operand(item.arg, "full")
                if item.op in ("argmax", "argmin"):
                    self._arg_combine(item, self._masked(item, x, acc, x_dtype), acc)
                    continue
                self.w.emit(f"{name} = {self._combine(item, name, self._masked(item, x, acc, x_dtype), acc)}")
            for store in stores:
                self.body.store(store)
            self.w.indent -= 1
            self.body.new_scope()
            for item in mine:
                name, acc, _ = accs[item.key]
                if item.op in ("argmax", "argmin"):
                    self._bind_arg(item, acc)
                else:
                    self._bind_reduce(item, self._final(item, name, acc), acc)
            self._emit_row_ops(row_ops, ready, p + 1)
        for store in self.kernel.stores:
            if store.level == "row":
                self.body.store(store)

    def _arg_dtype(self, arg: Ref | Load | Const) -> np.dtype:
        if isinstance(arg, Ref):
            return np.dtype(self.items[arg.key].dtype)
        return np.dtype(arg.view.dtype if isinstance(arg, Load) else arg.dtype)

    def _emit_row_ops(self, row_ops: list[Op], ready: dict[int, int], stage: int) -> None:
        for op in row_ops:
            if ready[op.key] == stage:
                self.body.op(op)


def emit_reduction(
    kernel: ReductionKernel, name: str, tuning: Tuning, describe: Callable[[int], str]
) -> GeneratedKernel:
    rows = int(np.prod(kernel.kept, dtype=np.int64))
    red = int(np.prod(kernel.reduced, dtype=np.int64))
    persistent = next_pow2(red) <= tuning.max_persistent
    block_r = next_pow2(red) if persistent else tuning.loop_block
    block_m = max(1, min(next_pow2(rows), tuning.tile_elems // block_r))
    views = item_views(kernel.body, kernel.stores)
    ptrs = Pointers.of(views)
    writer = _ReductionWriter(kernel, ptrs.params, persistent, tuning.libdevice)
    if persistent:
        writer.emit_persistent()
    else:
        writer.emit_looped()
    w, body = writer.w, writer.body
    pid = "tl.program_id(0).to(tl.int64)" if needs_int64(views, rows * red) else "tl.program_id(0)"
    lines = [f"    {c}" for c in w.const_lines] + [f"    {s}" for s in body.prelude]
    lines += [f"    rows = {pid} * BLOCK_M + tl.arange(0, BLOCK_M)", f"    row_mask = rows < {rows}"]
    lines += w.lines
    mode = "persistent" if persistent else "looped"
    summary = f"{rows} rows {kernel.kept} x {red} reduced {kernel.reduced} ({mode})"
    has_prod = any(isinstance(i, Reduce) and i.op in ("prod", "cumprod") for i in kernel.body)
    autotune = None
    if tuning.autotune:
        autotune = [({"BLOCK_M": m}, nw, 2) for m, nw in _autotune_configs(rows, block_r, tuning)]
    return assemble(
        name,
        ptrs,
        describe,
        summary,
        lines,
        constexprs={"BLOCK_M": block_m, "BLOCK_R": block_r},
        grid=(-(-rows // block_m),),
        num_warps=4 if block_m * block_r <= 2048 else 8,
        autotune=autotune,
        grid_fn=lambda meta: (-(-rows // meta["BLOCK_M"]),),
        helpers=_PROD_HELPER if has_prod else "",
    )


def _autotune_configs(rows: int, block_r: int, tuning: Tuning) -> list[tuple[int, int]]:
    """(BLOCK_M, num_warps) candidates whose tiles fit the register budget."""
    out = []
    for m in (1, 2, 4, 8, 16, 32, 64):
        if m * block_r <= tuning.tile_elems and m <= next_pow2(rows):
            out.append((m, 4 if m * block_r <= 2048 else 8))
    return out or [(1, 8)]
