"""Hunted cases of the GEMV team's column pieces (gemv.pxi: a layer whose 64-row chunks do not
divide among the threads is cut into 64-byte-aligned column ranges): floating-point flags raised in
a worker's piece, weights whose rows are longer than their columns or start off a vector boundary,
the rows form of a Fortran-ordered (M, K) @ (K,), and thread counts changed between calls while
other Python threads call."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numtrace_cpu import compile_graph, set_num_threads
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from threaded import run_threads


def _product(x_shape, w_shape, dtype, bias=False, matrix_first=False):
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(dtype), x_shape))
    w = g.add_input("w", TensorType(np.dtype(dtype), w_shape))
    h = g.create_node("np.matmul", [w, x] if matrix_first else [x, w]).output
    types = [x.type, w.type]
    if bias:
        b = g.add_input("b", TensorType(np.dtype(dtype), (h.type.shape[-1],)))
        h = g.create_node("np.add", [h, b]).output
        types.append(b.type)
    g.set_outputs([h])
    return compile_graph(g, types)


@pytest.mark.parametrize("dtype,big", [(np.float32, 1e30), (np.float64, 1e300)])
@pytest.mark.parametrize("kind", ["overflow", "invalid"])
def test_a_flag_raised_in_a_workers_piece_reaches_the_call(team, dtype, big, kind):
    """448 rows (7 chunks) on 2 threads: 14 pieces, the last (chunk 6, the last columns) in the
    worker's share. NumPy's matmul raises for the overflowing (or inf * 0) product under
    np.errstate(all='raise') (where its BLAS runs it on the calling thread); so must every traced
    call, whichever thread ran that piece."""
    k, n = 448, 130
    rng = np.random.default_rng(1)
    x = rng.standard_normal(k).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    x[400], w[400, n - 1] = (big, big) if kind == "overflow" else (0.0, np.inf)
    exe = _product((k,), (k, n), dtype)
    match = ("overflow" if kind == "overflow" else "invalid value") + " encountered in matmul"
    with np.errstate(all="raise"), pytest.raises(FloatingPointError, match=match):
        x[384:] @ w[384:, 100:]   # small enough for BLAS's calling thread, whose flags NumPy reads
    set_num_threads(2)
    assert exe.stats()["gemv_team_columns"] == 1
    shared = blocks.team_counts()["jobs_shared"]
    for _ in range(300):
        with np.errstate(all="raise"), pytest.raises(FloatingPointError, match=match):
            exe(x, w)
        if blocks.team_counts()["jobs_shared"] - shared >= 20:
            break


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [0, 3])
@pytest.mark.parametrize("layout", ["row_slice", "offset_one", "fortran_rows"])
def test_cut_pieces_of_offset_and_strided_weights_keep_one_threads_bits(team, dtype, m, layout):
    """Column pieces start on 64-byte multiples of the matrix's first column, not of memory: a
    weight that is a column slice of a wider array (rows longer than its columns), one that starts
    one element past an aligned address, and the rows form a Fortran-ordered (M, K) matrix times a
    vector takes, all give one thread's bits at 2, 3, 5 and 7 threads, and NumPy's values."""
    rng = np.random.default_rng(2)
    k, n = 448, 300
    if layout == "fortran_rows":
        w = np.asfortranarray(rng.standard_normal((n, k)).astype(dtype))
        x = rng.standard_normal(k).astype(dtype)
        exe, args, want = _product((k,), (n, k), dtype, matrix_first=True), (x, w), w @ x
    else:
        if layout == "row_slice":
            w = rng.standard_normal((k, n + 21)).astype(dtype)[:, 5:5 + n]
        else:
            w = np.empty(k * n + 1, dtype)[1:].reshape(k, n)
            w[...] = rng.standard_normal((k, n))
        x = rng.standard_normal((k,) if m == 0 else (m, k)).astype(dtype)
        b = rng.standard_normal(n).astype(dtype)
        exe, args, want = _product(x.shape, (k, n), dtype, bias=True), (x, w, b), x @ w + b
    set_num_threads(1)
    one = exe(*args)[0]
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(one, want, rtol=tol, atol=tol * np.abs(want).max())
    for nthreads in (2, 3, 5, 7):
        set_num_threads(nthreads)
        for _ in range(3):
            assert exe(*args)[0].tobytes() == one.tobytes(), nthreads


def test_thread_count_changed_between_calls_while_other_threads_call(team):
    """Four Python threads call one product whose pieces are cut by columns while one of them
    moves the thread count through 3, 2, 7, 1 and 5 (the cut follows it, 1 thread cuts none):
    every result keeps one thread's bits."""
    rng = np.random.default_rng(3)
    k, n = 448, 300
    exe = _product((2, k), (k, n), np.float32, bias=True)
    args = (rng.standard_normal((2, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32),
            rng.standard_normal(n).astype(np.float32))
    set_num_threads(1)
    want = exe(*args)[0].tobytes()
    set_num_threads(3)
    bad = []
    barrier = threading.Barrier(4)

    def work(i):
        barrier.wait()
        for r in range(150):
            if i == 0 and r % 30 == 0:
                set_num_threads((3, 2, 7, 1, 5)[r // 30])
            if exe(*args)[0].tobytes() != want:
                bad.append((i, r))

    run_threads(work, range(4))
    assert not bad
