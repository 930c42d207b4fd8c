"""Hunt on the per-call packed products cut into four column-panel chunks per thread, the team's miss
rule and counters, and benchmarks/peers.py's limit column: products of two run-time values at panel
counts around the chunk boundaries for 1 to 5 threads (bit-identical, NumPy's values), special values
in a worker's chunk, floating-point errors raised from a worker's chunk, team counters that add up,
and the peers limit (FLOPs counted by NumPy's own matmul calls, a limit never divided by an unmeasured
peak)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numtrace_cpu import blas_threads, compile_graph, get_num_threads, set_num_threads
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from threaded import run_threads

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


def _product(a_shape, b_shape, dtype):
    t = np.dtype(dtype)
    g = Graph()
    a = g.add_input("a", TensorType(t, a_shape))
    b = g.add_input("b", TensorType(t, b_shape))
    g.set_outputs([g.create_node("np.matmul", [a, b]).output])
    return compile_graph(g, [a.type, b.type])


def _by_threads(exe, a, b, counts):
    old = get_num_threads()
    try:
        out = []
        for n in counts:
            set_num_threads(n)
            (got,) = exe(a, b)
            out.append(got)
        return out
    finally:
        set_num_threads(old)


def _panel_width(dtype):
    return blocks.GEMM_MICRO_TILE[1] if np.dtype(dtype) == np.float32 else blocks.GEMM_MICRO_TILE[1] // 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_run_time_products_around_panel_chunk_boundaries(dtype):
    """N at, one below and one above multiples of 4 * threads panels (and odd N below one panel): every
    thread count cuts the panels differently, each output stays one sum in k order."""
    nr = _panel_width(dtype)
    rng = np.random.default_rng(0)
    m, k = 24, 2048   # M * N * K past GEMM_PARALLEL_MIN from N = 22: the team runs it
    ns = sorted({max(1, p * nr + d) for p in (1, 7, 8, 9, 12, 16, 17, 20, 33) for d in (-1, 0, 1)}
                | {1, 3, 31, 63})
    for n in ns:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        exe = _product(a.shape, b.shape, dtype)
        assert exe.stats()["packed_runtime"] == 1
        outs = _by_threads(exe, a, b, (1, 2, 3, 4, 5))
        for got in outs[1:]:
            np.testing.assert_array_equal(got, outs[0], err_msg=f"N={n}")
        tol = 1e-4 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(outs[0], a @ b, rtol=tol, atol=tol * np.sqrt(k), err_msg=f"N={n}")


@pytest.mark.parametrize("layout", ["F", "transposed", "strided"])
def test_run_time_products_of_other_layouts_split_the_same(layout):
    """A right operand F-ordered, a transpose view or every other column at the call (the trace made
    for a C-ordered one): the same bits at 1 to 3 threads, NumPy's values."""
    rng = np.random.default_rng(1)
    m, k, n = 40, 1500, 300
    a = rng.standard_normal((m, k)).astype(np.float32)
    base = rng.standard_normal((k, 2 * n)).astype(np.float32)
    b = {"F": np.asfortranarray(base[:, :n]), "transposed": np.ascontiguousarray(base[:, :n].T).T,
         "strided": base[:, ::2]}[layout]
    outs = _by_threads(_product(a.shape, b.shape, np.float32), a, b, (1, 2, 3))
    for got in outs[1:]:
        np.testing.assert_array_equal(got, outs[0])
    np.testing.assert_allclose(outs[0], a @ b, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_in_a_workers_panel_chunk(dtype):
    """NaN, inf and -0 in the last column panels (a worker's chunk at 2 and 3 threads): NumPy's NaN/inf
    pattern and zero signs."""
    rng = np.random.default_rng(2)
    m, k, n = 16, 1024, 20 * _panel_width(dtype) + 3
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    b[5, -1] = np.nan
    b[7, -2] = np.inf
    b[:, -3] = -0.0
    a[3, :] = -0.0
    exe = _product(a.shape, b.shape, dtype)
    with np.errstate(all="ignore"):
        want = a @ b
        outs = _by_threads(exe, a, b, (1, 2, 3))
    for got in outs:
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
        zeros = want == 0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))
        np.testing.assert_array_equal(got, outs[0])


@pytest.mark.skipif(not blas_threads.available(), reason="NumPy's OpenBLAS thread count cannot be set")
@pytest.mark.parametrize("threads", [2, 3])
def test_overflow_in_a_workers_panel_chunk_raises_like_numpy(threads):
    """np.errstate(over='raise'): NumPy's matmul raises when its OpenBLAS runs on the calling thread
    (the trace's error report reruns NumPy, so OpenBLAS is held to one thread here); so does the trace
    when only a worker's (last) panel chunk overflows."""
    rng = np.random.default_rng(3)
    m, k, n = 32, 1024, 40 * _panel_width(np.float32)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a[:, 0] = 1e30
    b[0, -1] = 1e30
    exe = _product(a.shape, b.shape, np.float32)
    old, shared = get_num_threads(), blocks.team_counts()["jobs_shared"]

    def check(env, nthreads):
        with np.errstate(over="raise"):
            with pytest.raises(FloatingPointError, match="overflow encountered in matmul"):
                a @ b
            for _ in range(200):
                with pytest.raises(FloatingPointError, match="overflow encountered in matmul"):
                    exe(a, b)
                if blocks.team_counts()["jobs_shared"] - shared >= 10:
                    break
    try:
        set_num_threads(threads)
        blas_threads.one_thread(check)([], 1)
    finally:
        set_num_threads(old)


@pytest.mark.parametrize("spin_us", [0, 50, 100_000])
def test_team_counters_add_up(spin_us):
    """team_counts() after products and GEMVs: shared and spinning jobs within all jobs, misses within
    spinning ones, one back-off per NT_TEAM_MISSES misses at most, long waits only in shared spinning
    jobs; with no spin nothing spins, misses nor backs off."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 512)).astype(np.float32)
    b = rng.standard_normal((512, 512)).astype(np.float32)
    v = rng.standard_normal((1, 512)).astype(np.float32)
    exe, gemv = _product(a.shape, b.shape, np.float32), _product(v.shape, b.shape, np.float32)
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    before = blocks.team_counts()
    try:
        set_num_threads(2)
        blocks.set_team_spin_us(spin_us)
        for _ in range(20):
            exe(a, b)
            gemv(v, b)
    finally:
        blocks.set_team_spin_us(old_spin)
        set_num_threads(old)
    c = {key: value - before[key] for key, value in blocks.team_counts().items()}
    if spin_us:   # each packed product ran on the team or, counted, alone (without a spin, a job the
        assert c["jobs"] + c["solo_runs"] >= 20   # sleeping workers had not yet acknowledged runs alone)
    assert 0 <= c["jobs_shared"] <= c["jobs"] and 0 <= c["jobs_spinning"] <= c["jobs"]
    assert 0 <= c["misses"] <= c["jobs_spinning"]
    assert 0 <= c["backoffs"] * 3 <= c["misses"]
    assert 0 <= c["long_waits"] <= min(c["jobs_shared"], c["jobs_spinning"])
    if spin_us == 0:
        assert c["jobs_spinning"] == c["misses"] == c["backoffs"] == c["long_waits"] == 0


# -- benchmarks/peers.py's limit column ------------------------------------------------------------------

@pytest.fixture(scope="module")
def peers():
    if not (BENCHMARKS / "peers.py").exists():
        pytest.skip("benchmarks/ is not beside this package")
    pytest.importorskip("numtrace")   # the workloads trace with the frontend
    spec = importlib.util.spec_from_file_location("peers_under_test", BENCHMARKS / "peers.py")
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)   # peers.py puts benchmarks/ first on it, for the workloads it imports
    sys.modules[spec.name] = module   # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path[:] = saved
        del sys.modules[spec.name]


class _Counting(np.ndarray):
    """An array that adds the FLOPs (2 per multiply-add) of every np.matmul it takes part in."""
    flops = 0

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [x.view(np.ndarray) if isinstance(x, _Counting) else x for x in inputs]
        if "out" in kwargs:
            outs = kwargs["out"]
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, _Counting) else o for o in outs)
        out = getattr(ufunc, method)(*plain, **kwargs)
        if ufunc is np.matmul:
            _Counting.flops += 2 * out.size * plain[0].shape[-1]
        return out.view(_Counting) if isinstance(out, np.ndarray) else out


def _counted_flops(row) -> int:
    _Counting.flops = 0
    args = [x.view(_Counting) if isinstance(x, np.ndarray) else x for x in row.make()]
    row.numpy_fn(*args)
    return _Counting.flops


def test_peers_rows_count_their_product_flops(peers):
    """Each W2/W3 row's `flops` is what its NumPy function's matmul calls do (counted as they run)."""
    rows = [r for r in peers._w_rows(quick=True) if r.flops]
    assert {r.name for r in rows} >= {"W2 MLP batch 1", "W2 MLP batch 256", "W3 transformer block",
                                      "W2 batch 1, constant weights", "W3 block, constant weights"}
    for row in rows:
        assert row.flops == _counted_flops(row), row.name
        if row.weight_bytes:
            weights = [x for x in row.make()[1:] + tuple(getattr(row.numpy_fn, "weights", ())) if x.ndim == 2]
            assert row.weight_bytes == sum(w.nbytes for w in weights), row.name


def test_peers_limit_without_a_measured_peak_is_none(peers):
    """machine_limits.c reports 0.0 for a peak it could not measure (OpenMP ran fewer threads than
    asked, e.g. OMP_THREAD_LIMIT=1): the row has no limit, rather than a division by zero that loses
    the whole table."""
    row = peers.Row("W2 MLP batch 1", "w", None, lambda: (), flops=2e6, weight_bytes=4_000)
    measured = {"fma_flops": 1e11, "read": {"4000": 1e8}}
    assert peers.row_limit(row, {}, measured) == (4e-5, "weights read")
    assert peers.row_limit(row, {}, {"fma_flops": 0.0, "read": {"4000": 1e8}}) is None
    assert peers.row_limit(row, {}, {"fma_flops": 1e11, "read": {"4000": 0.0}}) == (2e-5, "FMA peak")


def _peers_table(peers, capsys, rounds):
    rows = [peers.Row("W1 into out=", "w", None, None, kind="out", tag="w1"),
            peers.Row("W4 200 ops", "w", None, None, tag="w4")]
    peers.print_table(rows, rounds, ["numpy", "numtrace", "numba", "C loop"], None)
    return capsys.readouterr().out.splitlines()


def _line(lines, start):
    return next(line for line in lines if line.startswith(start))


def test_peers_rounds_report_medians_and_same_round_ratios(peers, capsys):
    """--rounds: each cell is the median over rounds, each ratio the median of the ratios of times from
    the same round (not a ratio of medians) with their min-max, and a row whose ratio crosses 1.00 gets
    a line per round."""
    def round_(ours, limit, numpy=4e-3):
        return {"numpy": {"W1 into out=": numpy, "W4 200 ops": 8e-5}, "numtrace": {"W1 into out=": ours,
                "W4 200 ops": 1e-6}, "C loop": {"W1 into out=": limit}, "numba": {"W4 200 ops": 6e-6}}
    rounds = [round_(1.0e-3, 1.2e-3), round_(2.0e-3, 1.6e-3, 8e-3), round_(1.4e-3, 1.3e-3)]
    merged = peers.aggregate(rounds)
    assert merged["numtrace"]["W1 into out="] == 1.4e-3 and merged["C loop"]["W1 into out="] == 1.3e-3
    lines = _peers_table(peers, capsys, rounds)
    # Per round vs limit: 1.20, 0.80, 0.93 -> median 0.93 (1.3 / 1.4, the ratio of medians, is too)
    # xNumPy: 4.00, 4.00, 2.86 -> 4.00, where the medians (4 ms / 1.4 ms) would say 2.86.
    assert "4.00x 2.86-4.00" in _line(lines, "W1 into out= ")
    assert "0.93x 0.80-1.20" in _line(lines, "W1 into out= ")
    assert "6.00x 6.00-6.00" in _line(lines, "W4 200 ops ")   # vs best: numba is the only peer
    per_round = [line for line in lines if ", round " in line]
    assert len(per_round) == 3 and all(line.startswith("  W1 into out=, round") for line in per_round)
    assert "vs limit 0.80x" in _line(lines, "  W1 into out=, round 2:")


def test_peers_one_round_keeps_the_table_of_one_run(peers, capsys):
    """One round (the default) prints what a run always printed: one ratio per cell, no rounds."""
    rounds = [{"numpy": {"W1 into out=": 4e-3}, "numtrace": {"W1 into out=": 1e-3},
               "C loop": {"W1 into out=": 1.2e-3}}]
    lines = _peers_table(peers, capsys, rounds)
    assert " vs limit peer/lim  limit" in lines[0]   # ratio columns 8 wide, as before --rounds
    assert _line(lines, "W1 into out= ").endswith(
        "   4.00x        - -                       1.20x        -  C loop 1.200 ms")
    assert not any("round" in line for line in lines)


def test_peers_wrong_result_in_one_round_stands_for_the_row(peers, capsys):
    """A result that is wrong in any round is reported (with its rounds) instead of a time, and no
    ratio is taken from the rounds where it was right."""
    ok = {"numpy": {"W1 into out=": 4e-3}, "numtrace": {"W1 into out=": 1e-3}}
    wrong = {"numpy": {"W1 into out=": 4e-3}, "numtrace": {"W1 into out=": "wrong result"}}
    lines = _peers_table(peers, capsys, [ok, wrong, ok])
    row = _line(lines, "W1 into out= ")
    assert "(wrong re)" in row and "x" not in row.split("(wrong re)")[1]
    assert "  not timed: W1 into out=: numtrace: wrong result (round 2)" in lines


def test_peers_rounds_rotate_the_tools(peers):
    """Each tool takes every place in the order in turn: none is always first or always last."""
    tools = ["numpy", "numtrace", "numba"]
    orders = [peers.round_order(tools, i) for i in range(4)]
    assert orders[0] == tools and orders[3] == tools
    assert [o[0] for o in orders[:3]] == tools
    assert [o[-1] for o in orders[:3]] == ["numba", "numpy", "numtrace"]
    assert peers.round_order([], 2) == []


_LIMITS_PROBE = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.fma_flops.restype = lib.read_bytes_per_s.restype = ctypes.c_double
lib.fma_flops.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_int]
lib.read_bytes_per_s.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
print(lib.fma_flops(2, 2000, 2) > 0, lib.read_bytes_per_s(2, 1 << 16, 4, 2) > 0)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("env,measured", [({"OMP_NUM_THREADS": "1"}, "True True"),
                                          ({"OMP_THREAD_LIMIT": "1"}, "False False")])
def test_machine_limits_count_the_threads_that_ran(tmp_path, env, measured):
    """machine_limits.c times 2 threads whatever OMP_NUM_THREADS says (num_threads overrides it), and
    reports nothing (0.0) when OpenMP ran fewer threads than asked (OMP_THREAD_LIMIT), rather than a
    rate multiplied by threads that did not run."""
    source = BENCHMARKS / "machine_limits.c"
    if not source.exists():
        pytest.skip("benchmarks/ is not beside this package")
    library = tmp_path / "limits.so"
    built = subprocess.run(["cc", "-O2", "-march=native", "-fopenmp", "-shared", "-fPIC", str(source), "-o",
                            str(library)], capture_output=True, text=True, check=False)
    if built.returncode:
        pytest.skip(f"machine_limits.c does not build here: {built.stderr[-300:]}")
    run = subprocess.run([sys.executable, "-c", _LIMITS_PROBE, str(library)], capture_output=True, text=True,
                         env={**os.environ, **env}, check=True, timeout=120)
    assert run.stdout.split() == measured.split()


@pytest.mark.parametrize("spin_us", [0, 100_000])
def test_two_python_threads_with_products_of_other_shapes(spin_us):
    """Two Python threads at once, one on packed products of run-time values cut into many panel
    chunks, the other on GEMVs and products of another shape (the team held by one, a back-off entered
    by either, then the other shape): every result is the one a lone call gives, bit for bit."""
    rng = np.random.default_rng(5)
    cases = []
    shapes = (((24, 700), (700, 37 * 16 + 5)), ((1, 900), (900, 333)), ((9, 300), (300, 1001)))
    for a_shape, b_shape in shapes:
        a = rng.standard_normal(a_shape).astype(np.float32)
        b = rng.standard_normal(b_shape).astype(np.float32)
        exe = _product(a.shape, b.shape, np.float32)
        cases.append((exe, a, b, exe(a, b)[0].copy()))
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    bad: list = []

    def loop(order):
        for i in range(30):
            exe, a, b, want = cases[order[i % len(order)]]
            (got,) = exe(a, b)
            if not np.array_equal(got, want):
                bad.append((order, i))
    try:
        set_num_threads(2)
        blocks.set_team_spin_us(spin_us)
        run_threads(loop, ((0, 1), (2, 1, 0)))
    finally:
        blocks.set_team_spin_us(old_spin)
        set_num_threads(old)
    assert not bad


@pytest.mark.parametrize("axes", [(0, 1), (1, 0), None, (-1, -2)], ids=str)
def test_gemv_form_before_the_first_call_is_the_one_it_runs(axes):
    """stats() before any call predicts the GEMV form from the trace's transposes; an identity
    np.transpose(w, (0, 1)) swaps nothing, so the prediction matches what the first call ran."""
    t = np.dtype(np.float32)
    g = Graph()
    x = g.add_input("x", TensorType(t, (1, 4096)))
    w = g.add_input("w", TensorType(t, (4096, 4096)))
    wt = g.create_node("np.transpose", [w], attrs={} if axes is None else {"axes": axes}).output
    g.set_outputs([g.create_node("np.matmul", [x, wt]).output])
    exe = compile_graph(g, [x.type, w.type])
    old = get_num_threads()
    try:
        set_num_threads(2)
        before = exe.stats()
        rng = np.random.default_rng(9)
        a = rng.standard_normal((1, 4096)).astype(np.float32)
        b = rng.standard_normal((4096, 4096)).astype(np.float32)
        (got,) = exe(a, b)
        after = exe.stats()
    finally:
        set_num_threads(old)
    np.testing.assert_allclose(got, a @ np.transpose(b, axes), rtol=1e-4, atol=1e-3)
    for key in ("gemv_team_columns", "gemv_team_folds"):
        assert before[key] == after[key], key
