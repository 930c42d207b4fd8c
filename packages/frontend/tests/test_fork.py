"""A fork() child of a process that ran parallel passes runs its traces on one thread (GNU OpenMP's
threads do not survive fork: entering a parallel region there waits forever)."""

import multiprocessing
import os
import sys

import numpy as np
import numtrace as nt
import pytest

numtrace_cpu = pytest.importorskip("numtrace_cpu")

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="fork() only")


def _program(x):
    return np.sqrt(np.abs(x)) * 2.0 + x


def _child(traced, x, expected, queue):
    try:
        same = bool(np.array_equal(traced(x), expected))
        threads = numtrace_cpu.get_num_threads()
        try:
            numtrace_cpu.set_num_threads(2)
            refused = ""
        except RuntimeError as e:
            refused = str(e)
        queue.put((same, threads, refused))
    except BaseException as e:  # pragma: no cover - reported to the parent
        queue.put(repr(e))


def test_a_forked_child_runs_traces_on_one_thread():
    x = np.linspace(-3.0, 3.0, 2_000_000)
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(2)
    try:
        traced = nt.trace(_program, (x,), backend="cpu")
        expected = traced(x)   # the parent's OpenMP team has run a pass
        np.testing.assert_array_equal(expected, _program(x))
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_child, args=(traced, x, expected, queue))
        child.start()
        child.join(120)
        if child.is_alive():
            child.kill()
            pytest.fail("the forked child hung running a trace")
        same, threads, refused = queue.get(timeout=10)
        assert child.exitcode == 0
        assert same and threads == 1
        assert "fork" in refused and "spawn" in refused
        assert numtrace_cpu.get_num_threads() == 2   # the parent keeps its setting
    finally:
        numtrace_cpu.set_num_threads(before)
