"""Hunt (hand-built adversarial cases) in the generated tiles of short rows that read a per-row
operand once per row (codegen.row_scalar_operands, stats()["generated_row_scalar_runs"]) and in
nt_gen_gather_rows' doubling copy of a row repeated along the rows (the bias b of ``x + b``).

test_codegen_row_scalars.py checks ``x[:, None]`` of a 1-d x against one row vector y. Here: a
per-row operand that is an (n, 1) input of its own called with column views of wider arrays,
operands broadcast along the innermost dim and another (``x[None, :, None]``, rows widened), two
and twenty per-row operands with some 0-stride at call time, a per-row view of an intermediate
or of an input updated in place (the pass must not read a row already written), row counts at the
edges of tiles and units on 1 and 2 threads with streaming stores on and off, NumPy's FP warnings
and errors, column sums with a bias row, and the avx2 and baseline builds. Each: generated against
interpreted bits, and NumPy's bits where NumPy is deterministic (no sums, no exp).
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import numtrace_cpu
import pytest
from graph_programs import RUNNABLE, Value, compiled_both, each_setting, graph_of
from numtrace_ir import testing
from test_codegen import _cache, _compiled  # noqa: F401  (_cache: autouse fixture)

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _getitem(self, index):   # x[:, None] and column slices in the programs below
    return self.node("np.getitem", self, index=index)


Value.__getitem__ = _getitem


def _bits(outs):
    return [(np.asarray(o).dtype, np.asarray(o).shape, np.asarray(o).tobytes()) for o in outs]


def _outputs(fn, args):
    with np.errstate(all="ignore"):
        out = fn(np, *args)
    return out if isinstance(out, tuple) else (out,)


def _check(fn, calls, exact=True, threads=(1, 2), streaming=(1 << 62,)):
    """fn compiled at calls[0]'s types, generated and interpreted, called with each argument tuple of
    `calls` on each thread count: the same bits, and NumPy's (`exact`) or close to them. Returns the
    generated executable's stats()."""
    gen, interp = compiled_both(fn, calls[0])
    for t, s in each_setting(threads, streaming):
        for k, args in enumerate(calls):
            what = f"call {k}, {t} threads, streaming from {s}"
            with np.errstate(all="ignore"):
                got, same = gen(*args), interp(*args)
            want = _outputs(fn, args)
            assert _bits(got) == _bits(same), what
            if exact:
                assert _bits(got) == _bits(want), what + " vs NumPy"
                continue
            for g, w in zip(got, want):
                tol = 1e-12 if g.dtype == F64 else 1e-5   # sums, exp: rounding only
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=what)
    assert interp.stats()["generated_runs"] == 0
    return gen.stats()


def _layouts(v):
    """v; strided along dim 0; reversed; unaligned; 0-stride (its first row); Fortran (2-d up)."""
    strided = np.empty((2 * v.shape[0],) + v.shape[1:], v.dtype)[::2]
    strided[...] = v
    unaligned = np.frombuffer(bytearray(v.nbytes + 1), np.uint8)[1:].view(v.dtype).reshape(v.shape)
    unaligned[...] = v
    out = [v, strided, v[::-1].copy()[::-1], unaligned, np.broadcast_to(v[:1], v.shape)]
    return out + ([np.asfortranarray(v)] if v.ndim > 1 else [])


def _specials(v):
    v = v.copy()
    if v.dtype.kind == "f":
        flat = v.reshape(-1)
        flat[::7], flat[1::11], flat[2::13] = -0.0, np.nan, np.inf
    return v


# -- an (n, 1) input of its own, called with column views -------------------------------------------

_COLUMN_PROGRAMS = {
    "sub": lambda np, a, y: a - y,
    "where": lambda np, a, y: np.where(a > y, a * y, y - a),
    "cast_compare": lambda np, a, y: (np.equal(a, y).astype(np.float32), (a * y).astype(np.float32)),
    "row_max": lambda np, a, y: ((a * y).max(axis=-1), a * y),
}


@pytest.mark.parametrize("name", list(_COLUMN_PROGRAMS))
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_column_input_given_as_views(name, dtype):
    """An (n, 1) argument (a size-1 last dim with any stride: the kernel sees stride 0) given as a
    column of a wider array (strides (80, 8)), its last column, reversed, unaligned, 0-stride, and
    y strided and reversed: the per-row path each time, the interpreter's and NumPy's bits."""
    rng = np.random.default_rng(len(name))
    n, k = 2049, 10
    a = _specials(rng.integers(-3, 4, (n, 1)).astype(dtype))
    y = _specials(rng.integers(-3, 4, k).astype(dtype))
    wide = rng.standard_normal((n, 10)).astype(dtype)
    wide[:, 3:4] = a
    calls = [(a, y), (wide[:, 3:4], y), (wide[::-1, 3:4][::-1], y[::-1].copy()[::-1]),
             (np.ascontiguousarray(wide[:, 3:4]), np.repeat(y, 2)[::2])] + [(v, y) for v in _layouts(a)[2:]]
    s = _check(_COLUMN_PROGRAMS[name], calls)
    runs = s["generated_row_tile_runs"] if name == "row_max" else s["generated_rows_runs"]
    assert runs == 2 * len(calls) and s["generated_row_scalar_runs"] == runs, s


# -- broadcast along the innermost dim and another; several per-row operands -----------------------

@pytest.mark.parametrize("shape", [(5000, 3, 10), (3, 5000, 10), (700, 7, 16), (2, 3, 128)])
def test_broadcast_along_two_dims(shape):
    """x[None, :, None] over (m, n, k) (rows widened where n is short: dims swapped under the
    kernel), with z[:, None, None] a second per-row operand, elementwise and with a row max."""
    m, n, k = shape
    rng = np.random.default_rng(m + n)
    x, z = _specials(rng.standard_normal(n)), rng.standard_normal(m)
    big = rng.standard_normal(shape)
    s = _check(lambda np, x, b: x[None, :, None] - b,
               [(x, big)] + [(v, big) for v in _layouts(x)[1:]] + [(x, v) for v in _layouts(big)[1:]])
    assert s["generated_row_scalar_runs"] > 0
    two = [(x, z, big), (x[::-1], z[::-1], big[::-1]), (np.broadcast_to(x[:1], x.shape), z, big)]
    s = _check(lambda np, x, z, b: x[None, :, None] * z[:, None, None] + b, two)
    assert s["generated_row_scalar_runs"] > 0
    s = _check(lambda np, x, z, b: (x[None, :, None] * z[:, None, None] + b).max(axis=-1), two)
    assert s["generated_row_scalar_runs"] == s["generated_row_tile_runs"] == 2 * len(two)


def test_twenty_per_row_operands():
    """Twenty x_i[:, None] in one pass, some read twice, a third of them 0-stride in one call (a
    broadcast_to argument): rowwise needs each marked operand's innermost stride to be 0."""
    rng = np.random.default_rng(10)
    n, k, m = 2049, 7, 20
    xs, y = [_specials(rng.standard_normal(n)) for _ in range(m)], rng.standard_normal(k)

    def fn(np, y, *xs):
        acc = xs[0][:, None] * y
        for i, x in enumerate(xs[1:]):
            acc = acc + x[:, None] * (y if i % 2 else 1.5) - xs[(i * 7) % len(xs)][:, None]
        return acc
    calls = [(y, *xs), (y[::-1], *[x[::-1] for x in xs]),
             (y, *[np.broadcast_to(x[:1], x.shape) if i % 3 == 0 else x for i, x in enumerate(xs)])]
    s = _check(fn, calls)
    assert s["generated_row_scalar_runs"] == 2 * len(calls)


def test_mixed_dtype_per_row_operands():
    """The per-row value cast in the row's loop as NumPy casts it: int64 past 2**53 against float64
    (compared and multiplied as float64), uint64 against int64 (float64), float32 past int32's range
    to int32 (INT_MIN and 'invalid')."""
    rng = np.random.default_rng(13)
    n, k = 2049, 10
    x = rng.integers(-2**62, 2**62, n)
    x[:5] = [2**53 + 1, -2**63, 2**63 - 1, 0, -1]
    y = rng.standard_normal(k) * 2.0**60
    y[:3] = [2.0**53, -2.0**63, 2.0**63]
    xu, yi = rng.integers(0, 2**63, n).astype(np.uint64), rng.integers(-5, 5, k)
    xu[0] = 2**64 - 1
    xf, y32 = (rng.standard_normal(n) * 1e10).astype(F32), rng.integers(-2**31, 2**31, k).astype(np.int32)
    cases = [(lambda np, x, y: (np.less(x[:, None], y), x[:, None] * y, np.equal(x[:, None], y)), x, y),
             (lambda np, x, y: (np.less(x[:, None], y), x[:, None] + y), xu, yi),
             (lambda np, x, y: (x[:, None] * y, (x[:, None] * y).astype("int32"),
                                x[:, None].astype("int64") - y), xf, y32)]
    for fn, a, b in cases:
        s = _check(fn, [(a, b), (a[::-1], b[::-1])])
        assert s["generated_row_scalar_runs"] == 4, s


# -- row counts at the edges of tiles (R rows) and units (32 R rows) --------------------------------

@pytest.mark.parametrize("k", [2, 8, 40, 128])
def test_row_counts_at_tile_and_unit_edges(k):
    """R = 512 // k rows a tile, 32 R a unit: n of 1, R - 1 .. R + 1, a unit +- 1, two units and a
    row, on 1 and 2 threads, outputs streamed and not; a per-row operand and a bias row."""
    rng = np.random.default_rng(k)
    R = 512 // k
    unit = 32 * R
    for n in (1, R - 1, R + 1, unit - 1, unit + 1, 2 * unit + 1):
        x, y, b = (_specials(rng.standard_normal(m).astype(F32)) for m in (n, k, k))
        calls = [(x, y, b), (x[::-1], y[::-1], b[::-1]), (np.broadcast_to(x[:1], x.shape), y, b)]
        s = _check(lambda np, x, y, b: (np.where(x[:, None] > y, x[:, None] * y, b), x[:, None] + b), calls,
                   streaming=(1 << 62, 1))
        assert s["generated_row_scalar_runs"] == (0 if n == 1 else 4 * len(calls)), (n, s)


# -- per-row views of memory the pass writes ---------------------------------------------------------

_VIEW_PROGRAMS = {
    "own_column": lambda np, a, y: (a * 2.0) - (a * 2.0)[:, :1],
    "reversed_column": lambda np, a, y: (a * 2.0) - (a * 2.0)[::-1, :1],
    "through_exp": lambda np, a, y: np.exp(np.exp(a * y)[::-1, :1] - np.exp(a * y)) * np.exp(a * y)[::-1, :1],
}


@pytest.mark.parametrize("name", list(_VIEW_PROGRAMS))
def test_per_row_view_of_an_intermediate(name):
    """t - t[::-1, :1] where t is a pass's output: the second pass must not write over t while it
    reads t's rows in another order (the buffer plan keeps them apart); on rows of 3, 10, 16."""
    rng = np.random.default_rng(len(name))
    for n, k in ((2049, 10), (50001, 3), (300, 16)):
        a, y = rng.standard_normal((n, k)), rng.standard_normal(k)
        s = _check(_VIEW_PROGRAMS[name], [(a, y), (a[::-1], y), (np.asfortranarray(a), y[::-1])],
                   exact=name != "through_exp")
        assert s["generated_row_scalar_runs"] > 0


@pytest.mark.parametrize("index", [(slice(None), slice(0, 1)), (slice(None, None, -1), slice(0, 1)),
                                   (slice(None), slice(-1, None))], ids=["first", "reversed", "last"])
def test_update_in_place_reading_its_own_column(index):
    """``a[...] = a[idx] * y - y`` as an update of a (compile_graph's updates): the output is NumPy's
    out-of-place result whether or not it is computed into a's memory."""
    rng = np.random.default_rng(3)
    n, k = 4001, 10
    a0, y = rng.standard_normal((n, k)), rng.standard_normal(k)

    def fn(np, a, y):
        return a[index] * y - y
    g, types = graph_of(fn, (a0, y))
    want = _outputs(fn, (a0, y))
    old = numtrace_cpu.get_num_threads()
    try:
        for mode in ("sync", "off"):
            exe = _compiled(g, types, mode, updates={0: 0})
            for t in (1, 2):
                numtrace_cpu.set_num_threads(t)
                a = a0.copy()
                (got,) = exe(a, y)
                assert _bits([got]) == _bits(want), (mode, t)
                assert _bits([a]) == _bits(want if np.shares_memory(got, a) else [a0]), (mode, t)
            assert exe.stats()["generated_row_scalar_runs"] == (2 if mode == "sync" else 0)
    finally:
        numtrace_cpu.set_num_threads(old)


# -- NumPy's floating-point warnings and errors ------------------------------------------------------

_FLAG_PROGRAMS = {
    "divide": lambda np, x, y: x[:, None] / y,
    "subtract": lambda np, x, y: x[:, None] - y,
    "multiply": lambda np, x, y: x[:, None] * y,
    "where_sqrt": lambda np, x, y: np.where(x[:, None] > 0, np.sqrt(x[:, None] * y), y),
    "to_int32": lambda np, x, y: (x[:, None] * y).astype("int32"),
}


def _reports(fn, *args):
    with np.errstate(all="warn"):
        reports, _, _ = testing.fp_reports(lambda: fn(*args))
    with np.errstate(all="raise"):
        _, raised, _ = testing.fp_reports(lambda: fn(*args))
    return reports, raised is not None


@pytest.mark.parametrize("name", list(_FLAG_PROGRAMS))
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_fp_reports_as_numpy(name, dtype):
    """A zero in y, infinities in x and y, products past the largest float, negatives under sqrt:
    each warning once and the error under 'raise' as NumPy, on the per-row path and the interpreter."""
    fn = _FLAG_PROGRAMS[name]
    rng = np.random.default_rng(8)
    n, k = 2049, 10
    x, y = rng.standard_normal(n).astype(dtype), rng.standard_normal(k).astype(dtype)
    big = np.finfo(dtype).max
    variants = [(np.abs(x) + 1, np.abs(y) + 1), (x, np.where(np.arange(k) == 3, 0, y).astype(dtype)),
                (np.where(np.arange(n) == 7, np.inf, x).astype(dtype), np.where(np.arange(k) == 2, -np.inf, y)
                 .astype(dtype)),
                (np.sign(x).astype(dtype) * big, (y * 4).astype(dtype)), (-np.abs(x), np.abs(y))]
    gen, interp = compiled_both(fn, variants[0])
    for args in variants:
        want = _reports(lambda *a: fn(np, *a), *args)
        assert _reports(gen, *args) == want
        assert _reports(interp, *args) == want
    assert gen.stats()["generated_row_scalar_runs"] > 0


# -- a bias row repeated along the rows of column sums (nt_gen_gather_rows' doubling copy) ----------

@pytest.mark.parametrize("shape", [(1000, 3), (257, 16), (33, 100)])
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_bias_row_of_column_and_row_reductions(shape, dtype):
    """(a * b + b).sum(axis=0), .mean(axis=0) and a + b with a row sum, b contiguous, strided,
    reversed and 0-stride, a Fortran and a reversed a: the interpreter's bits."""
    rng = np.random.default_rng(sum(shape))
    a, b = _specials(rng.standard_normal(shape).astype(dtype)), rng.standard_normal(shape[1]).astype(dtype)
    calls = [(a, b), (a, b[::-1].copy()[::-1]), (a, np.repeat(b, 2)[::2]), (np.asfortranarray(a), b[::-1]),
             (a[::-1], np.broadcast_to(b[:1], b.shape))]
    for fn in (lambda np, a, b: (a * b + b).sum(axis=0), lambda np, a, b: (a * b - b).mean(axis=0),
               lambda np, a, b: (a + b, (a * b).sum(axis=1))):
        s = _check(fn, calls, exact=False, threads=(2,))
        assert s["generated_runs"] == len(calls), s


# -- other ISA builds --------------------------------------------------------------------------------

_ISA_CHILD = r"""
import sys
import numpy as np, numtrace_cpu
sys.path.insert(0, sys.argv[1])
import test_hunt_oh1 as h
from numtrace_cpu import isa
rng = np.random.default_rng(3)
n, k = 3001, 10
ok = []
for name, fn, args in h.isa_cases(rng, n, k):
    for t in (1, 2):
        numtrace_cpu.set_num_threads(t)
        try:
            s = h._check(fn, [args, tuple(a[::-1] for a in args)], exact=False, threads=(t,))
            ok.append(s["generated_row_scalar_runs"] > 0)
        except AssertionError as e:
            ok.append(False)
            print(name, t, e)
print(isa.BUILD, all(ok))
"""


def isa_cases(rng, n, k):
    """(name, program, arguments) the ISA builds run: bool, int32 and float32 per-row operands."""
    xb, yb = rng.random(n) > 0.5, rng.random(k) > 0.5
    xi, yi = rng.integers(0, k, n).astype(np.int32), np.arange(k, dtype=np.int32)
    xf, yf = _specials(rng.standard_normal(n).astype(F32)), rng.standard_normal(k).astype(F32)
    return [("bool", lambda np, x, y: (np.logical_xor(x[:, None], y), (x[:, None] > y).astype(np.float32)),
             (xb, yb)),
            ("int32", lambda np, x, y: (np.equal(x[:, None], y).astype(np.float32), x[:, None] - y),
             (xi, yi)),
            ("exp_max", lambda np, x, y: ((np.exp(x[:, None] - y) * x[:, None]).max(axis=-1),
                                          np.exp(x[:, None] - y) * x[:, None]), (xf, yf)),
            ("where", lambda np, x, y: np.where(x[:, None] > y, x[:, None] * 2.0, np.sqrt(y)), (xf, yf))]


@pytest.mark.parametrize("build", ["baseline", "avx2"])
def test_other_isa_builds(build, tmp_path):
    """The programs of isa_cases in a child on the avx2 and baseline builds (NUMTRACE_CPU_ISA):
    generated bits equal the interpreter's, per-row path taken."""
    if build not in RUNNABLE:
        pytest.skip(f"this CPU or installation has no {build} build")
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CPU_ISA=build,
               NUMTRACE_CODEGEN_SHORT_ROWS="4096")
    here = os.path.dirname(__file__)
    done = subprocess.run([sys.executable, "-c", _ISA_CHILD, here], capture_output=True, text=True, env=env,
                          timeout=300, cwd=here)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == [build, "True"], done.stdout[-2000:]
