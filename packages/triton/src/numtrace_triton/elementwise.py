"""Lowering of elementwise ops to Triton expressions, with NumPy's edge cases: arithmetic, powers,
predicates, comparisons, bitwise ops and selection here, transcendental functions in
`numtrace_triton.transcendental` (imported here, so this module's table is complete).

One table, :data:`LOWERINGS`, maps a registry op (an ``OpDef``) to a function that
writes the op into a :class:`~numtrace_triton.source_writer.SourceWriter` and
returns the expression of its result (already of the node's output dtype).

Float math goes through the `SourceWriter` (``w.math``, ``w.div``, ``w.sqrt``, ``w.fmod``), which
writes it for the target: IEEE division and square root everywhere, and libdevice's exp, log, sin,
... on a GPU where the interpreter (which has no extern calls) gets ``triton.language``'s.
Functions Triton lacks (``tanh``, ``log1p``, ``expm1``, ``pow``, ...) are built from
``exp``/``log``/``exp2``/``log2`` with the classic accurate formulations, and every special case
NumPy defines (inf, nan, signed zeros where they matter, division by zero for integers, huge shifts)
is handled explicitly with ``tl.where``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numtrace_ir.registry import OpDef

from . import transcendental  # noqa: F401  (registers its lowerings)
from .dtypes import compute_float
from .elementwise_core import (
    LOWERINGS,
    Arg,
    Lowering,
    cast_to,
    common_dtype,
    named,
    opdef_of,
    register,
    where,
)
from .source_writer import SourceWriter

__all__ = ["COMPARISONS", "LOWERINGS", "Arg", "Lowering", "lower_elementwise"]


# ----------------------------------------------------------------------------- arithmetic


def _binary(symbol: str, bool_symbol: str | None = None) -> Lowering:
    """``a <symbol> b`` in the output dtype; on bools ``bool_symbol`` (NumPy's bool + is or, * is and)."""

    def lower(w, args, attrs, out):
        a, b = (cast_to(w, x, out) for x in args)
        return f"{a} {bool_symbol if out.kind == 'b' and bool_symbol else symbol} {b}"

    return lower


_name: np.ufunc  # the registration loops below share it
for _name, _sym, _bool_sym in ((np.add, "+", "|"), (np.subtract, "-", None), (np.multiply, "*", "&")):
    register(_name)(_binary(_sym, _bool_sym))


@register(np.divide)
def _divide(w, args, attrs, out):
    a, b = (cast_to(w, x, out) for x in args)
    return w.div(a, b, out)


@register(np.negative)
def _negative(w, args, attrs, out):
    return w.negative(cast_to(w, args[0], out), out)


@register(np.positive, np.conjugate)
def _positive(w, args, attrs, out):
    return cast_to(w, args[0], out)


@register(np.absolute, np.fabs)
def _absolute(w, args, attrs, out):
    x = cast_to(w, args[0], out)
    if out.kind == "b" or out.kind == "u":
        return x
    return f"tl.abs({x})"


@register(np.square)
def _square(w, args, attrs, out):
    x = named(w, cast_to(w, args[0], out))
    return f"{x} & {x}" if out.kind == "b" else f"{x} * {x}"


@register(np.reciprocal)
def _reciprocal(w, args, attrs, out):
    x = cast_to(w, args[0], out)
    if out.kind in "iu":
        # NumPy's integer reciprocal truncates: 1 for 1, -1 for -1, 0 otherwise (and 0 for 0 here).
        x = w.let(x)
        one = w.const(1, out)
        return (
            where(f"({x} == 1) | ({x} == -1)", x, w.const(0, out))
            if out.kind == "i"
            else where(f"{x} == 1", one, w.const(0, out))
        )
    return w.div(w.const(1, out), x, out)


@register(np.sign)
def _sign(w, args, attrs, out):
    x = named(w, cast_to(w, args[0], out))
    one, zero = w.const(1, out), w.const(0, out)
    if out.kind == "u":
        return where(f"{x} > 0", one, zero)
    # A float zero of either sign gives +0.0, NaN gives NaN.
    rest = where(f"{x} == 0", zero, x) if out.kind == "f" else zero
    return where(f"{x} > 0", one, where(f"{x} < 0", f"-{one}", rest))


def _nan_aware_extreme(pick: str, ignore_nan: bool) -> Lowering:
    def lower(w, args, attrs, out):
        a, b = (named(w, cast_to(w, x, out)) for x in args)
        if out.kind != "f":
            return f"tl.{pick}({a}, {b})"
        cmp = ">" if pick == "maximum" else "<"
        if out.itemsize == 2:  # NumPy's half loops: the first of equal operands (a zero's sign)
            return where(f"({a} {cmp}= {b}) | ({b if ignore_nan else a} != {b if ignore_nan else a})", a, b)
        if ignore_nan:  # fmax/fmin: a NaN loses unless both are NaN
            return where(f"{a} != {a}", b, where(f"{b} != {b}", a, f"tl.{pick}({a}, {b})"))
        # NaN in either operand wins, and of equal operands the second (NumPy's rule on x86, which
        # decides the sign of a zero: np.maximum(-0.0, 0.0) is 0.0), whatever the GPU's max does.
        return where(f"({a} {cmp} {b}) | ({a} != {a})", a, b)

    return lower


register(np.maximum)(_nan_aware_extreme("maximum", False))
register(np.minimum)(_nan_aware_extreme("minimum", False))
register(np.fmax)(_nan_aware_extreme("maximum", True))
register(np.fmin)(_nan_aware_extreme("minimum", True))


def _int_floor_divmod(w: SourceWriter, a: str, b: str, dtype: np.dtype) -> tuple[str, str]:
    """Python-style (floor) quotient and remainder of integers; both 0 where ``b == 0`` (as NumPy)."""
    zero, one = w.const(0, dtype), w.const(1, dtype)
    safe_b = w.let(_safe_divisor(w, b, dtype))
    q = w.let(f"{a} // {safe_b}")  # truncates toward zero
    r = w.let(f"{a} - {q} * {safe_b}")
    if dtype.kind == "i":
        q = w.let(where(f"{b} == -{one}", f"{zero} - {q}", q))  # the minimum's negation wraps, as NumPy's
        adjust = w.let(f"({r} != 0) & (({r} < 0) != ({safe_b} < 0))")
        q = w.let(where(adjust, f"{q} - {one}", q))
        r = w.let(where(adjust, f"{r} + {safe_b}", r))
    return where(f"{b} == 0", zero, q), where(f"{b} == 0", zero, r)


def _safe_divisor(w: SourceWriter, b: str, dtype: np.dtype) -> str:
    """``b`` with 1 where the division ``//`` is undefined: 0, and -1 for a signed type (its minimum
    over -1 overflows, undefined in LLVM's ``sdiv``); callers fix those lanes."""
    one = w.const(1, dtype)
    bad = f"({b} == 0) | ({b} == -{one})" if dtype.kind == "i" else f"{b} == 0"
    return where(bad, one, b)


def _float_divmod(w: SourceWriter, a: str, b: str, dtype: np.dtype) -> tuple[str, str]:
    """NumPy's float floor_divide and remainder (its ``npy_divmod``), special cases included."""
    zero, one, half = w.const(0, dtype), w.const(1, dtype), w.const(0.5, dtype)
    mod = w.let(w.fmod(a, b, dtype))  # sign of the dividend
    div = w.let(w.div(f"{a} - {mod}", b, dtype))
    fix = w.let(f"({mod} != 0) & (({b} < 0) != ({mod} < 0))")
    signed_zero = f"tl.where({b} < 0, {w.const(-0.0, dtype)}, {zero})"
    mod = w.let(where(fix, f"{mod} + {b}", where(f"{mod} == 0", signed_zero, mod)))
    div = w.let(where(fix, f"{div} - {one}", div))
    floordiv = w.let(f"tl.floor({div})")
    floordiv = w.let(where(f"{div} - {floordiv} > {half}", f"{floordiv} + {one}", floordiv))
    quotient = w.let(w.div(a, b, dtype))
    floordiv = where(f"{div} == 0", f"{zero} * {quotient}", floordiv)
    floordiv = w.let(where(f"{b} == 0", quotient, floordiv))
    return floordiv, mod


def _divmod_part(name: str, part: int) -> Lowering:
    """Part ``part`` of NumPy's divmod; float16 in float32 and rounded back, as NumPy's half loop
    does (and Triton has no float16 floor)."""

    def lower(w, args, attrs, out):
        if out.kind == "b":
            raise NotImplementedError(f"{name} on booleans")
        if out.kind != "f":
            a, b = (named(w, cast_to(w, x, out)) for x in args)
            return _int_floor_divmod(w, a, b, out)[part]
        work = compute_float(out)
        a, b = (named(w, cast_to(w, x, work)) for x in args)
        return w.cast(_float_divmod(w, a, b, work)[part], work, out)

    return lower


register(np.floor_divide)(_divmod_part("np.floor_divide", 0))
register(np.remainder)(_divmod_part("np.remainder", 1))


@register(np.fmod)
def _fmod(w, args, attrs, out):
    a, b = (named(w, cast_to(w, x, out)) for x in args)
    if out.kind == "f":
        return w.fmod(a, b, out)
    zero = w.const(0, out)
    safe_b = w.let(_safe_divisor(w, b, out))  # a remainder by 1 (for b == -1 too) is 0
    return where(f"{b} == 0", zero, f"{a} - ({a} // {safe_b}) * {safe_b}")


# ----------------------------------------------------------------------------- powers


def _float_pow(w: SourceWriter, a: str, b: str, dtype: np.dtype) -> str:
    """``a ** b`` for floats from ``|a| ** b`` (computed in float64 for float32 accuracy), with NumPy's
    signs and special cases."""
    work = np.dtype(np.float64)
    aw, bw = w.let(w.cast(a, dtype, work)), w.let(w.cast(b, dtype, work))
    one, two, zero = w.const(1.0, work), w.const(2.0, work), w.const(0.0, work)
    # |a| ** b: libdevice's pow on a GPU (within 2 ulp); the interpreter's exp2(b * log2|a|) loses
    # digits when b * log2|a| is large.
    mag = w.let(f"libdevice.pow(tl.abs({aw}), {bw})" if w.libdevice
                else w.math("exp2", f"{bw} * {w.math('log2', f'tl.abs({aw})')}"))
    is_int = w.let(f"tl.floor({bw}) == {bw}")
    odd = w.let(f"{is_int} & (tl.floor({bw} * {w.const(0.5, work)}) * {two} != {bw})")
    # A negative base needs an integer exponent (odd ones keep the sign), except -inf and -0.0 (C's pow).
    inf = w.const(math.inf, work)
    neg_base = where(
        is_int,
        where(odd, w.neg(mag, work), mag),
        where(f"({aw} == -{inf}) | ({aw} == {zero})", mag, w.const(math.nan, work)),
    )
    negative = f"({aw} < {zero}) | (({aw} == {zero}) & ({w.div(one, aw, work)} < {zero}))"  # -0.0 too
    res = where(negative, neg_base, mag)
    # x**0 == 1 and 1**y == 1 even for NaN, and (-1)**(+-inf) == 1; exp2 would give NaN for these.
    res = where(
        f"({bw} == {zero}) | ({aw} == {one}) | ((tl.abs({aw}) == {one}) & (tl.abs({bw}) == {inf}))", one, res
    )
    return w.cast(w.let(res), work, dtype)


def _int_pow(w: SourceWriter, a: str, b: str, dtype: np.dtype) -> str:
    """``a ** b`` for integers by square-and-multiply over every exponent bit (wrapping like NumPy).

    A negative exponent (an error in NumPy) gives the truncated value: 1 for
    base 1, +-1 for base -1, 0 otherwise.
    """
    bits = dtype.itemsize * 8
    one, zero = w.const(1, dtype), w.const(0, dtype)
    result, base, exp = w.fresh("p"), w.fresh("p"), w.fresh("p")
    w.emit(f"{result} = tl.zeros_like({a}) + {one}")
    w.emit(f"{base} = {a} + tl.zeros_like({b})")
    w.emit(f"{exp} = {b} + tl.zeros_like({a})")
    w.emit(f"for _ in tl.static_range({bits}):")
    w.emit(f"    {result} = tl.where(({exp} & {one}) != 0, {result} * {base}, {result})")
    w.emit(f"    {base} = {base} * {base}")
    w.emit(f"    {exp} = {exp} >> {one}")
    if dtype.kind == "u":
        return result
    negative = where(
        f"{a} == {one}", one, where(f"{a} == -{one}", where(f"({b} & {one}) != 0", f"-{one}", one), zero)
    )
    return where(f"{b} < {zero}", negative, result)


def _branched_pow(w: SourceWriter, a: str, b: str, dtype: np.dtype) -> str:
    """``a ** b`` where NumPy's float32/float64 power loop reads b with stride 0 (one exponent for the
    whole loop): it branches on b's value (loops_umath_fp.dispatch.c.src, POWER_FAST_PATH), so -inf **
    0.5 is sqrt's NaN and -0.0 ** 0.5 is -0.0 (C's pow gives +inf and +0.0), and x ** 2, x ** -1, x ** 1
    are exact where pow is not (the cpu backend's nt_opcodes.h NT_NPPOW)."""
    res = _float_pow(w, a, b, dtype)
    for value, expr in ((-1.0, w.div(w.const(1.0, dtype), a, dtype)), (0.0, w.const(1.0, dtype)),
                        (0.5, w.sqrt(a, dtype)), (1.0, a), (2.0, f"{a} * {a}")):
        res = where(f"{b} == {w.const(value, dtype)}", expr, res)
    return w.let(res)


@register(np.power, np.float_power)
def _power(w, args, attrs, out):
    a, b = (named(w, cast_to(w, x, out)) for x in args)
    if out.kind == "f":
        if out.itemsize < 4:
            work = np.dtype(np.float32)
            return w.cast(_float_pow(w, w.cast(a, out, work), w.cast(b, out, work), work), work, out)
        if attrs.get("scalar_exponent"):
            return _branched_pow(w, a, b, out)
        return _float_pow(w, a, b, out)
    if out.kind == "b":
        raise NotImplementedError("np.power on booleans")
    return _int_pow(w, a, b, out)


# ----------------------------------------------------------------------------- predicates & comparisons


@register(np.isnan)
def _isnan(w, args, attrs, out):
    x, dt = args[0]
    return (
        f"{x} != {x}" if dt.kind == "f" else f"tl.zeros_like({x}) != 0" if dt.kind != "b" else f"{x} & ~{x}"
    )


@register(np.isinf)
def _isinf(w, args, attrs, out):
    x, dt = args[0]
    if dt.kind != "f":
        return _isnan(w, args, attrs, out)
    return f"tl.abs({x}) == {w.const(math.inf, dt)}"


@register(np.isfinite)
def _isfinite(w, args, attrs, out):
    x, dt = args[0]
    if dt.kind != "f":
        return f"tl.zeros_like({x}) == 0"
    return f"tl.abs({x}) < {w.const(math.inf, dt)}"


@register(np.signbit)
def _signbit(w, args, attrs, out):
    x, dt = args[0]
    if dt.kind == "f":
        return w.sign_bit(x, dt)
    return f"{x} < 0" if dt.kind == "i" else f"tl.zeros_like({x}) != 0"


_MIRRORED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _compare(symbol: str) -> Lowering:
    """``a <symbol> b``, exact for every pair of integer dtypes: NumPy compares a signed with an
    unsigned 64-bit integer by value, where their common type (float64) would round both."""

    def lower(w, args, attrs, out):
        (a, da), (b, db) = args
        if {da.kind, db.kind} == {"i", "u"} and common_dtype(args).kind == "f":
            if da.kind == "u":  # the signed operand first
                (a, da), (b, db), sym = (b, db), (a, da), _MIRRORED[symbol]
            else:
                sym = symbol
            a = named(w, cast_to(w, (a, da), np.dtype(np.int64)))
            u64 = np.dtype(np.uint64)
            ua, ub = w.cast(a, np.dtype(np.int64), u64), cast_to(w, (b, db), u64)
            # A negative signed value is below every unsigned one; otherwise both compare as unsigned.
            if sym in ("!=", "<", "<="):
                return f"({a} < 0) | ({ua} {sym} {ub})"
            return f"({a} >= 0) & ({ua} {sym} {ub})"
        common = common_dtype(args)
        a, b = (cast_to(w, x, common) for x in args)
        return f"{a} {symbol} {b}"

    return lower


for _name, _sym in (
    (np.equal, "=="),
    (np.not_equal, "!="),
    (np.less, "<"),
    (np.less_equal, "<="),
    (np.greater, ">"),
    (np.greater_equal, ">="),
):
    register(_name)(_compare(_sym))
# The comparison ops, which take a Python int outside their array's range by value.
COMPARISONS = frozenset(opdef_of(u) for u in (np.equal, np.not_equal, np.less, np.less_equal, np.greater,
                                              np.greater_equal))


def _logical(symbol: str) -> Lowering:
    def lower(w, args, attrs, out):
        a, b = (cast_to(w, x, np.dtype(bool)) for x in args)
        return f"{a} {symbol} {b}"

    return lower


for _name, _sym in ((np.logical_and, "&"), (np.logical_or, "|"), (np.logical_xor, "^")):
    register(_name)(_logical(_sym))


@register(np.logical_not)
def _logical_not(w, args, attrs, out):
    return f"{cast_to(w, args[0], np.dtype(bool))} == 0"


# ----------------------------------------------------------------------------- bitwise

for _name, _sym in ((np.bitwise_and, "&"), (np.bitwise_or, "|"), (np.bitwise_xor, "^")):
    register(_name)(_binary(_sym))


@register(np.invert)
def _invert(w, args, attrs, out):
    x = cast_to(w, args[0], out)
    return f"{x} == 0" if out.kind == "b" else f"~{x}"


@register(np.bitwise_count)
def _bitwise_count(w, args, attrs, out):
    """The set bits of ``|x|`` (NumPy's definition) by the SWAR popcount: Triton's interpreter has no
    popc. ``|x|`` is negated unsigned, so the most negative value counts one bit, as in NumPy."""
    (x, dt), = args
    x, u = named(w, x), np.dtype(f"u{dt.itemsize}")
    v = w.let(w.cast(x, dt, u))
    if dt.kind == "i":
        v = w.let(where(f"{x} < 0", f"{w.const(0, u)} - {v}", v))
    m1, m2, m4 = (w.const(int(byte * u.itemsize, 16), u) for byte in ("55", "33", "0f"))
    v = w.let(f"{v} - (({v} >> {w.const(1, u)}) & {m1})")
    v = w.let(f"({v} & {m2}) + (({v} >> {w.const(2, u)}) & {m2})")
    v = w.let(f"({v} + ({v} >> {w.const(4, u)})) & {m4}")
    for shift in (8, 16, 32)[: u.itemsize.bit_length() - 1]:  # add up the bytes' counts
        v = w.let(f"{v} + ({v} >> {w.const(shift, u)})")
    return w.cast(f"{v} & {w.const(0x7F, u)}", u, out)


def _shift(left: bool) -> Lowering:
    def lower(w, args, attrs, out):
        a, b = (named(w, cast_to(w, x, out)) for x in args)
        bits = w.const(out.itemsize * 8, out)
        # NumPy defines shifts by >= the bit width (and by negative counts): all bits shifted out.
        too_far = f"({b} >= {bits}) | ({b} < 0)" if out.kind == "i" else f"{b} >= {bits}"
        if left:
            return where(too_far, w.const(0, out), f"{a} << {b}")
        fill = where(f"{a} < 0", w.const(-1, out), w.const(0, out)) if out.kind == "i" else w.const(0, out)
        return where(too_far, fill, f"{a} >> {b}")

    return lower


register(np.left_shift)(_shift(True))
register(np.right_shift)(_shift(False))


# ----------------------------------------------------------------------------- selection & conversion


@register("np.where")
def _select(w, args, attrs, out):
    cond = cast_to(w, args[0], np.dtype(bool))
    return where(cond, cast_to(w, args[1], out), cast_to(w, args[2], out))


@register("np.astype")
def _astype(w, args, attrs, out):
    return cast_to(w, args[0], out)


def lower_elementwise(
    w: SourceWriter, op: OpDef | tuple[OpDef, int], args: Sequence[Arg], attrs: dict, out: np.dtype
) -> str:
    """The expression computing ``op`` (a key of `LOWERINGS`) on ``args``; ``KeyError`` if it has none."""
    return LOWERINGS[op](w, [(e, np.dtype(d)) for e, d in args], attrs, np.dtype(out))
