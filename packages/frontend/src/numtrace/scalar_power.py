"""``**`` of NumPy scalars: NumPy routes it by its operands' types, to its scalar math (C pow) or to
np.power's loops, which differ at signed zeros and infinities (``np.float64(-0.0) ** 0.5`` is +0.0,
np.power's SIMD loop gives -0.0; ``np.float64(-inf) ** 0.5`` is +inf, not NaN) and in the warnings' text
("scalar power"). The trace records `np.scalar_power`, NumPy's own operator on the scalars at run time."""

from __future__ import annotations

import dis
from types import FrameType
from typing import Any

import numpy as np
from numtrace_ir.ops.elementwise import scalar_power

from .source import run_at_user_line
from .traced_value import unwrap

__all__ = ["NUMPY_SCALARS", "is_power_operator", "record_scalar_power"]

# NumPy scalars that run scalar math (not np.str_ and the like).
NUMPY_SCALARS = (np.number, np.bool_)


def _power_instructions() -> tuple[int | None, frozenset]:
    """(BINARY_OP's opcode, its args for ``**`` and ``**=``); Python 3.10: (None, the two opcodes)."""
    binary_op = dis.opmap.get("BINARY_OP")
    if binary_op is None:
        return None, frozenset(dis.opmap[name] for name in ("BINARY_POWER", "INPLACE_POWER"))
    names = [name for name, _ in getattr(dis, "_nb_ops", ())]
    if "NB_POWER" not in names:
        return binary_op, frozenset((8, 21))   # (CPython's NB_POWER and NB_INPLACE_POWER)
    return binary_op, frozenset(names.index(name) for name in ("NB_POWER", "NB_INPLACE_POWER"))


_BINARY_OP, _POWER = _power_instructions()


def is_power_operator(ufunc: Any, method: str, inputs: tuple, kwargs: dict, frame: FrameType | None) -> bool:
    """Whether np.power reached ``__array_ufunc__`` from a NumPy scalar's ``**`` (``np.float64(-inf) **
    (n / 4)``, `frame`: the caller's). NumPy's scalar ``__pow__`` hands an operand it does not know (a
    traced number, which has ``__array_ufunc__``) to the ufunc, as an explicit ``np.power(s, n)`` call
    does; the caller's current instruction tells them apart: a ``**`` or ``**=`` (not a call). The
    operator is NumPy's scalar math (C pow: +inf there, where np.power gives NaN). Python's ``pow(s, n)``
    and ``operator.pow`` are calls too, and are taken for np.power (docs/guide/sharp-edges.md)."""
    if ufunc is not np.power or method != "__call__" or kwargs or len(inputs) != 2 or frame is None:
        return False
    if not issubclass(type(inputs[0]), NUMPY_SCALARS):   # (type(): a traced scalar says it is one)
        return False
    code, at = frame.f_code.co_code, frame.f_lasti
    if _BINARY_OP is None:
        return code[at] in _POWER
    return code[at] == _BINARY_OP and code[at + 1] in _POWER


def record_scalar_power(tracer: Any, base: Any, exponent: Any) -> Any:
    """``base ** exponent`` (NumPy scalars and Python numbers, traced or not), run and recorded."""
    concrete = run_at_user_line("scalar power", scalar_power, *unwrap((base, exponent)))
    return tracer.record("np.scalar_power", [base, exponent], {}, concrete)
