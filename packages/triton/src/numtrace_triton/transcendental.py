"""Triton lowerings of NumPy's transcendental and float functions (exp/log, trig and hyperbolic
families, rounding, logaddexp, hypot, arctan2, copysign, heaviside, modf, round, nan_to_num), built
from ``exp``/``log``/``exp2``/``log2`` with accurate formulations and NumPy's special cases.
Registered into `elementwise_core.LOWERINGS` on import (numtrace_triton.elementwise imports it).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .dtypes import compute_float
from .elementwise_core import LOWERINGS, Lowering, cast_to, named, opdef_of, register, where
from .source_writer import SourceWriter


def _float_unary(body: Callable[[SourceWriter, str, np.dtype], str]) -> Lowering:
    """A float function: inputs converted to the compute float type, the result to ``out``."""

    def lower(w, args, attrs, out):
        work = compute_float(out)
        x = named(w, cast_to(w, args[0], work))
        return w.cast(named(w, body(w, x, work)), work, out)

    return lower


def _expm1(w: SourceWriter, x: str, dt: np.dtype) -> str:
    # Kahan: (u - 1) * x / log(u) with u = exp(x) cancels the rounding error of exp near 0; away
    # from 0 there is no cancellation and u - 1 is exact enough (and cannot overflow in the product).
    x = named(w, x)
    one = w.const(1.0, dt)
    u = w.let(w.math("exp", x))
    um1 = w.let(f"{u} - {one}")
    safe = w.let(where(f"({um1} == 0) | ({u} == {w.const(math.inf, dt)})", one, w.math("log", u)))
    near_zero = where(f"{um1} == 0", x, w.div(f"{um1} * {x}", safe, dt))
    return where(f"tl.abs({x}) < {one}", near_zero, um1)


def _log1p(w: SourceWriter, x: str, dt: np.dtype) -> str:
    x = named(w, x)
    # Kahan: log(u) * x / (u - 1) with u = 1 + x recovers the bits lost in forming u.
    u = w.let(f"{w.const(1.0, dt)} + {x}")
    um1 = w.let(f"{u} - {w.const(1.0, dt)}")
    safe = w.let(where(f"{um1} == 0", w.const(1.0, dt), um1))
    res = where(f"{um1} == 0", x, f"{w.math('log', u)} * {w.div(x, safe, dt)}")
    return where(f'{x} == float("inf")', x, res)


def _tanh(w: SourceWriter, x: str, dt: np.dtype) -> str:
    x = named(w, x)
    # tanh|x| = -expm1(-2|x|) / (2 + expm1(-2|x|)): no overflow, no cancellation near 0.
    e = w.let(_expm1(w, f"{w.const(-2.0, dt)} * tl.abs({x})", dt))
    mag = w.let(w.div(f"-{e}", f"{w.const(2.0, dt)} + {e}", dt))
    return where(f"{x} < 0", w.neg(mag, dt), where(f"{x} == 0", x, mag))


def _big_half_exp(w: SourceWriter, a: str, dt: np.dtype) -> str:
    """exp(a) / 2 for a >= 0 without overflowing where the result is finite (a up to log(2 * max)):
    (exp(a / 2) / 2) * exp(a / 2), both halves exact in their arguments."""
    h = w.let(w.math("exp", f"{a} * {w.const(0.5, dt)}"))
    return f"({h} * {w.const(0.5, dt)}) * {h}"


# Where exp(|x|) / 2 is sinh|x| and cosh x to the last bit (e^-|x| below half an ulp of it).
_EXP_ONLY = {np.dtype(np.float32): 9.0, np.dtype(np.float64): 19.0}


def _sinh(w: SourceWriter, x: str, dt: np.dtype) -> str:
    x = named(w, x)
    a = w.let(f"tl.abs({x})")
    # (e - 1/e)/2 from expm1 of |x|: accurate near 0; for large |x|, exp(|x|)/2 without early overflow.
    e = w.let(_expm1(w, a, dt))
    one = w.const(1.0, dt)
    small = f"{w.const(0.5, dt)} * ({e} + {w.div(e, f'{one} + {e}', dt)})"
    mag = w.let(where(f"{a} > {w.const(_EXP_ONLY[dt], dt)}", _big_half_exp(w, a, dt), small))
    # Tiny |x| (subnormals included): sinh x is x, which the halving above would round.
    tiny = w.const(2.0 ** (-26 if dt == np.float64 else -12), dt)
    return where(f"{a} < {tiny}", x, where(f"{x} < 0", w.neg(mag, dt), mag))


def _cosh(w: SourceWriter, x: str, dt: np.dtype) -> str:
    x = named(w, x)
    a = w.let(f"tl.abs({x})")
    e = w.let(w.math("exp", a))
    small = f"{w.const(0.5, dt)} * ({e} + {w.div(w.const(1.0, dt), e, dt)})"
    return where(f"{a} > {w.const(_EXP_ONLY[dt], dt)}", _big_half_exp(w, a, dt), small)


def _log10(w: SourceWriter, x: str, dt: np.dtype) -> str:
    return f"libdevice.log10({x})" if w.libdevice else f"{w.math('log', x)} * {w.const(1 / math.log(10), dt)}"


def _cbrt(w: SourceWriter, x: str, dt: np.dtype) -> str:
    """libdevice's cbrt on a GPU (a correctly signed root, C's special cases); in the interpreter
    ``exp2(log2|x| / 3)`` with the sign and zeros put back."""
    if w.libdevice:
        return f"libdevice.cbrt({x})"
    three = w.const(3.0, dt)
    return where(f"{x} < 0", f"-{w.math('exp2', w.div(w.math('log2', f'-{x}'), three, dt))}",
                 where(f"{x} == 0", x, w.math("exp2", w.div(w.math("log2", x), three, dt))))


_FLOAT_UNARY: dict[np.ufunc, Callable[[SourceWriter, str, np.dtype], str]] = {
    np.exp: lambda w, x, dt: w.math("exp", x),
    np.exp2: lambda w, x, dt: w.math("exp2", x),
    np.log: lambda w, x, dt: w.math("log", x),
    np.log2: lambda w, x, dt: w.math("log2", x),
    np.log10: lambda w, x, dt: _log10(w, x, dt),
    np.sqrt: lambda w, x, dt: w.sqrt(x, dt),
    np.cbrt: lambda w, x, dt: _cbrt(w, x, dt),
    np.sin: lambda w, x, dt: w.math("sin", x),
    np.cos: lambda w, x, dt: w.math("cos", x),
    np.tan: lambda w, x, dt: (f"libdevice.tan({x})" if w.libdevice
                              else w.div(w.math("sin", x), w.math("cos", x), dt)),
    np.expm1: _expm1,
    np.log1p: _log1p,
    np.tanh: _tanh,
    np.sinh: _sinh,
    np.cosh: _cosh,
    np.arcsinh: lambda w, x, dt: _arcsinh(w, x, dt),
    np.arctan: lambda w, x, dt: _atan(w, x, dt),
    np.arcsin: lambda w, x, dt: _asin(w, x, dt),
    np.arccos: lambda w, x, dt: _acos(w, x, dt),
    np.arccosh: lambda w, x, dt: _arccosh(w, x, dt),
    np.arctanh: lambda w, x, dt: (
        f"{w.const(0.5, dt)} * (" + _log1p(w, x, dt) + " - " + _log1p(w, f"-{x}", dt) + ")"
    ),
    np.floor: lambda w, x, dt: f"tl.floor({x})",
    np.ceil: lambda w, x, dt: f"tl.ceil({x})",
    np.trunc: lambda w, x, dt: where(f"{x} < 0", f"tl.ceil({x})", f"tl.floor({x})"),
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
    root = w.sqrt(f"{one} + {sq}", dt)
    small = w.let(_log1p(w, f"{a} + {w.div(sq, f'{one} + {root}', dt)}", dt))
    big = f"{w.math('log', a)} + {w.const(math.log(2), dt)}"
    mag = w.let(where(f"{a} > {w.const(2.0 ** (12 if dt == np.float32 else 28), dt)}", big, small))
    return where(f"{x} < 0", w.neg(mag, dt), where(f"{x} == 0", x, mag))


def _arccosh(w: SourceWriter, x: str, dt: np.dtype) -> str:
    # log(x + sqrt(x^2 - 1)); past 2**28 (float64) / 2**12 (float32) that is log(2x) to working
    # precision, taken as log(x) + log 2 so that it stays finite up to the largest float.
    one = w.const(1.0, dt)
    below, above = w.sqrt(f"{x} - {one}", dt), w.sqrt(f"{x} + {one}", dt)
    near = w.math("log", f"{x} + {below} * {above}")
    big = f"{w.math('log', x)} + {w.const(math.log(2), dt)}"
    return where(f"{x} > {w.const(2.0 ** (12 if dt == np.float32 else 28), dt)}", big, near)


def _atan(w: SourceWriter, x: str, dt: np.dtype) -> str:
    """arctan by range reduction: |x| > 1 via pi/2 - atan(1/|x|), then t > tan(pi/12) via
    pi/6 + atan((t*sqrt3 - 1) / (sqrt3 + t)); on |u| <= 0.268 the Taylor series converges fast
    (8 terms reach float32 precision, 15 float64's)."""
    x = named(w, x)
    one = w.const(1.0, dt)
    a = w.let(f"tl.abs({x})")
    inv = w.let(f"{a} > {one}")
    t = w.let(where(inv, w.div(one, a, dt), a))
    sqrt3 = w.const(math.sqrt(3.0), dt)
    shifted = w.let(f"{t} > {w.const(2.0 - math.sqrt(3.0), dt)}")
    u = w.let(where(shifted, w.div(f"{t} * {sqrt3} - {one}", f"{sqrt3} + {t}", dt), t))
    z = w.let(f"{u} * {u}")
    terms = 8 if dt == np.float32 else 15
    poly = w.const((-1) ** (terms - 1) / (2 * terms - 1), dt)
    for k in range(terms - 2, -1, -1):
        poly = w.let(f"{poly} * {z} + {w.const((-1) ** k / (2 * k + 1), dt)}")
    r = w.let(f"{u} * {poly} + tl.where({shifted}, {w.const(math.pi / 6, dt)}, {w.const(0.0, dt)})")
    r = w.let(where(inv, f"{w.const(math.pi / 2, dt)} - {r}", r))
    return where(f"{x} < 0", w.neg(r, dt), where(f"{x} == 0", x, r))


def _asin(w: SourceWriter, x: str, dt: np.dtype) -> str:
    one = w.const(1.0, dt)  # |x| == 1: x / 0 = +-inf, atan(+-inf) = +-pi/2; |x| > 1: sqrt(<0) = nan
    return _atan(w, w.let(w.div(x, w.sqrt(f"({one} - {x}) * ({one} + {x})", dt), dt)), dt)


def _acos(w: SourceWriter, x: str, dt: np.dtype) -> str:
    one = w.const(1.0, dt)  # acos x = 2 atan(sqrt((1 - x) / (1 + x))): exact near 1, pi at -1
    ratio = w.div(f"{one} - {x}", f"{one} + {x}", dt)
    return f"{w.const(2.0, dt)} * {named(w, _atan(w, w.let(w.sqrt(ratio, dt)), dt))}"


def _round_half_even(w: SourceWriter, x: str, dt: np.dtype) -> str:
    """rint: from ``f = floor(x)`` and the exact ``x - f`` (no rounding in forming ``x + 0.5``, which
    is off by one for odd integers past 2**52), ties to the even neighbour; a zero result keeps x's
    sign (``x * 0``: -0.0 for -0.4 and -0.0), and inf and NaN stay."""
    x = named(w, x)
    half, two, one = w.const(0.5, dt), w.const(2.0, dt), w.const(1.0, dt)
    f = w.let(f"tl.floor({x})")
    d = w.let(f"{x} - {f}")
    odd = f"tl.floor({f} * {half}) * {two} != {f}"
    r = w.let(where(f"({d} > {half}) | (({d} == {half}) & ({odd}))", f"{f} + {one}", f))
    return where(f"{r} == 0", f"{x} * {w.const(0.0, dt)}", where(f"{x} != {x} + {one}", r, x))


for _name, _body in _FLOAT_UNARY.items():
    register(_name)(_float_unary(_body))


def _rounding(body: Callable[[SourceWriter, str, np.dtype], str]) -> Lowering:
    """Integers and bools round to themselves (NumPy keeps their dtype); floats use ``body``."""
    as_float = _float_unary(body)

    def lower(w, args, attrs, out):
        return cast_to(w, args[0], out) if out.kind != "f" else as_float(w, args, attrs, out)

    return lower


for _name in (np.floor, np.ceil, np.trunc, np.rint):
    register(_name)(_rounding(_FLOAT_UNARY[_name]))


@register(np.logaddexp)
def _logaddexp(w, args, attrs, out):
    work = compute_float(out)
    a, b = (named(w, cast_to(w, x, work)) for x in args)
    m = w.let(f"tl.maximum({a}, {b})")
    tail = _log1p(w, w.math("exp", f"-tl.abs({a} - {b})"), work)
    res = where(f"{a} == {b}", f"{a} + {w.const(math.log(2), work)}", f"{m} + {tail}")
    return w.cast(w.let(res), work, out)


@register(np.hypot)
def _hypot(w, args, attrs, out):
    work = compute_float(out)
    a, b = (w.let(f"tl.abs({cast_to(w, x, work)})") for x in args)
    hi = w.let(f"tl.maximum({a}, {b})")
    lo = w.let(f"tl.minimum({a}, {b})")
    safe = w.let(where(f"{hi} == 0", w.const(1.0, work), hi))
    ratio = w.let(w.div(lo, safe, work))
    res = f"{hi} * {w.sqrt(f'{w.const(1.0, work)} + {ratio} * {ratio}', work)}"
    inf = w.const(math.inf, work)
    res = where(
        f"({a} == {inf}) | ({b} == {inf})",
        inf,
        where(f"({a} != {a}) | ({b} != {b})", w.const(math.nan, work), res),
    )
    return w.cast(w.let(res), work, out)


@register(np.arctan2)
def _arctan2(w, args, attrs, out):
    """C's atan2, special cases included: signed zeros pick the half-plane, inf/inf gives pi/4 multiples."""
    work = compute_float(out)
    y, x = (named(w, cast_to(w, v, work)) for v in args)
    zero, one, inf = w.const(0.0, work), w.const(1.0, work), w.const(math.inf, work)
    ay, ax = w.let(f"tl.abs({y})"), w.let(f"tl.abs({x})")
    base = w.let(_atan(w, w.let(w.div(ay, ax, work)), work))
    base = w.let(where(f"({ay} == {zero}) & ({ax} == {zero})", zero, base))
    base = w.let(where(f"({ay} == {inf}) & ({ax} == {inf})", w.const(math.pi / 4, work), base))
    x_negative = f"({x} < {zero}) | (({x} == {zero}) & ({w.div(one, x, work)} < {zero}))"
    r = w.let(where(x_negative, f"{w.const(math.pi, work)} - {base}", base))
    y_negative = f"({y} < {zero}) | (({y} == {zero}) & ({w.div(one, y, work)} < {zero}))"
    res = where(f"({x} != {x}) | ({y} != {y})", w.const(math.nan, work), where(y_negative, w.neg(r, work), r))
    return w.cast(w.let(res), work, out)


@register(np.copysign)
def _copysign(w, args, attrs, out):
    work = compute_float(out)
    a, b = (named(w, cast_to(w, x, work)) for x in args)
    return w.cast(w.copysign(a, b, work), work, out)


@register(np.logaddexp2)
def _logaddexp2(w, args, attrs, out):
    work = compute_float(out)
    a, b = (named(w, cast_to(w, x, work)) for x in args)
    m = w.let(f"tl.maximum({a}, {b})")
    tail = w.let(_log1p(w, w.math("exp2", f"-tl.abs({a} - {b})"), work))
    res = where(
        f"{a} == {b}", f"{a} + {w.const(1.0, work)}", f"{m} + {tail} * {w.const(1 / math.log(2), work)}"
    )
    return w.cast(w.let(res), work, out)


@register(np.heaviside)
def _heaviside(w, args, attrs, out):
    x, h = (named(w, cast_to(w, a, out)) for a in args)
    zero, one = w.const(0, out), w.const(1, out)
    return where(f"{x} < 0", zero, where(f"{x} > 0", one, where(f"{x} == 0", h, x)))


def _modf(part: int) -> Lowering:
    """``np.modf``: (fraction, integral part); the fraction of +-inf is +-0, NaN stays NaN."""

    def lower(w, args, attrs, out):
        work = compute_float(out)
        x = named(w, cast_to(w, args[0], work))
        whole = w.let(where(f"{x} < 0", f"tl.ceil({x})", f"tl.floor({x})"))
        if part == 1:
            return w.cast(whole, work, out)
        zero = w.const(0.0, work)
        # The fraction has x's sign (C's modf): -0.0 for -0.0, negative integers and -inf.
        rest = w.let(f"{x} - {whole}")
        frac = where(
            f"tl.abs({x}) == {w.const(math.inf, work)}",
            where(f"{x} < 0", w.const(-0.0, work), zero),
            where(f"{rest} == 0", f"{x} * {zero}", rest),
        )
        return w.cast(w.let(frac), work, out)

    return lower


LOWERINGS[(opdef_of(np.modf), 0)], LOWERINGS[(opdef_of(np.modf), 1)] = _modf(0), _modf(1)


@register("np.round")
def _round(w, args, attrs, out):
    decimals = int(attrs.get("decimals", 0))
    if out.kind != "f":
        if decimals >= 0:
            return cast_to(w, args[0], out)
        # NumPy rounds integers to tens, hundreds, ... through float64, half to even.
        work = np.dtype(np.float64)
        scale = w.const(10.0**-decimals, work)
        r = w.let(_round_half_even(w, w.let(w.div(cast_to(w, args[0], work), scale, work)), work))
        return w.astype(f"{r} * {scale}", work, out)
    work = compute_float(out)
    x = named(w, cast_to(w, args[0], work))
    if decimals == 0:
        return w.cast(w.let(_round_half_even(w, x, work)), work, out)

    def rounded(expr: str) -> str:
        """``expr`` rounded to ``out`` and back: NumPy scales and unscales float16 in float16."""
        return w.let(w.cast(w.cast(expr, work, out), out, work) if out != work else expr)

    scale = w.const(10.0 ** abs(decimals), work)
    scaled = rounded(f"{x} * {scale}" if decimals > 0 else w.div(x, scale, work))
    r = w.let(_round_half_even(w, scaled, work))
    return w.cast(rounded(w.div(r, scale, work) if decimals > 0 else f"{r} * {scale}"), work, out)


@register("np.nan_to_num")
def _nan_to_num(w, args, attrs, out):
    x = named(w, cast_to(w, args[0], out))
    if out.kind != "f":
        return x
    info = np.finfo(out)
    nan = w.const(attrs.get("nan", 0.0) or 0.0, out)
    posinf = w.const(info.max if attrs.get("posinf") is None else attrs["posinf"], out)
    neginf = w.const(info.min if attrs.get("neginf") is None else attrs["neginf"], out)
    inf = w.const(math.inf, out)
    return where(f"{x} != {x}", nan, where(f"{x} == {inf}", posinf, where(f"{x} == -{inf}", neginf, x)))
