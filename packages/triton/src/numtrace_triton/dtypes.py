"""NumPy dtypes as Triton sees them: the ``tl`` type in source, the pointer type in signatures.

Booleans are stored as ``uint8`` (NumPy's one-byte bools) and become ``int1``
only in registers: Triton's own bool pointer type has no NumPy spelling.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_supported", "compute_float", "signature_type", "storage_dtype", "tl_type"]

_TL = {
    "b": "tl.int1",
    "i1": "tl.int8",
    "i2": "tl.int16",
    "i4": "tl.int32",
    "i8": "tl.int64",
    "u1": "tl.uint8",
    "u2": "tl.uint16",
    "u4": "tl.uint32",
    "u8": "tl.uint64",
    "f2": "tl.float16",
    "f4": "tl.float32",
    "f8": "tl.float64",
}
_SIG = {
    "i1": "i8",
    "i2": "i16",
    "i4": "i32",
    "i8": "i64",
    "u1": "u8",
    "u2": "u16",
    "u4": "u32",
    "u8": "u64",
    "f2": "fp16",
    "f4": "fp32",
    "f8": "fp64",
}


def _key(dtype: np.dtype) -> str:
    dtype = np.dtype(dtype)
    return "b" if dtype.kind == "b" else f"{dtype.kind}{dtype.itemsize}"


def check_supported(dtype: np.dtype, what: str) -> np.dtype:
    """``dtype`` normalised, or ``NotImplementedError`` saying Triton has no such type."""
    dtype = np.dtype(dtype)
    if _key(dtype) not in _TL:
        raise NotImplementedError(
            f"{what}: dtype {dtype} is not supported by the Triton backend "
            "(Triton has no complex, string or object types)"
        )
    return dtype


def tl_type(dtype: np.dtype) -> str:
    """The register type, as written in kernel source (``tl.float32``)."""
    return _TL[_key(check_supported(dtype, "tl_type"))]


def storage_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a buffer of ``dtype`` values is stored as (bool becomes uint8)."""
    dtype = check_supported(dtype, "storage_dtype")
    return np.dtype(np.uint8) if dtype.kind == "b" else dtype


def signature_type(dtype: np.dtype) -> str:
    """The pointer type of a buffer of ``dtype`` in a ``triton.compile`` signature (``*fp32``)."""
    return "*" + _SIG[_key(storage_dtype(dtype))]


def compute_float(dtype: np.dtype) -> np.dtype:
    """The float type transcendental math runs in: Triton's math needs fp32 or fp64."""
    dtype = np.dtype(dtype)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float32)
