"""The array-API namespace of traced arrays (``x.__array_namespace__()``).

It is NumPy's own namespace (NumPy 2 implements the standard), except that ``asarray`` returns a
traced array as it is: array-API code starts with ``xp.asarray(x)``, which NumPy would answer by
converting the traced array to a constant. Every other function reaches the tracer through NumPy's
dispatch, as when the code calls NumPy directly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .traced_value import is_traced_array


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None) -> Any:
    """``np.asarray`` that keeps traced arrays traced (cast or copied as asked)."""
    if device not in (None, "cpu"):
        raise ValueError(f"traced arrays live on the cpu device, got {device!r}")
    if not is_traced_array(obj):
        return np.asarray(obj, dtype=dtype, copy=copy)
    if dtype is not None and np.dtype(dtype) != obj.dtype:
        if copy is False:
            raise ValueError("asarray(copy=False) cannot cast a traced array to another dtype")
        return np.astype(obj, dtype)
    return np.copy(obj) if copy else obj


def __getattr__(name: str) -> Any:
    return getattr(np, name)
