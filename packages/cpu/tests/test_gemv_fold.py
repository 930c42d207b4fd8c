"""The GEMV team's fold form (gemv.pxi's _gemv_fold_unit): on more than one thread, a product of the
rows form with more than one 64-row chunk gives each thread one unit, which computes its chunks'
partials (in alternating order between calls), waits for the units before it, and folds its own
partials into the output in chunk order, the last unit adding the bias and the activation. Every
output must keep the bits one thread gives, at any thread count, on either call parity, with
signed zeros and NaN, and with the workers preempted by a loaded machine."""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
from numtrace_cpu import compile_graph, set_num_threads
from numtrace_cpu.executable import _cache_aligned
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph
from numtrace_ir.types import TensorType

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # special values on purpose


def _layer(m, k, n, dtype, relu=True):
    """max(x @ w + b, 0) (or x @ w + b): x of shape (k,) when m is 0, else (m, k)."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(dtype), (m, k) if m else (k,)))
    w = g.add_input("w", TensorType(np.dtype(dtype), (k, n)))
    b = g.add_input("b", TensorType(np.dtype(dtype), (n,)))
    h = g.create_node("np.add", [g.create_node("np.matmul", [x, w]).output, b]).output
    if relu:
        zero = g.create_node("prim.Constant", [], attrs={"value": 0}).output
        h = g.create_node("np.maximum", [h, zero]).output
    g.set_outputs([h])
    return compile_graph(g, [x.type, w.type, b.type])


def _args(m, k, n, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k) if m else k).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    w[::7, ::5] = -0.0
    b[::3] = -0.0
    return x, w, b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [0, 3])
@pytest.mark.parametrize("k,n", [(784, 512), (512, 512), (128, 300), (448, 130), (200, 1000)])
def test_threads_folding_their_own_chunks_keep_one_threads_bits(team, dtype, m, k, n):
    """784x512 and 512x512 are the MLP's layers (13 and 8 chunks on 2 threads); 448 rows make 7
    chunks, cut by columns on 2 to 6 threads; 128 rows make 2 chunks, fewer than the threads. Each
    count runs 4 calls, so both orders of computing the chunks."""
    exe = _layer(m, k, n, dtype)
    x, w, b = _args(m, k, n, dtype, k + n + m)
    w[5, 3] = np.nan   # a NaN column of the output through the folds and the ReLU
    set_num_threads(1)
    assert exe.stats()["gemv_team_folds"] == 0
    want = exe(x, w, b)[0]
    for nthreads in (2, 3, 4, 5):
        set_num_threads(nthreads)
        assert exe.stats()["gemv_team_folds"] == 1
        for _ in range(4):
            np.testing.assert_array_equal(exe(x, w, b)[0], want)
    expected = np.maximum(x @ w + b, 0)
    # NumPy's BLAS sums in another order: a bound on the rounding of any order, per output
    bound = (2e-6 if dtype == np.float32 else 1e-14) * (np.abs(x) @ np.abs(w) + np.abs(b))
    assert np.array_equal(np.isnan(want), np.isnan(expected))
    assert np.all(np.isnan(want) | (np.abs(want - expected) <= bound))


def test_one_chunk_or_one_thread_does_not_fold(team):
    """A product of 64 rows (one chunk: no partials to fold) and any product on one thread keep the
    caller's finish; stats() says so."""
    set_num_threads(2)
    assert _layer(0, 64, 1024, np.float32).stats()["gemv_team_folds"] == 0
    assert _layer(0, 65, 1024, np.float32).stats()["gemv_team_folds"] == 1
    blocks.set_team_spin_us(0)   # no team: every GEMV on the calling thread
    assert _layer(0, 784, 512, np.float32).stats()["gemv_team_folds"] == 0


def _transposed_layer(k, n, dtype):
    """x @ w.T + b with w of shape (n, k): the traced (C-ordered) w makes the dots form."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(dtype), (k,)))
    w = g.add_input("w", TensorType(np.dtype(dtype), (n, k)))
    b = g.add_input("b", TensorType(np.dtype(dtype), (n,)))
    wt = g.create_node("np.transpose", [w]).output
    g.set_outputs([g.create_node("np.add", [g.create_node("np.matmul", [x, wt]).output, b]).output])
    return compile_graph(g, [x.type, w.type, b.type])


@pytest.mark.parametrize("transposed", [False, True])
def test_team_counts_follow_the_weight_layout_a_call_runs(team, transposed):
    """A weight whose summed axis is not its outer one in memory runs the dots form, which neither
    folds nor cuts columns: stats() counts by the form the last call ran (the traced layout's before
    any call), so a Fortran-ordered weight at a call changes the counts, both ways."""
    k, n = 448, 130   # 7 row chunks: folded, and cut into columns on 2 threads
    set_num_threads(2)
    x, w, b = _args(0, k, n, np.float32, 5)
    if transposed:
        exe, traced, other = _transposed_layer(k, n, np.float32), w.T.copy(), w.T.copy(order="F")
    else:
        exe, traced, other = _layer(0, k, n, np.float32, relu=False), w, np.asfortranarray(w)
    ran = {"folds": int(not transposed), "columns": int(not transposed)}
    for weight, rows in ((traced, not transposed), (other, transposed), (traced, not transposed)):
        stats = exe.stats()
        assert (stats["gemv_team_folds"], stats["gemv_team_columns"]) == (ran["folds"], ran["columns"])
        out = exe(x, weight, b)[0]
        np.testing.assert_allclose(out, x @ w + b, rtol=1e-4, atol=1e-4)
        stats = exe.stats()
        assert (stats["gemv_team_folds"], stats["gemv_team_columns"]) == (int(rows), int(rows))
        ran = {"folds": int(rows), "columns": int(rows)}


def test_folds_under_load_neither_deadlock_nor_change_bits(team):
    """Two busy processes take both cores while 2 and 3 threads fold: workers are preempted in the
    middle of their unit or while waiting for their turn to fold. Each call must still finish with
    one thread's bits (the calls run in a thread joined with a time limit, so a deadlock fails)."""
    exe = _layer(0, 784, 512, np.float32)
    x, w, b = _args(0, 784, 512, np.float32, 3)
    set_num_threads(1)
    want = exe(x, w, b)[0]
    bad, jobs = [], blocks.team_counts()["jobs"]

    def calls():
        for i in range(3000):
            set_num_threads(2 + i % 2)
            if not np.array_equal(exe(x, w, b)[0], want):
                bad.append(i)

    busy = [subprocess.Popen([sys.executable, "-c", "print(flush=True)\nwhile True: pass"],
                             stdout=subprocess.PIPE) for _ in range(2)]
    try:
        for proc in busy:
            proc.stdout.readline()   # spinning from here on
        caller = threading.Thread(target=calls, daemon=True)
        caller.start()
        caller.join(timeout=120)
        assert not caller.is_alive(), "the folding calls did not finish under load"
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
            proc.stdout.close()
    assert bad == []
    assert blocks.team_counts()["jobs"] > jobs   # some calls ran on the team, not all backed off


def _rows_at(w, offset):
    """w's values in a matrix whose rows start `offset` bytes past a 64-byte boundary and lie a
    multiple of 64 bytes apart (a column slice of a wider C-ordered array)."""
    k, n = w.shape
    per_line = 64 // w.itemsize
    ldw = (n + per_line) // per_line * per_line + per_line
    raw = np.zeros(k * ldw + 2 * per_line, w.dtype)
    start = next(s for s in range(per_line) if (raw.ctypes.data + s * w.itemsize) % 64 == offset)
    out = raw[start:start + k * ldw].reshape(k, ldw)[:, :n]
    out[...] = w
    assert out.ctypes.data % 64 == offset and out.strides == (ldw * w.itemsize, w.itemsize)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [0, 3])
@pytest.mark.parametrize("k,n", [(784, 512), (448, 130), (200, 20), (128, 7)])
def test_unaligned_weight_rows_peel_their_first_columns_with_the_same_bits(team, dtype, m, k, n):
    """Weights whose rows start past a 64-byte boundary (the MLP's 784x512 argument is 16 bytes off)
    have the columns before the boundary computed apart and the column pieces moved by as many: the
    bits of aligned weights at 1 to 3 threads, a NaN and signed zeros among the peeled columns. A
    matrix with no more columns than the peel, or a build without AVX-512, reads as it is."""
    exe = _layer(m, k, n, dtype)
    x, w, b = _args(m, k, n, dtype, k + n)
    w[5, 1] = np.nan
    aligned = _rows_at(w, 0)
    set_num_threads(1)
    want = exe(x, aligned, b)[0]
    assert exe.stats()["gemv_peeled"] == 0
    itemsize = np.dtype(dtype).itemsize
    for offset in (itemsize, 16, 64 - itemsize):
        unaligned = _rows_at(w, offset)
        peels = blocks.GEMV_PEELS and (64 - offset) // itemsize < n
        for nthreads in (1, 2, 3):
            set_num_threads(nthreads)
            for _ in range(2):   # both orders of computing the chunks
                np.testing.assert_array_equal(exe(x, unaligned, b)[0], want)
            assert exe.stats()["gemv_peeled"] == (1 if peels else 0)
    np.testing.assert_array_equal(exe(x, np.ascontiguousarray(w), b)[0], want)
    expected = np.maximum(x @ w + b, 0)
    bound = (2e-6 if dtype == np.float32 else 1e-14) * (np.abs(x) @ np.abs(w) + np.abs(b))
    assert np.array_equal(np.isnan(want), np.isnan(expected))
    assert np.all(np.isnan(want) | (np.abs(want - expected) <= bound))


def test_gemv_weight_constants_are_cache_line_aligned():
    """A GEMV's weight constant NumPy placed 16 bytes past a cache line is copied once to a 64-byte
    boundary, so the GEMV reads whole lines and peels nothing; its values are the constant's. Other
    constants are not copied."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(np.float32), (1, 200)))
    raw = np.zeros(200 * 48 + 16, np.float32)
    start = next(s for s in range(16) if (raw.ctypes.data + 4 * s) % 64 == 16)
    w = raw[start:start + 200 * 48].reshape(200, 48)
    w[...] = np.random.default_rng(0).standard_normal((200, 48))
    w.flags.writeable = False
    c = g.create_node("prim.Constant", [], attrs={"value": w}).output
    g.set_outputs([g.create_node("np.matmul", [x, c]).output])
    exe = compile_graph(g, [x.type])
    xv = np.linspace(-1.0, 1.0, 200, dtype=np.float32)[None]
    np.testing.assert_allclose(exe(xv)[0], xv @ w, rtol=1e-5, atol=1e-5)
    held = [v for v in exe._template if isinstance(v, np.ndarray) and v.shape == (200, 48)]
    assert len(held) == 1 and held[0].ctypes.data % 64 == 0 and not held[0].flags.writeable
    np.testing.assert_array_equal(held[0], w)
    assert exe.stats()["gemv_peeled"] == 0
    assert exe.stats()["gemv"] == 1
    # a constant no GEMV reads as its weights stays the graph's array
    g2 = Graph()
    y = g2.add_input("y", TensorType(np.dtype(np.float32), (200, 48)))
    c2 = g2.create_node("prim.Constant", [], attrs={"value": w}).output
    g2.set_outputs([g2.create_node("np.add", [y, c2]).output])
    exe2 = compile_graph(g2, [y.type])
    assert _template_holds_graph_constant(exe2)
    # the copy itself (the graph's constant may be a copy of w at any alignment)
    copied = _cache_aligned(w)
    assert copied is not w and copied.ctypes.data % 64 == 0 and not copied.flags.writeable
    np.testing.assert_array_equal(copied, w)
    strided = w[:, :8]
    assert _cache_aligned(copied) is copied and _cache_aligned(strided) is strided


def _template_holds_graph_constant(exe):
    """Whether the executable holds its graph's (200, 48) constant array itself, not a copy."""
    graph_arrays = [n.attrs["value"] for n in exe.graph.nodes if n.op == "prim.Constant"
                    and isinstance(n.attrs["value"], np.ndarray) and n.attrs["value"].shape == (200, 48)]
    return any(v is c for v in exe._template for c in graph_arrays)
