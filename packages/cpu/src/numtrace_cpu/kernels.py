"""Which build of the block interpreter this process uses, and the tables the lowering reads from it.

The interpreter (`fused_impl.pxi`) is compiled twice: `fused` for baseline x86-64 and `fused_avx2`
for x86-64-v3. The AVX2 build is imported only when the CPU reports AVX2 and FMA, so the package
runs everywhere and is fast where it can be. Set ``NUMTRACE_CPU_ISA=baseline`` to force the
baseline build (tests use it to check both builds agree).
"""

from __future__ import annotations

import os

from numtrace_cpu import fused as _baseline


def _select():
    if os.environ.get("NUMTRACE_CPU_ISA", "") != "baseline" and _baseline.CPU_HAS_AVX2_FMA:
        try:
            from numtrace_cpu import fused_avx2
        except ImportError:  # built on a platform without the x86-64-v3 variant
            return _baseline
        return fused_avx2
    return _baseline


impl = _select()
ISA = "x86-64-v3" if impl.__name__.endswith("_avx2") else "baseline"

FusedKernel = impl.FusedKernel
FusedCall = impl.FusedCall
CallPlan = impl.CallPlan
DTYPES = impl.DTYPES
OPS = impl.OPS
REDUCTIONS = impl.REDUCTIONS
REG_KINDS = impl.REG_KINDS
ROLES = impl.ROLES

__all__ = ["DTYPES", "ISA", "OPS", "REDUCTIONS", "REG_KINDS", "ROLES", "CallPlan", "FusedCall", "FusedKernel",
           "impl"]
