"""Hunt in a float's negation as a sign-bit flip (nt_opcodes.h NT_NEG), the packed column sums of 2, 4
and 8 columns (nt_gen.h NT_GEN_COLSUMS), the operands the rows path and narrow column blocks bind
through codegen's _bind_rows, and column blocks of other widths element by element.

Each program runs with generated kernels and on the interpreter, on 1 and 2 threads: the two give the
same bits, and NumPy's where NumPy is deterministic. Only one operand of each op holds NaNs (NaNs of
both signs, payloads, signaling ones): which of two NaN operands a commutative op keeps depends on
the operand order the C compiler (and NumPy's own loops, which differ between their vector body and
tail) picks (test_recompute.py). Column sums are NumPy's within rounding (float32 added in double,
docs/cpu.md), bit for bit in a column's NaN, infinity and zero; with one NaN per column, which NaN is
kept does not depend on the order of the adds."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from graph_programs import RUNNABLE
from graph_programs import compiled_both as _both
from graph_programs import numpy_outputs as _numpy
from numtrace_cpu import isa
from numtrace_ir import Graph, testing
from test_codegen import _assert_same_bits, _cache, _compiled  # noqa: F401  (_cache: autouse fixture)

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # NaN, inf and signaling NaNs on purpose




def _nan(dtype, sign: int, payload: int, quiet: bool = True):
    bits = {4: (0x7F800000, 0x400000, 31, np.uint32), 8: (0x7FF0000000000000, 1 << 51, 63, np.uint64)}
    base, q, s, u = bits[np.dtype(dtype).itemsize]
    return np.array([base | (q if quiet else 0) | payload | (sign << s)], u).view(dtype)[0]


def _with_specials(x: np.ndarray) -> np.ndarray:
    """x with quiet and signaling NaNs of both signs (payloads 1-4), +-inf, -0.0 and 0.0."""
    specials = [_nan(x.dtype, 0, 1), _nan(x.dtype, 1, 2), _nan(x.dtype, 0, 3, False),
                _nan(x.dtype, 1, 4, False), np.inf, -np.inf, -0.0, 0.0]
    flat = x.reshape(-1)
    for k, v in enumerate(specials):
        flat[k::11] = v
    return x




def _layouts(x: np.ndarray) -> list[np.ndarray]:
    """x's values C-ordered, Fortran-ordered, rows reversed, and every other column of a wider array."""
    wide = np.zeros((x.shape[0], 2 * x.shape[1]), x.dtype)
    wide[:, ::2] = x
    return [x, np.asfortranarray(x), x[::-1].copy()[::-1], wide[:, ::2]]


# Negation with the ops GCC folds a C negation into (s + -x into s - x, -x * -x into x * x, x - -y
# into x + y, -(a - b) into b - a), which keep x's NaN with x's sign where NumPy's has it flipped.
ELEMENTWISE = {
    "neg": lambda np, x, y: -x,
    "neg_times_neg": lambda np, x, y: (-x) * (-x),
    "y_plus_neg": lambda np, x, y: y + -x,
    "y_minus_neg": lambda np, x, y: y - (-x),
    "neg_of_difference": lambda np, x, y: -(x - y),
    "neg_times_y": lambda np, x, y: (-x) * y,
    "abs_of_neg_and_neg_of_abs": lambda np, x, y: (abs(-x), -abs(x)),
    "copysign_like_where": lambda np, x, y: np.where(y < 0, -abs(x), abs(x)),
    "neg_neg_and_copysign": lambda np, x, y: (np.negative(-x), np.copysign(-x, y), np.square(-x)),
}


@pytest.mark.parametrize("shape", [(67, 6), (3, 200)], ids=["rows_path", "long_rows"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("program", list(ELEMENTWISE))
def test_negation_flips_a_nan_sign_bit_as_numpy(program, dtype, shape, threads):
    fn = ELEMENTWISE[program]
    rng = np.random.default_rng(len(program))
    x = _with_specials(rng.standard_normal(shape).astype(dtype))
    y = rng.standard_normal(shape).astype(dtype)
    y.reshape(-1)[1::7], y.reshape(-1)[2::9] = -0.0, np.inf
    gen, interp = _both(fn, (x, y))
    for xs, ys in zip(_layouts(x), [y, y[::-1].copy()[::-1], np.broadcast_to(y[:1], y.shape), y]):
        want = _numpy(fn, xs.copy(), ys)
        got = gen(xs, ys)
        _assert_same_bits(got, interp(xs, ys), program)
        _assert_same_bits(got, want, f"{program} against NumPy")
    assert gen.stats()["generated_runs"] == 4 * gen.stats()["fused_groups"]


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                   np.uint64], ids=lambda d: np.dtype(d).name)
def test_integer_negation_wraps_as_numpy(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    x = rng.integers(info.min, info.max, (37, 5), dtype=dtype, endpoint=True)
    x.flat[:4] = [info.min, info.max, 0, 1]
    y = rng.integers(info.min, info.max, (37, 5), dtype=dtype, endpoint=True)

    def fn(np, a, b):
        return -a, (-a) * (-a), b + -a, a - -b, abs(-a), np.sum(-a, axis=0), np.max(-a, axis=1), \
            np.cumsum(-a, axis=0), np.where(a > b, -a, b)
    for mode_exe in _both(fn, (x, y)):
        for args in [(x, y), (x[::-1].copy()[::-1], np.asfortranarray(y))]:
            _assert_same_bits(mode_exe(*args), _numpy(fn, *args), f"{np.dtype(dtype).name} negation")


def test_negation_of_a_bool_raises_as_numpy():
    x = np.zeros((4, 3), bool)
    with pytest.raises(TypeError, match="boolean negative"):
        np.negative(x)
    with pytest.raises(TypeError, match="boolean negative"):
        _both(lambda np, a: -a, (x,))


def _one_special_per_column(m: int, n: int, dtype, rng) -> np.ndarray:
    """(m, n) values, each column holding one special: a NaN of either sign (payloads differ), +inf, or
    all -0.0; the NaNs and infinities on rows around the 128-row column blocks' edges."""
    x = rng.standard_normal((m, n)).astype(dtype)
    rows = [r for r in (0, 1, 126, 127, 128, 129, 255, 256, m - 1) if r < m]
    for c in range(n):
        kind, row = c % 4, rows[c % len(rows)]
        if kind == 3:
            x[:, c] = -0.0
        else:
            x[row, c] = np.inf if kind == 2 else _nan(dtype, kind, c + 1)
    return x


def _assert_sums(got, want, what, nan_bits=True):
    """A column sum's NaN, inf and zero bit for bit, finite values within a float sum's rounding; a
    column of several NaNs (nan_bits False) a NaN, which one depending on the order of the adds."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if not nan_bits:
        assert np.array_equal(np.isnan(got), np.isnan(want)), what
        got, want = np.where(np.isnan(got), 0, got), np.where(np.isnan(want), 0, want)
    exact = ~np.isfinite(want) | (want == 0)
    assert got[exact].tobytes() == want[exact].tobytes(), f"{what}: {got[exact]} != {want[exact]}"
    np.testing.assert_allclose(got[~exact], want[~exact], rtol=1e-5, atol=1e-4, err_msg=what)


COLUMN_PROGRAMS = {
    "where_of_neg": lambda np, a, b: np.sum(np.where(a > b, -a, b * 2.0), axis=0),
    "mean_of_where": lambda np, a, b: np.mean(np.where(b > 0, -a, b), axis=0),
    "sum_of_neg_where_and_where": lambda np, a, b: (lambda w: (w, np.sum(-w, axis=0), np.sum(w, axis=0)))(
        np.where(b > 0, (-a) * (-a), b - (-a))),
}


@pytest.mark.parametrize("ncol", [1, 2, 3, 4, 5, 8, 16, 66, 72])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("program", list(COLUMN_PROGRAMS))
def test_column_blocks_of_a_where_keep_numpy_specials(program, dtype, ncol, threads):
    """np.sum(np.where(...), axis=0) in column mode: the packed sums of 2, 4 and 8 columns (and of the
    last 2 and 8 of a 66 and a 72-column pass, past the 64 of a unit), the scalar ones of 1, 3, 5, and
    the element-by-element wide blocks, read in place, gathered, and with b a 0-stride broadcast."""
    fn = COLUMN_PROGRAMS[program]
    rng = np.random.default_rng(ncol)
    m = 300
    a = _one_special_per_column(m, ncol, dtype, rng)
    b = rng.standard_normal((m, ncol)).astype(dtype)
    gen, interp = _both(fn, (a, b))
    for args in zip(_layouts(a), [b, b[::-1].copy()[::-1], b, np.broadcast_to(b[:1], b.shape)]):
        got = gen(*args)
        _assert_same_bits(got, interp(*args), program)
        for g, w in zip(got, _numpy(fn, *(v.copy() for v in args))):
            _assert_sums(g, w, f"{program} over {ncol} columns")
    if ncol > 1:
        assert gen.stats()["generated_column_runs"] >= 3   # the Fortran-ordered a is not column mode


@pytest.mark.parametrize("ncol", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_packed_column_sums_keep_each_columns_first_nan(dtype, ncol, threads):
    """Two NaNs of opposite signs in each column, on both sides of a 128-row block edge or within
    one block: the packed sums (nt_gen_colsum2/4/8: the running sums the first source of each packed
    add) and the scalar ones keep the column's first NaN, as the interpreter's nt_colsum and NumPy's
    row-by-row sum (its vector lanes) do; the negation flips that NaN's sign."""
    rng = np.random.default_rng(ncol)
    a = rng.standard_normal((300, ncol)).astype(dtype)
    b = rng.standard_normal((300, ncol)).astype(dtype)
    pairs = [(3, 200), (127, 128), (129, 130), (0, 299), (250, 260)]
    for c in range(ncol):
        first, second = pairs[c % len(pairs)]
        a[first, c], a[second, c] = _nan(dtype, c % 2, 1 + c), _nan(dtype, 1 - c % 2, 100 + c)
    def fn(np, a, b):
        w = np.where(a > b, b, -a)   # -a where a is NaN
        return np.sum(w, axis=0), np.sum(-w, axis=0)
    gen, interp = _both(fn, (a, b))
    got = gen(a, b)
    _assert_same_bits(got, interp(a, b), "two NaNs a column")
    w = np.where(a > b, b, -a)
    first = w[np.argmax(np.isnan(w), axis=0), np.arange(ncol)]
    assert got[0].tobytes() == first.tobytes()
    assert got[1].tobytes() == (-first).tobytes()
    assert gen.stats()["generated_column_runs"] == 1


@pytest.mark.parametrize("shape", [(300, 3), (129, 8), (5, 100)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_in_place_update_with_negation_over_layouts(dtype, shape, threads):
    """x = np.where(x > r, -x, c + -x) (and its column sum) as an update of x, which the pass may write
    into x itself: the rows path and the column block bind an output that is also an input, over
    strided, reversed and Fortran layouts."""
    def fn(np, x, r, c):
        w = np.where(x > r, -x, c + -x)
        return w, np.sum(w, axis=0)
    rng = np.random.default_rng(shape[1])
    r = rng.standard_normal((1, shape[1])).astype(dtype)
    c = rng.standard_normal((shape[0], 1)).astype(dtype)
    base = _with_specials(rng.standard_normal(shape).astype(dtype))
    exes = _both(fn, (base, r, c), updates={0: 0})
    for exe in exes:
        for x in _layouts(base.copy()) + [base[:, ::-1].copy()[:, ::-1]]:
            want = _numpy(fn, base.copy(), r, c)
            got = exe(x, r, c)
            if not np.shares_memory(got[0], x):   # the caller's copy (compile_graph's `updates`)
                x[...] = got[0]
            assert x.tobytes() == want[0].tobytes()
            _assert_same_bits(got[:1], want[:1], "in-place where")
            _assert_sums(got[1], want[1], "its column sum", nan_bits=False)


def _unaligned(a: np.ndarray) -> np.ndarray:
    """a's values at an odd byte address (a NumPy array flagged unaligned)."""
    buf = np.zeros(a.nbytes + 1, np.uint8)
    u = np.frombuffer(buf.data, np.uint8, a.nbytes, 1).view(a.dtype).reshape(a.shape)
    u[...] = a
    assert not u.flags.aligned
    return u


@pytest.mark.parametrize("shape", [(300, 4), (7, 3), (40, 66)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_unaligned_operands_and_update(dtype, shape, threads):
    """Unaligned inputs, and an update written into an unaligned x: _bind_rows gathers an operand whose
    address is not a multiple of its item size, and writes such an output through its tile buffer."""
    rng = np.random.default_rng(shape[1])
    x = _one_special_per_column(*shape, dtype, rng)
    y = rng.standard_normal(shape).astype(dtype)

    def fn(np, x, y):
        w = np.where(x > y, -x, y)
        return w, np.sum(w, axis=0), (-x) * y + -(x - y)
    gen, interp = _both(fn, (x, y), updates={0: 0})
    for exe in (gen, interp):
        for xs, ys in [(_unaligned(x), y), (x.copy(), _unaligned(y)), (_unaligned(x), _unaligned(y))]:
            want = _numpy(fn, x.copy(), y)
            got = exe(xs, ys)
            if not np.shares_memory(got[0], xs):
                xs[...] = got[0]
            assert xs.tobytes() == want[0].tobytes()
            _assert_same_bits(got[2:], want[2:], "unaligned elementwise")
            _assert_sums(got[1], want[1], "unaligned column sum")
    assert gen.stats()["generated_column_runs"] == 3   # one pass, the outputs of the where included


def test_negation_under_broadcast_operands_in_widened_rows():
    """-(x - p) * q + -s of a (500, 8, 4) x with p (8, 4), q (500, 1, 1), s (500, 8, 1): the rows path
    with its rows dim swapped for the longest outer one (rows_widened_runs), each broadcast operand
    gathered (stride 0 along the rows: once per unit)."""
    rng = np.random.default_rng(5)
    x = _with_specials(rng.standard_normal((500, 8, 4)))
    p, q, s = rng.standard_normal((8, 4)), rng.standard_normal((500, 1, 1)), rng.standard_normal((500, 8, 1))

    def fn(np, x, p, q, s):
        return -(x - p) * q + -s, np.where(x > p, -x, s * q)
    gen, interp = _both(fn, (x, p, q, s))
    flipped = (x[::-1].copy()[::-1], p[:, ::-1].copy()[:, ::-1], np.broadcast_to(q[:1], q.shape), s)
    for args in [(x, p, q, s), flipped]:
        got = gen(*args)
        _assert_same_bits(got, interp(*args), "widened rows")
        _assert_same_bits(got, _numpy(fn, *args), "widened rows against NumPy")
    assert gen.stats()["generated_rows_runs"] >= 2 and gen.stats()["rows_widened_runs"] >= 2


_ISA_CHILD = textwrap.dedent("""
    import numpy as np
    from numtrace_cpu import compile_graph, compiler, isa
    from numtrace_ir import Graph, testing
    np.seterr(all="ignore")
    out = []
    for dtype in (np.float32, np.float64):
        for ncol in (2, 3, 4, 8, 16):
            a = np.random.default_rng(ncol).standard_normal((300, ncol)).astype(dtype)
            for c in range(ncol):   # two NaNs of opposite signs, or an inf, about the block edges
                r = (0, 127, 128, 129, 200)[c % 5]
                a[r, c], a[r + 1 + c % 7, c] = ((np.nan, -np.nan), (-np.nan, np.nan), (np.inf, 1.0))[c % 3]
            g = Graph()
            x = g.add_input("x", testing.type_of(a))
            zero = g.create_node("prim.Constant", [], attrs={"value": 0.0}).output
            neg = g.create_node("np.negative", [x]).output
            prod = g.create_node("np.multiply", [neg, neg]).output
            w = g.create_node("np.where", [g.create_node("np.greater", [x, zero]).output, prod, neg]).output
            g.set_outputs([w, g.create_node("np.sum", [w], attrs={"axis": 0}).output])
            got = []
            for mode in ("sync", "off"):
                compiler.set_mode(mode)
                got.append([o.tobytes().hex() for o in compile_graph(g, [testing.type_of(a)])(a)])
            ref = np.where(a > 0, (-a) * (-a), -a)
            total = np.frombuffer(bytes.fromhex(got[0][1]), dtype)
            first = ref[np.argmax(np.isnan(ref), axis=0), np.arange(ncol)]   # a column's first NaN
            nan = np.isnan(first)
            out.append((got[0] == got[1], ref.tobytes().hex() == got[0][0],
                        total[nan].tobytes() == first[nan].tobytes(),
                        bool(np.isposinf(total[~nan & np.isinf(ref).any(axis=0)]).all()), isa.BUILD))
    print(out)
""")


@pytest.mark.parametrize("build", [b for b in RUNNABLE if b != isa.BUILD] or ["none"])
def test_other_isa_builds_negate_and_sum_packed_columns_alike(build, tmp_path):
    """The avx2 and baseline builds (NUMTRACE_CPU_ISA, a child process: the generated kernels compile
    for the build in use): negation, a where of it and its packed column sums (two chains of half
    vectors where the build's vectors are narrower) against the interpreter's bits, NumPy's
    elementwise bits, each column's first NaN and +inf."""
    if build == "none":
        pytest.skip("this machine runs one ISA build")
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(tmp_path), NUMTRACE_CPU_ISA=build)
    done = subprocess.run([sys.executable, "-c", _ISA_CHILD], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    results = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert results and all(r == (True, True, True, True, build) for r in results), results


_F32_OVERFLOW = ("float32 sums are added in double (docs/cpu.md) by the interpreter and the generated "
                 "kernels alike: where NumPy's float32 partial sums overflow to inf (3e38 + 3e38 - 3e38), "
                 "numtrace returns the finite 3e38, and raises no 'overflow'")


@pytest.mark.xfail(strict=True, reason=_F32_OVERFLOW)
@pytest.mark.parametrize("mode", ["sync", "off"])
@pytest.mark.parametrize("axis", [0, 1])
def test_float32_sum_that_overflows_midway_is_inf_as_numpy(axis, mode):
    x = np.ones((300, 4), np.float32)
    x[:3] = np.array([3e38, 3e38, -3e38], np.float32)[:, None]
    x = x if axis == 0 else np.ascontiguousarray(x.T)
    g = Graph()
    v = g.add_input("x", testing.type_of(x))
    neg = g.create_node("np.negative", [v]).output
    g.set_outputs([g.create_node("np.sum", [neg], attrs={"axis": axis}).output])
    got = _compiled(g, [testing.type_of(x)], mode)(x)[0]
    want = np.sum(-x, axis=axis)
    assert np.isneginf(want).all()
    assert got.tobytes() == want.tobytes()
