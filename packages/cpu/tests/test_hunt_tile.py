"""Hunted cases of elementwise passes' byte-sized tiles (codegen's `_elementwise_step`, the first tile's
`lead` that lines later tiles up with a streamed output; the rows path's tiles, which the hunted branch
shortened to RT rows and then left as the interpreter's R): mixed dtypes (the step follows the widest),
several outputs at any byte offset, a where over computed operands and table ops in the middle of a
pass, FP flags from one element at every tile boundary, outputs over their inputs, per-row and repeated-
row operands, 1 to 3 threads, the avx2 and baseline builds. The generated kernel gives the interpreter's
bits (and NumPy's where NumPy's are the same on every machine), raises as NumPy does and touches no byte
around its outputs."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from numtrace_cpu import codegen, compile_graph, compiler, isa, runtime
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from test_tile_step import _cache, _setting  # noqa: F401  (the kernel cache fixture, autouse)


@pytest.fixture(autouse=True)
def _short_tiles_at_every_size(monkeypatch):
    """Every elementwise pass takes the short tiles (codegen.SHORT_TILES_FROM bytes and more), so the
    lengths and offsets here reach them; the child-process builds take the default threshold."""
    monkeypatch.setattr(codegen, "SHORT_TILES_FROM", 1)

# Around a tile of int64/float64 (64), float32 (128), bool (512), a unit (16384), two units and a bit.
LENGTHS = (1, 63, 64, 65, 129, 511, 513, 16383, 16384, 16385, 16384 + 65, 3 * 16384 + 7)
SENTINEL = 0x5A
SETTINGS = ((1, 1), (2, 1), (3, 1), (2, 1 << 62))   # (threads, stream_min_bytes): streamed or not


class _G:
    """A graph built op by op: g(op, *args, **attrs) is the op's output."""

    def __init__(self):
        self.graph, self.types = Graph(), []

    def inp(self, name, dtype, shape):
        t = TensorType(np.dtype(dtype), tuple(shape))
        self.types.append(t)
        return self.graph.add_input(name, t)

    def __call__(self, op, *args, **attrs):
        return self.graph.create_node(op, list(args), attrs=attrs).output

    def const(self, value):
        return self("prim.Constant", value=value)

    def both(self, *outputs):
        """The executable with generated kernels and the one on the interpreter."""
        self.graph.set_outputs(list(outputs))
        pair = []
        for mode in ("sync", "off"):
            old = compiler.set_mode(mode)
            try:
                pair.append(compile_graph(self.graph, self.types))
            finally:
                compiler.set_mode(old)
        return pair


def _placed(dtype, shape, offset):
    """(raw, view): an array of `shape` `offset` bytes past a cache line inside sentinel bytes."""
    dtype, size = np.dtype(dtype), int(np.prod(shape))
    raw = np.full(size * dtype.itemsize + 256, SENTINEL, np.uint8)
    start = (-raw.ctypes.data) % 64 + 64 + offset
    return raw, raw[start:start + size * dtype.itemsize].view(dtype).reshape(shape)


def _untouched(raw, view):
    start = view.ctypes.data - raw.ctypes.data
    return (raw[:start] == SENTINEL).all() and (raw[start + view.nbytes:] == SENTINEL).all()


def _mixed(n):
    """x float32, k int64, m bool, y float64 -> where(m, tanh(exp(x) * x), log|x|) (float32, a where
    over table ops and values spilled between them), (k + 3) cast to int8, x > 0, sin(y) + k (float64),
    k * 2 - k (int64: NumPy's bits). The step is 64 (int64/float64 the widest)."""
    g = _G()
    x, k, m, y = g.inp("x", np.float32, (n,)), g.inp("k", np.int64, (n,)), g.inp("m", bool, (n,)), \
        g.inp("y", np.float64, (n,))
    w = g("np.where", m, g("np.tanh", g("np.multiply", g("np.exp", x), x)), g("np.log", g("np.absolute", x)))
    c8 = g("np.astype", g("np.add", k, g.const(3)), dtype=np.dtype(np.int8))
    pos = g("np.greater", x, g.const(0.0))
    s = g("np.add", g("np.sin", y), k)
    ik = g("np.subtract", g("np.multiply", k, g.const(2)), k)
    return g.both(w, c8, pos, s, ik)


def _mixed_inputs(n, rng):
    x = (rng.standard_normal(n) * 3).astype(np.float32)
    x[::13] = 0.0
    x[::17] = -0.0
    x[5::29] = np.inf
    k = rng.integers(-300, 300, n)
    m = rng.random(n) < 0.5
    y = rng.standard_normal(n) * 100
    return x, k, m, y


@pytest.mark.parametrize("n", LENGTHS)
def test_mixed_dtypes_several_outputs_every_offset(n):
    """Five outputs of five dtypes, each at its own byte offset in a cache line (the first one lined
    up, the others not; offsets that are not a multiple of the item size, so never written in
    place), then all written backwards (negative strides), on 1, 2 and 3 threads, streamed and not:
    the interpreter's bits, NumPy's for the exact outputs, no sentinel byte changed."""
    gen, interp = _mixed(n)
    args = _mixed_inputs(n, np.random.default_rng(n))
    x, k, m, y = args
    with np.errstate(all="ignore"):
        want = interp(*args)
        assert want[1].tobytes() == (k + 3).astype(np.int8).tobytes()
        assert want[2].tobytes() == (x > 0).tobytes() and want[4].tobytes() == (k * 2 - k).tobytes()
    for threads, stream in SETTINGS:
        for base in (0, 4, 12, 60, 2):
            with _setting(threads, stream), np.errstate(all="ignore"):
                bufs = [_placed(w.dtype, w.shape, (base + 7 * j) % 64) for j, w in enumerate(want)]
                gen(*args, out=tuple(v for _, v in bufs))
            for (raw, v), w in zip(bufs, want):
                assert v.tobytes() == w.tobytes(), (n, threads, stream, base, w.dtype)
                assert _untouched(raw, v), (n, threads, stream, base, w.dtype)
            with _setting(threads, stream), np.errstate(all="ignore"):   # outputs backwards: scattered
                bufs = [_placed(w.dtype, w.shape, 8 * j) for j, w in enumerate(want)]
                gen(*args, out=tuple(v[::-1] for _, v in bufs))
            for (raw, v), w in zip(bufs, want):
                assert v[::-1].tobytes() == w.tobytes() and _untouched(raw, v), (n, threads, stream, w.dtype)
            with _setting(threads, stream), np.errstate(all="ignore"):   # fresh outputs
                for got, w in zip(gen(*args), want):
                    assert got.dtype == w.dtype and got.tobytes() == w.tobytes(), (n, threads, stream)
    stats = gen.stats()
    assert stats["generated_runs"] > 0 and stats["interpreted_runs"] == 0
    if n >= 16384:
        assert stats["streamed_runs"] > 0


def _raises(fn, *args, **kwargs):
    """Whether fn(*args, **kwargs) raises FloatingPointError."""
    try:
        fn(*args, **kwargs)
    except FloatingPointError:
        return True
    return False


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_bad_element_at_every_tile_boundary_raises(dtype):
    """log(x) * 2 + x (a table op in the pass), where(x > 0, sqrt(x), x) (a kept operand) and
    (x * 1e10) cast to int32 (out of range: invalid), each over x good but for one element at
    positions around the first tile (its lead), later tiles and the units: raises under
    np.errstate(all="raise") exactly where NumPy raises, and never for elements past the pass."""
    n = 2 * 16384 + 200
    g = _G()
    x = g.inp("x", dtype, (n,))
    a = g("np.add", g("np.multiply", g("np.log", x), g.const(2.0)), x)
    gen, interp = g.both(a)
    g2 = _G()
    x2 = g2.inp("x", dtype, (n,))
    b = g2("np.where", g2("np.greater", x2, g2.const(0.0)), g2("np.sqrt", x2), x2)
    c = g2("np.astype", g2("np.multiply", x2, g2.const(1e-10)), dtype=np.dtype(np.int32))
    gen2, interp2 = g2.both(b, c)
    base = np.linspace(0.5, 2.0, n).astype(dtype)
    positions = [0, 1, 15, 16, 63, 64, 127, 128, 129, 16383, 16384, 16385, 16384 + 128, n - 1]
    for threads, stream in SETTINGS:
        with _setting(threads, stream):
            for offset in (0, 8, 36):
                raw, out = _placed(dtype, (n,), offset)
                raw2, out2 = _placed(dtype, (n,), offset)
                raw3, out3 = _placed(np.int32, (n,), offset + 4)
                with np.errstate(all="raise"):
                    gen(base, out=(out,))
                    gen2(base, out=(out2, out3))
                for p in positions:
                    for bad in (-1.0, 0.0):   # invalid, divide by zero
                        x = base.copy()
                        x[p] = bad
                        with np.errstate(all="raise"):
                            assert _raises(gen, x, out=(out,)), (p, bad, threads, offset)
                            assert _raises(interp, x)
                        with np.errstate(all="ignore"):
                            gen(x, out=(out,))
                            assert out.tobytes() == interp(x)[0].tobytes(), (p, threads, offset)
                    x = base.copy()
                    x[p] = -1.0   # masked out, but np.where computes sqrt(-1): invalid
                    with np.errstate(all="raise"):
                        assert _raises(np.sqrt, x)
                        assert _raises(gen2, x, out=(out2, out3)), (p, threads, offset)
                    x = base.copy()
                    x[p] = 1e30   # 1e20 as int32: invalid (NumPy's cast warning)
                    with np.errstate(all="raise"):
                        assert _raises(np.ndarray.astype, x * dtype(1e-10), np.int32)
                        assert _raises(gen2, x, out=(out2, out3)), (p, threads, offset)
                assert _untouched(raw, out) and _untouched(raw2, out2) and _untouched(raw3, out3)
    assert gen.stats()["generated_runs"] > 0 and gen.stats()["interpreted_runs"] == 0
    assert gen2.stats()["generated_runs"] > 0 and gen2.stats()["interpreted_runs"] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_outputs_over_their_inputs(dtype):
    """x = x * y + (x - 1) with out= x itself, with out= x shifted one item either way (one buffer:
    an output partly over an input), with out= x reversed, and y a broadcast scalar row or a stride-3
    view: NumPy's bits (as if the inputs were read before any output was written)."""
    rng = np.random.default_rng(5)
    for n in (63, 129, 16385, 16384 + 200):
        g = _G()
        x, y = g.inp("x", dtype, (n,)), g.inp("y", dtype, (n,))
        gen = g.both(g("np.add", g("np.multiply", x, y), g("np.subtract", x, g.const(1))))[0]
        for threads, stream in SETTINGS:
            with _setting(threads, stream), np.errstate(all="ignore"):
                for shift in (0, 1, -1, "rev"):
                    buf = rng.integers(-50, 50, n + 2).astype(dtype)
                    ys = rng.integers(-50, 50, 3 * n).astype(dtype)
                    for yv in (ys[::3], np.broadcast_to(ys[:1], (n,)), ys[:n]):
                        b = buf.copy()
                        xv = b[1:n + 1]
                        want = xv * yv + (xv - 1)
                        out = {0: xv, 1: b[2:], -1: b[:n], "rev": xv[::-1]}[shift]
                        gen(xv, yv, out=(out,))
                        assert out.tobytes() == want.tobytes(), (n, threads, stream, shift)
        assert gen.stats()["generated_runs"] > 0


def _onehot_rows(rows, inner, dtype):
    """(idx[:, None] == arange(inner)) cast to dtype, times w (rows, inner) plus b (one row repeated),
    and exp(w - b) (a table op over the rows' tile): a per-row operand, a repeated row, an int64
    operand (the step: 64 elements)."""
    g = _G()
    idx, ar = g.inp("idx", np.int64, (rows, 1)), g.inp("ar", np.int64, (inner,))
    w, b = g.inp("w", dtype, (rows, inner)), g.inp("b", dtype, (inner,))
    hot = g("np.astype", g("np.equal", idx, ar), dtype=np.dtype(dtype))
    return g.both(g("np.add", g("np.multiply", hot, w), b), g("np.exp", g("np.subtract", w, b)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("inner", [2, 3, 7, 31, 33, 63, 65, 100, 128])
def test_rows_per_row_and_repeated_operands(dtype, inner):
    """The rows path at row counts around RT (64 // inner rows a tile) and a unit's rows, the input
    w a column slice (gathered) or contiguous, the outputs at odd offsets or column slices of a wider
    array (scattered row by row), on 1 to 3 threads, streamed and not: the interpreter's bits,
    NumPy's for the exact output, no byte around the outputs touched."""
    rng = np.random.default_rng(inner)
    rt = max(1, 64 // inner)
    for rows in sorted({1, rt - 1, rt, rt + 1, 3 * rt + 1, 4099}):
        if rows < 1:
            continue
        gen, interp = _onehot_rows(rows, inner, dtype)
        idx = rng.integers(-1, inner + 1, (rows, 1))
        ar = np.arange(inner)
        wide = rng.standard_normal((rows, inner + 3)).astype(dtype)
        b = rng.standard_normal(inner).astype(dtype)
        for w in (wide[:, 2:-1], np.ascontiguousarray(wide[:, 2:-1])):
            args = (idx, ar, w, b)
            want = interp(*args)
            exact = (idx == ar).astype(dtype) * w + b
            assert want[0].tobytes() == exact.tobytes()
            for threads, stream in SETTINGS:
                with _setting(threads, stream), np.errstate(all="ignore"):
                    for offset in (0, 8, 28):
                        bufs = [_placed(dtype, (rows, inner), off) for off in (offset, 60 - offset)]
                        gen(*args, out=tuple(v for _, v in bufs))
                        for (raw, v), ww in zip(bufs, want):
                            assert v.tobytes() == ww.tobytes(), (rows, threads, stream, offset)
                            assert _untouched(raw, v)
                    o1 = np.full((rows, inner + 5), 7, dtype)
                    o2 = np.full((rows, inner + 1), 7, dtype)
                    gen(*args, out=(o1[:, 3:-2], o2[:, 1:]))
                    assert o1[:, 3:-2].tobytes() == want[0].tobytes()
                    assert o2[:, 1:].tobytes() == want[1].tobytes()
                    assert (o1[:, :3] == 7).all() and (o1[:, -2:] == 7).all() and (o2[:, 0] == 7).all()
        stats = gen.stats()
        assert stats["generated_runs"] > 0 and stats["interpreted_runs"] == 0
        if rows >= 4099 and inner <= 33:
            assert stats["generated_rows_runs"] > 0, (rows, inner)


def test_bool_rows_and_int8_casts():
    """A pass over short rows of bool and int32 (the step: 128 int32, 512 bool alone): (x > b) &
    (y < 0) and (x + b) cast to int8, rows of 5 and 200: NumPy's bits."""
    rng = np.random.default_rng(11)
    for inner in (5, 100):
        for rows in (1, 25, 26, 103, 20000):
            g = _G()
            x, b, y = g.inp("x", np.int32, (rows, inner)), g.inp("b", np.int32, (inner,)), \
                g.inp("y", bool, (rows, inner))
            gen = g.both(g("np.logical_and", g("np.greater", x, b), y),
                         g("np.astype", g("np.add", x, b), dtype=np.dtype(np.int8)))[0]
            xs = rng.integers(-300, 300, (rows, inner)).astype(np.int32)
            bs = rng.integers(-300, 300, inner).astype(np.int32)
            ys = rng.random((rows, inner)) < 0.5
            want = [(xs > bs) & ys, (xs + bs).astype(np.int8)]
            for threads, stream in SETTINGS:
                with _setting(threads, stream):
                    for offset in (0, 1, 3, 33):
                        where = ((bool, offset), (np.int8, 63 - offset))
                        bufs = [_placed(dt, (rows, inner), off) for dt, off in where]
                        gen(xs, bs, ys, out=tuple(v for _, v in bufs))
                        for (raw, v), w in zip(bufs, want):
                            assert v.tobytes() == w.tobytes() and _untouched(raw, v), (inner, rows, offset)
            assert gen.stats()["generated_runs"] > 0 and gen.stats()["interpreted_runs"] == 0


_ISA_CHILD = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import test_hunt_tile as h
from numtrace_cpu import isa
ok = []
for n in (65, 16385, 16384 + 65):
    gen, interp = h._mixed(n)
    args = h._mixed_inputs(n, np.random.default_rng(n))
    with np.errstate(all="ignore"):
        want = interp(*args)
        for threads, stream in h.SETTINGS:
            with h._setting(threads, stream):
                bufs = [h._placed(w.dtype, w.shape, (4 + 7 * j) % 64) for j, w in enumerate(want)]
                gen(*args, out=tuple(v for _, v in bufs))
                ok += [v.tobytes() == w.tobytes() and h._untouched(raw, v) for (raw, v), w in zip(bufs, want)]
    ok.append(gen.stats()["generated_runs"] > 0 and gen.stats()["interpreted_runs"] == 0)
for rows, inner in ((4099, 3), (130, 33)):
    gen, interp = h._onehot_rows(rows, inner, np.float32)
    rng = np.random.default_rng(1)
    args = (rng.integers(0, inner, (rows, 1)), np.arange(inner),
            rng.standard_normal((rows, inner + 1)).astype(np.float32)[:, 1:], np.ones(inner, np.float32))
    want = interp(*args)
    for threads, stream in h.SETTINGS:
        with h._setting(threads, stream):
            ok += [g.tobytes() == w.tobytes() for g, w in zip(gen(*args), want)]
for seed in range(8):
    try:
        (gen, interp), args, rng = h._random_pass(seed)
    except (TypeError, ValueError):
        continue
    with np.errstate(all="ignore"):
        want = interp(*args)
        for threads, stream in h.SETTINGS:
            with h._setting(threads, stream):
                bufs = [h._placed(w.dtype, w.shape, int(rng.integers(0, 64))) for w in want]
                gen(*args, out=tuple(v for _, v in bufs))
                ok += [v.tobytes() == w.tobytes() and h._untouched(raw, v) for (raw, v), w in zip(bufs, want)]
print(isa.BUILD, all(ok))
"""


@pytest.mark.parametrize("build", ["baseline", "avx2"])
def test_other_isa_builds(build, tmp_path):
    """The avx2 and baseline builds (a child process): the mixed pass, the rows path and random passes
    as above."""
    if build not in isa.built() or not isa.BUILDS[build][1] <= runtime.cpu_features():
        pytest.skip(f"this CPU or installation has no {build} build")
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CPU_ISA=build)
    done = subprocess.run([sys.executable, "-c", _ISA_CHILD, os.path.dirname(__file__)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [build, "True"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_rows_every_row_lined_up_alone(dtype):
    """A 2-D pass whose rows are long (the plain elementwise units, one outer index each): the output
    a column slice of a wider array (each row starts at another offset in its line, so each unit's
    lead differs), Fortran-order and transposed inputs, a repeated row: the interpreter's bits, the
    columns around the slice untouched."""
    rng = np.random.default_rng(2)
    for shape in ((5, 1000), (3, 16384 + 70), (2, 129)):
        g = _G()
        x, y, b = g.inp("x", dtype, shape), g.inp("y", dtype, shape), g.inp("b", dtype, shape[-1:])
        gen, interp = g.both(g("np.multiply", g("np.tanh", g("np.add", x, b)), y), g("np.subtract", y, x))
        xs = np.asfortranarray(rng.standard_normal(shape).astype(dtype))
        ys = rng.standard_normal(shape[::-1]).astype(dtype).T
        bs = rng.standard_normal(shape[-1]).astype(dtype)
        want = interp(xs, ys, bs)
        assert want[1].tobytes() == (ys - xs).tobytes()
        for threads, stream in SETTINGS:
            with _setting(threads, stream):
                for pad in (0, 1, 3, 7, 16):
                    o1 = np.full((shape[0], shape[1] + 19), 9, dtype)
                    o2 = np.full((shape[0], shape[1] + 19), 9, dtype)
                    v1, v2 = o1[:, pad:pad + shape[1]], o2[:, 19 - pad:19 - pad + shape[1]]
                    gen(xs, ys, bs, out=(v1, v2))
                    assert v1.tobytes() == want[0].tobytes() and v2.tobytes() == want[1].tobytes(), \
                        (shape, threads, stream, pad)
                    assert (o1[:, :pad] == 9).all() and (o1[:, pad + shape[1]:] == 9).all()
                    assert (o2[:, :19 - pad] == 9).all() and (o2[:, 19 - pad + shape[1]:] == 9).all()
        assert gen.stats()["generated_runs"] > 0 and gen.stats()["interpreted_runs"] == 0


_BIN = ["np.add", "np.subtract", "np.multiply", "np.maximum", "np.minimum", "np.less", "np.equal",
        "np.logical_and", "np.divide"]
_UN = ["np.exp", "np.tanh", "np.sin", "np.log1p", "np.negative", "np.absolute", "np.sqrt", "np.logical_not"]
_DT = [np.dtype(d) for d in ("bool", "int32", "int64", "float32", "float64")]
_RANDOM_LENGTHS = (64, 65, 127, 128, 129, 511, 512, 513, 16383, 16384, 16385, 16384 + 127, 32768 + 64)


def _random_pass(seed):
    """A random elementwise program of 2 to 4 inputs of random dtypes (some a row broadcast over a
    second dim, some strided; rows long or short: the rows path) and 1 to 3 outputs, over a length
    around the tiles, and its inputs."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice(_RANDOM_LENGTHS))
    inner = int(rng.choice([3, 10, 33, 100]))
    shape = [(n,), (int(rng.integers(2, 5)), n // 64 + 1), (n // inner + 1, inner)][rng.integers(3)]
    g = _G()
    vals, args = [], []
    for i in range(int(rng.integers(2, 5))):
        dt = _DT[rng.integers(len(_DT))]
        shp = shape[-1:] if len(shape) == 2 and rng.random() < 0.3 else shape
        vals.append(g.inp(f"a{i}", dt, shp))
        raw = rng.integers(-8, 9, (2,) + shp) / 4
        kind = rng.integers(4)   # contiguous, negative stride, Fortran order, every other item
        a = raw.astype(dt)[kind % 2][..., ::-1] if kind == 1 else raw.astype(dt)[0]
        if kind == 2:
            a = np.asfortranarray(a)
        elif kind == 3:
            a = np.stack([a, a], -1)[..., 0]
        args.append(a)
    for _ in range(int(rng.integers(2, 7))):
        if rng.random() < 0.4:
            vals.append(g(str(rng.choice(_UN)), vals[rng.integers(len(vals))]))
        elif rng.random() < 0.2:
            vals.append(g("np.where", g("np.greater", vals[rng.integers(len(vals))], g.const(0.25)),
                          vals[rng.integers(len(vals))], vals[rng.integers(len(vals))]))
        else:
            pick = rng.integers(len(vals), size=2)
            vals.append(g(str(rng.choice(_BIN)), vals[pick[0]], vals[pick[1]]))
    outs = [vals[-1]] + [vals[j] for j in rng.integers(len(args), len(vals), int(rng.integers(0, 3)))]
    return g.both(*outs), args, rng


@pytest.mark.parametrize("seed", range(24))
def test_random_passes_around_the_tiles(seed):
    """Random elementwise passes (bool/int32/int64/float32/float64 mixes, where over computed
    operands, table ops between others) at lengths around the tiles and units, outputs at random
    byte offsets, 1 to 3 threads, streamed or not: the interpreter's bits, no byte around an output
    touched."""
    for tries in range(seed, seed + 2400, 24):   # the next seed where the IR refuses the program
        try:
            (gen, interp), args, rng = _random_pass(tries)
            break
        except (TypeError, ValueError):   # a dtype an op does not take
            continue
    with np.errstate(all="ignore"):
        want = interp(*args)
        for threads, stream in SETTINGS:
            with _setting(threads, stream):
                bufs = [_placed(w.dtype, w.shape, int(rng.integers(0, 64))) for w in want]
                gen(*args, out=tuple(v for _, v in bufs))
                for (raw, v), w in zip(bufs, want):
                    assert v.tobytes() == w.tobytes() and _untouched(raw, v), (seed, threads, stream)
    assert gen.stats()["interpreted_runs"] == 0


@pytest.mark.parametrize("inner", [3, 20, 65])
def test_rows_one_overflow_at_every_tile_boundary_raises(inner):
    """exp(x - b) * y over short rows (b one row repeated, the rows path's RT rows a tile), x fine
    but for one element that overflows, in rows around the tiles (RT = 64 // inner for float64) and
    the units: raises under np.errstate(over="raise") exactly as NumPy, the interpreter's bits when
    ignored."""
    rows = 3000
    g = _G()
    x, b, y = g.inp("x", np.float64, (rows, inner)), g.inp("b", np.float64, (inner,)), \
        g.inp("y", np.float64, (rows, inner))
    gen, interp = g.both(g("np.multiply", g("np.exp", g("np.subtract", x, b)), y))
    rng = np.random.default_rng(inner)
    x0, y0 = rng.standard_normal((2, rows, inner))
    b0 = rng.standard_normal(inner)
    rt = max(1, 64 // inner)
    for threads, stream in SETTINGS:
        with _setting(threads, stream):
            with np.errstate(all="raise"):
                gen(x0, b0, y0)
            for row in sorted({0, rt - 1, rt, 2 * rt, rows // 2, rows - 1}):
                for col in (0, inner - 1):
                    xs = x0.copy()
                    xs[row, col] = 1000.0
                    with np.errstate(all="raise"):
                        assert _raises(gen, xs, b0, y0), (row, col, threads, stream)
                    with np.errstate(all="ignore"):
                        assert gen(xs, b0, y0)[0].tobytes() == interp(xs, b0, y0)[0].tobytes()
    assert gen.stats()["generated_rows_runs"] > 0 and gen.stats()["interpreted_runs"] == 0


def test_bool_rows_take_a_whole_tile_of_rows():
    """A pass of bool rows alone (step 512: RT = 512 // inner rows a tile) with a repeated bool row and
    a per-row bool column: NumPy's bits at row counts around RT."""
    rng = np.random.default_rng(4)
    for inner in (5, 64, 100):
        rt = 512 // inner
        for rows in (rt - 1, rt, rt + 1, 2 * rt + 3, 9000):
            g = _G()
            a, r, c = g.inp("a", bool, (rows, inner)), g.inp("r", bool, (inner,)), g.inp("c", bool, (rows, 1))
            gen = g.both(g("np.logical_or", g("np.logical_and", a, r), c), g("np.not_equal", a, r))[0]
            av, rv, cv = rng.random((rows, inner)) < 0.5, rng.random(inner) < 0.5, rng.random((rows, 1)) < 0.2
            want = [(av & rv) | cv, av != rv]
            for threads, stream in SETTINGS:
                with _setting(threads, stream):
                    for offset in (0, 1, 63):
                        bufs = [_placed(bool, (rows, inner), off) for off in (offset, 64 - offset)]
                        gen(av, rv, cv, out=tuple(v for _, v in bufs))
                        for (raw, v), w in zip(bufs, want):
                            assert v.tobytes() == w.tobytes() and _untouched(raw, v), (inner, rows, offset)
            assert gen.stats()["generated_runs"] > 0 and gen.stats()["interpreted_runs"] == 0
