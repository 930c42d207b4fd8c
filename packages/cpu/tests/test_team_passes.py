"""Generated passes split over the persistent thread team (blocks.pxi's _run_generated): each chunk of
units runs on whichever thread claims it, so the bits must be one thread's, also for an update
written in place into its inputs (sgd with momentum), with the workers spinning or sleeping after
each job, and the floating-point flags a worker raised must reach the caller."""

from __future__ import annotations

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph, compiler
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from threaded import run_threads

F32 = np.dtype(np.float32)
N = 1_000_003   # large enough for two threads (PARALLEL_MIN_WORK), a part chunk at the end


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))


def _sgd_graph():
    """m = m * 0.9 + g; w = w - 0.01 * m: outputs (w, m), both updates of inputs."""
    g = Graph()
    w, grad, m = (g.add_input(name, TensorType(F32, (N,))) for name in ("w", "g", "m"))

    def node(op, *args):
        return g.create_node(op, list(args)).output

    def const(value):
        return g.create_node("prim.Constant", [], attrs={"value": value}).output

    m2 = node("np.add", node("np.multiply", m, const(0.9)), grad)
    g.set_outputs([node("np.subtract", w, node("np.multiply", const(0.01), m2)), m2])
    return g, [w.type, grad.type, m.type]


def _compiled(mode):
    graph, types = _sgd_graph()
    old = compiler.set_mode(mode)
    try:
        return compile_graph(graph, types, updates={0: 0, 1: 2})
    finally:
        compiler.set_mode(old)


def _inputs(seed):
    rng = np.random.default_rng(seed)
    w, g, m = (rng.standard_normal(N).astype(F32) for _ in range(3))
    g[::1001] = -0.0
    m[5::997] = np.nan
    w[7::991] = np.inf
    return w, g, m


def _numpy_sgd(w, g, m):
    m *= 0.9
    m += g
    w -= 0.01 * m


@pytest.mark.parametrize("spin_us", [2000, 0])
def test_in_place_update_on_the_team_keeps_numpys_bits(team, numpy_quiet, spin_us):
    blocks.set_team_spin_us(spin_us)
    exe, interp = _compiled("sync"), _compiled("off")
    for threads in (1, 2):
        numtrace_cpu.set_num_threads(threads)
        before = exe.stats()["generated_team_runs"]
        for seed in range(3):
            w, g, m = _inputs(seed)
            want = [w.copy(), g.copy(), m.copy()]
            _numpy_sgd(*want)
            got = exe(w, g, m)
            assert got[0] is w and got[1] is m, "the update is computed into the caller's arrays"
            for a, b, name in zip((w, g, m), want, "wgm"):
                assert a.tobytes() == b.tobytes(), f"{name} on {threads} threads, spin {spin_us} us"
            w2, g2, m2 = _inputs(seed)
            interp(w2, g2, m2)
            assert w2.tobytes() == w.tobytes() and m2.tobytes() == m.tobytes()
        runs = exe.stats()["generated_team_runs"] - before
        assert runs == (3 if threads == 2 else 0), f"{runs} team runs on {threads} threads"
    assert exe.stats()["generated_runs"] == 6 and exe.stats()["interpreted_runs"] == 0


def test_team_pass_reports_a_workers_overflow(team):
    numtrace_cpu.set_num_threads(2)
    exe = _compiled("sync")
    w, g, m = (np.ones(N, F32) for _ in range(3))
    g[-5] = np.float32(3e38)   # the last chunk: the caller's home range starts at the first
    m[-5] = np.float32(3e38)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError, match="overflow"):
        exe(w, g, m)
    assert exe.stats()["generated_team_runs"] == 1
    w, g, m = (np.ones(N, F32) for _ in range(3))
    g[1] = m[1] = np.float32(3e38)
    with pytest.warns(RuntimeWarning, match="overflow"):
        exe(w, g, m)


def _softmax_rows(s):
    """A transformer's attention softmax: three passes over (4, 128, 128) (two of them reductions over
    short rows, which the interpreter's blocks run), each of less work than PARALLEL_MIN_WORK but
    enough for the spinning team."""
    s = s * 0.125
    p = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return p / np.sum(p, axis=-1, keepdims=True)


def _team_runs(traced):
    stats = traced.stats()["signatures"].values()
    return sum(v["generated_team_runs"] + v["interpreted_team_runs"] for v in stats)


def test_softmax_passes_share_the_team_bit_for_bit(team, numpy_quiet):
    nt = pytest.importorskip("numtrace")
    rng = np.random.default_rng(4)
    s = rng.standard_normal((4, 128, 128)).astype(F32) * 30
    s[0, 3, 7], s[1, 5] = np.nan, -np.inf
    s[2, 9, :4] = [np.inf, -0.0, 0.0, -np.inf]
    traced = {}
    for mode in ("sync", "off"):
        old = compiler.set_mode(mode)
        try:
            traced[mode] = nt.trace(_softmax_rows, (s,), backend="cpu", check_trace=False)
            traced[mode](s)   # compiled on the first call, in this mode
        finally:
            compiler.set_mode(old)
    got = {}
    for threads in (1, 2):
        numtrace_cpu.set_num_threads(threads)
        before = _team_runs(traced["sync"])
        got[threads] = traced["sync"](s)
        runs = _team_runs(traced["sync"]) - before
        assert runs == (3 if threads == 2 else 0), f"{runs} team runs on {threads} threads"
    assert got[1].tobytes() == got[2].tobytes()
    assert got[2].tobytes() == traced["off"](s).tobytes()
    want = _softmax_rows(s)
    np.testing.assert_array_equal(np.isnan(got[2]), np.isnan(want))
    np.testing.assert_allclose(got[2], want, rtol=1e-5, atol=1e-7)


def _gemv(k, n, seed):
    g = Graph()
    x = g.add_input("x", TensorType(F32, (1, k)))
    w = g.add_input("w", TensorType(F32, (k, n)))
    g.set_outputs([g.create_node("np.matmul", [x, w]).output])
    rng = np.random.default_rng(seed)
    return compile_graph(g, [x.type, w.type]), rng.standard_normal((1, k)).astype(F32), \
        rng.standard_normal((k, n)).astype(F32)


@pytest.mark.parametrize("callers", [1, 2])
def test_back_to_back_short_jobs_take_turns_in_two_slots_and_keep_one_threads_bits(team, callers):
    """Short team jobs back to back (two GEMVs of other shapes, in turn): each new job goes to the slot
    the job before last used, while a worker may still be looking at the last one (nt_team.h). Every
    result must be one thread's bits, from one Python thread or two calling at once (a job that finds
    the team held runs alone), and every job is counted once, run on the team or alone."""
    numtrace_cpu.set_num_threads(2)
    gemvs = [_gemv(256, 512, 1), _gemv(384, 256, 2)]
    numtrace_cpu.set_num_threads(1)
    want = [np.asarray(exe(x, w)[0]).copy() for exe, x, w in gemvs]
    numtrace_cpu.set_num_threads(2)
    before = blocks.team_counts()
    bad: list[int] = []

    def calls(_):
        for i in range(600):
            exe, x, w = gemvs[i % 2]
            if not np.array_equal(np.asarray(exe(x, w)[0]), want[i % 2]):
                bad.append(i)

    run_threads(calls, range(callers))
    after = blocks.team_counts()
    assert not bad, bad[:10]
    jobs = after["jobs"] - before["jobs"] + after["solo_runs"] - before["solo_runs"]
    assert jobs == 600 * callers
    assert sum(after[k] - before[k] for k in ("solo_backoff", "solo_lagging", "solo_held")) \
        == after["solo_runs"] - before["solo_runs"]
