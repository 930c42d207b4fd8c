"""What every example does after building its program: trace with check inputs, save, load, run the
loaded trace on fresh inputs of another size against the eager NumPy result, then time both.

Shared by the example scripts (files named ``_*.py`` are helpers, not examples).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numtrace as nt


def parse_args(doc: str) -> argparse.Namespace:
    """``--backend`` (default cpu when installed) and ``--quick`` (small sizes, few timing runs)."""
    default = "cpu" if "cpu" in nt.available_backends() else "reference"
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--backend", default=default, help=f"backend to run on (default: {default})")
    parser.add_argument("--quick", action="store_true", help="small inputs and few timing runs (a smoke run)")
    return parser.parse_args()


def run(name: str, program: Callable[..., Any], example: tuple, checks: Sequence[tuple], fresh: tuple, *,
        backend: str, quick: bool, rtol: float = 1e-4, atol: float = 1e-5) -> int:
    """Trace ``program`` (a function or a numtrace.Module) at ``example``, checked at ``checks``; save
    and load it; compare the loaded trace with ``program`` on ``fresh``; time both. 0 if all match."""
    start = time.perf_counter()
    traced = nt.trace(program, example, check_inputs=list(checks), backend=backend)
    print(f"{name}: traced and checked against {len(checks)} check inputs in "
          f"{time.perf_counter() - start:.2f} s ({len(list(traced.graph.nodes))} nodes)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{name}.nt")
        traced.save(path)
        size = os.path.getsize(path)
        loaded = nt.load(path, backend=backend)
    print(f"{name}: saved ({size / 1024:.0f} KiB) and loaded on backend {backend!r}")
    got, want = loaded(*fresh), program(*fresh)
    shapes = ", ".join(str(a.shape) for a in fresh)
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
        error = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("inf")
        print(f"{name}: MISMATCH on fresh inputs {shapes}: got {got.shape}, expected {want.shape}, "
              f"max difference {error:.2e}", file=sys.stderr)
        return 1
    print(f"{name}: loaded trace matches NumPy on fresh inputs {shapes} "
          f"(max difference {float(np.max(np.abs(got - want))):.2e})")
    ours, theirs = interleaved_medians(lambda: loaded(*fresh), lambda: program(*fresh),
                                       repeat=3 if quick else 15)
    print(f"{name}: numtrace ({backend}) {ours * 1e3:.3f} ms, NumPy {theirs * 1e3:.3f} ms per call on "
          f"{shapes}: {theirs / ours:.2f}x speedup over NumPy")
    return 0


def interleaved_medians(a: Callable[[], Any], b: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """Median seconds per call of ``a`` and ``b``, timed in alternating runs (so machine noise hits
    both alike), each run as many calls as fit in about 20 ms."""
    a(), b()
    calls = [max(1, int(0.02 / max(_seconds(fn, 1), 1e-7))) for fn in (a, b)]
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, n, out in zip((a, b), calls, times):
            out.append(_seconds(fn, n) / n)
    return tuple(sorted(t)[repeat // 2] for t in times)


def _seconds(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return time.perf_counter() - start
