"""Timing shared by the benchmarks: the median over repeats of the mean time per call, after one
warm-up call (compilation, caches and page faults of the first call are not what we compare)."""

from __future__ import annotations

import argparse
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


def calls_per_timing(fn: Callable, quick: bool) -> int:
    """Calls back to back in one timing: enough for ~20 ms (5 ms with --quick)."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, min(10_000, int((0.005 if quick else 0.02) / once)))


def time_pair(numpy_fn: Callable, traced_fn: Callable, quick: bool, clock: Callable[[], float]
               ) -> tuple[float, float]:
    """Median seconds per call of each, timed in alternation: the machine is shared and its load
    drifts, and alternating makes both sides see the same drift, which keeps their ratio honest."""
    n_np, n_nt = calls_per_timing(numpy_fn, quick), calls_per_timing(traced_fn, quick)
    t_np, t_nt = [], []
    for _ in range(3 if quick else 5):
        t_np.append(median_seconds(numpy_fn, n_np, 1, clock))
        t_nt.append(median_seconds(traced_fn, n_nt, 1, clock))
    return statistics.median(t_np), statistics.median(t_nt)


def fmt_seconds(seconds: float) -> str:
    """A time per call for the tables: ms from 1 ms up, us below."""
    return f"{seconds * 1e3:9.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:9.2f} us"


def sweep_args(description: str, quick_help: str, only_help: str) -> tuple[argparse.Namespace, set, Callable]:
    """The flags the side-by-side sweeps share: --quick, --only (a name set; empty means all) and
    --cpu-time (the clock: CPU seconds of the process instead of wall time)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--only", default="", help=only_help)
    parser.add_argument("--cpu-time", action="store_true", help="time CPU seconds, not wall time")
    args = parser.parse_args()
    clock = time.process_time if args.cpu_time else time.perf_counter
    return args, set(filter(None, args.only.split(","))), clock
