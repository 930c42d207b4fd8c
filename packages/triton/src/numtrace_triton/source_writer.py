"""Building blocks of generated kernel source: named temporaries, typed constants, casts, addresses.

Everything here produces plain strings of Triton code; the emitters put them
together. Names are short and numbered (``v3``, ``t7``, ``c0``) so the
generated source reads like hand-written code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .dtypes import tl_type

__all__ = ["SourceWriter", "flat_address", "literal"]


def literal(value: bool | int | float, dtype: np.dtype) -> str:
    """``value`` as a Python literal Triton accepts (``float("inf")`` for non-finite floats)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return "True" if value else "False"
    if dtype.kind in "iu":
        return str(int(value))
    value = float(value)
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else 'float("-inf")'
    return repr(value)


def _nan_bits(value: bool | int | float, dtype: np.dtype) -> int | None:
    """The bits (as a signed int) of a float NaN `value` in `dtype` (NumPy's cast keeps its sign and
    payload), where they are not those of ``float("nan")``; else None."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f" or not isinstance(value, (float, np.floating)) or not math.isnan(value):
        return None
    signed = f"i{dtype.itemsize}"
    bits = int(np.array(value, dtype).view(signed))
    return None if bits == int(np.array(math.nan, dtype).view(signed)) else bits


class SourceWriter:
    """Lines of a kernel body with an indentation level, fresh names and hoisted constants.

    ``libdevice`` chooses the form of float math (`Tuning.libdevice`): CUDA's libdevice functions
    for a GPU, ``triton.language``'s for the interpreter (which runs them with NumPy and has no
    libdevice). Division and square root are IEEE round-to-nearest in both forms.
    """

    def __init__(self, indent: int = 1, *, libdevice: bool = False) -> None:
        self.lines: list[str] = []
        self.indent = indent
        self.libdevice = libdevice
        self._counter = 0
        self._consts: dict[tuple[str, str], str] = {}
        self.const_lines: list[str] = []

    def emit(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def fresh(self, prefix: str = "t") -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def let(self, expr: str, prefix: str = "t") -> str:
        """Assign ``expr`` to a fresh name and return the name."""
        name = self.fresh(prefix)
        self.emit(f"{name} = {expr}")
        return name

    def const(self, value: bool | int | float, dtype: np.dtype) -> str:
        """A typed constant, defined once at the top of the kernel.

        Shape ``[1]`` rather than 0-d: it broadcasts against any tile, and Triton's
        interpreter mistypes comparisons between 0-d tensors.
        """
        text, ty = literal(value, dtype), tl_type(dtype)
        bits = _nan_bits(value, dtype)
        key = (text if bits is None else f"nan {bits}", ty)
        name = self._consts.get(key)
        if name is None:
            name = f"c{len(self._consts)}"
            self._consts[key] = name
            full = f"tl.full([1], {text}, {ty})"
            if text == "-0.0":  # Triton 3.6's tl.full writes a zero of either sign as +0.0
                full = f"tl.full([1], 0.0, {ty}) * tl.full([1], -1.0, {ty})"
            if bits is not None:   # float("nan") is the default NaN: another sign or payload by its bits
                full = f"tl.full([1], {bits}, tl.int{8 * np.dtype(dtype).itemsize}).to({ty}, bitcast=True)"
            self.const_lines.append(f"{name} = {full}")
        return name

    def math(self, name: str, *args: str) -> str:
        """A call of the float32/float64 function ``name`` (``exp``, ``log``, ``exp2``, ``log2``, ``sin``,
        ``cos``): libdevice's on a GPU (Triton's own lower float32 to ``ex2.approx``-style
        instructions), ``tl``'s in the interpreter."""
        return f"{'libdevice' if self.libdevice else 'tl'}.{name}({', '.join(args)})"

    @staticmethod
    def div(a: str, b: str, dtype: np.dtype) -> str:
        """``a / b`` of floats rounded to nearest, as NumPy divides: Triton lowers a float32 (and a
        float16, computed in float32) ``/`` to the approximate ``div.full.f32``; ``tl.div_rn`` is
        IEEE's division on a GPU and NumPy's in the interpreter. float64's ``/`` is already exact."""
        dtype = np.dtype(dtype)
        if dtype == np.float32:
            return f"tl.div_rn({a}, {b})"
        if dtype == np.float16:
            return f"tl.div_rn({_wrap(a)}.to(tl.float32), {_wrap(b)}.to(tl.float32)).to(tl.float16)"
        return f"{_wrap(a)} / {_wrap(b)}"

    def neg(self, x: str, dtype: np.dtype) -> str:
        """``-x``; a float's as ``x * -1.0``, which flips a zero's sign: Triton 3.6 writes a float's
        ``-x`` as ``0 - x``, which is +0.0 for both zeros."""
        return f"{_wrap(x)} * {self.const(-1.0, dtype)}" if np.dtype(dtype).kind == "f" else f"-{_wrap(x)}"

    def negative(self, x: str, dtype: np.dtype) -> str:
        """NumPy's ``np.negative``: a float's sign bit flipped (a NaN's too, which `neg`'s ``x * -1.0``
        keeps); `neg` otherwise."""
        d = np.dtype(dtype)
        if d.kind != "f":
            return self.neg(x, d)
        bits = 8 * d.itemsize
        sign = self.const(-(1 << (bits - 1)), np.dtype(f"i{d.itemsize}"))
        return f"({_wrap(x)}.to(tl.int{bits}, bitcast=True) ^ {sign}).to({tl_type(d)}, bitcast=True)"

    def sign_bit(self, x: str, dtype: np.dtype) -> str:
        """Whether a float's sign bit is set, as NumPy's ``np.signbit``: a NaN's and -0.0's too (a
        compare of the value loses a NaN's sign)."""
        bits = 8 * np.dtype(dtype).itemsize
        return f"({_wrap(x)}.to(tl.int{bits}, bitcast=True) < {self.const(0, np.dtype(f'i{bits // 8}'))})"

    def copysign(self, a: str, b: str, dtype: np.dtype) -> str:
        """C's ``copysign`` of floats: a's bits but for the sign bit, b's (a NaN's sign too, either side)."""
        d = np.dtype(dtype)
        bits, it = 8 * d.itemsize, np.dtype(f"i{d.itemsize}")
        sign, magnitude = self.const(-(1 << (bits - 1)), it), self.const((1 << (bits - 1)) - 1, it)
        return (f"(({_wrap(a)}.to(tl.int{bits}, bitcast=True) & {magnitude}) | "
                f"({_wrap(b)}.to(tl.int{bits}, bitcast=True) & {sign})).to({tl_type(d)}, bitcast=True)")

    @staticmethod
    def sqrt(x: str, dtype: np.dtype) -> str:
        """The correctly rounded square root: ``tl.sqrt`` of a float32 is ``sqrt.approx`` on a GPU."""
        return f"tl.sqrt_rn({x})" if np.dtype(dtype) == np.float32 else f"tl.sqrt({x})"

    def fmod(self, a: str, b: str, dtype: np.dtype) -> str:
        """C's ``fmod`` of floats (exact): libdevice's on a GPU, where ``%`` is ``a - trunc(a / b) * b``
        (wrong for large quotients); ``%`` is NumPy's ``fmod`` in the interpreter."""
        dtype = np.dtype(dtype)
        if not self.libdevice:
            return f"{_wrap(a)} % {_wrap(b)}"
        if dtype == np.float16:  # NumPy's half fmod goes through float32 too
            return f"libdevice.fmod({_wrap(a)}.to(tl.float32), {_wrap(b)}.to(tl.float32)).to(tl.float16)"
        return f"libdevice.fmod({a}, {b})"

    def astype(self, expr: str, src: np.dtype, dst: np.dtype) -> str:
        """`cast`, with NumPy's x86-64 answer for a float out of an integer destination's range on a GPU,
        where PTX's ``cvt.rzi`` saturates and gives 0 for NaN. NumPy's casts are C's, compiled for
        x86-64: a signed conversion gives the integer minimum for NaN and out-of-range values, of
        int32 (wrapped to int8, int16, uint8, uint16) or of int64 (wrapped to uint32: -1.0 ->
        4294967295); uint64 converts ``x - 2**63`` and sets the top bit back for ``x >= 2**63``.
        The interpreter's ``.to`` is NumPy's own cast, but for uint32, which goes through int64 there
        too: NumPy's vectorised float -> uint32 loop answers NaN and values out of [-2**31, 2**32)
        otherwise than its scalar C cast, by an element's position in the array."""
        src, dst = np.dtype(src), np.dtype(dst)
        if src.kind != "f" or dst.kind not in "iu":
            return self.cast(expr, src, dst)
        via = np.dtype(np.int32 if dst.itemsize < 4 or dst == np.int32 else np.int64)
        if not self.libdevice and dst != np.uint32:
            return self.cast(expr, src, dst)
        if not self.libdevice:
            return self.cast(self.cast(expr, src, via), via, dst)
        wide = np.dtype(np.float32) if src == np.float16 else src
        x = expr if expr.isidentifier() else self.let(expr)
        xw = self.let(self.cast(x, src, wide))
        top = None
        if dst == np.uint64:
            top = self.let(f"{xw} >= {self.const(2.0**63, wide)}")
            xw = self.let(f"{xw} - tl.where({top}, {self.const(2.0**63, wide)}, {self.const(0.0, wide)})")
        bound = float(2 ** (via.itemsize * 8 - 1))
        fits = f"({xw} >= {self.const(-bound, wide)}) & ({xw} < {self.const(bound, wide)})"
        whole = f"tl.where({fits}, {self.cast(xw, wide, via)}, {self.const(np.iinfo(via).min, via)})"
        if top is None:
            return self.cast(whole, via, dst)
        top_bit = f"tl.where({top}, {self.const(np.iinfo(via).min, via)}, {self.const(0, via)})"
        return f"({_wrap(whole)} ^ {top_bit}).to({tl_type(dst)}, bitcast=True)"

    @staticmethod
    def cast(expr: str, src: np.dtype, dst: np.dtype) -> str:
        """``expr`` (of dtype ``src``) converted to ``dst`` with NumPy's ``astype`` meaning."""
        src, dst = np.dtype(src), np.dtype(dst)
        if src == dst:
            return expr
        if dst.kind == "b":
            return f"({expr} != 0)"
        return f"{_paren(expr)}.to({tl_type(dst)})"


def _wrap(expr: str) -> str:
    """``expr`` as one operand: a name stays, anything else gets parentheses."""
    return expr if expr.isidentifier() else f"({expr})"


def _paren(expr: str) -> str:
    return expr if expr.isidentifier() or expr.endswith(")") and expr.startswith("(") else f"({expr})"


def flat_address(index: str, shape: Sequence[int], strides: Sequence[int]) -> str:
    """Element offset of the C-order flat ``index`` into a view with ``shape`` and ``strides``.

    Unit dimensions are dropped and neighbours that are contiguous with each
    other are merged first, so a contiguous view costs no division at all and a
    broadcast one costs one ``//`` or ``%`` per run of dimensions.
    Returns ``"0"`` when every stride is zero.
    """
    merged: list[list[int]] = []  # [extent, stride], outermost first
    for n, s in zip(shape, strides):
        if n == 1:
            continue
        if merged and merged[-1][1] == s * n:
            merged[-1] = [merged[-1][0] * n, s]
        else:
            merged.append([n, s])
    terms: list[str] = []
    inner = 1
    for pos in range(len(merged) - 1, -1, -1):
        n, s = merged[pos]
        if s != 0:
            q = index if inner == 1 else f"({index} // {inner})"
            term = q if pos == 0 else f"({q} % {n})" if inner != 1 else f"({index} % {n})"
            terms.append(term if s == 1 else f"{term} * {s}")
        inner *= n
    return " + ".join(reversed(terms)) if terms else "0"
