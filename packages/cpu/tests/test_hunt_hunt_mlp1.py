"""GEMV weights read at every offset past a cache line (gemv.pxi's peeled head columns, nt_gemv.h's
masked tail of a narrow output) and GEMV weight constants copied to a cache line
(executable._cache_aligned): the bits of the same weights read aligned, NumPy's values within the
product bound, NumPy's floating-point errors, and one aligned copy of a constant however many input
signatures its graph is compiled at, freed with the constant."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from numtrace_cpu import compile_graph, set_num_threads
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph
from numtrace_ir.types import TensorType


def _product(x_shape, k, n, dtype):
    """x @ w with w an argument of shape (k, n)."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(dtype), x_shape))
    w = g.add_input("w", TensorType(np.dtype(dtype), (k, n)))
    g.set_outputs([g.create_node("np.matmul", [x, w]).output])
    return compile_graph(g, [x.type, w.type])


def _at(w, offset, past=0):
    """w's values in rows `offset` bytes past a 64-byte boundary, a whole number of cache lines apart,
    in a buffer read through np.frombuffer; the `past` columns after each row hold inf."""
    k, n = w.shape
    per_line = 64 // w.itemsize
    ldw = (n + past + per_line - 1) // per_line * per_line
    buf = np.zeros(k * ldw * w.itemsize + 128, np.uint8)
    start = -buf.ctypes.data % 64 + offset
    whole = np.frombuffer(buf, w.dtype, k * ldw, start).reshape(k, ldw)
    whole[:, n:] = np.inf
    out = whole[:, :n]
    out[...] = w
    assert out.ctypes.data % 64 == offset
    return out


def _bound(x, w, dtype):
    """The rounding of a product of any summation order (the GEMV tests' bound)."""
    return (2e-6 if dtype == np.float32 else 1e-14) * 4 * (np.abs(x) @ np.abs(w))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_rows", [0, 1, 2])
def test_every_offset_and_width_keeps_the_aligned_bits(team, dtype, x_rows):
    """Widths 1 to 17 and past a vector, 65 and 784 rows (more than one chunk: the peel), every offset
    a float can start at, 1 to 3 threads: the bits of the same weights aligned, NumPy within the
    bound (signed zeros in the weights)."""
    rng = np.random.default_rng(x_rows)
    itemsize = np.dtype(dtype).itemsize
    peeled = 0
    for k in (65, 784):
        x_shape = (x_rows, k) if x_rows else (k,)
        for n in (*range(1, 18), 31, 33, 63, 65):
            exe = _product(x_shape, k, n, dtype)
            x = rng.standard_normal(x_shape).astype(dtype)
            w = rng.standard_normal((k, n)).astype(dtype)
            w[::3, ::2] = -0.0
            set_num_threads(1)
            want = exe(x, _at(w, 0))[0]
            assert np.all(np.abs(want - x @ w) <= _bound(x, w, dtype))
            for offset in range(itemsize, 64, itemsize):
                wv = _at(w, offset)
                for nthreads in (1, 2, 3):
                    set_num_threads(nthreads)
                    got = exe(x, wv)[0]
                    assert got.tobytes() == want.tobytes(), (k, n, offset, nthreads)
                    peeled += exe.stats()["gemv_peeled"]
    assert (peeled > 0) == blocks.GEMV_PEELS


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [3, 10, 20])
def test_errors_of_the_lanes_it_computes_only(dtype, n):
    """inf in the columns after the weights (a column slice of a wider array) is never read:
    np.errstate(all="raise") raises nothing where NumPy raises nothing, with x holding zeros; inf * 0
    in the last (tail) or first (peeled) column raises NumPy's invalid; a real overflow, overflow."""
    rng = np.random.default_rng(n)
    k = 784
    exe = _product((k,), k, n, dtype)
    x = rng.standard_normal(k).astype(dtype)
    x[::3] = 0
    w = rng.standard_normal((k, n)).astype(dtype)
    for offset in (0, 16, 64 - np.dtype(dtype).itemsize):
        wv = _at(w, offset, past=16)
        with np.errstate(all="raise"):
            got = exe(x, wv)[0]
        assert np.all(np.abs(got - x @ w) <= _bound(x, w, dtype))
        for j in (0, n - 1):
            bad = wv.copy()
            bad[3, j] = np.inf
            bad = _at(bad, offset, past=16)
            with np.errstate(all="raise"), pytest.raises(FloatingPointError, match="invalid value"):
                exe(x, bad)
            big = _at(np.full((k, n), np.finfo(dtype).max, dtype), offset, past=16)
            with np.errstate(all="raise"), pytest.raises(FloatingPointError, match="overflow"):
                exe(np.ones(k, dtype), big)


def _constant_product(w, extra):
    """x @ w with w a constant, and an input of `extra` elements summed beside it (one graph, one
    signature per `extra`)."""
    g = Graph()
    x = g.add_input("x", TensorType(w.dtype, (w.shape[0],)))
    y = g.add_input("y", TensorType(w.dtype, (extra,)))
    c = g.create_node("prim.Constant", [], attrs={"value": w}).output
    prod = g.create_node("np.matmul", [x, c]).output
    g.set_outputs([prod, g.create_node("np.sum", [y]).output])
    return g, (x.type, y.type)


def _held_weights(exe, shape):
    return [v for v in exe._template if isinstance(v, np.ndarray) and v.shape == shape]


def test_a_weight_constant_is_copied_once_for_every_signature_and_freed_with_it():
    """A graph compiled at several input signatures (a trace called with new shapes) holds one aligned
    copy of its GEMV weight constant, not one per signature, and the copy goes with the constant."""
    raw = np.zeros(512 * 64 + 16, np.float32)
    start = next(s for s in range(16) if (raw.ctypes.data + 4 * s) % 64 == 16)
    w = raw[start:start + 512 * 64].reshape(512, 64)
    w[...] = np.random.default_rng(0).standard_normal(w.shape)
    g, (xt, _) = _constant_product(w, 3)
    exes = [compile_graph(g, [xt, TensorType(np.dtype(np.float32), (m,))]) for m in (3, 5, 7)]
    held = [_held_weights(e, w.shape) for e in exes]
    assert all(len(h) == 1 and h[0].ctypes.data % 64 == 0 for h in held)
    assert held[1][0] is held[0][0] and held[2][0] is held[0][0]
    x = np.linspace(-1, 1, 512, dtype=np.float32)
    for m in (3, 5, 7):
        out = exes[(m - 3) // 2](x, np.ones(m, np.float32))
        assert np.all(np.abs(out[0] - x @ w) <= _bound(x, w, np.float32))
        assert out[1] == m
    copy = weakref.ref(held[0][0])
    del exes, held, g, w, raw
    gc.collect()
    assert copy() is None
