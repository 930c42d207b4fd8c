# What runtime.pyx exports, for type checkers (mypy cannot read Cython); kept beside the .pyx it describes.
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from numtrace_ir.call_spec import CallSpec

DTYPES: dict[np.dtype, int]
REG_KINDS: dict[str, int]
ROLES: dict[str, int]
OPS: dict[str, tuple[int, int, tuple[int, ...]]]
REDUCTIONS: dict[str, tuple[int, tuple[int, ...]]]
BLOCK_ELEMENTS: int
UNIT_ELEMENTS: int

def cpu_features() -> frozenset[str]: ...
def use_blocks(blocks: ModuleType) -> None: ...
def set_num_threads(n: int) -> None: ...

class FusedKernel:
    @property
    def iteration_shape(self) -> tuple[int, ...]: ...
    @property
    def n_instructions(self) -> int: ...
    @property
    def program(self) -> tuple[Any, ...]: ...
    @property
    def has_generated(self) -> bool: ...
    @property
    def generated_runs(self) -> int: ...
    @property
    def interpreted_runs(self) -> int: ...
    def set_generated(self, address: int, owner: Any) -> None: ...
    def __init__(
        self,
        shape: tuple[int, ...],
        reduce_axes: tuple[int, ...],
        regs: list[Any],
        consts: list[Any],
        instrs: list[Any],
        reductions: list[Any],
        operands: list[Any],
        blocks: ModuleType | None = None,
    ) -> None: ...
    def run(self, operands: list[np.ndarray], nthreads: int = 1) -> None: ...
    def stats(self) -> dict[str, int]: ...

class FusedCall:
    def __init__(self, kernel: FusedKernel, ids: list[int], scalars: list[Any]) -> None: ...

class CallRunner:
    def _setup(
        self, input_specs: list[Any], steps: list[Any], outputs: list[Any], per_call: list[int]
    ) -> None: ...
    def __call__(self, *inputs: Any, out: Any = None) -> Any: ...
    def exact_caller(
        self, call_spec: CallSpec, state: tuple[Any, ...] = (), build: Callable[..., Any] | None = None
    ) -> ExactCall: ...

class ExactCall:
    @property
    def call_spec(self) -> CallSpec: ...
    def run(self, args: tuple[Any, ...]) -> Any: ...
