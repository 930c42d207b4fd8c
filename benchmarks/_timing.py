"""Timing shared by the benchmarks: the median over repeats of the mean time per call, after one
warm-up call (compilation, caches and page faults of the first call are not what we compare)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Median over ``repeat`` runs of the seconds per call of ``number`` back-to-back calls."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)
