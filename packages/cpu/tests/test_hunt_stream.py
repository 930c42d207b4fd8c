"""Hunted cases of generated kernels' streaming stores and blocks of short rows (docs/cpu.md): bool
values computed and stored at any byte offset, outputs partly over their inputs, a misconfigured
threshold. The generated kernel must give the interpreter's and NumPy's bits, or refuse clearly."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph, compiler, runtime
from numtrace_ir import Graph
from numtrace_ir.types import TensorType

BOOL = np.dtype(bool)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))


def _both(graph, types):
    """The graph's executable with generated kernels, and one on the interpreter."""
    pair = []
    for mode in ("sync", "off"):
        old = compiler.set_mode(mode)
        try:
            pair.append(compile_graph(graph, types))
        finally:
            compiler.set_mode(old)
    return pair


@contextlib.contextmanager
def _setting(threads, stream_min_bytes):
    old_threads, old_bytes = numtrace_cpu.get_num_threads(), runtime.set_stream_min_bytes(stream_min_bytes)
    numtrace_cpu.set_num_threads(threads)
    try:
        yield
    finally:
        numtrace_cpu.set_num_threads(old_threads)
        runtime.set_stream_min_bytes(old_bytes)


def _at_offset(dtype, shape, offset):
    """An array of `shape` starting `offset` bytes past a cache line."""
    dtype = np.dtype(dtype)
    raw = np.zeros(int(np.prod(shape)) * dtype.itemsize + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw[start:start + int(np.prod(shape)) * dtype.itemsize].view(dtype).reshape(shape)


def _bool_rows_graph(shape):
    """p = x > b (b one row), q = y > 0: p + q (or), p * q cast to float32, ~p cast to int64."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(np.int64), shape))
    b = g.add_input("b", TensorType(np.dtype(np.int64), shape[-1:]))
    y = g.add_input("y", TensorType(np.dtype(np.float64), shape))

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    p = node("np.greater", x, b)
    q = node("np.greater", y, node("prim.Constant", value=0.0))
    g.set_outputs([node("np.add", p, q),
                   node("np.astype", node("np.multiply", p, q), dtype=np.dtype(np.float32)),
                   node("np.astype", node("np.invert", p), dtype=np.dtype(np.int64))])
    return g


def _bool_rows_want(x, b, y):
    p, q = x > b, y > 0
    return [p + q, (p * q).astype(np.float32), (~p).astype(np.int64)]


@pytest.mark.parametrize("shape", [(3001, 7), (20001, 3), (517, 40), (65, 1), (150001, 7)])
def test_bool_rows_streamed_at_every_byte_offset(shape):
    """Bool values (ints in the generated loops) stay 0 or 1 through +, *, ~ and casts, in blocks of
    short rows, streamed into out= arrays that start 0 to 63 bytes past a cache line, on 1 and 2
    threads (the largest shape has the work to split between them): the interpreter's bits and
    NumPy's."""
    rng = np.random.default_rng(shape[0])
    x, b = rng.integers(-3, 3, shape), rng.integers(-3, 3, shape[-1:])
    y = rng.standard_normal(shape)
    gen, interp = _both(_bool_rows_graph(shape), [TensorType(v.dtype, v.shape) for v in (x, b, y)])
    want = _bool_rows_want(x, b, y)
    for threads, stream in ((1, 1), (2, 1), (2, 1 << 62)):
        with _setting(threads, stream):
            for got, w in zip(interp(x, b, y), want):
                assert got.tobytes() == w.tobytes()
            for offset in (0, 1, 7, 33, 63):
                outs = tuple(_at_offset(w.dtype, w.shape, offset) for w in want)
                gen(x, b, y, out=outs)
                for got, w in zip(outs, want):
                    assert got.dtype == w.dtype and got.tobytes() == w.tobytes(), (threads, stream, offset)
    stats = gen.stats()
    assert stats["generated_runs"] > 0 and stats["streamed_runs"] > 0
    if shape[-1] > 1:
        assert stats["generated_rows_runs"] > 0


@pytest.mark.parametrize("dtype", [np.float64, np.int32, BOOL])
@pytest.mark.parametrize("shape", [(5000,), (3000, 10)])
def test_out_partly_over_an_input_equals_numpy(dtype, shape):
    """out= a view of the same buffer as x, some items before or after it: NumPy's result (which
    reads x as it was), with streaming stores allowed, on 1 and 2 threads."""
    g = Graph()
    t = TensorType(np.dtype(dtype), shape)
    x, y = g.add_input("x", t), g.add_input("y", t)
    op = "np.bitwise_xor" if dtype is BOOL else "np.add"
    g.set_outputs([g.create_node(op, [x, y]).output])
    ufunc = np.bitwise_xor if dtype is BOOL else np.add
    rng = np.random.default_rng(4)
    x0, y0 = (rng.integers(0, 100 if dtype is not BOOL else 2, shape).astype(dtype) for _ in range(2))
    gen, interp = _both(g, [t, t])
    n = x0.size
    for threads in (1, 2):
        with _setting(threads, 1):
            for shift in (1, -1, 3, 8, -64, 64):
                results = []
                for run in (gen, interp, None):
                    buf = np.zeros(n + 200, dtype)
                    xs = buf[100:100 + n].reshape(shape)
                    xs[...] = x0
                    out = buf[100 + shift:100 + shift + n].reshape(shape)
                    if run is None:
                        ufunc(xs, y0, out=out)
                    else:
                        run(xs, y0, out=(out,))
                    results.append(buf.tobytes())
                assert results[0] == results[1] == results[2], (threads, shift)


def _import_with(value):
    """A fresh interpreter importing the runtime under NUMTRACE_STREAM_MIN_BYTES=value; it prints the
    threshold it took."""
    env = dict(os.environ, NUMTRACE_STREAM_MIN_BYTES=value)
    code = "import numtrace_cpu.runtime as r; print(r.set_stream_min_bytes(1))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("value", ["-5", "0", "abc", "1.5"])
def test_bad_stream_threshold_variable_is_refused_by_name(value):
    """NUMTRACE_STREAM_MIN_BYTES below 1 was taken as a threshold (every pass streamed) though
    set_stream_min_bytes refuses it, and a non-number failed at import without naming the variable."""
    done = _import_with(value)
    assert done.returncode != 0
    assert f"NUMTRACE_STREAM_MIN_BYTES={value!r}" in done.stderr


@pytest.mark.parametrize("value", ["4096", " 64 ", ""])
def test_stream_threshold_variable_sets_the_threshold(value):
    done = _import_with(value)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == (int(value) if value.strip() else runtime._last_level_cache_bytes())
