"""Elementwise passes' tiles (codegen's `_elementwise_step`, STEP_BYTES of the widest operand, and the
first tile's lead that lines the tiles up with a streamed output's cache lines): every element once,
at every length around the tile and unit boundaries, at every offset of the output in its cache line,
streamed or not, on 1 and 2 threads. The generated kernel gives the interpreter's bits, and NumPy's
where NumPy's are the same on every machine."""

from __future__ import annotations

import numpy as np
import pytest
from numtrace_cpu import codegen, compile_graph, compiler
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from test_hunt_stream import _both, _cache, _setting  # noqa: F401  (the kernel cache fixture, autouse)

# Around one tile of float64 (64) and float32 (128), two, a unit (16384), and a unit and a bit; the
# last two take the short tiles (codegen.SHORT_TILES_FROM bytes of float64, of float32).
LENGTHS = (1, 11, 63, 64, 65, 127, 128, 129, 255, 257, 1000, 16383, 16385, 40000, 131072 + 77, 262144 + 5)


def _at_offset(dtype, n, offset):
    """n items of dtype starting `offset` bytes past a cache line, in a buffer of sentinel bytes."""
    dtype = np.dtype(dtype)
    raw = np.full(n * dtype.itemsize + 256, 0xA5, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    return raw, raw[start:start + n * dtype.itemsize].view(dtype)


def _w1_graph(n, dtype, second=None):
    """(a*b + c) * exp(-d) / (1 + |a|), W1's pass (exp through the op table: a segment of its own), and
    a second output of another dtype where given (a + b cast): two streamed outputs, lined up only
    with the first."""
    g = Graph()
    t = TensorType(np.dtype(dtype), (n,))
    a, b, c, d = (g.add_input(name, t) for name in "abcd")

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    one = node("prim.Constant", value=1.0)
    w1 = node("np.divide", node("np.multiply", node("np.add", node("np.multiply", a, b), c),
                                node("np.exp", node("np.negative", d))),
              node("np.add", one, node("np.absolute", a)))
    outs = [w1]
    if second is not None:
        outs.append(node("np.astype", node("np.add", a, b), dtype=np.dtype(second)))
    g.set_outputs(outs)
    return g


def _exact_want(a, b, second):
    return [(a + b).astype(second)] if second is not None else []


@pytest.mark.parametrize("dtype,second", [(np.float32, None), (np.float64, None), (np.float32, np.float64),
                                          (np.float64, np.int8)])
def test_every_element_once_at_every_offset_and_length(dtype, second):
    """Every length of LENGTHS, the outputs 0 to 63 bytes past a cache line (a step of the first
    output's item size, and 1 and 3 bytes: not a multiple of it, so no lead), streamed on 1 and 2
    threads and not streamed: the interpreter's bits; the bytes around the outputs untouched."""
    rng = np.random.default_rng(7)
    isz = np.dtype(dtype).itemsize
    for n in LENGTHS:
        a, b, c, d = (rng.standard_normal(n).astype(dtype) for _ in range(4))
        a[::7] = -0.0
        d[::5] = np.float32(-90.0)   # exp(90): inf in float32, so inf / x and inf * 0 reach the outputs
        gen, interp = _both(_w1_graph(n, dtype, second), [TensorType(np.dtype(dtype), (n,))] * 4)
        with np.errstate(all="ignore"):
            want = interp(a, b, c, d)
        assert [w.tobytes() for w in want[1:]] == [w.tobytes() for w in _exact_want(a, b, second)]
        offsets = sorted(set(range(0, 64, isz)) | {1, 3})
        for threads, stream in ((1, 1), (2, 1), (2, 1 << 62)):
            with _setting(threads, stream), np.errstate(all="ignore"):
                for offset in offsets:
                    bufs = [_at_offset(w.dtype, n, offset) for w in want]
                    gen(a, b, c, d, out=tuple(o for _, o in bufs))
                    for (raw, o), w in zip(bufs, want):
                        assert o.tobytes() == w.tobytes(), (n, threads, stream, offset)
                        start = o.ctypes.data - raw.ctypes.data
                        untouched = np.concatenate([raw[:start], raw[start + o.nbytes:]])
                        assert (untouched == 0xA5).all(), (n, threads, stream, offset)
        stats = gen.stats()
        assert stats["generated_runs"] > 0 and stats["interpreted_runs"] == 0
        if n >= 64:
            assert stats["streamed_runs"] > 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_fresh_outputs_and_strided_inputs(dtype):
    """Fresh outputs (no out=) and inputs every other item (gathered tiles) at lengths across the
    tiles: NumPy's bits for arithmetic, on 1 and 2 threads, streamed and not."""
    rng = np.random.default_rng(3)
    for n in LENGTHS:
        g = Graph()
        t = TensorType(np.dtype(dtype), (n,))
        x, y = g.add_input("x", t), g.add_input("y", t)
        s = g.create_node("np.add", [x, y]).output
        g.set_outputs([g.create_node("np.multiply", [s, x]).output, s])
        gen = _both(g, [t, t])[0]
        raw = rng.integers(0, 50, 2 * n).astype(dtype)
        x0, y0 = raw[::2], raw[1::2][::-1]
        with np.errstate(all="ignore"):
            want = [(x0 + y0) * x0, x0 + y0]
        for threads, stream in ((1, 1), (2, 1), (2, 1 << 62)):
            with _setting(threads, stream), np.errstate(all="ignore"):
                for got, w in zip(gen(x0, y0), want):
                    assert got.dtype == w.dtype and got.tobytes() == w.tobytes(), (n, threads, stream)
        assert gen.stats()["generated_runs"] > 0


@pytest.mark.parametrize("dtype,step", [(np.float32, 128), (np.float64, 64)])
def test_a_pass_with_a_table_op_tiles_by_its_widest_operand(dtype, step):
    """The generated source tiles a large elementwise pass with a table op (exp) STEP_BYTES of its
    widest operand at a time (a small one TILE); a pass of inline arithmetic alone and a reduction
    keep the loop over the interpreter's blocks as it was."""
    n = 5000
    t = TensorType(np.dtype(dtype), (n,))

    def source(*ops):
        g = Graph()
        v = g.add_input("x", t)
        for op in ops:
            v = g.create_node(op, [v, v] if op == "np.add" else [v]).output
        g.set_outputs([v])
        return _source(g, [t])

    short = source("np.add", "np.exp")
    assert f"? {step} : TILE;" in short and "want = lead ? lead : step;" in short
    assert f">= {codegen.SHORT_TILES_FROM // np.dtype(dtype).itemsize} ?" in short
    for blocks in (source("np.add", "np.negative"), source("np.add", "np.exp", "np.sum")):
        assert "t += TILE) {" in blocks and "lead" not in blocks


def _source(graph, types):
    old = compiler.set_mode("sync")
    try:
        exe = compile_graph(graph, types)
    finally:
        compiler.set_mode(old)
    text = exe.explain()
    assert "generated C kernel" in text, text
    return text


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inner", [1, 3, 16, 33, 100, 128])
def test_tiles_of_short_rows_every_row_once(dtype, inner):
    """An elementwise pass over short rows (`_rows_units`, the interpreter's tiles of whole rows, which
    the tile change leaves alone): exp(x - b) * y with b one row repeated (gathered once per unit), x a
    column slice (gathered), y contiguous, at row counts around the tiles and units, outputs 0 to 60
    bytes past a cache line, streamed or not, on 1 and 2 threads: the interpreter's bits, and no byte
    around the output touched."""
    rng = np.random.default_rng(inner)
    for rows in (1, 7, 8, 9, 129, 1025, 20001):
        shape = (rows, inner)
        wide = rng.standard_normal((rows, inner + 2)).astype(dtype)
        x, b = wide[:, 1:-1], rng.standard_normal(inner).astype(dtype)
        y = rng.standard_normal(shape).astype(dtype)
        g = Graph()
        tx, tb = TensorType(np.dtype(dtype), shape), TensorType(np.dtype(dtype), (inner,))
        gx, gy, gb = g.add_input("x", tx), g.add_input("y", tx), g.add_input("b", tb)
        e = g.create_node("np.exp", [g.create_node("np.subtract", [gx, gb]).output]).output
        g.set_outputs([g.create_node("np.multiply", [e, gy]).output])
        gen, interp = _both(g, [tx, tx, tb])
        with np.errstate(all="ignore"):
            want = interp(x, y, b)[0]
        for threads, stream in ((1, 1), (2, 1), (2, 1 << 62)):
            with _setting(threads, stream), np.errstate(all="ignore"):
                for offset in (0, 4, 8, 20, 60):
                    raw, o = _at_offset(dtype, want.size, offset)
                    o = o.reshape(shape)
                    gen(x, y, b, out=(o,))
                    assert o.tobytes() == want.tobytes(), (rows, threads, stream, offset)
                    start = o.ctypes.data - raw.ctypes.data
                    assert (raw[:start] == 0xA5).all() and (raw[start + o.nbytes:] == 0xA5).all()
        stats = gen.stats()
        assert stats["generated_runs"] > 0 and stats["interpreted_runs"] == 0
        if rows > 1 and inner > 1:   # (rows, 1) with a (1,) row: one run, the plain elementwise path
            assert stats["generated_rows_runs"] > 0, (rows, inner)


def test_short_tile_runs_are_counted():
    """stats()["generated_short_tile_runs"] counts the runs of a large pass with a table op (the
    kernel's own test, as the fuzzers' reach of the path is checked by it), and not a small one's."""
    for n, runs in ((262144 + 5, 2), (1000, 0)):
        t = TensorType(np.dtype(np.float32), (n,))
        g = Graph()
        x = g.add_input("x", t)
        g.set_outputs([g.create_node("np.exp", [g.create_node("np.add", [x, x]).output]).output])
        gen = _both(g, [t])[0]
        v = np.ones(n, np.float32)
        gen(v)
        gen(v)
        assert gen.stats()["generated_short_tile_runs"] == runs, n


@pytest.mark.parametrize("value", ["0", "-3", "1.5", "abc"])
def test_bad_short_tiles_variable_is_refused_by_name(value):
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMTRACE_SHORT_TILES_FROM=value)
    done = subprocess.run([sys.executable, "-c", "import numtrace_cpu.codegen"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode != 0 and f"NUMTRACE_SHORT_TILES_FROM={value!r}" in done.stderr
