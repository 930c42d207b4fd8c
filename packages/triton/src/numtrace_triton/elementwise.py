"""Lowering of elementwise ops to Triton expressions, with NumPy's edge cases.

One table, :data:`LOWERINGS`, maps a registry op (an ``OpDef``) to a function that
writes the op into a :class:`~numtrace_triton.source_writer.SourceWriter` and
returns the expression of its result (already of the node's output dtype).

Only ``triton.language`` primitives that both the GPU compiler and the CPU
interpreter implement are used (no libdevice: the interpreter has no extern
calls). Functions Triton lacks (``tanh``, ``log1p``, ``expm1``, ``pow``, ...)
are built from ``exp``/``log``/``exp2``/``log2`` with the classic accurate
formulations, and every special case NumPy defines (inf, nan, signed zeros
where they matter, division by zero for integers, huge shifts) is handled
explicitly with ``tl.where``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numtrace_ir import registry
from numtrace_ir.registry import OpDef

from .dtypes import compute_float
from .source_writer import SourceWriter

__all__ = ["LOWERINGS", "Arg", "Lowering"]

Arg = tuple[str, np.dtype]  # (expression, dtype)
Lowering = Callable[[SourceWriter, Sequence[Arg], dict, np.dtype], str]

# Keyed by registry op (a ufunc stands for the op it traces to; any other op is named); a multi-output
# op has one lowering per output, keyed ``(op, output index)``.
LOWERINGS: dict[OpDef | tuple[OpDef, int], Lowering] = {}


def _opdef(op: np.ufunc | str) -> OpDef:
    """The registry op of a ufunc or op name: a typo or a ufunc the registry lacks fails at import."""
    if isinstance(op, np.ufunc):
        found = registry.for_numpy(op)
        if found is None or found.ufunc is not op:
            raise LookupError(f"no registry op computes the ufunc {op.__name__}")
        return found
    return registry.get(op)


def _register(*ops: np.ufunc | str) -> Callable[[Lowering], Lowering]:
    def deco(fn: Lowering) -> Lowering:
        for op in ops:
            LOWERINGS[_opdef(op)] = fn
        return fn

    return deco


def _common(args: Sequence[Arg]) -> np.dtype:
    return np.result_type(*[dt for _, dt in args])


def _as(w: SourceWriter, arg: Arg, dtype: np.dtype) -> str:
    return w.cast(arg[0], arg[1], dtype)


def _where(cond: str, a: str, b: str) -> str:
    return f"tl.where({cond}, {a}, {b})"


def _named(w: SourceWriter, expr: str) -> str:
    """``expr`` as a plain name, so that helpers can splice it anywhere without precedence surprises."""
    return expr if expr.isidentifier() else w.let(expr)


# ----------------------------------------------------------------------------- arithmetic


def _binary(symbol: str, bool_symbol: str | None = None) -> Lowering:
    """``a <symbol> b`` in the output dtype; on bools ``bool_symbol`` (NumPy's bool + is or, * is and)."""

    def lower(w, args, attrs, out):
        a, b = (_as(w, x, out) for x in args)
        return f"{a} {bool_symbol if out.kind == 'b' and bool_symbol else symbol} {b}"

    return lower


_name: np.ufunc  # the registration loops below share it
for _name, _sym, _bool_sym in ((np.add, "+", "|"), (np.subtract, "-", None), (np.multiply, "*", "&")):
    _register(_name)(_binary(_sym, _bool_sym))


@_register(np.divide)
def _divide(w, args, attrs, out):
    a, b = (_as(w, x, out) for x in args)
    return f"{a} / {b}"


@_register(np.negative)
def _negative(w, args, attrs, out):
    return f"-{_as(w, args[0], out)}"


@_register(np.positive, np.conjugate)
def _positive(w, args, attrs, out):
    return _as(w, args[0], out)


@_register(np.absolute, np.fabs)
def _absolute(w, args, attrs, out):
    x = _as(w, args[0], out)
    if out.kind == "b" or out.kind == "u":
        return x
    return f"tl.abs({x})"


@_register(np.square)
def _square(w, args, attrs, out):
    x = _named(w, _as(w, args[0], out))
    return f"{x} & {x}" if out.kind == "b" else f"{x} * {x}"


@_register(np.reciprocal)
def _reciprocal(w, args, attrs, out):
    x = _as(w, args[0], out)
    if out.kind in "iu":
        # NumPy's integer reciprocal truncates: 1 for 1, -1 for -1, 0 otherwise (and 0 for 0 here).
        x = w.let(x)
        one = w.const(1, out)
        return (
            _where(f"({x} == 1) | ({x} == -1)", x, w.const(0, out))
            if out.kind == "i"
            else _where(f"{x} == 1", one, w.const(0, out))
        )
    return f"{w.const(1, out)} / {x}"


@_register(np.sign)
def _sign(w, args, attrs, out):
    x = _named(w, _as(w, args[0], out))
    one, zero = w.const(1, out), w.const(0, out)
    if out.kind == "u":
        return _where(f"{x} > 0", one, zero)
    return _where(f"{x} > 0", one, _where(f"{x} < 0", f"-{one}", x if out.kind == "f" else zero))


def _nan_aware_extreme(pick: str, ignore_nan: bool) -> Lowering:
    def lower(w, args, attrs, out):
        a, b = (_named(w, _as(w, x, out)) for x in args)
        if out.kind != "f":
            return f"tl.{pick}({a}, {b})"
        if ignore_nan:  # fmax/fmin: a NaN loses unless both are NaN
            return _where(f"{a} != {a}", b, _where(f"{b} != {b}", a, f"tl.{pick}({a}, {b})"))
        # NaN in either operand wins, and of equal operands the second (NumPy's rule on x86, which
        # decides the sign of a zero: np.maximum(-0.0, 0.0) is 0.0), whatever the GPU's max does.
        cmp = ">" if pick == "maximum" else "<"
        return _where(f"({a} {cmp} {b}) | ({a} != {a})", a, b)

    return lower


_register(np.maximum)(_nan_aware_extreme("maximum", False))
_register(np.minimum)(_nan_aware_extreme("minimum", False))
_register(np.fmax)(_nan_aware_extreme("maximum", True))
_register(np.fmin)(_nan_aware_extreme("minimum", True))


def _int_floor_divmod(w: SourceWriter, a: str, b: str, dtype: np.dtype) -> tuple[str, str]:
    """Python-style (floor) quotient and remainder of integers; both 0 where ``b == 0`` (as NumPy)."""
    zero, one = w.const(0, dtype), w.const(1, dtype)
    safe_b = w.let(_where(f"{b} == 0", one, b))
    q = w.let(f"{a} // {safe_b}")  # truncates toward zero
    r = w.let(f"{a} - {q} * {safe_b}")
    if dtype.kind == "i":
        adjust = w.let(f"({r} != 0) & (({r} < 0) != ({safe_b} < 0))")
        q = w.let(_where(adjust, f"{q} - {one}", q))
        r = w.let(_where(adjust, f"{r} + {safe_b}", r))
    return _where(f"{b} == 0", zero, q), _where(f"{b} == 0", zero, r)


def _float_divmod(w: SourceWriter, a: str, b: str, dtype: np.dtype) -> tuple[str, str]:
    """NumPy's float floor_divide and remainder (its ``npy_divmod``), special cases included."""
    zero, one, half = w.const(0, dtype), w.const(1, dtype), w.const(0.5, dtype)
    mod = w.let(f"{a} % {b}")  # fmod: sign of the dividend
    div = w.let(f"({a} - {mod}) / {b}")
    fix = w.let(f"({mod} != 0) & (({b} < 0) != ({mod} < 0))")
    mod = w.let(
        _where(fix, f"{mod} + {b}", _where(f"{mod} == 0", f"tl.where({b} < 0, -{zero}, {zero})", mod))
    )
    div = w.let(_where(fix, f"{div} - {one}", div))
    floordiv = w.let(f"tl.floor({div})")
    floordiv = w.let(_where(f"{div} - {floordiv} > {half}", f"{floordiv} + {one}", floordiv))
    floordiv = _where(f"{div} == 0", f"{zero} * ({a} / {b})", floordiv)
    floordiv = w.let(_where(f"{b} == 0", f"{a} / {b}", floordiv))
    return floordiv, mod


@_register(np.floor_divide)
def _floor_divide(w, args, attrs, out):
    a, b = (_named(w, _as(w, x, out)) for x in args)
    if out.kind == "b":
        raise NotImplementedError("np.floor_divide on booleans")
    return (_float_divmod if out.kind == "f" else _int_floor_divmod)(w, a, b, out)[0]


@_register(np.remainder)
def _remainder(w, args, attrs, out):
    a, b = (_named(w, _as(w, x, out)) for x in args)
    if out.kind == "b":
        raise NotImplementedError("np.remainder on booleans")
    return (_float_divmod if out.kind == "f" else _int_floor_divmod)(w, a, b, out)[1]


@_register(np.fmod)
def _fmod(w, args, attrs, out):
    a, b = (_named(w, _as(w, x, out)) for x in args)
    if out.kind == "f":
        return f"{a} % {b}"
    zero, one = w.const(0, out), w.const(1, out)
    safe_b = w.let(_where(f"{b} == 0", one, b))
    return _where(f"{b} == 0", zero, f"{a} - ({a} // {safe_b}) * {safe_b}")


# ----------------------------------------------------------------------------- powers


def _float_pow(w: SourceWriter, a: str, b: str, dtype: np.dtype) -> str:
    """``a ** b`` for floats via ``exp2(b * log2|a|)`` (computed in float64 for float32 accuracy)."""
    work = np.dtype(np.float64)
    aw, bw = w.let(w.cast(a, dtype, work)), w.let(w.cast(b, dtype, work))
    one, two, zero = w.const(1.0, work), w.const(2.0, work), w.const(0.0, work)
    mag = w.let(f"tl.exp2({bw} * tl.log2(tl.abs({aw})))")
    is_int = w.let(f"tl.floor({bw}) == {bw}")
    odd = w.let(f"{is_int} & (tl.floor({bw} / {two}) * {two} != {bw})")
    # A negative base needs an integer exponent (odd ones keep the sign), except -inf and -0.0 (C's pow).
    inf = w.const(math.inf, work)
    neg_base = _where(
        is_int,
        _where(odd, f"-{mag}", mag),
        _where(f"({aw} == -{inf}) | ({aw} == {zero})", mag, w.const(math.nan, work)),
    )
    negative = f"({aw} < {zero}) | (({aw} == {zero}) & ({one} / {aw} < {zero}))"  # -0.0 included
    res = _where(negative, neg_base, mag)
    # x**0 == 1 and 1**y == 1 even for NaN, and (-1)**(+-inf) == 1; exp2 would give NaN for these.
    res = _where(
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
    negative = _where(
        f"{a} == {one}", one, _where(f"{a} == -{one}", _where(f"({b} & {one}) != 0", f"-{one}", one), zero)
    )
    return _where(f"{b} < {zero}", negative, result)


@_register(np.power, np.float_power)
def _power(w, args, attrs, out):
    a, b = (_named(w, _as(w, x, out)) for x in args)
    if out.kind == "f":
        if out.itemsize < 4:
            work = np.dtype(np.float32)
            return w.cast(_float_pow(w, w.cast(a, out, work), w.cast(b, out, work), work), work, out)
        return _float_pow(w, a, b, out)
    if out.kind == "b":
        raise NotImplementedError("np.power on booleans")
    return _int_pow(w, a, b, out)


# ----------------------------------------------------------------------------- transcendental


def _float_unary(body: Callable[[SourceWriter, str, np.dtype], str]) -> Lowering:
    """A float function: inputs converted to the compute float type, the result to ``out``."""

    def lower(w, args, attrs, out):
        work = compute_float(out)
        x = _named(w, _as(w, args[0], work))
        return w.cast(_named(w, body(w, x, work)), work, out)

    return lower


def _expm1(w: SourceWriter, x: str, dt: np.dtype) -> str:
    # Kahan: (u - 1) * x / log(u) with u = exp(x) cancels the rounding error of exp near 0; away
    # from 0 there is no cancellation and u - 1 is exact enough (and cannot overflow in the product).
    x = _named(w, x)
    one = w.const(1.0, dt)
    u = w.let(f"tl.exp({x})")
    um1 = w.let(f"{u} - {one}")
    safe = w.let(_where(f"({um1} == 0) | ({u} == {w.const(math.inf, dt)})", one, f"tl.log({u})"))
    near_zero = _where(f"{um1} == 0", x, f"{um1} * {x} / {safe}")
    return _where(f"tl.abs({x}) < {one}", near_zero, um1)


def _log1p(w: SourceWriter, x: str, dt: np.dtype) -> str:
    x = _named(w, x)
    # Kahan: log(u) * x / (u - 1) with u = 1 + x recovers the bits lost in forming u.
    u = w.let(f"{w.const(1.0, dt)} + {x}")
    um1 = w.let(f"{u} - {w.const(1.0, dt)}")
    safe = w.let(_where(f"{um1} == 0", w.const(1.0, dt), um1))
    res = _where(f"{um1} == 0", x, f"tl.log({u}) * ({x} / {safe})")
    return _where(f'{x} == float("inf")', x, res)


def _tanh(w: SourceWriter, x: str, dt: np.dtype) -> str:
    x = _named(w, x)
    # tanh|x| = -expm1(-2|x|) / (2 + expm1(-2|x|)): no overflow, no cancellation near 0.
    e = w.let(_expm1(w, f"{w.const(-2.0, dt)} * tl.abs({x})", dt))
    mag = w.let(f"-{e} / ({w.const(2.0, dt)} + {e})")
    return _where(f"{x} < 0", f"-{mag}", _where(f"{x} == 0", x, mag))


def _sinh(w: SourceWriter, x: str, dt: np.dtype) -> str:
    x = _named(w, x)
    # (e - 1/e)/2 from expm1 of |x|: accurate near 0, overflows to inf exactly where sinh does.
    e = w.let(_expm1(w, f"tl.abs({x})", dt))
    one = w.const(1.0, dt)
    # e / (e + 1) written as 1 / (1 + 1/e): finite when e overflows to inf.
    mag = w.let(f"{w.const(0.5, dt)} * ({e} + {one} / ({one} + {one} / {e}))")
    return _where(f"{x} < 0", f"-{mag}", _where(f"{x} == 0", x, mag))


def _cosh(w: SourceWriter, x: str, dt: np.dtype) -> str:
    x = _named(w, x)
    e = w.let(f"tl.exp(tl.abs({x}))")
    return f"{w.const(0.5, dt)} * ({e} + {w.const(1.0, dt)} / {e})"


_FLOAT_UNARY: dict[np.ufunc, Callable[[SourceWriter, str, np.dtype], str]] = {
    np.exp: lambda w, x, dt: f"tl.exp({x})",
    np.exp2: lambda w, x, dt: f"tl.exp2({x})",
    np.log: lambda w, x, dt: f"tl.log({x})",
    np.log2: lambda w, x, dt: f"tl.log2({x})",
    np.log10: lambda w, x, dt: f"tl.log({x}) * {w.const(1 / math.log(10), dt)}",
    np.sqrt: lambda w, x, dt: f"tl.sqrt_rn({x})" if dt == np.float32 else f"tl.sqrt({x})",
    np.cbrt: lambda w, x, dt: _where(
        f"{x} < 0",
        f"-tl.exp2(tl.log2(-{x}) / {w.const(3.0, dt)})",
        _where(f"{x} == 0", x, f"tl.exp2(tl.log2({x}) / {w.const(3.0, dt)})"),
    ),
    np.sin: lambda w, x, dt: f"tl.sin({x})",
    np.cos: lambda w, x, dt: f"tl.cos({x})",
    np.tan: lambda w, x, dt: f"tl.sin({x}) / tl.cos({x})",
    np.expm1: _expm1,
    np.log1p: _log1p,
    np.tanh: _tanh,
    np.sinh: _sinh,
    np.cosh: _cosh,
    np.arcsinh: lambda w, x, dt: _arcsinh(w, x, dt),
    np.arctan: lambda w, x, dt: _atan(w, x, dt),
    np.arcsin: lambda w, x, dt: _asin(w, x, dt),
    np.arccos: lambda w, x, dt: _acos(w, x, dt),
    np.arccosh: lambda w, x, dt: (
        f"tl.log({x} + tl.sqrt({x} - {w.const(1.0, dt)}) * tl.sqrt({x} + {w.const(1.0, dt)}))"
    ),
    np.arctanh: lambda w, x, dt: (
        f"{w.const(0.5, dt)} * (" + _log1p(w, x, dt) + " - " + _log1p(w, f"-{x}", dt) + ")"
    ),
    np.floor: lambda w, x, dt: f"tl.floor({x})",
    np.ceil: lambda w, x, dt: f"tl.ceil({x})",
    np.trunc: lambda w, x, dt: _where(f"{x} < 0", f"tl.ceil({x})", f"tl.floor({x})"),
    np.rint: lambda w, x, dt: _round_half_even(w, x, dt),
    np.deg2rad: lambda w, x, dt: f"{x} * {w.const(math.pi / 180, dt)}",
    np.rad2deg: lambda w, x, dt: f"{x} * {w.const(180 / math.pi, dt)}",
}


def _arcsinh(w: SourceWriter, x: str, dt: np.dtype) -> str:
    # |asinh x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))): exact near 0; for huge |x|, x^2 overflows,
    # and asinh x = log(2|x|) to working precision.
    a = w.let(f"tl.abs({x})")
    one = w.const(1.0, dt)
    sq = w.let(f"{a} * {a}")
    small = w.let(_log1p(w, f"{a} + {sq} / ({one} + tl.sqrt({one} + {sq}))", dt))
    big = f"tl.log({a}) + {w.const(math.log(2), dt)}"
    mag = w.let(_where(f"{a} > {w.const(2.0 ** (12 if dt == np.float32 else 28), dt)}", big, small))
    return _where(f"{x} < 0", f"-{mag}", _where(f"{x} == 0", x, mag))


def _atan(w: SourceWriter, x: str, dt: np.dtype) -> str:
    """arctan by range reduction: |x| > 1 via pi/2 - atan(1/|x|), then t > tan(pi/12) via
    pi/6 + atan((t*sqrt3 - 1) / (sqrt3 + t)); on |u| <= 0.268 the Taylor series converges fast
    (8 terms reach float32 precision, 15 float64's)."""
    x = _named(w, x)
    one = w.const(1.0, dt)
    a = w.let(f"tl.abs({x})")
    inv = w.let(f"{a} > {one}")
    t = w.let(_where(inv, f"{one} / {a}", a))
    sqrt3 = w.const(math.sqrt(3.0), dt)
    shifted = w.let(f"{t} > {w.const(2.0 - math.sqrt(3.0), dt)}")
    u = w.let(_where(shifted, f"({t} * {sqrt3} - {one}) / ({sqrt3} + {t})", t))
    z = w.let(f"{u} * {u}")
    terms = 8 if dt == np.float32 else 15
    poly = w.const((-1) ** (terms - 1) / (2 * terms - 1), dt)
    for k in range(terms - 2, -1, -1):
        poly = w.let(f"{poly} * {z} + {w.const((-1) ** k / (2 * k + 1), dt)}")
    r = w.let(f"{u} * {poly} + tl.where({shifted}, {w.const(math.pi / 6, dt)}, {w.const(0.0, dt)})")
    r = w.let(_where(inv, f"{w.const(math.pi / 2, dt)} - {r}", r))
    return _where(f"{x} < 0", f"-{r}", _where(f"{x} == 0", x, r))


def _asin(w: SourceWriter, x: str, dt: np.dtype) -> str:
    one = w.const(1.0, dt)  # |x| == 1: x / 0 = +-inf, atan(+-inf) = +-pi/2; |x| > 1: sqrt(<0) = nan
    return _atan(w, w.let(f"{x} / tl.sqrt(({one} - {x}) * ({one} + {x}))"), dt)


def _acos(w: SourceWriter, x: str, dt: np.dtype) -> str:
    one = w.const(1.0, dt)  # acos x = 2 atan(sqrt((1 - x) / (1 + x))): exact near 1, pi at -1
    return f"{w.const(2.0, dt)} * {_named(w, _atan(w, w.let(f'tl.sqrt(({one} - {x}) / ({one} + {x}))'), dt))}"


def _round_half_even(w: SourceWriter, x: str, dt: np.dtype) -> str:
    x = _named(w, x)
    half, two = w.const(0.5, dt), w.const(2.0, dt)
    r = w.let(f"tl.floor({x} + {half})")
    tie_to_odd = f"({r} - {x} == {half}) & (tl.floor({r} / {two}) * {two} != {r})"
    return _where(tie_to_odd, f"{r} - {w.const(1.0, dt)}", r)


for _name, _body in _FLOAT_UNARY.items():
    _register(_name)(_float_unary(_body))


def _rounding(body: Callable[[SourceWriter, str, np.dtype], str]) -> Lowering:
    """Integers and bools round to themselves (NumPy keeps their dtype); floats use ``body``."""
    as_float = _float_unary(body)

    def lower(w, args, attrs, out):
        return _as(w, args[0], out) if out.kind != "f" else as_float(w, args, attrs, out)

    return lower


for _name in (np.floor, np.ceil, np.trunc, np.rint):
    _register(_name)(_rounding(_FLOAT_UNARY[_name]))


@_register(np.logaddexp)
def _logaddexp(w, args, attrs, out):
    work = compute_float(out)
    a, b = (_named(w, _as(w, x, work)) for x in args)
    m = w.let(f"tl.maximum({a}, {b})")
    tail = _log1p(w, f"tl.exp(-tl.abs({a} - {b}))", work)
    res = _where(f"{a} == {b}", f"{a} + {w.const(math.log(2), work)}", f"{m} + {tail}")
    return w.cast(w.let(res), work, out)


@_register(np.hypot)
def _hypot(w, args, attrs, out):
    work = compute_float(out)
    a, b = (w.let(f"tl.abs({_as(w, x, work)})") for x in args)
    hi = w.let(f"tl.maximum({a}, {b})")
    lo = w.let(f"tl.minimum({a}, {b})")
    safe = w.let(_where(f"{hi} == 0", w.const(1.0, work), hi))
    ratio = w.let(f"{lo} / {safe}")
    res = f"{hi} * tl.sqrt({w.const(1.0, work)} + {ratio} * {ratio})"
    inf = w.const(math.inf, work)
    res = _where(
        f"({a} == {inf}) | ({b} == {inf})",
        inf,
        _where(f"({a} != {a}) | ({b} != {b})", w.const(math.nan, work), res),
    )
    return w.cast(w.let(res), work, out)


@_register(np.arctan2)
def _arctan2(w, args, attrs, out):
    """C's atan2, special cases included: signed zeros pick the half-plane, inf/inf gives pi/4 multiples."""
    work = compute_float(out)
    y, x = (_named(w, _as(w, v, work)) for v in args)
    zero, one, inf = w.const(0.0, work), w.const(1.0, work), w.const(math.inf, work)
    ay, ax = w.let(f"tl.abs({y})"), w.let(f"tl.abs({x})")
    base = w.let(_atan(w, w.let(f"{ay} / {ax}"), work))
    base = w.let(_where(f"({ay} == {zero}) & ({ax} == {zero})", zero, base))
    base = w.let(_where(f"({ay} == {inf}) & ({ax} == {inf})", w.const(math.pi / 4, work), base))
    x_negative = f"({x} < {zero}) | (({x} == {zero}) & ({one} / {x} < {zero}))"
    r = w.let(_where(x_negative, f"{w.const(math.pi, work)} - {base}", base))
    y_negative = f"({y} < {zero}) | (({y} == {zero}) & ({one} / {y} < {zero}))"
    res = _where(f"({x} != {x}) | ({y} != {y})", w.const(math.nan, work), _where(y_negative, f"-{r}", r))
    return w.cast(w.let(res), work, out)


@_register(np.copysign)
def _copysign(w, args, attrs, out):
    work = compute_float(out)
    a, b = (_named(w, _as(w, x, work)) for x in args)
    neg = f"({b} < 0) | (({b} == 0) & ({w.const(1.0, work)} / {b} < 0))"
    return w.cast(_where(neg, "-tl.abs(" + a + ")", f"tl.abs({a})"), work, out)


@_register(np.logaddexp2)
def _logaddexp2(w, args, attrs, out):
    work = compute_float(out)
    a, b = (_named(w, _as(w, x, work)) for x in args)
    m = w.let(f"tl.maximum({a}, {b})")
    tail = w.let(_log1p(w, f"tl.exp2(-tl.abs({a} - {b}))", work))
    res = _where(
        f"{a} == {b}", f"{a} + {w.const(1.0, work)}", f"{m} + {tail} * {w.const(1 / math.log(2), work)}"
    )
    return w.cast(w.let(res), work, out)


@_register(np.heaviside)
def _heaviside(w, args, attrs, out):
    x, h = (_named(w, _as(w, a, out)) for a in args)
    zero, one = w.const(0, out), w.const(1, out)
    return _where(f"{x} < 0", zero, _where(f"{x} > 0", one, _where(f"{x} == 0", h, x)))


def _modf(part: int) -> Lowering:
    """``np.modf``: (fraction, integral part); the fraction of +-inf is +-0, NaN stays NaN."""

    def lower(w, args, attrs, out):
        work = compute_float(out)
        x = _named(w, _as(w, args[0], work))
        whole = w.let(_where(f"{x} < 0", f"tl.ceil({x})", f"tl.floor({x})"))
        if part == 1:
            return w.cast(whole, work, out)
        zero = w.const(0.0, work)
        frac = _where(
            f"tl.abs({x}) == {w.const(math.inf, work)}",
            _where(f"{x} < 0", f"-{zero}", zero),
            f"{x} - {whole}",
        )
        return w.cast(w.let(frac), work, out)

    return lower


LOWERINGS[(_opdef(np.modf), 0)], LOWERINGS[(_opdef(np.modf), 1)] = _modf(0), _modf(1)


@_register("np.round")
def _round(w, args, attrs, out):
    decimals = int(attrs.get("decimals", 0))
    if out.kind != "f":
        if decimals >= 0:
            return _as(w, args[0], out)
        # NumPy rounds integers to tens, hundreds, ... through float64, half to even.
        work = np.dtype(np.float64)
        scale = w.const(10.0**-decimals, work)
        r = w.let(_round_half_even(w, w.let(f"{_as(w, args[0], work)} / {scale}"), work))
        return w.cast(f"{r} * {scale}", work, out)
    work = compute_float(out)
    x = _named(w, _as(w, args[0], work))
    if decimals == 0:
        return w.cast(w.let(_round_half_even(w, x, work)), work, out)
    scale = w.const(10.0 ** abs(decimals), work)
    scaled = w.let(f"{x} * {scale}" if decimals > 0 else f"{x} / {scale}")
    r = w.let(_round_half_even(w, scaled, work))
    return w.cast(w.let(f"{r} / {scale}" if decimals > 0 else f"{r} * {scale}"), work, out)


@_register("np.nan_to_num")
def _nan_to_num(w, args, attrs, out):
    x = _named(w, _as(w, args[0], out))
    if out.kind != "f":
        return x
    info = np.finfo(out)
    nan = w.const(attrs.get("nan", 0.0) or 0.0, out)
    posinf = w.const(info.max if attrs.get("posinf") is None else attrs["posinf"], out)
    neginf = w.const(info.min if attrs.get("neginf") is None else attrs["neginf"], out)
    inf = w.const(math.inf, out)
    return _where(f"{x} != {x}", nan, _where(f"{x} == {inf}", posinf, _where(f"{x} == -{inf}", neginf, x)))


# ----------------------------------------------------------------------------- predicates & comparisons


@_register(np.isnan)
def _isnan(w, args, attrs, out):
    x, dt = args[0]
    return (
        f"{x} != {x}" if dt.kind == "f" else f"tl.zeros_like({x}) != 0" if dt.kind != "b" else f"{x} & ~{x}"
    )


@_register(np.isinf)
def _isinf(w, args, attrs, out):
    x, dt = args[0]
    if dt.kind != "f":
        return _isnan(w, args, attrs, out)
    return f"tl.abs({x}) == {w.const(math.inf, dt)}"


@_register(np.isfinite)
def _isfinite(w, args, attrs, out):
    x, dt = args[0]
    if dt.kind != "f":
        return f"tl.zeros_like({x}) == 0"
    return f"tl.abs({x}) < {w.const(math.inf, dt)}"


@_register(np.signbit)
def _signbit(w, args, attrs, out):
    x, dt = args[0]
    if dt.kind == "f":
        return f"({x} < 0) | (({x} == 0) & ({w.const(1.0, dt)} / {x} < 0))"
    return f"{x} < 0" if dt.kind == "i" else f"tl.zeros_like({x}) != 0"


def _compare(symbol: str) -> Lowering:
    def lower(w, args, attrs, out):
        common = _common(args)
        a, b = (_as(w, x, common) for x in args)
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
    _register(_name)(_compare(_sym))


def _logical(symbol: str) -> Lowering:
    def lower(w, args, attrs, out):
        a, b = (_as(w, x, np.dtype(bool)) for x in args)
        return f"{a} {symbol} {b}"

    return lower


for _name, _sym in ((np.logical_and, "&"), (np.logical_or, "|"), (np.logical_xor, "^")):
    _register(_name)(_logical(_sym))


@_register(np.logical_not)
def _logical_not(w, args, attrs, out):
    return f"{_as(w, args[0], np.dtype(bool))} == 0"


# ----------------------------------------------------------------------------- bitwise

for _name, _sym in ((np.bitwise_and, "&"), (np.bitwise_or, "|"), (np.bitwise_xor, "^")):
    _register(_name)(_binary(_sym))


@_register(np.invert)
def _invert(w, args, attrs, out):
    x = _as(w, args[0], out)
    return f"{x} == 0" if out.kind == "b" else f"~{x}"


@_register(np.bitwise_count)
def _bitwise_count(w, args, attrs, out):
    """The set bits of ``|x|`` (NumPy's definition) by the SWAR popcount: Triton's interpreter has no
    popc. ``|x|`` is negated unsigned, so the most negative value counts one bit, as in NumPy."""
    (x, dt), = args
    x, u = _named(w, x), np.dtype(f"u{dt.itemsize}")
    v = w.let(w.cast(x, dt, u))
    if dt.kind == "i":
        v = w.let(_where(f"{x} < 0", f"{w.const(0, u)} - {v}", v))
    m1, m2, m4 = (w.const(int(byte * u.itemsize, 16), u) for byte in ("55", "33", "0f"))
    v = w.let(f"{v} - (({v} >> {w.const(1, u)}) & {m1})")
    v = w.let(f"({v} & {m2}) + (({v} >> {w.const(2, u)}) & {m2})")
    v = w.let(f"({v} + ({v} >> {w.const(4, u)})) & {m4}")
    for shift in (8, 16, 32)[: u.itemsize.bit_length() - 1]:  # add up the bytes' counts
        v = w.let(f"{v} + ({v} >> {w.const(shift, u)})")
    return w.cast(f"{v} & {w.const(0x7F, u)}", u, out)


def _shift(left: bool) -> Lowering:
    def lower(w, args, attrs, out):
        a, b = (_named(w, _as(w, x, out)) for x in args)
        bits = w.const(out.itemsize * 8, out)
        # NumPy defines shifts by >= the bit width (and by negative counts): all bits shifted out.
        too_far = f"({b} >= {bits}) | ({b} < 0)" if out.kind == "i" else f"{b} >= {bits}"
        if left:
            return _where(too_far, w.const(0, out), f"{a} << {b}")
        fill = _where(f"{a} < 0", w.const(-1, out), w.const(0, out)) if out.kind == "i" else w.const(0, out)
        return _where(too_far, fill, f"{a} >> {b}")

    return lower


_register(np.left_shift)(_shift(True))
_register(np.right_shift)(_shift(False))


# ----------------------------------------------------------------------------- selection & conversion


@_register("np.where")
def _select(w, args, attrs, out):
    cond = _as(w, args[0], np.dtype(bool))
    return _where(cond, _as(w, args[1], out), _as(w, args[2], out))


@_register("np.astype")
def _astype(w, args, attrs, out):
    return _as(w, args[0], out)


def lower_elementwise(
    w: SourceWriter, op: OpDef | tuple[OpDef, int], args: Sequence[Arg], attrs: dict, out: np.dtype
) -> str:
    """The expression computing ``op`` (a key of `LOWERINGS`) on ``args``; ``KeyError`` if it has none."""
    return LOWERINGS[op](w, [(e, np.dtype(d)) for e, d in args], attrs, np.dtype(out))
