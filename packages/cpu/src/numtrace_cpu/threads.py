"""How many threads large fused passes use (OpenMP teams; BLAS keeps its own setting).

Default: the CPUs this process may run on, or ``NUMTRACE_NUM_THREADS`` when set. Small passes stay
on the calling thread whatever the setting (see PARALLEL_MIN_WORK in runtime.pyx).

A child made by ``fork()`` (multiprocessing's "fork" start method) runs every pass on its calling
thread: GNU OpenMP's worker threads do not survive fork, and a child that enters a parallel region
its parent used waits for them forever. Children started with "spawn" or "forkserver" are fresh
processes and keep the default.
"""

from __future__ import annotations

import os

from numtrace_cpu import runtime

__all__ = ["get_num_threads", "set_num_threads"]


def _default() -> int:
    env = os.environ.get("NUMTRACE_NUM_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"NUMTRACE_NUM_THREADS must be a positive integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"NUMTRACE_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_num_threads = 1
_forked = False   # this process is a fork() child of one that imported numtrace_cpu


def get_num_threads() -> int:
    """Threads a large fused pass splits over."""
    return _num_threads


def set_num_threads(n: int) -> None:
    """Set the thread count for every executable of this process (``n >= 1``)."""
    global _num_threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"number of threads must be an int >= 1, got {n!r}")
    if n > 1 and _forked:
        raise RuntimeError(
            f"numtrace_cpu.set_num_threads({n}) in a process made by fork(): OpenMP's threads do not "
            "survive fork, so passes here run on one thread; start workers with the 'spawn' or "
            "'forkserver' multiprocessing start method to use several")
    runtime.set_num_threads(n)   # the interpreter reads it without a Python call
    _num_threads = n


def _after_fork_in_child() -> None:
    global _forked, _num_threads
    _forked = True
    runtime.set_num_threads(1)
    _num_threads = 1


set_num_threads(_default())
os.register_at_fork(after_in_child=_after_fork_in_child)
