"""C source for one fused pass: the FusedKernel's program as one loop nest.

The block interpreter runs each instruction as its own loop over a 512-element register, loading
and storing every intermediate; the generated kernel runs the whole program per element, values in
C locals (registers), over tiles of `TILE` elements of the innermost dim. Each op is the op table's
scalar function (nt_opcodes.h's nt_op_<name>_<suffix>), compiled with contraction off, so every
element rounds as the interpreter's loops round it. The float-unary ops with faster block loops
(exp, log, sin, tanh, ...: nt_vmath.h) are not inlined: the tile's operand values are stored to a
tile buffer and the op runs through the ISA build's own loop table (nt_gen.h), so their bits are
the interpreter's by construction. Only the ops whose scalar function equals that loop bit for bit
(sqrt, reciprocal, floor, ceil, rint, trunc) are inlined.

Operands whose innermost stride is not their item size (or whose data is not aligned) are gathered
into a tile buffer first and outputs of that kind scattered after, as the interpreter does; outputs
are stored only in the tile's last loop, after every input read, so an output written over its own
input (FusedStep.overwritable) reads each element before it is replaced. An output the runtime marks
for streaming (a large one that no input shares: FusedKernel's stream_min_bytes) is computed into its
tile buffer and copied out with streaming stores (nt_gen.h's nt_gen_stream), the same bits.

A pass with reductions folds each tile of each reduced value with the build's own fold (blocks.pxi's
_fold, through nt_gen.h's nt_gen_reduce), on the interpreter's blocks of one reduction row, so sums,
means and variances add up in the same order. Passes in the interpreter's column mode, or that fold
their inputs in place, stay on the interpreter (FusedKernel._run decides per call).

`generate(program)` returns the source, or None where the program is not one this generator handles
(no instructions; an output never written; np.power by a run-time scalar exponent, whose loop the
interpreter picks by the exponent's value once a block): those passes stay on the interpreter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from numtrace_cpu.runtime import BLOCK_ELEMENTS, DTYPES, OPS, REDUCTIONS, REG_KINDS, UNIT_ELEMENTS

__all__ = ["ENTRY", "STACK_BYTES", "TILE", "folds_in_registers", "generate", "has_row_tiles", "has_rows_path",
           "short_tiles_from",
           "row_scalar_operands"]

ENTRY = "nt_kernel"
"""The default name of the kernel function in the generated source."""
TILE = 512
"""Elements of the innermost dim per tile (as the interpreter's BLOCK: the tile buffers stay in L1)."""
STEP_BYTES = 512
"""Bytes of its widest operand an elementwise pass's tile covers (`_elementwise_step`) where that
operand is SHORT_TILES_FROM bytes or more. A pass that reduces nothing need not follow the
interpreter's blocks, and shorter tiles keep memory busy while it computes: in a tile of 512
elements, a table op's loop (exp: 40% of W1's arithmetic) ran on L1 data with no load of the next
tile in flight, so the compute and the memory traffic of a pass over operands larger than the
caches added up instead of overlapping. On one thread (Zen 4), W1 over 1e7 float32 went from 8.6
to 5.8 ms at 128 elements a tile; 64 elements (float32) cost more per tile than it saved, and
float64 was best at 64. Only passes with a table op take them (`_elementwise_units`)."""


def _env_short_tiles_from() -> int:
    """NUMTRACE_SHORT_TILES_FROM (bytes, at least 1; the frontend's tests lower it so that the fuzzers'
    generated passes take the short tiles), or 1 MiB where it is unset or empty."""
    text = os.environ.get("NUMTRACE_SHORT_TILES_FROM", "").strip()
    if not text:
        return 1 << 20
    value = int(text) if text.lstrip("+").isdigit() else 0
    if value < 1:
        raise ValueError(f"NUMTRACE_SHORT_TILES_FROM={text!r}: expected a number of bytes, at least 1")
    return value


SHORT_TILES_FROM = _env_short_tiles_from()
"""Bytes of an elementwise pass's widest operand from which its tiles are STEP_BYTES long: below,
the operands stay in the caches and the shorter tiles' overhead (a few ns each) is all they add
(1000 float32 elements took 0.34 -> 0.45 us in tiles of 128)."""

_NAMES = {"bool": "b", "int32": "i32", "int64": "i64", "float32": "f32", "float64": "f64"}
_C = {"bool": "unsigned char", "int32": "int32_t", "int64": "int64_t", "float32": "float",
      "float64": "double", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "uint16": "uint16_t",
      "uint32": "uint32_t", "uint64": "uint64_t"}
CTYPE = {code: _C[dt.name] for dt, code in DTYPES.items()}
SUFFIX = {code: _NAMES[dt.name] for dt, code in DTYPES.items() if dt.name in _NAMES}
ITEMSIZE = {code: dt.itemsize for dt, code in DTYPES.items()}
_DT = {dt.name: code for dt, code in DTYPES.items()}
_BY_CODE = {code: name for name, (code, _, _) in OPS.items()}
_CATEGORY = {code: cat for _, (code, cat, _) in OPS.items()}
_POW_BROADCAST = OPS["power_broadcast"][0]
CAT_UNARY, CAT_UNARY_BOOL, CAT_BINARY, CAT_BINARY_BOOL, CAT_WHERE, CAT_CAST = range(6)
_FLOATS = (_DT["float32"], _DT["float64"])
# Float-unary ops whose table expression equals their block loop bit for bit (nt_vmath.h's
# nt_float_unary_f32_exact, and the plain loops elsewhere): inlined.
_INLINE_FLOAT = frozenset({"sqrt", "reciprocal", "floor", "ceil", "rint", "trunc"})
_TEMP, _INPUT, _CONST, _OUTPUT = (REG_KINDS[k] for k in ("temp", "input", "const", "output"))
STACK_BYTES = 1 << 19
"""Most bytes of tile buffers a kernel keeps on its stack: a pass that needs more (hundreds of
values spilled between table ops, or of operands) stays on the interpreter, whose registers are on
the heap, since a thread's stack is 8 MiB (the team's workers) or less (a caller's thread)."""
assert UNIT_ELEMENTS == 16384, "nt_gen.h's NT_GEN_CHUNK must equal the interpreter's CHUNK"
assert BLOCK_ELEMENTS == TILE, "a reduction folds the interpreter's blocks: tiles must be as long"
# Column mode (see _column_units): reductions it folds in registers, most of them per pass, and the
# column (row) lengths given loops of their own, fully unrolled so that each sum stays in a register.
_MEAN = REDUCTIONS["mean"][0]
_COLUMN_REDUCTIONS = frozenset((REDUCTIONS["sum"][0], _MEAN))
_COLUMN_MAX_REDUCTIONS = 4
_UNROLLED = (1, 2, 3, 4, 8)
_PAD_ELEMENTS = 64   # nt_gen.h's NT_GEN_PAD: an operand's tile buffer is TILE + NT_GEN_PAD elements
# `_segments` by rows: a row from this long keeps its loop (GCC unroll 1), which GCC then vectorizes;
# unrolled whole, a row of 16 float32 ran as 16 scalar ops or its rows were vectorized across with
# transposing permutes (1.6-1.9x slower on rows of 16, 1.4x on 8, one-hot's and x[:, None] - y's).
# Shorter rows unroll: across the rows was faster there (1.6x on rows of 2 and 3).
_ROW_LOOP_MIN = 8


# Ops whose C expression uses these operands (by position) only for some elements, so GCC computes
# them only there: np.where's two values, heaviside's value at 0, left_shift's value under a short
# shift. NumPy computes every operand for every element, and so raises its FP flags.
_SELECTED = {"where": (0, 1), "heaviside": (1,), "left_shift": (0,)}
# Ops NumPy raises no FP flag for on any operand, a signaling NaN included (bit operations, quiet
# compares, selects; heaviside, logical_not and logical_xor raise 'invalid' on a signaling NaN): an
# operand they compute needs no keep of its own, only the ops under it that may raise (`_kept`).
# Casts from integers or bools raise nothing NumPy reports either (only 'inexact').
_FLAG_FREE = frozenset({
    "copy", "negative", "absolute", "sign", "isnan", "isinf", "isfinite", "signbit", "maximum",
    "minimum", "fmax", "fmin", "copysign", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "where"})


def _kept(instrs: list, uses: list[list[str]], defs: list[str], rdt: list[int], floaty: set[str],
          stored: set[str], consts: dict[str, float]) -> tuple[list[list[str]], set[str]]:
    """Per instruction, the values nt_gen_keep keeps for it: under each operand it selects from
    (_SELECTED), the values whose op may raise a flag NumPy reports, down to values the kernel
    computes for every element anyway (`stored`, and what they read other than through a select's
    operands), through ops that raise none (_FLAG_FREE). np.clip's maximum and minimum under a
    where, or a where under another, cost no keep; 2 * x still does (it overflows). Also returns the
    kept values whose only flag another op computed for every element raises too (`_snan_covered`),
    which the vectorized loops leave out."""
    at = {v: i for i, v in enumerate(defs)}
    always, todo = set(stored), list(stored)
    while todo:   # the values every element computes: read by a stored one, not only selected
        i = at.get(todo.pop())
        if i is None:
            continue
        skip = _SELECTED.get(_BY_CODE[instrs[i][0]], ())
        for k, u in enumerate(uses[i]):
            if k not in skip and u not in always:
                always.add(u)
                todo.append(u)

    def raising(v: str, out: list[str]) -> list[str]:
        if v not in at or v in always or v not in floaty:
            return out   # an input, a constant, computed anyway, or from no float
        i = at[v]
        op, dt, _dst, a = instrs[i][:4]
        name = _BY_CODE[op]
        if name not in _FLAG_FREE and not (name == "cast" and rdt[a] not in _FLOATS):
            out.append(v)
        else:
            for u in uses[i]:
                raising(u, out)
        return out

    kept = [list(dict.fromkeys(u for k in _SELECTED.get(_BY_CODE[op], ()) for u in raising(uses[i][k], [])))
            for i, (op, *_rest) in enumerate(instrs)]
    return kept, _snan_covered(instrs, uses, defs, consts, always, {v for k in kept for v in k})


# x + c and x - c (c - x) of a finite constant c of magnitude under these (by dtype code) raise no
# overflow (x at most the largest float: the sum rounds to it), no underflow (a subnormal sum is
# exact), no invalid but from a signaling NaN x: the only flag they can raise.
_SMALL = {_DT["float32"]: 2.0 ** 100, _DT["float64"]: 2.0 ** 960}
_ARITH = frozenset({"add", "subtract", "multiply", "divide"})


def _snan_covered(instrs: list, uses: list[list[str]], defs: list[str], consts: dict[str, float],
                  always: set[str], kept: set[str]) -> set[str]:
    """The kept values of x +- c (`_SMALL`) whose x another op computed for every element (read by a
    stored value, or kept and not itself such a value) adds, subtracts, multiplies or divides by
    something other than 0 or +-1 (which GCC may fold away: it assumes no signaling NaN): that op
    raises 'invalid' wherever x is a signaling NaN, so the keep of x +- c adds no flag.
    ``np.where(x > 0.5, 2 * x, x - 1)`` keeps 2 * x alone."""
    at = {v: i for i, v in enumerate(defs)}

    def name(i: int) -> str:
        return _BY_CODE[instrs[i][0]]

    def small_offset(v: str) -> str | None:   # x of a kept x +- c, else None
        i = at[v]
        if name(i) not in ("add", "subtract") or instrs[i][1] not in _SMALL:
            return None
        a, b = uses[i]
        for x, c in ((a, b), (b, a)):
            if c in consts and abs(consts[c]) < _SMALL[instrs[i][1]]:
                return x
        return None

    offsets = {v: small_offset(v) for v in kept}
    computed = always | {v for v, x in offsets.items() if x is None}
    covered = set()
    for v, x in offsets.items():
        if x is not None and any(
                defs[j] in computed and name(j) in _ARITH and instrs[j][1] in _SMALL and x in uses[j]
                and not any(u != x and u in consts and _near_identity(consts[u]) for u in uses[j])
                for j in range(len(instrs))):
            covered.add(v)
    return covered


def _near_identity(c: float) -> bool:
    """Whether c is 0 or +-1, or rounds to one in float32 (with a margin)."""
    return abs(c) < 2.0 ** -100 or abs(abs(c) - 1.0) < 2.0 ** -20


def _keep(w: _Writer, tile: _Tile, body, into: str | None = "seen{}", every: bool = False) -> None:
    """One statement per width, after a loop body's values, ORing the bits of the values kept for its
    instructions into nt_gen_keep's `seen` (8-byte values) and `seen32` (smaller ones: widened to 64
    bits, a float32 loop's vectors were unpacked in two, and it ran 1.5x slower), or into the lvalues
    `into` names with "" and "32": a comma expression inside each select (or one `seen |=` per
    operand) is a reduction GCC 12 does not vectorize, and clip_where_fill ran 8x slower. `into`
    None: each value held by nt_gen.h's nt_gen_hold (a row block's loop of pinned adds). `every`: the
    values whose flag another op raises too (tile.covered) as well, for the loops over one element
    at a time (`_element`): held for free there, and GCC may select by a branch without them."""
    values = list(dict.fromkeys(u for i in body for u in tile.kept[i] if every or u not in tile.covered))
    if into is None:
        for v in values:
            w.line(f"nt_gen_hold_{SUFFIX[tile.vdt[v]] if tile.vdt[v] in _FLOATS else 'int'}({v});")
        return
    for wide in (True, False):
        bits = [_bits(v, tile.vdt[v]) for v in values if (ITEMSIZE[tile.vdt[v]] == 8) == wide]
        if bits:
            w.line(f"{into.format('' if wide else '32')} |= {' | '.join(bits)};")


def _kept_widths(tile: _Tile) -> list[str]:
    """The suffixes of the `seen` values the kernel keeps bits in ("" 8-byte, "32" smaller)."""
    widths = {ITEMSIZE[tile.vdt[v]] == 8 for k in tile.kept for v in k}
    return [suffix for wide, suffix in ((True, ""), (False, "32")) if wide in widths]


def _bits(v: str, dt: int) -> str:
    """The bits of value v (of dtype code dt) as an unsigned integer of its own width (bool: int)."""
    if dt in _FLOATS:
        return f"nt_gen_bits_{SUFFIX[dt]}({v})"
    return f"(uint64_t)({v})" if ITEMSIZE[dt] == 8 else f"(uint32_t)({v})"


def _through_table(op: int, dt: int) -> bool:
    name = _BY_CODE[op]
    return (_CATEGORY[op] == CAT_UNARY and OPS[name][2] == _FLOATS and name not in _INLINE_FLOAT
            and dt in _FLOATS)


def _convert(expr: str, src: int, dst: int) -> str:
    """expr (of dtype code src) cast to dtype code dst as NumPy casts (blocks.pxi's _convert)."""
    if dst == _DT["bool"]:
        return f"NT_GEN_TO_BOOL({expr})"
    if src in _FLOATS and dst in (_DT["int32"], _DT["int64"]):
        bits = 32 if dst == _DT["int32"] else 64   # out of range: 'invalid' at the kernel's end
        return (f"(out_of_range |= NT_GEN_F_OUT_I{bits}({expr}), "
                f"NT_GEN_F_TO_I{bits}({expr}) ^ (int{bits}_t)opaque_zero)")   # see nt_gen_opaque_zero
    if src == _DT["float64"] and dst == _DT["float32"]:
        return f"(float)nt_gen_opaque_f64({expr}, opaque_zero)"   # see nt_gen_opaque_f64
    return f"({CTYPE[dst]})({expr})"


@dataclass
class _Segment:
    """One loop over the tile (`table` None) or one float-unary op run through the loop table."""
    instrs: list[int] = field(default_factory=list)
    table: int | None = None


def folds_in_registers(program: tuple) -> bool:
    """Whether `generate(program)` has column units (a reduction over a dim that is not the
    innermost, as ``x.sum(axis=1)`` of an (n, m, 3) x) and row-block units (a reduction of a short
    innermost dim, as ``(d ** 2).sum(-1)`` of that x): sums and means of floats, at most
    _COLUMN_MAX_REDUCTIONS of them, by a program with no op run through the loop table."""
    _shape, _axes, regs, _consts, instrs, reductions, _operands = program
    return (bool(instrs) and 0 < len(reductions) <= _COLUMN_MAX_REDUCTIONS
            and all(op in _COLUMN_REDUCTIONS and regs[src][0] in _FLOATS for op, src, _, _ in reductions)
            and not any(_through_table(op, dt) for op, dt, *_ in instrs))


def generate(program: tuple, entry: str = ENTRY) -> str | None:
    """The C source of the kernel `entry` for a FusedKernel's `program`, or None (see the module
    doc). Sources of several programs, each with its own entry, concatenate into one file."""
    shape, _axes, regs, consts, instrs, reductions, operands = program
    if not instrs:
        return None   # nothing to compute: a reduction of inputs folds them where they lie
    if any(op == _POW_BROADCAST for op, *_ in instrs):
        return None   # the interpreter picks its loop by the exponent once a block (nt_opcodes.h's NT_NPPOW)
    nops = len(operands)
    kind = [r[1] for r in regs]
    rdt = [r[0] for r in regs]
    # SSA: value i is instruction i's result; cur maps a register to the value it holds.
    cur: dict[int, str] = {}
    for r, (_, k, _) in enumerate(regs):
        if k == _INPUT:
            cur[r] = f"in{r}"
        elif k == _CONST:
            cur[r] = f"c{r}"
    uses: list[list[str]] = []
    defs: list[str] = []
    exprs: list[str] = []
    vdt: dict[str, int] = {}
    floaty: set[str] = set()   # values computed by a float op, or from one: they may raise FP flags
    for i, (op, dt, dst, a, b, c) in enumerate(instrs):
        cat = _CATEGORY[op]
        srcs = [a] + ([b] if cat in (CAT_BINARY, CAT_BINARY_BOOL, CAT_WHERE) else []) + \
            ([c] if cat == CAT_WHERE else [])
        if any(s not in cur for s in srcs):
            return None   # a register read before anything was written to it
        args = [cur[s] for s in srcs]
        name = _BY_CODE[op]
        if cat == CAT_CAST:
            expr = _convert(args[0], rdt[a], dt)
        elif cat == CAT_WHERE:
            expr = f"({args[2]} ? {args[0]} : {args[1]})"
        elif name == "copy":
            expr = args[0]
        else:
            expr = f"nt_op_{name}_{SUFFIX[dt]}({', '.join(args)})"
        v = f"v{i}"
        if dt in _FLOATS or rdt[dst] in _FLOATS or any(rdt[s] in _FLOATS or cur[s] in floaty for s in srcs):
            floaty.add(v)
        uses.append(args)
        defs.append(v)
        exprs.append(expr)
        vdt[v] = rdt[dst]
        cur[dst] = v
    casts = any("out_of_range" in e for e in exprs)
    opaque = any("opaque_zero" in e for e in exprs)
    outputs = {r: cur[r] for r in range(len(regs)) if kind[r] == _OUTPUT and r in cur}
    if len(outputs) != kind.count(_OUTPUT) or any(not v.startswith("v") for v in outputs.values()):
        return None   # an output register no instruction writes
    for r, (dt, k, _) in enumerate(regs):
        if k in (_INPUT, _CONST):
            vdt[cur[r] if k == _CONST else f"in{r}"] = dt
    found = [cur.get(src) for _, src, _, _ in reductions]   # what each reduction folds, per tile
    if any(v is None or v.startswith("c") for v in found):
        return None
    folded = [v for v in found if v is not None]

    segments: list[_Segment] = [_Segment()]
    for i, (op, dt, *_rest) in enumerate(instrs):
        if _through_table(op, dt):
            if any(u.startswith("c") for u in uses[i]):
                return None   # a float-unary op of a constant: the graph folds those
            segments.append(_Segment(table=i))
            segments.append(_Segment())
        else:
            segments[-1].instrs.append(i)
    segments[-1].instrs.append(-1)   # the stores
    _sink(segments, uses, defs, set(outputs.values()), set(folded))
    seg_of: dict[str, int] = {}
    for s, seg in enumerate(segments):
        for i in ([seg.table] if seg.table is not None else seg.instrs):
            if i >= 0:
                seg_of[defs[i]] = s
    # Values read in a later segment than the one defining them live in tile buffers.
    spilled: set[str] = set()
    for s, seg in enumerate(segments):
        reads = [u for i in seg.instrs if i >= 0 for u in uses[i]]
        if seg.table is not None:
            reads = uses[seg.table]
            spilled.update(u for u in reads if u.startswith("v"))
            spilled.add(defs[seg.table])
        if -1 in seg.instrs:
            reads += list(outputs.values())
        spilled.update(u for u in reads if u.startswith("v") and seg_of[u] != s)
    spilled.update(v for v in folded if v.startswith("v"))

    # operands computed for every element, as NumPy computes them (nt_gen.h's nt_gen_keep)
    values = {f"c{r}": float(consts[arg]) for r, (dt, k, arg) in enumerate(regs)
              if k == _CONST and dt in _FLOATS}
    stored = set(outputs.values()) | set(folded) | spilled
    kept, covered = _kept(instrs, uses, defs, rdt, floaty, stored, values)
    in_regs = [r for r in range(len(regs)) if kind[r] == _INPUT]
    out_regs = [r for r in range(len(regs)) if kind[r] == _OUTPUT]
    stack = (sum(ITEMSIZE[rdt[r]] * (TILE + _PAD_ELEMENTS) for r in in_regs + out_regs)
             + sum(ITEMSIZE[vdt[v]] * TILE for v in spilled) + 8 * TILE * len(reductions))
    if stack > STACK_BYTES:
        return None
    w = _Writer()
    w.line("/* numtrace generated kernel: one fused pass (see numtrace_cpu/codegen.py). */")
    w.line("#include <stddef.h>")
    w.line("#include <stdint.h>")
    w.line("#include <string.h>")
    w.line("typedef ptrdiff_t Py_ssize_t;")
    w.line("#define NT_GEN_KERNEL 1")
    w.line('#include "nt_opcodes.h"')
    w.line('#include "nt_gen.h"')
    w.line(f"#define TILE {TILE}")
    w.line(f"_Static_assert(NCOMPUTE == {len(SUFFIX)} && NOPS == {len(OPS)}, \"op table changed\");")
    w.line(f"void {entry}(char *const *data, const Py_ssize_t *strides, const Py_ssize_t *shape, int nd,")
    w.line("               Py_ssize_t u0, Py_ssize_t u1, const double *fc, const int64_t *ic,")
    w.line("               const nt_gen_loop_fn *loops, const nt_gen_reduce *red) {")
    w.indent += 1
    w.line("(void)fc; (void)ic; (void)loops; (void)red;")
    tile = _Tile(regs, rdt, in_regs, out_regs, segments, instrs, uses, defs, exprs, vdt, seg_of, spilled,
                 outputs, folded, kept, covered, row_scalar_operands(program), shape[-1] if shape else 0)
    widths = _kept_widths(tile)
    for suffix in widths:   # the bits of np.where's computed operands (nt_gen_keep), by width
        w.line(f"uint{suffix or 64}_t seen{suffix} = 0;")
    if casts:
        w.line("int out_of_range = 0;   /* a float cast to an int it does not fit (NT_GEN_F_OUT_I64) */")
    if opaque:
        w.line("const int64_t opaque_zero = nt_gen_opaque_zero;   /* keeps the casts' round trips */")
    for r, (dt, k, arg) in enumerate(regs):
        if k == _CONST:
            src = f"fc[{arg}]" if dt in _FLOATS else f"ic[{arg}]"
            val = f"({CTYPE[dt]}){src}" if dt != _DT["bool"] else f"NT_GEN_TO_BOOL({src})"
            w.line(f"const {CTYPE[dt]} c{r} = {val};")
    for r in in_regs + out_regs:
        w.line(f"_Alignas(64) {CTYPE[rdt[r]]} g{r}[TILE + NT_GEN_PAD];")
    for v in sorted(spilled, key=_number):
        w.line(f"_Alignas(64) {CTYPE[vdt[v]]} t{v}[TILE];")
    w.line("const Py_ssize_t inner = shape[nd - 1];")
    for r in out_regs:
        w.line(f"const int st{r} = (int)((red->stream >> {regs[r][2]}) & 1);   /* streaming stores */")
    if reductions:
        folds = folds_in_registers(program)
        cases = [("red->cols", lambda: _column_units(w, nops, reductions, tile))] if folds else []
        if has_row_tiles(program):
            cases.append(("red->tile_rows > 1", lambda: _rows_units(w, nops, tile, reductions)))
        if folds:
            cases.append(("red->rows > 1", lambda: _row_block_units(w, nops, reductions, tile)))
        if cases:
            _branches(w, *cases, (None, lambda: _reduction_units(w, nops, reductions, tile)))
        else:
            _reduction_units(w, nops, reductions, tile)
    elif has_rows_path(program):
        _branches(w, ("red->tile_rows > 1", lambda: _rows_units(w, nops, tile)),
                  (None, lambda: _elementwise_units(w, nops, tile, short=False)))
    else:
        _elementwise_units(w, nops, tile)
    w.line("if (red->stream) nt_gen_stream_fence();")
    if widths:
        w.line(f"nt_gen_keep({' | '.join(f'seen{suffix}' for suffix in widths)});")
    if casts:
        w.line("if (out_of_range) nt_gen_raise_invalid();")
    w.indent -= 1
    w.line("}")
    return w.text()


def _branches(w: _Writer, *cases) -> None:
    """An if / else-if / else chain of (C condition or None for the else, body writer) cases."""
    for n, (cond, body) in enumerate(cases):
        w.line(f"{'if' if n == 0 else '} else if'} ({cond}) {{" if cond else "} else {")
        w.indent += 1
        body()
        w.indent -= 1
    w.line("}")


def _sink(segments: list[_Segment], uses: list[list[str]], defs: list[str], stored: set[str],
          folded: set[str]) -> None:
    """Move each loop instruction into the latest segment before all of its readers: a value read
    only after a table op (W1's ``a * b + c``, read after exp) is then computed there from its
    operands instead of stored to a tile buffer and loaded back. The same operations on the same
    values; within a segment instructions keep program order, so each follows its operands."""
    where = {i: s for s, seg in enumerate(segments) for i in seg.instrs if i >= 0}
    table = {seg.table: s for s, seg in enumerate(segments) if seg.table is not None}
    readers: dict[str, list[int]] = {}
    for i, args in enumerate(uses):
        for u in args:
            readers.setdefault(u, []).append(i)
    for i in sorted(where, reverse=True):
        if defs[i] in folded:
            continue
        latest = [table[j] - 1 if j in table else where[j] for j in readers.get(defs[i], [])]
        if defs[i] in stored:
            latest.append(len(segments) - 1)
        if not latest or min(latest) <= where[i]:
            continue
        segments[where[i]].instrs.remove(i)
        target = segments[min(latest)].instrs
        target.insert(next((p for p, j in enumerate(target) if j == -1 or j > i), len(target)), i)
        where[i] = min(latest)


@dataclass
class _Tile:
    """What the tile loop of a kernel is made of (see `generate`)."""
    regs: list
    rdt: list[int]
    in_regs: list[int]
    out_regs: list[int]
    segments: list[_Segment]
    instrs: list
    uses: list[list[str]]
    defs: list[str]
    exprs: list[str]
    vdt: dict[str, int]
    seg_of: dict[str, int]
    spilled: set[str]
    outputs: dict[int, str]
    folded: list[str]
    kept: list[list[str]]
    covered: set[str]
    row_scalars: int = 0   # row_scalar_operands(program): operands read once per row in tiles of rows
    inner: int = 0         # the program's innermost length, a literal in those tiles' loops


def _offsets(w: _Writer, nops: int, index: str, first: str, stop: str, ptr: str) -> None:
    """Add to each operand's pointer the byte offsets of multi-index `index` over dims [first, stop)."""
    w.line(f"for (int d = {stop} - 1; d >= {first}; d--) {{")
    w.line(f"    const Py_ssize_t j = {index} % shape[d];")
    w.line(f"    {index} /= shape[d];")
    for k in range(nops):
        w.line(f"    {ptr}{k} += j * strides[{k} * NT_GEN_MAXD + d];")
    w.line("}")


def _elementwise_units(w: _Writer, nops: int, tile: _Tile, short: bool = True) -> None:
    """Units of NT_GEN_CHUNK innermost elements at one outer multi-index (`_elementwise_unit`'s), in
    tiles of `_elementwise_step` elements where the pass is SHORT_TILES_FROM bytes or more, else TILE.
    Short tiles only where a segment runs through the loop table (exp, log, tanh...), whose loop on
    L1 data is what idled memory: a pass of inline arithmetic alone (a float64 polynomial over 1e7
    elements, a clip and where) ran 5-10% slower in them. `short` False: TILE always, for the kernels
    of passes with a path for short rows (their rows path, with the short tiles' code beside it, ran
    bias_relu's (1e6, 10) pass 3.1 -> 3.9-5.0 ms in most processes though the code it ran was the
    same; not understood). Without short tiles the kernel's source is as before the change."""
    short = short and any(seg.table is not None for seg in tile.segments)
    if short:
        widest, step = _elementwise_step(tile)
        w.line(f"/* {SHORT_TILES_MARK}{SHORT_TILES_FROM // widest} */")
        w.line("Py_ssize_t total = 1;")
        w.line("for (int d = 0; d < nd; d++) total *= shape[d];")
        w.line(f"const Py_ssize_t step = total >= {SHORT_TILES_FROM // widest} ? {step} : TILE;")
    w.line("const Py_ssize_t nchunk = (inner + NT_GEN_CHUNK - 1) / NT_GEN_CHUNK;")
    w.line("for (Py_ssize_t u = u0; u < u1; u++) {")
    w.indent += 1
    w.line("Py_ssize_t start = (u % nchunk) * NT_GEN_CHUNK, idx = u / nchunk;")
    w.line("const Py_ssize_t stop = start + NT_GEN_CHUNK < inner ? start + NT_GEN_CHUNK : inner;")
    for k in range(nops):
        w.line(f"char *p{k} = data[{k}]; const Py_ssize_t s{k} = strides[{k} * NT_GEN_MAXD + nd - 1];")
    _offsets(w, nops, "idx", "0", "nd - 1", "p")
    _tile_loop(w, tile, "start", "stop", short=short)
    w.indent -= 1
    w.line("}")


SHORT_TILES_MARK = "short tiles from elements: "


def short_tiles_from(source: str) -> int:
    """The elements from which the generated kernel `source` runs an elementwise pass in short tiles
    (its comment, written where the code that decides is: `_elementwise_units`), or 0 if it has none."""
    at = source.find(SHORT_TILES_MARK)
    return int(source[at + len(SHORT_TILES_MARK):].split(maxsplit=1)[0]) if at >= 0 else 0


def _elementwise_step(tile: _Tile) -> tuple[int, int]:
    """(bytes of an item of the pass's widest operand or tile buffer, elements per tile of a large
    elementwise pass: STEP_BYTES of that item, 64 to TILE, the buffers' length)."""
    widest = max([ITEMSIZE[tile.rdt[r]] for r in tile.in_regs + tile.out_regs]
                 + [ITEMSIZE[tile.vdt[v]] for v in tile.spilled] + [1])
    return widest, max(64, min(TILE, STEP_BYTES // widest))


def has_rows_path(program: tuple) -> bool:
    """Whether `generate` gives the program's kernel the path for short rows (`_rows_units`): an
    elementwise pass whose innermost dim is short enough that the runtime may walk it in blocks of
    whole rows (FusedKernel._run's cx.rows > 1; collapsing dims only lengthens the innermost one)."""
    shape, reductions = program[0], program[5]
    return not reductions and len(shape) >= 2 and shape[-1] <= TILE // 4


def has_row_tiles(program: tuple) -> bool:
    """Whether `generate` gives the kernel of a pass with reductions the tiles of short rows
    (`_rows_units` with its reductions): the runtime runs it there when the pass reduces exactly
    its short innermost dim (FusedKernel._run's cx.rows > 1) outside the row blocks of
    `folds_in_registers` (a table op such as exp, a max, rows of 16 elements or more)."""
    shape, reductions = program[0], program[5]
    return bool(reductions) and len(shape) >= 2 and shape[-1] <= TILE // 4


def row_scalar_operands(program: tuple) -> int:
    """The input operands (bit k: operand k) that the tiles of rows (`_rows_units`) read once per row:
    those the program marks as broadcast along its innermost dim (assemble's per-row hint), as the
    ``x[:, None]`` of ``x[:, None] == y`` or ``x[:, None] - y[None, :]``. Where the kernel runs on
    the program's own innermost length and each has stride 0 along it (FusedKernel's
    _count_row_scalars), a tile's loops run row by row over that literal length, the operand's one
    value per row in a register, instead of over a tile of it repeated (nt_gen_gather_rows' fill,
    then a load of each element back: 42% of one-hot encoding's time). 0: none, or no such tiles."""
    _shape, _axes, regs, _consts, instrs, reductions, operands = program
    if not (has_rows_path(program) or has_row_tiles(program)):
        return 0
    # Only the tile's elementwise loops read a per-row operand in place: a table op's or a fold's
    # pointer would run over rows * inner elements of it. The fuser gives neither such an operand
    # (an op of x[:, None] alone is its own (n, 1) pass), but the kernel must not rely on that.
    direct = {src for _op, src, *_ in reductions}
    for op, dt, _dst, a, b, c in instrs:
        if _through_table(op, dt):
            cat = _CATEGORY[op]
            direct.update([a] + ([b] if cat in (CAT_BINARY, CAT_BINARY_BOOL, CAT_WHERE) else [])
                          + ([c] if cat == CAT_WHERE else []))
    read_directly = {regs[r][2] for r in direct if 0 <= r < len(regs) and regs[r][1] == _INPUT}
    mask = 0
    for k, operand in enumerate(operands):
        if len(operand) > 2 and operand[2] and k < 64 and k not in read_directly:
            mask |= 1 << k
    return mask


def _rows_units(w: _Writer, nops: int, tile: _Tile, reductions: tuple | list = ()) -> None:
    """Units of a pass whose innermost dim is short (`_rows_unit`'s, red->tile_rows rows a tile):
    each tile is whole rows of dim nd-2, so its loops (and table ops) run over rows * inner elements
    instead of one short row. An operand that is one contiguous run over the tile's rows is read or
    written where it lies; the others are gathered row by row (a row that repeats along dim nd-2,
    like the bias of ``x + b``, once per unit) and outputs scattered the same way. A pass that
    reduces its innermost dim then folds each reduced value's rows of the tile with the
    interpreter's own fold of a block of rows (red->fold_rows, blocks.pxi's _fold_rows_of)."""
    regs, rdt = tile.regs, tile.rdt
    w.line("const Py_ssize_t R = red->tile_rows, nrows = shape[nd - 2];")
    w.line("const Py_ssize_t per_unit = R * (NT_GEN_CHUNK / TILE);")
    w.line("const Py_ssize_t nchunk = (nrows + per_unit - 1) / per_unit;")
    scalars = [k for k in range(nops) if (tile.row_scalars >> k) & 1]
    if scalars:   # the condition FusedKernel._count_row_scalars counts
        zero = " && ".join(f"strides[{k} * NT_GEN_MAXD + nd - 1] == 0" for k in scalars)
        w.line(f"const int rowwise = inner == {tile.inner} && {zero};   /* per-row operands in registers */")
    w.line("for (Py_ssize_t u = u0; u < u1; u++) {")
    w.indent += 1
    w.line("Py_ssize_t start = (u % nchunk) * per_unit, idx = u / nchunk;")
    w.line("const Py_ssize_t stop = start + per_unit < nrows ? start + per_unit : nrows;")
    for k in range(nops):
        w.line(f"char *p{k} = data[{k}] + start * strides[{k} * NT_GEN_MAXD + nd - 2];")
        w.line(f"const Py_ssize_t s{k} = strides[{k} * NT_GEN_MAXD + nd - 1], "
               f"o{k} = strides[{k} * NT_GEN_MAXD + nd - 2];")
    _offsets(w, nops, "idx", "0", "nd - 2", "p")
    for r in tile.in_regs:
        w.line(f"int f{r} = 0;   /* g{r} holds R copies of a repeated row */")
    w.line("for (Py_ssize_t t = start; t < stop; t += R) {")
    w.indent += 1
    w.line("const Py_ssize_t rows = stop - t < R ? stop - t : R, n = rows * inner;")
    _bind_rows(w, tile, "p{}", "s{}", "o{}", "inner", "rows", "R", stream=True, rowwise=bool(scalars))
    if scalars:
        _branches(w, ("rowwise", lambda: _segments(w, tile, by_rows=True)),
                  (None, lambda: _segments(w, tile)))
    else:
        _segments(w, tile)
    for r in tile.out_regs:
        arg, isz = regs[r][2], ITEMSIZE[rdt[r]]
        w.line(f"if (out{r}p == g{r} && d{r}) nt_gen_stream(p{arg}, (const char *)g{r}, n * {isz});")
        w.line(f"else if (out{r}p == g{r}) "
               f"nt_gen_scatter_rows(p{arg}, s{arg}, o{arg}, g{r}, {isz}, inner, rows);")
    for j, value in enumerate(tile.folded):
        ptr, out = f"t{value}" if value.startswith("v") else f"{value}p", reductions[j][2]
        w.line(f"red->fold_rows(red->cx, {j}, (const char *){ptr}, inner, rows, p{out}, o{out});")
    for k in range(nops):
        w.line(f"p{k} += rows * o{k};")
    w.indent -= 1
    w.line("}")
    w.indent -= 1
    w.line("}")


def _bind_rows(w: _Writer, tile: _Tile, base: str, col: str, row: str, width: str, rows: str, unit: str,
               stream: bool, rowwise: bool = False) -> None:
    """Bind each operand of a tile of `rows` whole rows of `width` elements: the formats `base`, `col`
    and `row` give an operand's first row (char *) and its strides along and across rows, from its
    number. An input is read where it lies when the rows are one aligned contiguous run, else gathered
    (a row repeated along the rows, stride 0, once per `unit` rows: flag f<r>); an output is written
    where it lies on the same terms, and not where it is streamed, else into its tile buffer.
    `rowwise`: a per-row operand (tile.row_scalars) is not gathered where the C flag `rowwise` is
    set: the loops read it row by row (`_segments`' by_rows)."""
    regs, rdt = tile.regs, tile.rdt
    for r in tile.in_regs:
        arg, T, isz = regs[r][2], CTYPE[rdt[r]], ITEMSIZE[rdt[r]]
        b, c, o = base.format(arg), col.format(arg), row.format(arg)
        w.line(f"const {T} *in{r}p = (const {T} *){b};")
        gather = f"{c} != {isz} || ({o} != {width} * {isz} && {rows} > 1) || (size_t)in{r}p % {isz}"
        if rowwise and (tile.row_scalars >> arg) & 1:
            gather = f"!rowwise && ({gather})"
        w.line(f"if ({gather}) {{")
        w.line(f"    if ({o} || !f{r}) nt_gen_gather_rows(g{r}, {b}, {c}, {o}, {isz}, {width}, "
               f"{o} ? {rows} : {unit});")
        w.line(f"    f{r} = {o} == 0;")
        w.line(f"    in{r}p = g{r};")
        w.line("}")
    for r in tile.out_regs:
        arg, T, isz = regs[r][2], CTYPE[rdt[r]], ITEMSIZE[rdt[r]]
        b, c, o = base.format(arg), col.format(arg), row.format(arg)
        w.line(f"const int d{r} = {c} == {isz} && ({o} == {width} * {isz} || {rows} == 1) "
               f"&& (size_t){b} % {isz} == 0;")
        w.line(f"{T} *out{r}p = d{r}{f' && !st{r}' if stream else ''} ? ({T} *){b} : g{r};")


def _reduction_units(w: _Writer, nops: int, reductions: list, tile: _Tile) -> None:
    """Units of one kept multi-index each, all its reduced positions folded tile by tile with the
    build's own fold (`_reduction_row`'s: the tiles are its blocks, so the sums add up alike)."""
    w.line(f"_Alignas(16) char acc[{len(reductions)}][NT_GEN_ACC_BYTES];")
    w.line("const int nkept = red->nkept;")
    w.line("Py_ssize_t outer = 1;")
    w.line("for (int d = nkept; d < nd - 1; d++) outer *= shape[d];")
    w.line("for (Py_ssize_t u = u0; u < u1; u++) {")
    w.indent += 1
    w.line("Py_ssize_t idx = u;")
    for k in range(nops):
        w.line(f"char *b{k} = data[{k}]; const Py_ssize_t s{k} = strides[{k} * NT_GEN_MAXD + nd - 1];")
    _offsets(w, nops, "idx", "0", "nkept", "b")
    for j in range(len(reductions)):
        w.line(f"red->init(red->cx, {j}, acc[{j}]);")
    w.line("for (Py_ssize_t o = 0; o < outer; o++) {")
    w.indent += 1
    w.line("Py_ssize_t oidx = o;")
    for k in range(nops):
        w.line(f"char *p{k} = b{k};")
    _offsets(w, nops, "oidx", "nkept", "nd - 1", "p")
    _tile_loop(w, tile, "0", "inner")
    w.indent -= 1
    w.line("}")
    for j, (_, _, out, _) in enumerate(reductions):
        w.line(f"red->store(red->cx, {j}, acc[{j}], b{out});")
    w.indent -= 1
    w.line("}")


def _column_units(w: _Writer, nops: int, reductions: list, tile: _Tile) -> None:
    """Column mode (blocks.pxi's `_columns_unit`): dims (kept..., reduced, innermost kept); unit u
    is red->cols columns at one outer kept multi-index. Each block of red->rows reduced rows sums
    each column from +0 row by row into a register, then adds that to the column's total, as
    nt_colsum and `_fold_columns` do: the interpreter's additions in its order, so its bits."""
    w.line("const Py_ssize_t cols = red->cols, rows = red->rows;")
    w.line("const Py_ssize_t nrows = shape[nd - 2];")
    w.line("const Py_ssize_t nchunk = (inner + cols - 1) / cols;")
    w.line("for (Py_ssize_t u = u0; u < u1; u++) {")
    w.indent += 1
    # col0, not c0: the constant registers are named c<r>
    w.line("const Py_ssize_t col0 = (u % nchunk) * cols, ncol = inner - col0 < cols ? inner - col0 : cols;")
    w.line("Py_ssize_t idx = u / nchunk;")
    _strided_bases(w, nops)
    for k in range(nops):
        w.line(f"b{k} += col0 * sc{k};")
    _offsets(w, nops, "idx", "0", "nd - 2", "b")
    nred = len(reductions)
    # A pass with selected operands to keep computes a narrow block's values in a loop of their own
    # (`_column_block`: GCC vectorizes the selects and the keep there, not across a few columns); one
    # without, or a block of other widths, keeps them in registers, element by element
    # (`_column_elements`: no buffer and no second pass, a fifth faster on a plain narrow sum, and
    # up to 2-3x on wide blocks of a where, measured on (500, 128) to (300, 1000) float64).
    block = _column_block if any(tile.kept) else _column_elements
    if block is _column_block:
        for r in tile.in_regs:
            w.line(f"int f{r} = 0;   /* g{r} holds rows of a row repeated along the reduced dim */")
    w.line(f"double tot[{nred}][NT_GEN_MAXCOLS];")
    w.line(f"for (int j = 0; j < {nred}; j++) for (Py_ssize_t c = 0; c < ncol; c++) tot[j][c] = 0.0;")
    w.line("for (Py_ssize_t start = 0; start < nrows; start += rows) {")
    w.indent += 1
    w.line("const Py_ssize_t r = nrows - start < rows ? nrows - start : rows;")
    for n, case in enumerate(_UNROLLED):
        w.line(f"{'if' if n == 0 else '} else if'} (ncol == {case}) {{")
        w.indent += 1
        block(w, tile, case)
        w.indent -= 1
    w.line("} else {")
    w.indent += 1
    _column_elements(w, tile, "ncol")
    w.indent -= 1
    w.line("}")
    w.indent -= 1
    w.line("}")
    for j, (_, _, out, _) in enumerate(reductions):
        w.line(f"for (Py_ssize_t c = 0; c < ncol; c++) "
               f"red->store_sum(red->cx, {j}, tot[{j}][c], nrows, b{out} + c * sc{out});")
    w.indent -= 1
    w.line("}")


def _row_block_units(w: _Writer, nops: int, reductions: list, tile: _Tile) -> None:
    """Row blocks (blocks.pxi's `_rows_unit` and `_fold_rows`): the pass reduces its short
    innermost dim; unit u is a run of rows (dim nd-2) at one outer multi-index. A row shorter than
    red->sequential_below is summed element by element from +0 in a register, as the build's
    nt_sum does; a longer one is stored to a tile and folded by the build."""
    w.line("const Py_ssize_t per_unit = red->rows * (NT_GEN_CHUNK / TILE), nrows = shape[nd - 2];")
    w.line("const Py_ssize_t nchunk = (nrows + per_unit - 1) / per_unit;")
    w.line("for (Py_ssize_t u = u0; u < u1; u++) {")
    w.indent += 1
    w.line("const Py_ssize_t start = (u % nchunk) * per_unit;")
    w.line("const Py_ssize_t stop = start + per_unit < nrows ? start + per_unit : nrows;")
    w.line("Py_ssize_t idx = u / nchunk;")
    _strided_bases(w, nops)
    _offsets(w, nops, "idx", "0", "nd - 2", "b")
    w.line("if (inner < red->sequential_below) {")
    w.indent += 1
    for n, case in enumerate(_UNROLLED):
        w.line(f"{'if' if n == 0 else '} else if'} (inner == {case}) {{")
        w.indent += 1
        _row_block(w, tile, reductions, str(case), fold=False)
        w.indent -= 1
    w.line("} else {")
    w.indent += 1
    _row_block(w, tile, reductions, "inner", fold=False)
    w.indent -= 1
    w.line("}")
    w.indent -= 1
    w.line("} else {")
    w.indent += 1
    _row_block(w, tile, reductions, "inner", fold=True)
    w.indent -= 1
    w.line("}")
    w.indent -= 1
    w.line("}")


def _strided_bases(w: _Writer, nops: int) -> None:
    """Each operand's base pointer and its strides along dims nd-2 (sr) and nd-1 (sc)."""
    for k in range(nops):
        w.line(f"char *b{k} = data[{k}];")
        w.line(f"const Py_ssize_t sr{k} = strides[{k} * NT_GEN_MAXD + nd - 2], "
               f"sc{k} = strides[{k} * NT_GEN_MAXD + nd - 1];")


def _element(w: _Writer, tile: _Tile, row: str, col: str, keep: str | None = "seen{}") -> None:
    """The program at element (row, col) of dims (nd-2, nd-1): inputs loaded, values computed,
    outputs stored, selected operands kept into `keep`."""
    regs, rdt = tile.regs, tile.rdt
    needed = {u for i in range(len(tile.instrs)) for u in tile.uses[i]} | set(tile.outputs.values()) \
        | set(tile.folded)
    for r in tile.in_regs:
        if f"in{r}" in needed:
            arg, T = regs[r][2], CTYPE[rdt[r]]
            w.line(f"const {T} in{r} = *(const {T} *)(b{arg} + {row} * sr{arg} + {col} * sc{arg});")
    for i in range(len(tile.instrs)):
        w.line(f"const {_local(tile.vdt[tile.defs[i]])} {tile.defs[i]} = {tile.exprs[i]};")
    _keep(w, tile, range(len(tile.instrs)), keep, every=True)
    for r in tile.out_regs:
        arg, T = regs[r][2], CTYPE[rdt[r]]
        w.line(f"*({T} *)(b{arg} + {row} * sr{arg} + {col} * sc{arg}) = {tile.outputs[r]};")


def _row_block(w: _Writer, tile: _Tile, reductions: list, m: str, fold: bool) -> None:
    """Rows [start, stop) of `m` elements each (a literal where the loop over them is unrolled)."""
    w.line("for (Py_ssize_t i = start; i < stop; i++) {")
    w.indent += 1
    nred = len(reductions)
    if fold:
        for j, (_, src, _, _) in enumerate(reductions):
            w.line(f"_Alignas(64) {CTYPE[tile.rdt[src]]} f{j}[TILE];")
    else:
        w.line(f"double s[{nred}] = {{0}};")
    w.line(f"for (Py_ssize_t t = 0; t < {m}; t++) {{")
    w.indent += 1
    _element(w, tile, "i", "t", "seen{}" if fold else None)   # pinned adds: held (nt_gen_hold)
    for j, value in enumerate(tile.folded):
        w.line(f"f{j}[t] = {value};" if fold else f"s[{j}] = nt_gen_add_first(s[{j}], (double){value});")
    w.indent -= 1
    w.line("}")
    for j, (op, src, out, _) in enumerate(reductions):
        ptr = f"b{out} + i * sr{out}"
        if fold:
            w.line(f"_Alignas(16) char acc{j}[NT_GEN_ACC_BYTES];")
            w.line(f"red->init(red->cx, {j}, acc{j});")
            w.line(f"red->fold(red->cx, {j}, acc{j}, (const char *)f{j}, {m});")
            w.line(f"red->store(red->cx, {j}, acc{j}, {ptr});")
            continue
        value = f"(0.0 + s[{j}]) / (double){m}" if op == _MEAN else f"0.0 + s[{j}]"
        w.line(f"*({CTYPE[tile.rdt[src]]} *)({ptr}) = ({CTYPE[tile.rdt[src]]})({value});")
    w.indent -= 1
    w.line("}")


def _column_elements(w: _Writer, tile: _Tile, ncol: int | str) -> None:
    """One block of r rows by `ncol` columns (a literal where the loop over them is unrolled), each
    element's values in registers and added to its column's sum as it is computed: a column's first
    NaN, as nt_simd.h's nt_colsum (NumPy's rows added in order) keeps it, through a pinned add
    (nt_gen.h's nt_gen_add_first) for an unrolled block's few columns, nt_gen_add in a wide one's
    loop, which vectorizes (a fifth faster than the pinned add on (500, 300) to (5000, 16)). Neither
    lets GCC fold ``s + -x`` into ``s - x`` (x's NaN with x's sign, where NumPy's sum of ``-x`` has
    the flipped one): nt_opcodes.h negates a float by flipping its sign bit, which GCC keeps."""
    nred = len(tile.folded)
    add = "nt_gen_add" if ncol == "ncol" else "nt_gen_add_first"
    width = ncol if ncol != "ncol" else "NT_GEN_MAXCOLS"
    w.line(f"double part[{nred}][{width}];")
    w.line(f"for (int j = 0; j < {nred}; j++) for (Py_ssize_t c = 0; c < {ncol}; c++) part[j][c] = 0.0;")
    widths = _kept_widths(tile)
    for suffix in widths:   # kept bits per column: a loop over a row's few columns ORing into one
        w.line(f"uint{suffix or 64}_t kept{suffix}[{width}] = {{0}};")   # seen reduced it per row
    w.line("for (Py_ssize_t i = start; i < start + r; i++) {")
    w.indent += 1
    w.line(f"for (Py_ssize_t c = 0; c < {ncol}; c++) {{")
    w.indent += 1
    _element(w, tile, "i", "c", "kept{}[c]")
    for j, value in enumerate(tile.folded):
        w.line(f"part[{j}][c] = {add}(part[{j}][c], (double){value});")
    w.indent -= 1
    w.line("}")
    w.indent -= 1
    w.line("}")
    w.line(f"for (int j = 0; j < {nred}; j++) for (Py_ssize_t c = 0; c < {ncol}; c++) "
           "tot[j][c] = nt_gen_add(tot[j][c], part[j][c]);")
    for suffix in widths:
        w.line(f"for (Py_ssize_t c = 0; c < {ncol}; c++) seen{suffix} |= kept{suffix}[c];")


def _column_block(w: _Writer, tile: _Tile, ncol: int) -> None:
    """One block of r rows by `ncol` columns (a literal for the unrolled widths): its r * ncol values
    computed by one loop over the block as tiles of whole rows (as `_rows_units`: operands read where
    they lie when the block is one contiguous run, else gathered, a row repeated along the reduced dim
    once per unit), then each column summed row by row from +0 (nt_gen.h's nt_gen_colsum: 2, 4 and 8
    columns by a packed add with the running sums first, per lane nt_gen_add_first, so each column's
    first NaN; 1 and 3 by that scalar add). A loop over the columns per element left the values
    scalar and np.where's selects branching where the columns are few."""
    regs, rdt = tile.regs, tile.rdt
    w.line(f"const Py_ssize_t n = r * {ncol};")
    _bind_rows(w, tile, "(b{0} + start * sr{0})", "sc{}", "sr{}", str(ncol), "r", "rows", stream=False)
    _segments(w, tile)
    for r in tile.out_regs:
        arg, isz = regs[r][2], ITEMSIZE[rdt[r]]
        w.line(f"if (!d{r}) nt_gen_scatter_rows(b{arg} + start * sr{arg}, sc{arg}, sr{arg}, g{r}, {isz}, "
               f"{ncol}, r);")
    for j, value in enumerate(tile.folded):
        ptr = f"t{value}" if value.startswith("v") else f"{value}p"
        sfx = SUFFIX[tile.vdt[value]]
        w.line(f"double part{j}[{ncol}] = {{0.0}};")
        w.line(f"nt_gen_colsum{ncol}_{sfx}(part{j}, {ptr}, r);" if ncol in (2, 4, 8)
               else f"nt_gen_colsum_{sfx}(part{j}, {ptr}, r, {ncol});")
        w.line(f"for (Py_ssize_t c = 0; c < {ncol}; c++) tot[{j}][c] = nt_gen_add(tot[{j}][c], part{j}[c]);")


def _tile_loop(w: _Writer, tile: _Tile, start: str, stop: str, short: bool = False) -> None:
    """The tiles of [start, stop) along the innermost dim: operands bound (gathered where needed),
    the segments' loops and table calls, outputs scattered, reduced values folded. The tiles are the
    interpreter's blocks (TILE), or with `short` the C variable `step`'s (`_short_tiles`)."""
    if short:
        _short_tiles(w, tile, start, stop)
    else:   # the interpreter's blocks (the loop as it was written before short tiles)
        w.line(f"for (Py_ssize_t t = {start}; t < {stop}; t += TILE) {{")
        w.indent += 1
        w.line(f"const Py_ssize_t n = {stop} - t < TILE ? {stop} - t : TILE;")
    _tile_body(w, tile, not short)


def _short_tiles(w: _Writer, tile: _Tile, start: str, stop: str) -> None:
    """The header of `_tile_loop`'s loop over tiles of `step` elements, the first ending at a cache
    line of the first output where that output is streamed, so that every later tile streams whole
    lines (a line split between two tiles is written with plain stores, which read it first: one
    line in eight at 128 float32 a tile); the body adds n to t."""
    regs, rdt = tile.regs, tile.rdt
    lead = "0"
    if tile.out_regs:
        r = tile.out_regs[0]
        arg, isz = regs[r][2], ITEMSIZE[rdt[r]]
        lead = (f"st{r} && s{arg} == {isz} ? (Py_ssize_t)((64 - (uintptr_t)(p{arg} + {start} * s{arg}) % 64) "
                f"% 64 / {isz}) : 0")
    w.line(f"for (Py_ssize_t t = {start}, lead = {lead}; t < {stop}; lead = 0) {{")
    w.indent += 1
    w.line("const Py_ssize_t want = lead ? lead : step;")
    w.line(f"const Py_ssize_t n = {stop} - t < want ? {stop} - t : want;")


def _tile_body(w: _Writer, tile: _Tile, blocks: bool) -> None:
    """A tile's body (its n elements at t); `blocks`: the loop header steps t itself."""
    regs, rdt = tile.regs, tile.rdt
    for r in tile.in_regs:
        arg, T, isz = regs[r][2], CTYPE[rdt[r]], ITEMSIZE[rdt[r]]
        w.line(f"const {T} *in{r}p = (const {T} *)(p{arg} + t * s{arg});")
        w.line(f"if (s{arg} != {isz} || (size_t)in{r}p % {isz}) {{")
        w.line(f"    nt_gen_gather(g{r}, p{arg} + t * s{arg}, s{arg}, {isz}, n);")
        w.line(f"    in{r}p = g{r};")
        w.line("}")
    for r in tile.out_regs:   # a streamed output is computed into its tile, then streamed out
        arg, T, isz = regs[r][2], CTYPE[rdt[r]], ITEMSIZE[rdt[r]]
        w.line(f"const int d{r} = s{arg} == {isz} && (size_t)(p{arg} + t * s{arg}) % {isz} == 0;")
        w.line(f"{T} *out{r}p = d{r} && !st{r} ? ({T} *)(p{arg} + t * s{arg}) : g{r};")
    _segments(w, tile)
    for r in tile.out_regs:
        arg, isz = regs[r][2], ITEMSIZE[rdt[r]]
        w.line(f"if (out{r}p == g{r} && d{r}) "
               f"nt_gen_stream(p{arg} + t * s{arg}, (const char *)g{r}, n * {isz});")
        w.line(f"else if (out{r}p == g{r}) nt_gen_scatter(p{arg} + t * s{arg}, s{arg}, g{r}, {isz}, n);")
    for j, value in enumerate(tile.folded):
        ptr = f"t{value}" if value.startswith("v") else f"{value}p"
        w.line(f"red->fold(red->cx, {j}, acc[{j}], (const char *){ptr}, n);")
    if not blocks:
        w.line("t += n;")
    w.indent -= 1
    w.line("}")


def _segments(w: _Writer, tile: _Tile, by_rows: bool = False) -> None:
    """The tile's n elements through the segments: loops over values in locals, table calls between.
    `by_rows` (`_rows_units` where `rowwise`): each loop runs over the tile's rows, each row's value
    of the per-row operands (tile.row_scalars) read once into a register, and within a row over the
    literal innermost length (tile.inner), which GCC vectorizes whole (a 10-element row: one 8-lane
    and one 2-lane step). The same element values computed by the same expressions."""
    rdt, uses, defs, regs = tile.rdt, tile.uses, tile.defs, tile.regs
    scalar = {r for r in tile.in_regs if by_rows and (tile.row_scalars >> regs[r][2]) & 1}
    for s, seg in enumerate(tile.segments):
        if seg.table is not None:
            i = seg.table
            op, dt = tile.instrs[i][0], tile.instrs[i][1]
            src = uses[i][0]
            src_ptr = f"t{src}" if src.startswith("v") else f"{src}p"
            w.line(f"loops[{op} * NCOMPUTE + {dt}]((char *)t{defs[i]}, (const char *){src_ptr}, NULL, n);"
                   f"  /* {_BY_CODE[op]} */")
            continue
        body = [i for i in seg.instrs if i >= 0]
        stores = -1 in seg.instrs
        if not body and not (stores and tile.out_regs):
            continue
        needed = {u for i in body for u in uses[i]} | (set(tile.outputs.values()) if stores else set())
        if by_rows:
            w.line("for (Py_ssize_t row = 0; row < rows; row++) {")
            w.indent += 1
            for r in sorted(scalar):
                if f"in{r}" in needed:   # memcpy: the operand need not be aligned
                    arg = regs[r][2]
                    w.line(f"{CTYPE[rdt[r]]} in{r};")
                    w.line(f"memcpy(&in{r}, p{arg} + row * o{arg}, sizeof in{r});")
            w.line("#pragma GCC ivdep")
            if tile.inner >= _ROW_LOOP_MIN:
                w.line("#pragma GCC unroll 1   /* vectorize the row's loop (_ROW_LOOP_MIN) */")
            w.line(f"for (Py_ssize_t j = 0; j < {tile.inner}; j++) {{")
            w.indent += 1
            w.line(f"const Py_ssize_t i = row * {tile.inner} + j;")
        else:
            w.line("#pragma GCC ivdep")
            w.line("for (Py_ssize_t i = 0; i < n; i++) {")
            w.indent += 1
        for r in tile.in_regs:
            if f"in{r}" in needed and r not in scalar:
                w.line(f"const {CTYPE[rdt[r]]} in{r} = in{r}p[i];")
        for v in sorted((v for v in needed if v.startswith("v") and tile.seg_of[v] != s), key=_number):
            w.line(f"const {_local(tile.vdt[v])} {v} = t{v}[i];")
        for i in body:
            w.line(f"const {_local(tile.vdt[defs[i]])} {defs[i]} = {tile.exprs[i]};")
            if defs[i] in tile.spilled:
                w.line(f"t{defs[i]}[i] = {defs[i]};")
        _keep(w, tile, body)
        if stores:
            for r in tile.out_regs:
                w.line(f"out{r}p[i] = {tile.outputs[r]};")
        for _ in range(2 if by_rows else 1):
            w.indent -= 1
            w.line("}")


def _local(dt: int) -> str:
    """The C type of a computed value of dtype code dt in the loops. A bool (always 0 or 1, as the op
    table's predicates, NT_GEN_TO_BOOL and the logical ops give it) is an int there: with byte-sized
    locals GCC vectorized no loop mixing them with 8-byte values (``labels[:, None] == classes`` in
    int64, cast to float32), and ran one-hot encoding an element at a time."""
    return "int" if dt == _DT["bool"] else CTYPE[dt]


def _number(value: str) -> int:
    return int(value[1:])


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.indent = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
