"""``**`` of NumPy scalars: NumPy routes it by its operands' types, to its scalar math (C pow) or to
np.power's loops, which differ at signed zeros and infinities (``np.float64(-0.0) ** 0.5`` is +0.0,
np.power's SIMD loop gives -0.0; ``np.float64(-inf) ** 0.5`` is +inf, not NaN) and in the warnings' text
("scalar power"). The trace records `np.scalar_power`, NumPy's own operator on the scalars at run time."""

from __future__ import annotations

from typing import Any

import numpy as np
from numtrace_ir.ops.elementwise import scalar_power

from .source import run_at_user_line
from .traced_value import unwrap

__all__ = ["NUMPY_SCALARS", "record_scalar_power"]

# NumPy scalars that run scalar math (not np.str_ and the like).
NUMPY_SCALARS = (np.number, np.bool_)


def record_scalar_power(tracer: Any, base: Any, exponent: Any) -> Any:
    """``base ** exponent`` (NumPy scalars and Python numbers, traced or not), run and recorded."""
    concrete = run_at_user_line("scalar power", scalar_power, *unwrap((base, exponent)))
    return tracer.record("np.scalar_power", [base, exponent], {}, concrete)
