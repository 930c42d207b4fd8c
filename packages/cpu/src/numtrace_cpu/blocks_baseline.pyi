# What each ISA build of the block loops (blocks_baseline/_avx2/_avx512.pyx: blocks.pxi and gemv.pxi)
# exports, for type checkers (mypy cannot read Cython). The builds are one source compiled per
# instruction set: blocks_avx2.pyi and blocks_avx512.pyi re-export this stub.
from collections.abc import Callable
from typing import Any

import numpy as np

RUN_PASS: object
RUN_GENERATED: object
GEMV_PARALLEL_MIN: int
GEMV_MAX_M: int
GEMV_PEELS: bool
GEMV_ACTIVATIONS: dict[str | None, int]

def scan(a: np.ndarray, out: np.ndarray, axis: int, op: int, nthreads: int) -> None: ...
def small_k_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray, nthreads: int) -> bool: ...
def row_arg_extreme(a: np.ndarray, out: np.ndarray, want_max: bool, nthreads: int) -> bool: ...
def team_spin_us() -> int: ...
def set_team_spin_us(us: int) -> None: ...
def team_counts() -> dict[str, int]: ...
def team_job_missed(mine: int, nunits: int, all_awake: bool, work_ns: int, wait_ns: int) -> bool: ...
def gemv_column_pieces(K: int, n: int, itemsize: int, nthreads: int) -> int: ...
def gemv_team_folds(K: int, nthreads: int) -> bool: ...

class Gemv:
    def __init__(
        self,
        vec: int,
        mat: int,
        out: int,
        k_axis: int,
        dtype: Any,
        bias: int = -1,
        activation: str | None = None,
        fallback: Callable[[list[Any], int], Any] | None = None,
        windows: tuple[int, ...] = (),
        stack_axis: int = 0,
        rshape: tuple[int, ...] = (),
    ) -> None: ...
    def __call__(self, env: list[Any], nthreads: int) -> Any: ...
    @property
    def last_form(self) -> str | None: ...
    @property
    def last_peeled(self) -> bool: ...

EPILOGUE_OPS: dict[str, int]
GEMM_MICRO_TILE: tuple[int, int, int]
GEMM_PARALLEL_MIN: int

def pack_weights(w: np.ndarray) -> np.ndarray: ...

class PackedMatmul:
    calls_packed: int
    calls_gathered: int
    calls_direct: int
    calls_stack_offsets: int
    def __init__(
        self,
        a: int,
        b: int,
        out: int,
        dtype: Any,
        epilogue: Any = (),
        constant: bool = False,
        fallback: Callable[[list[Any], int], Any] | None = None,
        windows: tuple[int, ...] = (),
        stack_axis: int = 0,
        rshape: tuple[int, ...] = (),
    ) -> None: ...
    def __call__(self, env: list[Any], nthreads: int) -> Any: ...
