"""Which ISA build of the block loops this process runs, chosen at import, and the interpreter
tables the lowering reads.

The typed block loops (blocks.pxi) are compiled once per instruction set, widest first in `BUILDS`;
everything else (numtrace_cpu.runtime) is compiled once. At import the widest build whose features
the CPU reports is handed to the runtime, so the package runs on any x86-64 and uses the vector
width it has. A build is never imported on a CPU without its features: its module code may itself
use them. ``NUMTRACE_CPU_ISA=<build>`` (baseline, avx2, avx512) forces a build, and refuses one this
CPU cannot run or this platform did not build.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING

from numtrace_cpu import runtime
from numtrace_cpu.runtime import DTYPES, OPS, REDUCTIONS, REG_KINDS, ROLES, FusedKernel

__all__ = ["BUILD", "BUILDS", "DTYPES", "ISA", "OPS", "REDUCTIONS", "REG_KINDS", "ROLES", "FusedKernel",
           "blocks", "built", "choose", "load"]

BUILDS: dict[str, tuple[str, frozenset[str]]] = {
    "avx512": ("x86-64-v4",
               frozenset({"avx2", "fma", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})),
    "avx2": ("x86-64-v3", frozenset({"avx2", "fma"})),
    "baseline": ("baseline", frozenset()),
}
"""Build name -> (the ISA it is compiled for, the CPU features it needs), widest first."""


def built() -> list[str]:
    """The builds this installation has (found without importing them), widest first."""
    return [b for b in BUILDS if importlib.util.find_spec(f"numtrace_cpu.blocks_{b}") is not None]


def choose(features: Iterable[str], available: Iterable[str], forced: str | None = None) -> str:
    """The build to run: `forced` when given (refused unless built and supported), else the widest
    of `available` whose features are all in `features`."""
    features, available = frozenset(features), list(available)
    if forced:
        if forced not in BUILDS:
            raise ValueError(f"NUMTRACE_CPU_ISA={forced!r} names no build; choose one of {', '.join(BUILDS)}")
        if forced not in available:
            raise ValueError(f"NUMTRACE_CPU_ISA={forced!r}: that build is not part of this installation "
                             f"(built: {', '.join(available)})")
        missing = BUILDS[forced][1] - features
        if missing:
            raise ValueError(f"NUMTRACE_CPU_ISA={forced!r}: this CPU lacks {', '.join(sorted(missing))}")
        return forced
    for name in BUILDS:
        if name in available and BUILDS[name][1] <= features:
            return name
    raise ImportError(f"no build of numtrace_cpu's block loops runs on this CPU (built: {available})")


def load(name: str) -> ModuleType:
    """Import build `name`; only call it for a build `choose` accepts on this CPU."""
    return importlib.import_module(f"numtrace_cpu.blocks_{name}")


BUILD = choose(runtime.cpu_features(), built(), os.environ.get("NUMTRACE_CPU_ISA") or None)
"""The build in use."""
ISA = BUILDS[BUILD][0]
"""The instruction set the build in use was compiled for (what `numtrace backends` reports)."""
if TYPE_CHECKING:  # every build has the interface blocks_baseline.pyi describes
    from numtrace_cpu import blocks_baseline as blocks
else:
    blocks = load(BUILD)
runtime.use_blocks(blocks)
