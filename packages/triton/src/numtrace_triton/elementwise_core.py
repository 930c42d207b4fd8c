"""The table of elementwise lowerings (:data:`LOWERINGS`), the decorator that fills it and the
helpers every family of lowerings shares. The families are `elementwise` (arithmetic, powers,
predicates, comparisons, bitwise, selection) and `transcendental` (exp/log/trig families, rounding
and the float functions built from them); importing `numtrace_triton.elementwise` registers both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numtrace_ir import registry
from numtrace_ir.registry import OpDef

from .source_writer import SourceWriter

__all__ = ["LOWERINGS", "Arg", "Lowering", "cast_to", "common_dtype", "named", "opdef_of", "register",
           "where"]

Arg = tuple[str, np.dtype]  # (expression, dtype)
Lowering = Callable[[SourceWriter, Sequence[Arg], dict, np.dtype], str]

# Keyed by registry op (a ufunc stands for the op it traces to; any other op is named); a multi-output
# op has one lowering per output, keyed ``(op, output index)``.
LOWERINGS: dict[OpDef | tuple[OpDef, int], Lowering] = {}


def opdef_of(op: np.ufunc | str) -> OpDef:
    """The registry op of a ufunc or op name: a typo or a ufunc the registry lacks fails at import."""
    if isinstance(op, np.ufunc):
        found = registry.for_numpy(op)
        if found is None or found.ufunc is not op:
            raise LookupError(f"no registry op computes the ufunc {op.__name__}")
        return found
    return registry.get(op)


def register(*ops: np.ufunc | str) -> Callable[[Lowering], Lowering]:
    """Register the decorated function as the lowering of `ops` (ufuncs or op names)."""
    def deco(fn: Lowering) -> Lowering:
        for op in ops:
            LOWERINGS[opdef_of(op)] = fn
        return fn

    return deco


def common_dtype(args: Sequence[Arg]) -> np.dtype:
    return np.result_type(*[dt for _, dt in args])


def cast_to(w: SourceWriter, arg: Arg, dtype: np.dtype) -> str:
    return w.astype(arg[0], arg[1], dtype)


def where(cond: str, a: str, b: str) -> str:
    return f"tl.where({cond}, {a}, {b})"


def named(w: SourceWriter, expr: str) -> str:
    """``expr`` as a plain name, so that helpers can splice it anywhere without precedence surprises."""
    return expr if expr.isidentifier() else w.let(expr)
