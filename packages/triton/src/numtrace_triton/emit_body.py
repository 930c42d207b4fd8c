"""What every kernel emitter shares: the generated-kernel record, the module header, block-size rules,
and the emission of loads, elementwise ops and stores through a kernel-specific index space.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .dtypes import signature_type, storage_dtype, tl_type
from .elementwise import LOWERINGS, lower_elementwise
from .kernel_plan import Arg, Const, Load, Op, Ref, Store, View
from .source_writer import SourceWriter

__all__ = [
    "COMPILE_OPTIONS",
    "BodyEmitter",
    "GeneratedKernel",
    "IndexSpace",
    "Pointers",
    "Tuning",
    "assemble",
    "item_views",
    "needs_int64",
    "next_pow2",
]


# Options of every compile and launch: no contraction of a * b + c into one FMA, which rounds once
# where NumPy rounds twice (Triton 3.6 contracts by default); libdevice's float32 functions in their
# IEEE form, which keeps subnormal operands and results (Triton links the flush-to-zero form by
# default: float32 exp(-90) would be 0, log(1e-40) -inf).
COMPILE_OPTIONS = {"enable_fp_fusion": False, "enable_reflect_ftz": False}


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


@dataclass(frozen=True)
class Tuning:
    """Block-size limits and the form of float math, per target. The GPU wants blocks that fit
    registers; the interpreter wants few programs.

    ``autotune`` adds ``triton.autotune`` configs to matmul and reduction kernels (GPU only: the
    interpreter would run every config). ``libdevice`` writes exp, log, sin, ... as CUDA's libdevice
    functions (within CUDA's documented ulp bounds), which the interpreter cannot run; without it,
    as ``triton.language``'s, which a GPU computes with approximate instructions
    (`SourceWriter.math`).
    """

    max_block: int
    max_persistent: int
    loop_block: int
    tile_elems: int
    mm_block: int
    autotune: bool
    libdevice: bool

    @staticmethod
    def gpu() -> Tuning:
        return Tuning(
            max_block=1024, max_persistent=8192, loop_block=2048, tile_elems=8192, mm_block=128,
            autotune=True, libdevice=True,
        )

    @staticmethod
    def interpreter() -> Tuning:
        return Tuning(
            max_block=1 << 16,
            max_persistent=1 << 14,
            loop_block=1 << 12,
            tile_elems=1 << 16,
            mm_block=128,
            autotune=False,
            libdevice=False,
        )


@dataclass
class GeneratedKernel:
    """One kernel ready to launch: readable source, its buffers, launch grid and compile-time constants.

    ``buffers[i]`` is the plan buffer bound to pointer parameter ``i``; ``signature`` and
    ``constexprs`` are what ``triton.compile`` needs for an ahead-of-time build.
    """

    name: str
    source: str
    buffers: list[int]
    buffer_dtypes: list[np.dtype]
    grid: tuple[int, ...] | None
    constexprs: dict[str, int]
    num_warps: int
    signature: dict[str, str]
    tuned: tuple[str, ...] = ()  # constexprs chosen by triton.autotune at launch (GPU only)
    grid_fn: Callable[[dict], tuple[int, ...]] | None = None  # the grid from the chosen config
    path: str | None = field(default=None, compare=False)

    @property
    def launch_constexprs(self) -> dict[str, int]:
        """The constexprs a launch passes itself (autotuned ones come from the chosen config)."""
        return {k: v for k, v in self.constexprs.items() if k not in self.tuned}


class IndexSpace(abc.ABC):
    """How a kernel kind turns a view (in its coordinates) into addresses, masks and broadcasts."""

    @abc.abstractmethod
    def address(self, view: View, level: str) -> str:
        """The element offset expression of ``view`` at ``level`` (without the base pointer)."""

    @abc.abstractmethod
    def mask(self, level: str) -> str | None:
        """The mask expression of ``level``'s tile, or None when every lane is in bounds."""

    def lift(self, expr: str, from_level: str, to_level: str) -> str:
        """``expr`` computed at ``from_level`` broadcast to ``to_level``'s tile shape."""
        if from_level != to_level:
            raise AssertionError(f"cannot use a {from_level}-level value at level {to_level}")
        return expr


class BodyEmitter:
    """Emits loads, elementwise ops and stores; knows nothing about how a kernel is tiled."""

    def __init__(self, writer: SourceWriter, space: IndexSpace, params: dict[int, str]) -> None:
        self.w = writer
        self.space = space
        self.params = params  # buffer id -> pointer parameter name
        self.names: dict[int, tuple[str, str]] = {}  # value key -> (variable, level)
        self.dtypes: dict[int, np.dtype] = {}
        self.scalars: dict[View, str] = {}  # fully broadcast loads ...
        self.prelude: list[str] = []  # ... emitted once at the top of the kernel
        self.loaded: dict[tuple[View, str], str] = {}  # loads already in scope

    def operand(self, arg: Arg, level: str) -> tuple[str, np.dtype]:
        if isinstance(arg, Ref):
            name, at = self.names[arg.key]
            return self.space.lift(name, at, level), self.dtypes[arg.key]
        if isinstance(arg, Const):
            return self.w.const(arg.value, arg.dtype), np.dtype(arg.dtype)
        return self.load(arg, level), np.dtype(arg.view.dtype)

    def load(self, arg: Load, level: str) -> str:
        view = arg.view
        ptr = self.params[view.buffer]
        is_bool = np.dtype(view.dtype).kind == "b"
        if self._is_scalar(view):
            # Broadcast everywhere: one load at the top of the kernel, before any loop.
            name = self.scalars.get(view)
            if name is None:
                name = f"s{len(self.scalars)}"
                self.scalars[view] = name
                self.prelude.append(
                    f"{name} = tl.load({ptr} + {view.offset} + tl.zeros([1], tl.int32))"
                    + (" != 0" if is_bool else "")
                )
            return name
        cached = self.loaded.get((view, level))
        if cached is not None:
            return cached
        addr = self.space.address(view, level)
        mask = self.space.mask(level)
        expr = f"tl.load({ptr} + {addr}" + (f", mask={mask}, other=0)" if mask else ")")
        name = self.w.let(f"{expr} != 0" if is_bool else expr, "x")
        self.loaded[(view, level)] = name
        return name

    def new_scope(self) -> None:
        """Forget loads and full-level values: a new loop body must load and compute them again."""
        self.loaded.clear()

    @staticmethod
    def _is_scalar(view: View) -> bool:
        return not any(s for s, n in zip(view.strides, view.shape) if n != 1)

    def op(self, item: Op, suffix: str = "") -> str:
        special = getattr(item.op, "name", None)
        if special == "gather":
            return self._gather(item, suffix)
        if special in ("scatter_claim", "scatter_write"):
            return self._scatter(item, special == "scatter_claim")
        if special == "scatter_atomic":
            return self._scatter_atomic(item)
        if item.op not in LOWERINGS:
            raise NotImplementedError(f"the Triton backend has no lowering for {item.label}")
        args = [self.operand(a, item.level) for a in item.args]
        try:
            expr = lower_elementwise(self.w, item.op, args, item.attrs, item.dtype)
        except NotImplementedError as exc:
            raise NotImplementedError(f"{item.label}: {exc}") from None
        if expr.isidentifier():  # already a name (a temporary, or an operand the op leaves unchanged)
            name = expr
        else:
            name = f"v{item.key}{suffix}"
            self.w.emit(f"{name} = {expr}")
        self.bind(item.key, name, item.level, item.dtype)
        return name

    def _gather(self, item: Op, suffix: str) -> str:
        """``source[..., index, ...]`` (see `numtrace_triton.gathers`): an index out of range (after
        NumPy's wrap of a negative one) is not loaded; it sets the flag the executable checks."""
        w, attrs = self.w, item.attrs
        many = isinstance(attrs["stride"], tuple)  # several index arrays, one per indexed axis
        strides = attrs["stride"] if many else (attrs["stride"],)
        extents = attrs["extent"] if many else (attrs["extent"],)
        offsets, bads = [], []
        for k, (stride, n) in enumerate(zip(strides, extents)):
            iv, bad = self._index(item, k, n)
            offsets.append(f"{iv} * {stride}")
            bads.append(bad)
        bad = bads[0] if len(bads) == 1 else w.let(" | ".join(f"({b})" for b in bads))
        mask = self.space.mask(item.level)
        ok = f"{mask} & ({bad} == 0)" if mask else f"{bad} == 0"
        src, flag = attrs["source"], attrs["flag"]
        addr = self.space.address(src, item.level)
        load = f"tl.load({self.params[src.buffer]} + {addr} + {' + '.join(offsets)}, mask={ok}, other=0)"
        name = f"v{item.key}{suffix}"
        w.emit(f"{name} = {load}" + (" != 0" if np.dtype(src.dtype).kind == "b" else ""))
        self._raise_flag(flag, mask, bad)
        self.bind(item.key, name, item.level, item.dtype)
        return name

    def _raise_flag(self, flag: View, mask: str | None, bad: str) -> None:
        """Sets the per-call out-of-range flag where a lane's index is bad. The pointer takes the shape
        of the whole condition: an index uniform over the block (one index row) is a 1-element
        tensor, and a store's mask may not be wider than its pointer."""
        fmask = self.w.let(f"{mask} & {bad}" if mask else bad)
        self.w.emit(f"tl.store({self.params[flag.buffer]} + {fmask}.to(tl.int32) * 0, {fmask}.to(tl.int32), "
                    f"mask={fmask})")

    def _index(self, item: Op, k: int = 0, n: int | None = None) -> tuple[str, str]:
        """Index operand ``k`` of a gather or scatter as int64, a negative one wrapped, and whether it
        is out of range of ``n`` (default: the op's ``extent``) (names)."""
        w = self.w
        index, index_dtype = self.operand(item.args[k], item.level)
        iv = w.let(SourceWriter.cast(index, index_dtype, np.dtype(np.int64)))
        n = item.attrs["extent"] if n is None else n
        wrap = item.attrs["wrap"]
        if wrap[k] if isinstance(wrap, tuple) else wrap:  # see `gathers._wraps`
            iv = w.let(f"tl.where({iv} < 0, {iv} + {n}, {iv})")
        return iv, w.let(f"({iv} < 0) | ({iv} >= {n})")

    def _scatter(self, item: Op, claim: bool) -> str:
        """A scatter's claim (the last position naming each target row wins, by an atomic max) or its
        write (only where the position won); see `numtrace_triton.gathers`."""
        w, attrs = self.w, item.attrs
        iv, bad = self._index(item)
        position, _ = self.operand(item.args[1], item.level)
        mask = self.space.mask(item.level)
        ok = w.let(f"{mask} & ({bad} == 0)" if mask else f"{bad} == 0")
        pw = self.params[attrs["winner"].buffer]
        if claim:
            flag = attrs["flag"]
            w.emit(f"tl.atomic_max({pw} + {iv}, {position}, mask={ok}, sem=\"relaxed\")")
            self._raise_flag(flag, mask, bad)
        else:
            won = w.let(f"{ok} & (tl.load({pw} + {iv}, mask={ok}, other=-1) == {position})")
            value, value_dtype = self.operand(item.args[2], item.level)
            target = attrs["target"]
            value = self.w.astype(value, value_dtype, target.dtype)
            if np.dtype(target.dtype).kind == "b":
                value = f"{value}.to({tl_type(storage_dtype(target.dtype))})"
            addr = self.space.address(target, item.level)
            w.emit(f"tl.store({self.params[target.buffer]} + {addr} + {iv} * {attrs['stride']}, {value}, "
                   f"mask={won})")
        self.bind(item.key, iv, item.level, np.dtype(np.int64))
        return iv

    def _scatter_atomic(self, item: Op) -> str:
        """``ufunc.at``'s update of each indexed element by an atomic (see `numtrace_triton.gathers`); an
        index out of range is not written, it sets the flag."""
        w, attrs = self.w, item.attrs
        iv, bad = self._index(item)
        mask = self.space.mask(item.level)
        ok = w.let(f"{mask} & ({bad} == 0)" if mask else f"{bad} == 0")
        value, value_dtype = self.operand(item.args[1], item.level)
        target = attrs["target"]
        value = w.let(w.astype(value, value_dtype, target.dtype))
        if attrs["negate"]:
            value = w.let(w.neg(value, target.dtype))
        base = self.params[target.buffer]
        offset = f"{self.space.address(target, item.level)} + {iv} * {attrs['stride']}"
        if attrs["atomic"] == "add" and np.dtype(target.dtype) == np.float32:
            self._add_float32(base, offset, value, ok)
        else:
            w.emit(f"tl.atomic_{attrs['atomic']}({base} + {offset}, {value}, mask={ok}, sem=\"relaxed\")")
        self._raise_flag(attrs["flag"], mask, bad)
        self.bind(item.key, iv, item.level, np.dtype(np.int64))
        return iv

    def _add_float32(self, base: str, offset: str, value: str, ok: str) -> None:
        """``base[offset] += value`` where ``ok``, atomically, with NumPy's IEEE float32 addition. A GPU's
        float32 atomic add (``red.add.f32``) flushes subnormal operands and results to zero, which
        changes no sum where ``|value| >= 2**-100``: such a value is normal, and the floats beside it are
        at least 2**-124 apart, so a subnormal in memory (below 2**-126) is under half that gap and
        value plus it rounds to value, as value plus zero does; and an exact sum below 2**-126 would need
        the operand in memory within 2**-101 of ``-value``, a multiple of 2**-124 as value is, so the sum
        is 0 or at least 2**-124. Those lanes take the atomic add. The others (zeros, subnormals, tiny
        normals, NaN) read the element atomically and add in float32 arithmetic that keeps subnormals;
        an add that leaves the bits read is done (it takes effect at that read: ``x + 0.0``), the rest
        swap the sum's int32 bits in by a compare-and-swap loop. The loop runs until every lane of the
        block is done: ``tl.atomic_cas`` has no mask, so a done lane swaps some bits for themselves (at
        element 0 for a lane without a target, which exists wherever a lane has one): no change."""
        w = self.w
        added = w.let(f"{ok} & (tl.abs({value}) >= {w.const(2.0**-100, np.dtype(np.float32))})")
        w.emit(f"tl.atomic_add({base} + {offset}, {value}, mask={added}, sem=\"relaxed\")")
        bits = w.let(f"{base}.to(tl.pointer_type(tl.int32)) + tl.where({ok}, {offset}, 0)")
        pending = w.let(f"tl.broadcast_to({ok} & ({added} == 0), {bits}.shape)")
        old = w.let(f"tl.atomic_or({bits}, {pending}.to(tl.int32) * 0, mask={pending}, sem=\"relaxed\")")
        total = f"({old}.to(tl.float32, bitcast=True) + {value}).to(tl.int32, bitcast=True)"
        new = w.let(total)
        w.emit(f"{pending} = {pending} & ({new} != {old})")
        w.emit(f"while tl.max({pending}.to(tl.int32), 0) != 0:")
        w.indent += 1
        seen = w.let(f"tl.atomic_cas({bits}, {old}, tl.where({pending}, {new}, {old}), sem=\"relaxed\")")
        w.emit(f"{pending} = {pending} & ({seen} != {old})")
        w.emit(f"{old} = {seen}")
        w.emit(f"{new} = {total}")
        w.emit(f"{pending} = {pending} & ({new} != {old})")
        w.indent -= 1

    def bind(self, key: int, name: str, level: str, dtype: np.dtype) -> None:
        self.names[key] = (name, level)
        self.dtypes[key] = np.dtype(dtype)

    def store(self, store: Store) -> None:
        name, at = self.names[store.key]
        value = self.space.lift(name, at, store.level)
        value_dtype = self.dtypes[store.key]
        target = storage_dtype(store.view.dtype)
        value = self.w.astype(value, value_dtype, store.view.dtype)
        if np.dtype(store.view.dtype).kind == "b":
            value = f"{value}.to({tl_type(target)})"
        ptr = self.params[store.view.buffer]
        addr = self.space.address(store.view, store.level)
        mask = self.space.mask(store.level)
        self.w.emit(f"tl.store({ptr} + {addr}, {value}" + (f", mask={mask})" if mask else ")"))


@dataclass(frozen=True)
class Pointers:
    """A kernel's pointer parameters ``p0, p1, ...``: one per distinct buffer, in first-use order."""

    params: dict[int, str]  # buffer id -> parameter name
    buffers: list[tuple[int, np.dtype]]  # (buffer id, storage dtype)
    signature: dict[str, str]  # parameter name -> triton.compile pointer type

    @classmethod
    def of(cls, views: list[View]) -> Pointers:
        seen: dict[int, np.dtype] = {}
        for v in views:
            dtype = storage_dtype(v.dtype)
            if seen.setdefault(v.buffer, dtype) != dtype:
                raise AssertionError(f"buffer {v.buffer} accessed as both {seen[v.buffer]} and {dtype}")
        params = {buf: f"p{i}" for i, buf in enumerate(seen)}
        signature = {params[buf]: signature_type(dtype) for buf, dtype in seen.items()}
        return cls(params, list(seen.items()), signature)


def item_views(items: list, stores: list[Store]) -> list[View]:
    """Every view a kernel body touches, in program order."""
    views: list[View] = []
    for item in items:
        args = item.args if isinstance(item, Op) else [item.arg]
        views.extend(a.view for a in args if isinstance(a, Load))
        if isinstance(item, Op):  # a gather's source and flag (`numtrace_triton.gathers`)
            views.extend(v for v in item.attrs.values() if isinstance(v, View))
    views.extend(s.view for s in stores)
    return views


HEADER = "import triton\nimport triton.language as tl\n"
LIBDEVICE_IMPORT = "from triton.language.extra.cuda import libdevice\n"


def assemble(
    name: str,
    ptrs: Pointers,
    describe: Callable[[int], str],
    summary: str,
    lines: list[str],
    *,
    constexprs: dict[str, int],
    grid: tuple[int, ...],
    num_warps: int,
    autotune: list[tuple[dict[str, int], int, int]] | None = None,
    grid_fn: Callable[[dict], tuple[int, ...]] | None = None,
    helpers: str = "",
) -> GeneratedKernel:
    """The kernel module (imports, helpers, decorators, kernel) and its launch record.

    The kernel's comment header lists each pointer (``describe(buffer)``) and then ``summary``.

    ``autotune`` lists ``(config, num_warps, num_stages)`` for ``triton.autotune``; the keys of the
    configs are then chosen at launch and ``grid_fn`` gives the grid from the chosen config.
    """
    header = HEADER + (LIBDEVICE_IMPORT if any("libdevice." in line for line in lines) else "")
    decorators = []
    tuned: tuple[str, ...] = ()
    if autotune:
        configs = ", ".join(
            f"triton.Config({cfg!r}, num_warps={nw}, num_stages={ns})" for cfg, nw, ns in autotune
        )
        decorators.append(f"@triton.autotune(configs=[{configs}], key=[])")
        tuned = tuple(autotune[0][0])
    signature_line = ", ".join([*ptrs.params.values(), *(f"{c}: tl.constexpr" for c in constexprs)])
    docs = [f"{p}: {describe(b)}" for b, p in ptrs.params.items()] + [summary]
    doc = "".join(f"    # {line}\n" for line in docs)
    source = (
        f'"""numtrace generated kernel {name}."""\n{header}\n{helpers}\n'
        + "".join(f"{d}\n" for d in decorators)
        + f"@triton.jit\ndef {name}({signature_line}):\n{doc}"
        + "\n".join(lines)
        + "\n"
    )
    return GeneratedKernel(
        name=name,
        source=source,
        buffers=[b for b, _ in ptrs.buffers],
        buffer_dtypes=[d for _, d in ptrs.buffers],
        grid=grid,
        constexprs=dict(constexprs),
        num_warps=num_warps,
        signature={**ptrs.signature, **{c: "constexpr" for c in constexprs}},
        tuned=tuned,
        grid_fn=grid_fn,
    )


def needs_int64(views: list[View], *extents: int) -> bool:
    """Whether any index or address of the kernel can exceed int32 (then index math is int64)."""
    limit = 2**31 - 1
    if any(e > limit for e in extents):
        return True
    for v in views:
        reach = abs(v.offset) + sum(abs(s) * (n - 1) for s, n in zip(v.strides, v.shape) if n > 0)
        if reach > limit:
            return True
    return False
