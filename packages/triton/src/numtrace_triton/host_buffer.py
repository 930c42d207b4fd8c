"""Host NumPy memory shaped like the tensor API that Triton's interpreter drives.

With ``TRITON_INTERPRET=1`` Triton runs kernels on the CPU and talks to every
pointer argument as if it were a PyTorch tensor: it reads ``data_ptr()`` and
``dtype``, snapshots ``untyped_storage().cpu()``, rebuilds a host view with
``new_empty(0, device="cpu").set_(storage, storage_offset(), size(), stride())``
and finally copies results back with ``storage.copy_(host_storage)``.  This
module provides exactly that surface over NumPy memory, so the backend is
tested without PyTorch and without a GPU.

Invariant: a :class:`HostStorage` spans every byte its views can touch, so
``storage_offset()`` is never negative, even for negative strides.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

import numpy as np

__all__ = ["HostBuffer", "HostStorage"]


class HostStorage:
    """A flat byte range of host memory, kept alive by a reference to its owner."""

    __slots__ = ("_bytes", "_owner")

    def __init__(self, address: int, nbytes: int, owner: object) -> None:
        if nbytes < 0:
            raise ValueError(f"HostStorage: nbytes must be >= 0, got {nbytes}")
        self._owner = owner
        if nbytes == 0:
            self._bytes = np.empty(0, dtype=np.uint8)
        else:
            raw = (ctypes.c_uint8 * nbytes).from_address(address)
            self._bytes = np.ctypeslib.as_array(raw)

    @classmethod
    def of(cls, array: np.ndarray) -> HostStorage:
        """The smallest storage that covers every element of ``array``."""
        lo, hi = _byte_extent(array)
        return cls(array.ctypes.data + lo, hi - lo, array)

    @property
    def bytes(self) -> np.ndarray:
        """The storage as a 1-D ``uint8`` array (a view, never a copy)."""
        return self._bytes

    def data_ptr(self) -> int:
        return self._bytes.ctypes.data if self._bytes.size else 0

    def nbytes(self) -> int:
        return int(self._bytes.size)

    def size(self) -> int:
        return int(self._bytes.size)

    def cpu(self) -> HostStorage:
        # Already host memory: the interpreter then works in place, no copy.
        return self

    def copy_(self, other: HostStorage) -> HostStorage:
        if not isinstance(other, HostStorage):
            raise TypeError(f"HostStorage.copy_: expected a HostStorage, got {type(other).__name__}")
        if other.nbytes() != self.nbytes():
            raise ValueError(
                f"HostStorage.copy_: size mismatch ({other.nbytes()} bytes into {self.nbytes()})"
            )
        if other.data_ptr() != self.data_ptr():
            np.copyto(self._bytes, other._bytes)
        return self


class HostBuffer:
    """A strided NumPy array exposed through the tensor methods the interpreter calls.

    Strides and offsets are in elements (as the interpreter expects), so every
    byte stride of the wrapped array must be a multiple of its item size.
    """

    __slots__ = ("_array", "_storage")

    def __init__(self, array: np.ndarray, storage: HostStorage | None = None) -> None:
        if not isinstance(array, np.ndarray):
            raise TypeError(f"HostBuffer: expected a numpy.ndarray, got {type(array).__name__}")
        if array.dtype.hasobject or array.dtype.fields is not None or array.dtype.kind not in "biufc":
            raise TypeError(f"HostBuffer: unsupported dtype {array.dtype} (expected a numeric dtype)")
        if not array.dtype.isnative:
            raise TypeError(f"HostBuffer: byte-swapped dtype {array.dtype} (expected native byte order)")
        itemsize = array.dtype.itemsize
        if any(s % itemsize for s in array.strides):
            raise ValueError(
                f"HostBuffer: strides {array.strides} are not multiples of the item size {itemsize}"
            )
        self._array = array
        self._storage = storage if storage is not None else HostStorage.of(array)

    @property
    def array(self) -> np.ndarray:
        """The wrapped NumPy view."""
        return self._array

    @property
    def dtype(self) -> np.dtype:
        return self._array.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._array.shape

    @property
    def ndim(self) -> int:
        return self._array.ndim

    @property
    def device(self) -> str:
        return "cpu"

    def data_ptr(self) -> int:
        return self._array.ctypes.data

    def untyped_storage(self) -> HostStorage:
        return self._storage

    def storage_offset(self) -> int:
        return (
            (self.data_ptr() - self._storage.data_ptr()) // self._array.dtype.itemsize if self.numel() else 0
        )

    def size(self, dim: int | None = None) -> tuple[int, ...] | int:
        return self._array.shape if dim is None else self._array.shape[dim]

    def stride(self, dim: int | None = None) -> tuple[int, ...] | int:
        itemsize = self._array.dtype.itemsize
        strides = tuple(s // itemsize for s in self._array.strides)
        return strides if dim is None else strides[dim]

    def numel(self) -> int:
        return int(self._array.size)

    def element_size(self) -> int:
        return self._array.dtype.itemsize

    def new_empty(self, size: int | Sequence[int], device: str = "cpu") -> HostBuffer:
        if device != "cpu":
            raise ValueError(f"HostBuffer.new_empty: only device='cpu' exists here, got {device!r}")
        return HostBuffer(np.empty(size, dtype=self._array.dtype))

    def set_(
        self, storage: HostStorage, offset: int, size: Sequence[int], stride: Sequence[int]
    ) -> HostBuffer:
        """Rebind this buffer to a strided view of ``storage`` (bounds checked)."""
        if not isinstance(storage, HostStorage):
            raise TypeError(f"HostBuffer.set_: expected a HostStorage, got {type(storage).__name__}")
        size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
        if len(size) != len(stride):
            raise ValueError(f"HostBuffer.set_: size {size} and stride {stride} differ in length")
        if any(s < 0 for s in size) or offset < 0:
            raise ValueError(f"HostBuffer.set_: negative size {size} or offset {offset}")
        dtype = self._array.dtype
        itemsize = dtype.itemsize
        if 0 not in size:
            lo = offset + sum(st * (n - 1) for st, n in zip(stride, size) if st < 0)
            hi = offset + sum(st * (n - 1) for st, n in zip(stride, size) if st > 0)
            if lo < 0 or (hi + 1) * itemsize > storage.nbytes():
                raise IndexError(
                    f"HostBuffer.set_: view (offset {offset}, size {size}, stride {stride}) "
                    f"reaches outside a storage of {storage.nbytes()} bytes"
                )
            array = np.ndarray(
                size,
                dtype=dtype,
                buffer=storage.bytes,
                offset=offset * itemsize,
                strides=tuple(s * itemsize for s in stride),
            )
        else:
            array = np.empty(size, dtype=dtype)
        self._array = array
        self._storage = storage
        return self

    def copy_(self, other: HostBuffer) -> HostBuffer:
        if not isinstance(other, HostBuffer):
            raise TypeError(f"HostBuffer.copy_: expected a HostBuffer, got {type(other).__name__}")
        np.copyto(self._array, other._array, casting="same_kind")
        return self

    def cpu(self) -> HostBuffer:
        return self

    def __repr__(self) -> str:
        return f"HostBuffer(dtype={self.dtype}, shape={self.shape}, stride={self.stride()})"


def _byte_extent(array: np.ndarray) -> tuple[int, int]:
    """Byte offsets ``[lo, hi)`` relative to ``array``'s data pointer that its elements occupy."""
    if array.size == 0:
        return 0, 0
    lo = sum(s * (n - 1) for s, n in zip(array.strides, array.shape) if s < 0)
    hi = sum(s * (n - 1) for s, n in zip(array.strides, array.shape) if s > 0) + array.dtype.itemsize
    return lo, hi
