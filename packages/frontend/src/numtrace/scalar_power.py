"""Operators of NumPy scalars: NumPy runs them as its scalar math, which differs from its ufuncs on 0-d
arrays. ``**`` differs at signed zeros and infinities (``np.float64(-0.0) ** 0.5`` is +0.0, np.power's
SIMD loop gives -0.0; ``np.float64(-inf) ** 0.5`` is +inf, not NaN) and in the warnings' text ("scalar
power"); ``+ - * / // % divmod``, unary ``-`` and ``abs()`` warn of int overflow, which the ufuncs wrap
silently. The trace records `np.scalar_power` / `np.scalar_operator` / `np.scalar_unary_operator`: NumPy's
own operator on the scalars at run time."""

from __future__ import annotations

import dis
from types import FrameType
from typing import Any

import numpy as np
from numtrace_ir.ops.elementwise import scalar_operator, scalar_power, scalar_unary_operator

from .source import run_at_user_line
from .traced_value import unwrap

__all__ = ["NUMPY_SCALARS", "is_scalar_operator", "record_scalar_operator", "record_scalar_power",
           "record_scalar_unary_operator"]

# NumPy scalars that run scalar math (not np.str_ and the like).
NUMPY_SCALARS = (np.number, np.bool_)


# The Python operators NumPy's scalars run as scalar math, and the ufunc each hands an operand it does not
# know to (a traced number: it has __array_ufunc__), by the instruction that applies the operator.
_UFUNCS = {"ADD": np.add, "SUBTRACT": np.subtract, "MULTIPLY": np.multiply, "TRUE_DIVIDE": np.true_divide,
           "FLOOR_DIVIDE": np.floor_divide, "REMAINDER": np.remainder, "POWER": np.power}


def _operator_instructions() -> tuple[int | None, dict]:
    """(BINARY_OP's opcode, its arg -> ufunc); Python 3.10: (None, opcode -> ufunc)."""
    binary_op = dis.opmap.get("BINARY_OP")
    if binary_op is None:
        return None, {dis.opmap[f"{kind}_{'MODULO' if name == 'REMAINDER' else name}"]: ufunc
                      for name, ufunc in _UFUNCS.items() for kind in ("BINARY", "INPLACE")}
    names = [name for name, _ in dis._nb_ops]  # type: ignore[attr-defined]  # BINARY_OP args (3.11 on)
    return binary_op, {names.index(f"NB_{inplace}{name}"): ufunc for name, ufunc in _UFUNCS.items()
                       for inplace in ("", "INPLACE_") if f"NB_{inplace}{name}" in names}


_BINARY_OP, _OPERATORS = _operator_instructions()


def is_scalar_operator(ufunc: Any, method: str, inputs: tuple, kwargs: dict, frame: FrameType | None) -> bool:
    """Whether `ufunc` reached ``__array_ufunc__`` from a Python operator of a NumPy scalar
    (``np.float64(-inf) ** (n / 4)``, ``np.int8(127) + n``; `frame`: the caller's). NumPy's scalar
    ``__pow__``, ``__add__``... hand an operand they do not know (a traced number, which has
    ``__array_ufunc__``) to the ufunc, as an explicit ``np.power(s, n)`` call does; the caller's current
    instruction tells them apart: the operator (``**``, ``+=``...), not a call. The operator is NumPy's
    scalar math (C pow: +inf there, where np.power gives NaN; int overflow warned). Python's ``pow(s, n)``
    and ``operator.add`` are calls too, and are taken for the ufunc (docs/guide/sharp-edges.md)."""
    if method != "__call__" or kwargs or len(inputs) != 2 or frame is None:
        return False
    # (type(): a traced NumPy scalar says it is one to isinstance)
    if not any(issubclass(type(v), NUMPY_SCALARS) for v in inputs):
        return False
    code, at = frame.f_code.co_code, frame.f_lasti
    if _BINARY_OP is None:
        return _OPERATORS.get(code[at]) is ufunc
    return code[at] == _BINARY_OP and _OPERATORS.get(code[at + 1]) is ufunc


def record_scalar_operator(tracer: Any, ufunc: Any, a: Any, b: Any) -> Any:
    """``a <op> b`` of a NumPy scalar and a traced number, `ufunc`'s operator: run and recorded."""
    if ufunc is np.power:
        return record_scalar_power(tracer, a, b)
    name = ufunc.__name__
    concrete = run_at_user_line(f"scalar {name}", scalar_operator, *unwrap((a, b)), name)
    return tracer.record("np.scalar_operator", [a, b], {"op": name}, concrete)


def record_scalar_unary_operator(tracer: Any, ufunc: Any, a: Any) -> Any:
    """``-a`` or ``abs(a)`` of a traced NumPy scalar, `ufunc`'s operator: run and recorded."""
    name = ufunc.__name__
    concrete = run_at_user_line(f"scalar {name}", scalar_unary_operator, unwrap(a), name)
    return tracer.record("np.scalar_unary_operator", [a], {"op": name}, concrete)


def record_scalar_power(tracer: Any, base: Any, exponent: Any) -> Any:
    """``base ** exponent`` (NumPy scalars and Python numbers, traced or not), run and recorded."""
    concrete = run_at_user_line("scalar power", scalar_power, *unwrap((base, exponent)))
    return tracer.record("np.scalar_power", [base, exponent], {}, concrete)
