"""Hunted cases of the GEMV team's fold form (gemv.pxi's _gemv_fold_unit: each thread folds its own
row chunks' partials into the output in chunk order, the last one adding the bias and activation):
outputs given with out= that alias an input (the folds write the output while other threads still
read the inputs), output and vector rows with padded or negative strides, thread counts beyond the
team's workers and its unit limit, a chained MLP with both forms of product, and Python threads
calling one executable with their own inputs and bad ones in between. Every call must keep one
thread's bits, on either call parity, and finish (threads joined with a time limit)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numtrace_cpu import compile_graph, set_num_threads
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from test_gemv_fold import _layer  # the fold's own test builds the same layer


def _args(m, k, n, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k) if m else k).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    w[::7, ::5] = -0.0
    return x, w, b


def _in_time(fn, timeout=120):
    """fn() on another thread, joined with a time limit: a fold that never gets its turn fails."""
    result: list = []
    t = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "the folding call did not finish"
    assert result, "the call raised"
    return result[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [0, 1, 3])
def test_out_aliasing_an_input_keeps_one_threads_bits(team, dtype, m):
    """out= the vector, the bias or a row of the weights (square 512x512, 8 chunks): the thread of
    the first chunks folds into the output while the others still read the inputs, so the output
    must not be the input's memory."""
    exe = _layer(m, 512, 512, dtype)
    x, w, b = _args(m, 512, 512, dtype, 7 + m)
    set_num_threads(1)
    want = exe(x, w, b)[0]
    for nthreads in (2, 3):
        set_num_threads(nthreads)
        for _ in range(2):   # both orders of computing the chunks
            xt = x.copy()
            assert exe(xt, w, b, out=[xt])[0] is xt
            np.testing.assert_array_equal(xt, want)
            if m == 0:
                bt = b.copy()
                exe(x, w, bt, out=[bt])
                np.testing.assert_array_equal(bt, want)
                wt = w.copy()
                exe(x, wt, b, out=[wt[0]])
                np.testing.assert_array_equal(wt[0], want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_padded_and_reversed_rows_of_x_and_of_the_output(team, dtype):
    """A few rows of x read, and written, with row strides other than n: padded rows and negative
    strides, through the fold's own row offsets."""
    m, k, n = 3, 784, 512
    exe = _layer(m, k, n, dtype)
    x, w, b = _args(m, k, n, dtype, 11)
    set_num_threads(1)
    want = exe(x, w, b)[0]
    for nthreads in (2, 3):
        set_num_threads(nthreads)
        for _ in range(2):
            padded = np.zeros((m, n + 48), dtype)[:, :n]
            exe(x, w, b, out=[padded])
            np.testing.assert_array_equal(padded, want)
            reversed_rows = np.zeros((m, n), dtype)[::-1]
            exe(x, w, b, out=[reversed_rows])
            np.testing.assert_array_equal(reversed_rows, want)
            wide = np.zeros((m, 2 * k), dtype)
            wide[:, :k] = x
            np.testing.assert_array_equal(exe(wide[:, :k], w, b)[0], want)
            np.testing.assert_array_equal(exe(x[::-1].copy()[::-1], w, b)[0], want)


@pytest.mark.parametrize("nthreads", [65, 257, 400])
def test_thread_counts_beyond_the_team_and_its_unit_limit(team, nthreads):
    """One fold unit per thread, 301 row chunks: 65 threads (61 units of 5 chunks) and 257 (151
    units of 2) are more than the team's 63 workers and the caller; 400 make 301 units, more than a
    team job takes, which run on the caller in unit order."""
    k, n = 64 * 300 + 5, 16
    exe = _layer(2, k, n, np.float32, relu=False)
    x, w, b = _args(2, k, n, np.float32, 13)
    set_num_threads(1)
    want = exe(x, w, b)[0]
    set_num_threads(nthreads)
    assert exe.stats()["gemv_team_folds"] == 1
    for _ in range(2):
        np.testing.assert_array_equal(_in_time(lambda: exe(x, w, b)[0]), want)


def _mlp():
    """relu(relu(x @ w1 + b1) @ w2 + b2) then a @ h: two fold layers (784 and 512 rows), the last
    product of the matrix-vector form."""
    f = np.dtype(np.float32)
    g = Graph()
    x = g.add_input("x", TensorType(f, (784,)))
    w1 = g.add_input("w1", TensorType(f, (784, 512)))
    b1 = g.add_input("b1", TensorType(f, (512,)))
    w2 = g.add_input("w2", TensorType(f, (512, 512)))
    b2 = g.add_input("b2", TensorType(f, (512,)))
    a = g.add_input("a", TensorType(f, (300, 512)))
    zero = g.create_node("prim.Constant", [], attrs={"value": 0}).output
    h = x
    for w, b in ((w1, b1), (w2, b2)):
        h = g.create_node("np.add", [g.create_node("np.matmul", [h, w]).output, b]).output
        h = g.create_node("np.maximum", [h, zero]).output
    g.set_outputs([g.create_node("np.matmul", [a, h]).output])
    return compile_graph(g, [v.type for v in (x, w1, b1, w2, b2, a)])


def test_mlp_layers_feeding_each_other_and_a_fortran_matrix(team):
    """Each layer's folded output is the next one's vector; the last product, a Fortran-ordered
    (300, 512) @ (512,), runs the rows form too (its 512 columns are the chunked axis)."""
    exe = _mlp()
    rng = np.random.default_rng(17)
    x = rng.standard_normal(784).astype(np.float32)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) * 0.05 for s in ((784, 512), (512, 512)))
    b1, b2 = (rng.standard_normal(512).astype(np.float32) for _ in range(2))
    a = np.asfortranarray(rng.standard_normal((300, 512)).astype(np.float32))
    set_num_threads(1)
    want = exe(x, w1, b1, w2, b2, a)[0]
    h = np.maximum(np.maximum(x @ w1 + b1, 0) @ w2 + b2, 0)
    np.testing.assert_allclose(want, a @ h, rtol=1e-4, atol=1e-3)
    for nthreads in (2, 3, 4):
        set_num_threads(nthreads)
        for _ in range(3):
            np.testing.assert_array_equal(exe(x, w1, b1, w2, b2, a)[0], want)


def test_python_threads_with_their_own_inputs_and_bad_calls(team):
    """Four Python threads call one folding executable, each with its own vectors, and now and then
    with a vector of the wrong length (a clear error before any kernel runs): every result must be
    its own vector's one-thread bits (no fold state shared between calls)."""
    exe = _layer(0, 784, 512, np.float32)
    rng = np.random.default_rng(19)
    _, w, b = _args(0, 784, 512, np.float32, 19)
    xs = [rng.standard_normal(784).astype(np.float32) for _ in range(8)]
    set_num_threads(1)
    wants = [exe(x, w, b)[0] for x in xs]
    bad: list = []

    def calls(i):
        for c in range(200):
            j = (i + c) % len(xs)
            if not np.array_equal(exe(xs[j], w, b)[0], wants[j]):
                bad.append((i, c))
            if c % 40 == 3:
                with pytest.raises(ValueError):
                    exe(xs[j][:783], w, b)

    for nthreads in (2, 3):
        set_num_threads(nthreads)
        threads = [threading.Thread(target=calls, args=(i,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "the folding calls did not finish"
    assert bad == []
