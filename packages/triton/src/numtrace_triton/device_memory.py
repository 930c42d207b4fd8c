"""Device memory behind one small interface, backed by whatever is installed.

The executable only ever asks for flat byte buffers, copies between host and
device, and a pointer object to hand to a Triton launch. Three allocators
implement that: host NumPy memory (Triton's interpreter mode, the test
setting), CuPy, and cuda-python. :func:`select_allocator` picks one at run
time; none of them is imported unless chosen.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import numpy as np

from .host_buffer import HostBuffer

__all__ = [
    "CudaPythonAllocator",
    "CupyAllocator",
    "DeviceAllocator",
    "DeviceBuffer",
    "DevicePointer",
    "HostAllocator",
    "interpreter_enabled",
    "select_allocator",
]

# Triton needs 16-byte aligned pointers to vectorize; both CUDA allocators give 256.
_ALIGN = 16


def interpreter_enabled() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET``, as Triton reads it)."""
    import triton

    return bool(triton.knobs.runtime.interpret)


@dataclass(frozen=True)
class DeviceBuffer:
    """A flat allocation: its address, its size, and the object that keeps it alive."""

    ptr: int
    nbytes: int
    owner: Any  # what keeps the memory alive: a CuPy allocation, a cudaFree handle (untyped libraries)


@dataclass(frozen=True)
class DevicePointer:
    """A typed device address in the form Triton's launcher reads (``data_ptr()``, ``dtype``)."""

    ptr: int
    dtype: np.dtype

    def data_ptr(self) -> int:
        return self.ptr


class DeviceAllocator(abc.ABC):
    """Flat device buffers plus host<->device copies; one instance per process."""

    name: str

    @abc.abstractmethod
    def empty(self, nbytes: int) -> DeviceBuffer:
        """An uninitialised buffer of ``nbytes`` bytes (zero bytes is allowed)."""

    @abc.abstractmethod
    def upload(self, array: np.ndarray) -> DeviceBuffer:
        """The C-ordered contents of ``array`` in device memory."""

    @abc.abstractmethod
    def download(self, buf: DeviceBuffer, out: np.ndarray) -> None:
        """Copy ``out.nbytes`` bytes from the start of ``buf`` into the C-contiguous ``out``."""

    @abc.abstractmethod
    def pointer(self, buf: DeviceBuffer, dtype: np.dtype) -> object:
        """What a Triton launch receives for a pointer parameter of element type ``dtype``."""


class HostAllocator(DeviceAllocator):
    """Host NumPy memory for Triton's interpreter: 'device' and host are the same RAM."""

    name = "host"

    def empty(self, nbytes: int) -> DeviceBuffer:
        raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
        start = (-raw.ctypes.data) % _ALIGN
        block = raw[start : start + nbytes]
        return DeviceBuffer(block.ctypes.data, nbytes, block)

    def upload(self, array: np.ndarray) -> DeviceBuffer:
        array = np.ascontiguousarray(array)
        buf = self.empty(array.nbytes)
        np.copyto(self.host_view(buf, array.dtype, array.shape), array)
        return buf

    def download(self, buf: DeviceBuffer, out: np.ndarray) -> None:
        _check_download(buf, out)
        np.copyto(out, self.host_view(buf, out.dtype, out.shape))

    def pointer(self, buf: DeviceBuffer, dtype: np.dtype) -> HostBuffer:
        dtype = np.dtype(dtype)
        return HostBuffer(self.host_view(buf, dtype, (buf.nbytes // dtype.itemsize,)))

    @staticmethod
    def host_view(buf: DeviceBuffer, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
        """``buf``'s memory as a C-contiguous array (no copy); only host buffers have one."""
        block = buf.owner
        if not isinstance(block, np.ndarray):
            raise TypeError("HostAllocator.host_view: the buffer was not made by a HostAllocator")
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        return block[: count * dtype.itemsize].view(dtype).reshape(shape)


class CupyAllocator(DeviceAllocator):
    """CUDA memory from CuPy's pool (the ``numtrace-triton[cupy]`` extra)."""

    name = "cupy"

    def __init__(self) -> None:
        import cupy

        self._cupy = cupy

    def empty(self, nbytes: int) -> DeviceBuffer:
        mem = self._cupy.cuda.alloc(max(nbytes, 1))
        return DeviceBuffer(int(mem.ptr), nbytes, mem)

    def upload(self, array: np.ndarray) -> DeviceBuffer:
        array = np.ascontiguousarray(array)
        buf = self.empty(array.nbytes)
        if array.nbytes:
            buf.owner.copy_from_host(array.ctypes.data, array.nbytes)
        return buf

    def download(self, buf: DeviceBuffer, out: np.ndarray) -> None:
        _check_download(buf, out)
        if out.nbytes:
            buf.owner.copy_to_host(out.ctypes.data, out.nbytes)

    def pointer(self, buf: DeviceBuffer, dtype: np.dtype) -> DevicePointer:
        return DevicePointer(buf.ptr, np.dtype(dtype))


class CudaPythonAllocator(DeviceAllocator):
    """CUDA memory through cuda-python's runtime bindings (the ``numtrace-triton[cuda-python]`` extra)."""

    name = "cuda-python"

    def __init__(self) -> None:
        try:
            from cuda.bindings import runtime
        except ImportError:  # cuda-python < 12.6 spells it differently
            from cuda import cudart as runtime
        self._rt = runtime

    def _check(self, result: tuple) -> Any:
        err, *rest = result
        if int(err) != 0:
            raise RuntimeError(f"CUDA runtime call failed: {err}")
        return rest[0] if rest else None

    def empty(self, nbytes: int) -> DeviceBuffer:
        ptr = int(self._check(self._rt.cudaMalloc(max(nbytes, 1))))
        return DeviceBuffer(ptr, nbytes, _CudaFree(self._rt, ptr))

    def upload(self, array: np.ndarray) -> DeviceBuffer:
        array = np.ascontiguousarray(array)
        buf = self.empty(array.nbytes)
        if array.nbytes:
            kind = self._rt.cudaMemcpyKind.cudaMemcpyHostToDevice
            self._check(self._rt.cudaMemcpy(buf.ptr, array.ctypes.data, array.nbytes, kind))
        return buf

    def download(self, buf: DeviceBuffer, out: np.ndarray) -> None:
        _check_download(buf, out)
        if out.nbytes:
            kind = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
            self._check(self._rt.cudaMemcpy(out.ctypes.data, buf.ptr, out.nbytes, kind))

    def pointer(self, buf: DeviceBuffer, dtype: np.dtype) -> DevicePointer:
        return DevicePointer(buf.ptr, np.dtype(dtype))


class _CudaFree:
    """Frees a cudaMalloc'd pointer when the last buffer referring to it goes away."""

    def __init__(self, runtime: Any, ptr: int) -> None:
        self._rt, self._ptr = runtime, ptr

    def __del__(self) -> None:
        self._rt.cudaFree(self._ptr)


def _check_download(buf: DeviceBuffer, out: np.ndarray) -> None:
    if not out.flags.c_contiguous:
        raise ValueError("download: the destination array must be C-contiguous")
    if out.nbytes > buf.nbytes:
        raise ValueError(f"download: {out.nbytes} bytes requested from a {buf.nbytes}-byte buffer")


_CUDA_ALLOCATORS: tuple[tuple[str, type[DeviceAllocator]], ...] = (
    ("cupy", CupyAllocator),
    ("cuda-python", CudaPythonAllocator),
)
_selected: DeviceAllocator | None = None


def select_allocator() -> DeviceAllocator:
    """The process-wide allocator: host memory under the interpreter, else CuPy, else cuda-python.

    Raises ``RuntimeError`` naming both extras when no CUDA allocator can be imported.
    """
    global _selected
    if interpreter_enabled():
        return _HOST
    if _selected is None:
        errors = []
        for label, cls in _CUDA_ALLOCATORS:
            try:
                _selected = cls()
                break
            except ImportError as exc:
                errors.append(f"{label}: {exc}")
        else:
            raise RuntimeError(
                "numtrace-triton needs a CUDA memory library to run on a GPU, and none could be imported ("
                + "; ".join(errors)
                + "). Install one: pip install 'numtrace-triton[cupy]' or 'numtrace-triton[cuda-python]'; "
                "or set TRITON_INTERPRET=1 to run kernels on the CPU in Triton's interpreter."
            )
    return _selected


def available_allocator_name() -> str | None:
    """The allocator :func:`select_allocator` would pick, or None (without importing CUDA libraries twice)."""
    if interpreter_enabled():
        return _HOST.name
    try:
        return select_allocator().name
    except RuntimeError:
        return None


_HOST = HostAllocator()
