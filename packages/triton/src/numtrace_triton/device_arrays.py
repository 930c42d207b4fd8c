"""Device arrays from other libraries (CuPy, Numba, PyTorch, ...) in and out, without copies.

Inputs exposing ``__cuda_array_interface__`` (or ``__dlpack__`` on a CUDA
device, through CuPy) are read in place; results go back as arrays of the
first such input's library when it can wrap foreign CUDA memory, else as a
:class:`CudaArray`, which any of them can import.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .device_memory import DeviceBuffer

__all__ = ["CudaArray", "export_array", "import_array", "is_device_array"]

_KDL_CUDA = 2  # DLPack device type of CUDA memory


class CudaArray:
    """A C-contiguous CUDA array exposing ``__cuda_array_interface__`` (version 3)."""

    def __init__(self, buf: DeviceBuffer, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self._buf, self.dtype, self.shape = buf, np.dtype(dtype), tuple(shape)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self._buf.ptr, False),
            "strides": None,
            "version": 3,
        }


def is_device_array(obj: object) -> bool:
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None or isinstance(obj, np.ndarray):
        return False
    try:
        return dev()[0] == _KDL_CUDA
    except Exception:  # a __dlpack_device__ that cannot answer is not a CUDA array
        return False


def import_array(obj: Any, dtype: np.dtype, shape: tuple[int, ...], what: str) -> DeviceBuffer:
    """``obj``'s memory as a buffer, checked against the planned dtype and shape; no copy is made."""
    if not hasattr(obj, "__cuda_array_interface__"):
        try:
            import cupy
        except ImportError:
            raise TypeError(
                f"{what}: a DLPack CUDA array can only be used through CuPy "
                "(pip install 'numtrace-triton[cupy]'), or pass one with "
                "__cuda_array_interface__"
            ) from None
        obj = cupy.from_dlpack(obj)
    cai = obj.__cuda_array_interface__
    got = np.dtype(cai["typestr"])
    if got != np.dtype(dtype) or tuple(cai["shape"]) != tuple(shape):
        raise TypeError(
            f"{what}: device array is {got}{list(cai['shape'])}, expected {np.dtype(dtype)}{list(shape)}"
        )
    strides = cai.get("strides")
    if strides is not None:
        contiguous, step = True, got.itemsize
        for n, s in zip(reversed(cai["shape"]), reversed(strides)):
            if n != 1 and s != step:
                contiguous = False
            step *= n
        if not contiguous:
            raise ValueError(
                f"{what}: non-contiguous device arrays are not supported; pass a C-contiguous "
                "one (e.g. cupy.ascontiguousarray)"
            )
    return DeviceBuffer(int(cai["data"][0]), math.prod(shape) * got.itemsize, obj)  # per call: no np.prod


def export_array(buf: DeviceBuffer, dtype: np.dtype, shape: tuple[int, ...], like: object) -> object:
    """A device array of ``like``'s library over ``buf`` (which it keeps alive)."""
    arr = CudaArray(buf, dtype, shape)
    module = type(like).__module__.split(".")[0]
    try:
        if module == "cupy":
            import cupy

            return cupy.asarray(arr)
        if module == "torch":
            import torch

            return torch.as_tensor(arr, device="cuda")
        if module == "numba":
            from numba import cuda

            return cuda.as_cuda_array(arr)
    except ImportError:
        pass
    return arr
