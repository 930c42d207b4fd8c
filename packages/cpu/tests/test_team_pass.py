"""Medium generated passes on the thread team of the products (blocks.pxi's _run_generated, nt_team.h):
the same bits at 1 and 2 threads, the floating-point flags of a worker's chunk reported to the
caller, the calling thread alone with the team's spin off; and the team's back-off rule."""

from __future__ import annotations

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler, set_num_threads
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph, registry
from numtrace_ir.types import TensorType

ROWS, COLS = 96, 1024   # element-instructions of each pass between TEAM_PASS_MIN_WORK and PARALLEL_MIN_WORK


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))


def _node(g, op, *inputs, **attrs):
    return g.create_node(op, list(inputs), attrs=registry.get(op).normalize_attrs(attrs)).output


def _softmax(dtype):
    """Softmax over rows of a (ROWS, COLS) input, generated kernels compiled before the first call."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(dtype), (ROWS, COLS)))
    e = _node(g, "np.exp", _node(g, "np.subtract", x, _node(g, "np.max", x, axis=-1, keepdims=True)))
    g.set_outputs([_node(g, "np.divide", e, _node(g, "np.sum", e, axis=-1, keepdims=True))])
    old = compiler.set_mode("sync")
    try:
        return compile_graph(g, [TensorType(np.dtype(dtype), (ROWS, COLS))])
    finally:
        compiler.set_mode(old)


def _inputs(dtype):
    x = np.random.default_rng(5).standard_normal((ROWS, COLS)).astype(dtype) * 4
    x[3, 10], x[50, :7], x[70, 100], x[90] = np.nan, -0.0, np.inf, -np.inf   # rows on both threads' chunks
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_medium_pass_on_the_team_keeps_one_threads_bits(dtype, team, numpy_quiet):
    exe, x = _softmax(dtype), _inputs(dtype)
    set_num_threads(1)
    want = exe(x)[0]
    assert exe.stats()["team_pass_runs"] == 0
    set_num_threads(2)
    for _ in range(20):
        assert exe(x)[0].tobytes() == want.tobytes()
    stats = exe.stats()
    assert stats["team_pass_runs"] >= 20 and stats["generated_runs"] > 0
    np.testing.assert_allclose(want, np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(
        -1, keepdims=True), rtol=1e-5 if dtype == np.float32 else 1e-12, equal_nan=True)


def test_flags_of_the_workers_chunk_reach_the_caller(team):
    """An invalid operation only in the last rows (the worker's home chunks) raises under
    errstate(invalid="raise") at 2 threads as at 1."""
    exe = _softmax(np.float64)
    x = np.zeros((ROWS, COLS))
    x[ROWS - 1, 5] = np.inf   # inf - inf in the subtraction
    for threads in (1, 2):
        set_num_threads(threads)
        for _ in range(5):
            with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
                exe(x)


def test_medium_pass_with_the_spin_off_runs_on_the_caller(team):
    exe, x = _softmax(np.float32), _inputs(np.float32)
    set_num_threads(1)
    with np.errstate(all="ignore"):
        want = exe(x)[0]
        set_num_threads(2)
        blocks.set_team_spin_us(0)
        before = blocks.team_counts()
        got = exe(x)[0]
    assert blocks.team_counts()["jobs"] == before["jobs"]
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("mine,nunits,awake,work,wait,missed", [
    (3, 3, True, 10_000, 0, True),              # the workers ran nothing while awake: starved
    (3, 3, False, 10_000, 0, False),            # they were asleep: woken too late, not starved
    (4, 8, True, 400_000, 200_000, False),      # a worker that started late still took work off the caller
    (1, 3, True, 200_000, 190_000, False),      # the caller ran one unit of three, a worker two
    (4, 8, True, 400_000, 3_000_000, True),     # a worker preempted inside its unit for a time slice
    (2, 4, True, 2_000, 30_000, False),         # a small job's jitter
])
def test_team_miss_rule(mine, nunits, awake, work, wait, missed):
    """A spinning job counts toward a back-off when its workers were starved of cores, not when a
    worker merely finished its last unit a little after the caller: with units of hundreds of
    microseconds (a product's), a fixed bound of ~50 us counted such jobs as misses."""
    assert blocks.team_job_missed(mine, nunits, awake, work, wait) is missed
