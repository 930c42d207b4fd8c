"""Reductions' fast paths against NumPy: column reductions folded in place (a pass that only reduces
its inputs over a leading axis), vector max/min, any/all that stop at the first decisive block, and
the integer shifts and heaviside kernels. Special values, odd sizes and layouts, 1 and 2 threads."""

import contextlib

import numpy as np
import numtrace_cpu
import pytest
from numtrace_ir.dims import ShapeError
from numtrace_ir.types import TensorType
from test_fast_paths import _compile, _const, _op, _sample


@contextlib.contextmanager
def _threads(n):
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(n)
    try:
        yield
    finally:
        numtrace_cpu.set_num_threads(before)


def _layouts(x):
    """x in the layouts a caller may pass: C, Fortran, strided, reversed, misaligned; each paired with
    the shape it has (strided views are smaller)."""
    out = [x, np.asfortranarray(x), x[..., ::-1, :], x[..., ::-1]]
    big = np.repeat(x, 2, axis=-1)
    out.append(big[..., ::2])                         # columns two elements apart: not in place
    raw = np.empty(x.nbytes + 1, np.uint8)[1:]        # every element misaligned
    mis = raw.view(x.dtype).reshape(x.shape)
    mis[...] = x
    out.append(mis)
    return out


_REDUCERS = {"np.sum": np.sum, "np.mean": np.mean, "np.max": np.max, "np.min": np.min,
             "np.any": np.any, "np.all": np.all, "np.var": np.var}


def _ops_for(dtype):
    if dtype == np.bool_:
        return ["np.any", "np.all", "np.max", "np.min"]
    if dtype.kind == "f":
        return ["np.sum", "np.mean", "np.max", "np.min", "np.var"]
    return ["np.sum", "np.max", "np.min"] + (["np.mean"] if dtype == np.int64 else [])


def _check(got, want, x, n):
    """Exact for integer and bool results; float ones within the rounding of a float sum of n terms
    (NumPy's float32 sum accumulates in float32, ours in float64; an int64 mean of values near the
    limits cancels), so the tolerance scales with n and the largest |x|."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        finite = np.abs(x[np.isfinite(x)]) if x.dtype.kind == "f" else np.abs(x.astype(np.float64))
        atol = 4 * np.finfo(got.dtype).eps * n * (float(finite.max()) if finite.size else 1.0)
        np.testing.assert_allclose(got, want, rtol=1e-5 if got.dtype == np.float32 else 1e-12, atol=atol,
                                   equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def _special(x):
    """x with special values where its dtype has them: NaN in the first and last rows and a whole
    NaN column, infinities; for ints the limits (so sums wrap), for bools all-true/all-false columns."""
    x = x.copy()
    rows = x.shape[-2]
    if x.dtype.kind == "f":
        x[..., 0, 0] = np.nan
        x[..., rows - 1, -1] = np.nan
        if x.shape[-1] > 2:
            x[..., :, 1] = np.nan
        x.flat[3::29] = np.inf
        x.flat[5::31] = -np.inf
    elif x.dtype.kind == "i":
        info = np.iinfo(x.dtype)
        x.flat[::7] = info.max
        x.flat[2::11] = info.min
    else:
        x[..., :, 0] = True
        if x.shape[-1] > 1:
            x[..., :, -1] = False
    return x


# (9, 2050) takes three column units; (1030, 1001) and (3, 700, 530) are big enough to run on two threads.
COLUMN_SHAPES = [(2, 1), (1, 9), (9, 1), (7, 5), (1000, 16), (5, 513), (9, 2050), (600, 700), (1030, 1001),
                 (3, 200, 7), (4, 3, 530), (3, 700, 530)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", COLUMN_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.bool_], ids=str)
def test_leading_axis_reductions_of_inputs(dtype, shape, threads):
    """A pass that only reduces its input over axis -2 folds the input where it lies, up to BLOCK
    columns wide; every layout and special value gives NumPy's result."""
    dtype = np.dtype(dtype)
    ax = len(shape) - 2
    names = _ops_for(dtype)
    exe = _compile([TensorType(dtype, shape)], lambda g, a: [_op(g, n, a, axis=ax) for n in names])
    assert exe.stats()["fallbacks"] == 0
    for x in [_sample(dtype, shape), _special(_sample(dtype, shape, 1))]:
        for v in _layouts(x):
            with _threads(threads), np.errstate(all="ignore"):
                got = exe(v)
            for g_, name in zip(got, names):
                with np.errstate(all="ignore"):
                    _check(g_, _REDUCERS[name](v, axis=ax), v, shape[ax])


@pytest.mark.parametrize("axis", [0, -1])
def test_reductions_over_an_empty_axis(axis):
    """Sums over an empty axis give zeros, any False and all True; max/min are refused as NumPy
    refuses them."""
    f64 = np.dtype(np.float64)
    shape = (0, 5) if axis == 0 else (5, 0)
    x = np.zeros(shape)
    exe = _compile([TensorType(f64, shape)], lambda g, a: [_op(g, "np.sum", a, axis=axis),
                                                           _op(g, "np.any", a, axis=axis),
                                                           _op(g, "np.all", a, axis=axis)])
    for got, want in zip(exe(x), [x.sum(axis=axis), x.any(axis=axis), x.all(axis=axis)]):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ShapeError, match="zero-size"):
        _compile([TensorType(f64, shape)], lambda g, a: [_op(g, "np.max", a, axis=axis)])


@pytest.mark.parametrize("n", [1, 15, 16, 17, 31, 33, 64, 511, 512, 513, 1001, 100003])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=str)
def test_float_max_min_over_all(dtype, n):
    """Max/min over all (vector accumulators with a NaN flag): NaN first, last or everywhere gives
    NaN; infinities and ties otherwise as NumPy."""
    dtype = np.dtype(dtype)
    exe = _compile([TensorType(dtype, (n,))], lambda g, a: [_op(g, "np.max", a), _op(g, "np.min", a)])
    base = _sample(dtype, (n,), n)
    cases = [base, np.full(n, 2.5, dtype), np.full(n, np.nan, dtype)]
    for where in (0, n - 1, n // 2):
        x = base.copy()
        x[where] = np.nan
        cases.append(x)
        y = base.copy()
        y[where] = np.inf
        y[(where + 1) % n] = -np.inf
        cases.append(y)
    for x in cases:
        mx, mn = exe(x)
        np.testing.assert_array_equal(mx, np.max(x))
        np.testing.assert_array_equal(mn, np.min(x))


def _decisive(shape, where, value):
    x = np.full(shape, not value)
    if where is not None:
        x.reshape(-1)[where] = value
    return x


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1,), (513,), (100000,), (300, 700), (7, 1)], ids=str)
def test_any_all_stop_early_and_stay_exact(shape, threads):
    """any/all over all and over the last axis, alone or together, on a bool input and fused behind
    a comparison: the decisive element first, last, in the middle or absent."""
    size = int(np.prod(shape))
    exe = _compile([TensorType(np.dtype(bool), shape)],
                   lambda g, a: [_op(g, "np.any", a), _op(g, "np.all", a), _op(g, "np.any", a, axis=-1)])
    exe_any = _compile([TensorType(np.dtype(bool), shape)], lambda g, a: [_op(g, "np.any", a)])
    exe_cmp = _compile([TensorType(np.dtype(np.float64), shape)],
                       lambda g, a: [_op(g, "np.all", _op(g, "np.less", a, _const(g, 0.5)))])
    for value in (True, False):
        for where in (0, size - 1, size // 2, None):
            x = _decisive(shape, where, value)
            with _threads(threads):
                got = exe(x) + exe_any(x) + exe_cmp(np.where(x, 0.0, 1.0))
            want = [np.any(x), np.all(x), np.any(x, axis=-1), np.any(x), np.all(np.where(x, 0.0, 1.0) < 0.5)]
            for g_, w in zip(got, want):
                np.testing.assert_array_equal(g_, w)


def test_any_beside_an_elementwise_output_still_writes_all_of_it():
    """A pass that also writes an elementwise result cannot stop at the decisive block."""
    shape = (5000,)
    f64 = np.dtype(np.float64)

    def body(g, a):
        m = _op(g, "np.greater", a, _const(g, 0.0))
        return [_op(g, "np.any", m), _op(g, "np.multiply", a, a)]
    exe = _compile([TensorType(f64, shape)], body)
    x = np.linspace(1.0, 2.0, shape[0])
    flag, sq = exe(x)
    assert flag
    np.testing.assert_array_equal(sq, x * x)


def test_any_beside_a_float_reduction_reads_everything():
    f64 = np.dtype(np.float64)

    def body(g, a):
        return [_op(g, "np.any", _op(g, "np.greater", a, _const(g, 0.0))), _op(g, "np.sum", a)]
    exe = _compile([TensorType(f64, (3000,))], body)
    x = np.linspace(1.0, 2.0, 3000)
    flag, s = exe(x)
    assert flag
    np.testing.assert_allclose(s, x.sum(), rtol=1e-13)


def _shift_values(dtype):
    info = np.iinfo(dtype)
    bits = info.bits
    limits = [info.max, info.min, info.max - 1, info.min + 1]
    a = np.array([0, 1, -1, 2, -2, 7, -7, 12345, -12345, *limits], dtype)
    b = np.array([*range(-3, bits + 3), -bits, -bits - 1, 2 * bits, info.max, info.min, -1000, 1000], dtype)
    return np.repeat(a, b.size), np.tile(b, a.size)


@pytest.mark.parametrize("name", ["left_shift", "right_shift"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=str)
def test_shifts_are_fused_and_match_numpy(dtype, name):
    """Counts >= the bit width give 0 (-1 for a negative right-shifted value); negative counts too."""
    a, b = _shift_values(np.dtype(dtype))
    ref = getattr(np, name)
    exe = _compile([TensorType(a.dtype, a.shape)] * 2, lambda g, x, y: [_op(g, f"np.{name}", x, y)])
    assert exe.stats()["fallbacks"] == 0 and exe.stats()["fused_groups"] == 1
    np.testing.assert_array_equal(exe(a, b)[0], ref(a, b))
    strided_a, reversed_b = np.repeat(a, 2)[::2], b[::-1]   # non-contiguous operands
    np.testing.assert_array_equal(exe(strided_a, reversed_b)[0], ref(a, reversed_b))
    c = _compile([TensorType(a.dtype, a.shape)],
                 lambda g, x: [_op(g, f"np.{name}", x, _const(g, 3))])
    np.testing.assert_array_equal(c(a)[0], ref(a, 3))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=str)
def test_heaviside_is_fused_and_matches_numpy(dtype):
    vals = np.array([np.nan, -np.nan, 0.0, -0.0, 1e-300, -1e-300, 2.5, -2.5, np.inf, -np.inf], dtype)
    h0 = np.array([0.5, np.nan, 0.0, 1.0, -3.0, np.inf], dtype)
    x, h = np.repeat(vals, h0.size), np.tile(h0, vals.size)
    exe = _compile([TensorType(x.dtype, x.shape)] * 2, lambda g, a, b: [_op(g, "np.heaviside", a, b)])
    assert exe.stats()["fallbacks"] == 0 and exe.stats()["fused_groups"] == 1
    np.testing.assert_array_equal(exe(x, h)[0], np.heaviside(x, h))
    big = _sample(np.dtype(dtype), (700, 3))
    big[::5] = 0
    exe = _compile([TensorType(big.dtype, big.shape)],
                   lambda g, a: [_op(g, "np.heaviside", a, _const(g, 0.5))])
    with _threads(2):
        got = exe(np.asfortranarray(big))[0]
    np.testing.assert_array_equal(got, np.heaviside(big, 0.5).astype(big.dtype))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("n", "k", "width"),
                         [(9, 3, 4), (700, 8, 4), (300, 2, 10), (5000, 8, 4), (3, 200, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=str)
def test_short_rows_of_a_broadcast_difference(dtype, n, k, width, threads):
    """``((x[:, None] - c[None]) ** 2).sum(-1)`` and its mean: the pass's rows of `width` elements lie
    along a dim of only k of them, so its blocks walk the longer dim of n instead. A row this short
    is summed in float64 in order from 0.0 (the block fold's order), bit for bit, as before."""
    dtype = np.dtype(dtype)
    x, c = _sample(dtype, (n, width), 1), _sample(dtype, (k, width), 2)
    x[0, 0], c[0, 1] = np.nan, np.inf

    def body(g, a, b):
        d = _op(g, "np.subtract", _op(g, "np.getitem", a, index=(slice(None), None, slice(None))),
                _op(g, "np.getitem", b, index=(None, slice(None), slice(None))))
        sq = _op(g, "np.multiply", d, d)
        return [_op(g, "np.sum", sq, axis=-1), _op(g, "np.mean", sq, axis=-1)]

    exe = _compile([TensorType(dtype, x.shape), TensorType(dtype, c.shape)], body)
    d = x[:, None] - c[None]
    with _threads(threads), np.errstate(all="ignore"):
        got = exe(x, c)
        want = [r.astype(dtype) for r in _ordered_row_sums(d * d)]
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert exe.stats()["rows_widened_runs"] == (1 if n > k else 0)


def _ordered_row_sums(sq):
    """Sum and mean over the last axis, each row added in order from 0.0 in float64 (a block fold of
    fewer than 16 terms: nt_simd.h's nt_sum)."""
    s = np.zeros(sq.shape[:-1])
    for i in range(sq.shape[-1]):
        s = s + sq[..., i].astype(np.float64)
    return s, s / sq.shape[-1]


@pytest.mark.parametrize("shape", [(3, 5), (1000, 10), (70, 3, 2)], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.bool_], ids=str)
def test_short_rows_of_a_column_operand(dtype, shape):
    """``x[..., None] * y`` over short rows: each row of a block is x's one element, repeated (every
    item size), and the row sums are NumPy's."""
    dtype = np.dtype(dtype)
    x, y = _sample(dtype, shape[:-1], 1), _sample(dtype, shape[-1:], 2)
    key = (Ellipsis, None)

    def body(g, a, b):
        p = _op(g, "np.multiply", _op(g, "np.getitem", a, index=key), b)
        return [p, _op(g, "np.max", p, axis=-1)]

    exe = _compile([TensorType(dtype, x.shape), TensorType(dtype, y.shape)], body)
    for v in _layouts(x) if x.ndim > 1 else [x, x[::-1]]:
        got = exe(v, y)
        np.testing.assert_array_equal(got[0], v[key] * y)
        np.testing.assert_array_equal(got[1], (v[key] * y).max(-1))


def _stats_graph(t, with_mean, instr):
    """mean (when `with_mean`), var and std of one input over its last axis, in one pass; `instr`
    folds x * 2 instead of x (a register the pass computes, not the input read in place)."""
    def body(g, x):
        src = _op(g, "np.multiply", x, _const(g, 2.0)) if instr else x
        outs = [_op(g, "np.mean", src, axis=-1, keepdims=True)] if with_mean else []
        return outs + [_op(g, "np.var", src, axis=-1, keepdims=True), _op(g, "np.std", src, axis=-1, ddof=1)]
    return _compile([t], body)


@pytest.mark.usefixtures("numpy_quiet")   # NaN and inf rows on purpose: NumPy warns for them too
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 129), (7, 256), (3, 1000), (2, 5000), (4, 3, 515)])
@pytest.mark.parametrize("instr", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_var_beside_a_mean_takes_its_block_sums(dtype, shape, instr, threads):
    """A layer norm's mean and var of one input: the var and std take the block sums the mean folded
    (stats' shared_sum_runs) and give the bits they give without a mean beside them; the values are
    NumPy's within a float sum's rounding, NaN and inf rows included, on every layout."""
    dtype = np.dtype(dtype)
    x = _sample(dtype, shape, seed=3) * 4
    x[..., 0, 1] = np.nan
    x[..., -1, -1] = np.inf if shape[-2] > 1 else x[..., -1, -1]
    x[..., 1:2, :] = -0.0   # a row of zeros where there are two
    t = TensorType(dtype, shape)
    with _threads(threads):
        shared, alone = _stats_graph(t, True, instr), _stats_graph(t, False, instr)
        assert shared.stats()["fused_groups"] == 1
        for v in _layouts(x)[:3]:
            got, want = shared(v), alone(v)
            for a, b in zip(got[1:], want):
                assert a.tobytes() == b.tobytes()
            src = v * 2 if instr else v
            with np.errstate(invalid="ignore"):
                for a, ref in zip(got, [np.mean(src, -1, keepdims=True), np.var(src, -1, keepdims=True),
                                        np.std(src, -1, ddof=1)]):
                    _check(a, ref, src, shape[-1])
    assert shared.stats()["shared_sum_runs"] > 0
    assert alone.stats()["shared_sum_runs"] == 0


@pytest.mark.usefixtures("numpy_quiet")   # NaN and inf on purpose
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [2 * 8 * 16384, 2 * 8 * 16384 + 7, 300_001])
@pytest.mark.parametrize("mode", ["sync", "off"])
@pytest.mark.parametrize("special", [None, np.nan, np.inf, -0.0])
def test_full_sum_split_over_threads_keeps_its_bits(dtype, n, mode, special, tmp_path, monkeypatch):
    """A full float sum/mean of a computed register, long enough for two threads, runs as rows of a
    block shared by the team (stats' split_row_runs) and gives the bits one thread gives (one row,
    its block sums added in order), generated kernel or interpreter, a tail of a part block included."""
    from numtrace_cpu import compiler
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path))
    dtype = np.dtype(dtype)
    x = _sample(dtype, (n,), seed=5) * 3
    if special is not None:
        x[n // 3] = special
        x[n - 2] = -special if special == special else special
    if special == -0.0:
        x[:] = -0.0

    def body(g, a):
        e = _op(g, "np.exp", _op(g, "np.multiply", a, _const(g, 0.5)))
        return [_op(g, "np.mean", e), _op(g, "np.sum", e), _op(g, "np.sum", a, axis=0)]

    old = compiler.set_mode(mode)
    try:
        exe = _compile([TensorType(dtype, (n,))], body)
    finally:
        compiler.set_mode(old)
    with _threads(1):
        want = exe(x)
    assert exe.stats()["split_row_runs"] == 0
    with _threads(2):
        got = exe(x)
    assert exe.stats()["split_row_runs"] == 1
    assert exe.stats()["generated_runs" if mode == "sync" else "interpreted_runs"] > 0
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    ref = np.exp(x * dtype.type(0.5))
    np.testing.assert_allclose(got[0], np.mean(ref), rtol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(got[1], np.sum(ref), rtol=1e-5 if dtype == np.float32 else 1e-12)
    if special == -0.0:
        assert np.signbit(got[2]) == np.signbit(np.sum(x))

