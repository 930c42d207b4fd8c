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


class SourceWriter:
    """Lines of a kernel body with an indentation level, fresh names and hoisted constants."""

    def __init__(self, indent: int = 1) -> None:
        self.lines: list[str] = []
        self.indent = indent
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
        name = self._consts.get((text, ty))
        if name is None:
            name = f"c{len(self._consts)}"
            self._consts[(text, ty)] = name
            self.const_lines.append(f"{name} = tl.full([1], {text}, {ty})")
        return name

    @staticmethod
    def cast(expr: str, src: np.dtype, dst: np.dtype) -> str:
        """``expr`` (of dtype ``src``) converted to ``dst`` with NumPy's ``astype`` meaning."""
        src, dst = np.dtype(src), np.dtype(dst)
        if src == dst:
            return expr
        if dst.kind == "b":
            return f"({expr} != 0)"
        return f"{_paren(expr)}.to({tl_type(dst)})"


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
