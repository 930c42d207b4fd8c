"""NumPy's OpenBLAS held to one thread around numtrace's own BLAS calls.

numtrace's passes and matrix kernels run on threads of their own. OpenBLAS splits each product
statically over its thread pool, whose threads spin (yielding) for a long while after every call:
on a machine with few cores, or one that other work shares, a product then waits for an OpenBLAS
thread that is descheduled, and the spinning threads take the cores from the numtrace passes and
packed products that follow. Measured on a 2-core machine under load, an encoder block whose
attention products went to BLAS took 60-130 ms per call, and 1.1-1.3 ms with OpenBLAS on one
thread; an MLP at batch 256 whose products went to BLAS on two threads took 10-11 ms, on the packed
kernels 1.6-1.8 ms. The products numtrace still sends to BLAS (few rows, complex dtypes, broadcast
stacks; see numtrace_cpu.products) therefore all run on one OpenBLAS thread, so numtrace never wakes
OpenBLAS's pool. The setting is restored after each call, and only OpenBLAS builds found beside
NumPy are touched (any other BLAS is left alone).
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["available", "one_thread"]

_SYMBOLS = [(f"{p}_get_num_threads{s}", f"{p}_set_num_threads{s}")
            for p in ("scipy_openblas", "openblas") for s in ("64_", "")]


def _find() -> tuple[Any, Any] | None:
    """(get, set) of the OpenBLAS that NumPy bundles, or None."""
    here = os.path.dirname(np.__file__)
    for path in sorted(glob.glob(os.path.join(here, "..", "numpy.libs", "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, set_name in _SYMBOLS:
            get, put = getattr(lib, get_name, None), getattr(lib, set_name, None)
            if get is not None and put is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                put.restype, put.argtypes = None, [ctypes.c_int]
                return get, put
    return None


_FUNCTIONS = _find()


def available() -> bool:
    """Whether NumPy's BLAS is an OpenBLAS whose thread count numtrace can set."""
    return _FUNCTIONS is not None


def one_thread(run: Callable[[list, int], Any]) -> Callable[[list, int], Any]:
    """`run(env, nthreads)` with OpenBLAS on one thread while it runs (as it is when unavailable).
    Concurrent callers may see each other's setting for a moment; each restores what it found, so
    the count ends where it was."""
    if _FUNCTIONS is None:
        return run
    get, put = _FUNCTIONS

    def run_on_one_blas_thread(env: list, nthreads: int) -> Any:
        old = get()
        if old > 1:
            put(1)
        try:
            return run(env, nthreads)
        finally:
            if old > 1:
                put(old)
    return run_on_one_blas_thread
