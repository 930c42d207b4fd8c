"""Timing shared by the benchmarks: the median over repeats of the mean time per call, after one
warm-up call (compilation, caches and page faults of the first call are not what we compare)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], number: int, repeat: int,
                   clock: Callable[[], float] = time.perf_counter) -> float:
    """Median over ``repeat`` runs of the seconds per call of ``number`` back-to-back calls. `clock`
    may be ``time.process_time``: CPU seconds of the whole process, which a shared machine's other
    load does not inflate (but which adds up every thread's time)."""
    fn()
    times = []
    for _ in range(repeat):
        start = clock()
        for _ in range(number):
            fn()
        times.append((clock() - start) / number)
    return statistics.median(times)
