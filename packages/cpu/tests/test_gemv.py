"""The GEMV kernels (nt_gemv.h, gemv.pxi) behind matrix-vector MatmulSteps, and the bias/ReLU
epilogue fused into them: differential against NumPy over shapes, dtypes, weight layouts (C,
transposed, reversed, strided: the last falls back to NumPy), special values, 1 and 2 threads, and
concurrent calls."""


import numpy as np
import pytest
from numtrace_cpu import compile_graph, get_num_threads, set_num_threads
from numtrace_cpu.isa import blocks
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from threaded import run_threads

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # special values on purpose

SHAPES = [(1, 1), (1, 9), (9, 1), (3, 5), (63, 17), (64, 64), (65, 33), (130, 513), (784, 512), (512, 10),
          (1000, 3), (3, 1000), (0, 5), (2048, 300)]
TOL = {np.float32: 2e-6, np.float64: 1e-14}


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    """1 thread, or 2 with the GEMV team on (it only runs while its workers may spin)."""
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    set_num_threads(request.param)
    blocks.set_team_spin_us(100 if request.param > 1 else 0)
    yield request.param
    set_num_threads(old)
    blocks.set_team_spin_us(old_spin)


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _graph(x_shape, w_shape, dtype, *, vec_first=True, bias=False, relu=None):
    """(vector @ W) or (W @ vector), then `+ b` and maximum with 0 (relu: "h0" or "0h" order)."""
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(dtype), x_shape))
    w = g.add_input("w", TensorType(np.dtype(dtype), w_shape))
    h = _op(g, "np.matmul", x, w) if vec_first else _op(g, "np.matmul", w, x)
    if bias:
        b = g.add_input("b", TensorType(np.dtype(dtype), (h.type.shape[-1],)))
        h = _op(g, "np.add", h, b)
    if relu is not None:
        zero = _op(g, "prim.Constant", value=0)
        h = _op(g, "np.maximum", h, zero) if relu == "h0" else _op(g, "np.maximum", zero, h)
    g.set_outputs([h])
    return g


def _expected(x, w, b=None, relu=None, vec_first=True):
    h = x @ w if vec_first else w @ x
    if b is not None:
        h = h + b
    if relu == "h0":
        h = np.maximum(h, 0)
    elif relu == "0h":
        h = np.maximum(0, h)
    return h


def _assert_close(got, want, x, w, dtype, vec_first=True):
    """Within float rounding of NumPy: the kernels sum in another order than BLAS."""
    scale = np.abs(x) @ np.abs(w) if vec_first else np.abs(w) @ np.abs(x)
    k = w.shape[0] if vec_first else w.shape[1]
    tol = TOL[dtype] * (k + 4) * (scale + 1)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.all(np.abs(got[ok] - want[ok]) <= np.broadcast_to(tol, want.shape)[ok])


def _layouts(w):
    """The same matrix in several layouts: C, transposed (F), reversed columns, strided rows (the
    kernels take these), and strided in both axes (NumPy fallback)."""
    k, n = w.shape
    big = np.zeros((2 * k, 2 * n), w.dtype)
    big[::2, ::2] = w
    out = {"c": w, "f": np.asfortranarray(w), "strided_both": big[::2, ::2]}
    rows = np.zeros((2 * k, n), w.dtype)
    rows[::2] = w
    out["strided_rows"] = rows[::2]
    rev = np.ascontiguousarray(w[:, ::-1])
    out["reversed"] = rev[:, ::-1]
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_row_vector_times_matrix(dtype, shape, threads):
    rng = np.random.default_rng(sum(shape))
    k, n = shape
    for x_shape in ((1, k), (k,)):
        for bias, relu in ((False, None), (True, None), (True, "h0"), (True, "0h")):
            exe = compile_graph(_graph(x_shape, shape, dtype, bias=bias, relu=relu),
                                [TensorType(np.dtype(dtype), x_shape), TensorType(np.dtype(dtype), shape)]
                                + ([TensorType(np.dtype(dtype), (n,))] if bias else []))
            assert exe.stats()["fallbacks"] == 0
            assert "GEMV kernel" in exe.explain()
            x = rng.standard_normal(x_shape).astype(dtype)
            w = rng.standard_normal(shape).astype(dtype)
            b = rng.standard_normal(n).astype(dtype) if bias else None
            for wl in _layouts(w).values():
                (got,) = exe(x, wl, *([b] if bias else []))
                _assert_close(got, _expected(x, wl, b, relu), x, w, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (17, 64), (513, 130), (300, 2048)], ids=str)
def test_matrix_times_vector(dtype, shape, threads):
    rng = np.random.default_rng(sum(shape))
    m, k = shape
    exe = compile_graph(_graph((k,), shape, dtype, vec_first=False, bias=True, relu="h0"),
                        [TensorType(np.dtype(dtype), (k,)), TensorType(np.dtype(dtype), shape),
                         TensorType(np.dtype(dtype), (m,))])
    assert "GEMV kernel" in exe.explain()
    x = rng.standard_normal(k).astype(dtype)
    a = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(m).astype(dtype)
    for al in _layouts(a).values():
        (got,) = exe(x, al, b)
        _assert_close(got, _expected(x, al, b, "h0", vec_first=False), x, a, dtype, vec_first=False)
    (got,) = exe(np.repeat(x, 2)[::2], a, b)   # a strided vector: NumPy fallback
    _assert_close(got, _expected(x, a, b, "h0", vec_first=False), x, a, dtype, vec_first=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_and_relu_zero_signs(dtype):
    """NaN and inf propagate as in NumPy; maximum(h, 0) and maximum(0, h) keep NumPy's zero signs."""
    k, n = 70, 40
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    x[0, 3] = np.nan
    w[5, 7] = np.inf
    w[:, 11:20] = 0.0
    x2 = x.copy()
    x2[0, 3] = 1.0
    b = rng.standard_normal(n).astype(dtype)
    b[11:15] = -0.0
    b[15:20] = 0.0
    for relu in ("h0", "0h"):
        exe = compile_graph(_graph((1, k), (k, n), dtype, bias=True, relu=relu),
                            [TensorType(np.dtype(dtype), s) for s in ((1, k), (k, n), (n,))])
        for xv in (x, x2):
            (got,) = exe(xv, w, b)
            want = _expected(xv, w, b, relu)
            _assert_close(got, want, xv, np.nan_to_num(w, posinf=0), dtype)
            zeros = want == 0
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(900, 700), (64, 1025), (129, 1025), (40, 2049), (2048, 17), (1100, 33)],
                         ids=str)
def test_thread_counts_agree_bit_for_bit(dtype, shape):
    """The summation order is fixed by the row chunking, not by which columns (rows form) or rows
    (dot form) each thread computes: 1, 2 and 3 threads give the same bits, epilogue included
    (each shape has enough multiply-adds for the team, GEMV_PARALLEL_MIN)."""
    rng = np.random.default_rng(8)
    k, n = shape
    x = rng.standard_normal((1, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    exe = compile_graph(_graph((1, k), (k, n), dtype, bias=True, relu="h0"),
                        [TensorType(np.dtype(dtype), s) for s in ((1, k), (k, n), (n,))])
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    assert k * n >= blocks.GEMV_PARALLEL_MIN
    try:
        results = []
        for nthreads, spin in ((1, 0), (2, 100), (3, 100), (2, 0)):
            set_num_threads(nthreads)
            blocks.set_team_spin_us(spin)
            results.append([exe(x, wl, b)[0] for wl in (w, np.asfortranarray(w))])
    finally:
        set_num_threads(old)
        blocks.set_team_spin_us(old_spin)
    for r in results[1:]:
        for got, want in zip(r, results[0]):
            np.testing.assert_array_equal(got, want)
    _assert_close(results[0][0], _expected(x, w, b, "h0"), x, w, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [0, 1, 7, 8, 9, 63, 64, 65, 72, 129])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 31, 33, 511, 513, 1023, 1025], ids=lambda n: f"n{n}")
def test_edge_sizes_of_the_row_groups_chunks_and_column_blocks(dtype, k, n, threads):
    """K around the eight-row groups and the 64-row chunks, N around the vector widths and the
    columns whose partials the rows form keeps in L1 at once (NT_GEMV_COLS: 1024 float32, 512
    float64), in both layouts."""
    rng = np.random.default_rng(k * 1000 + n)
    exe = compile_graph(_graph((k,), (k, n), dtype, bias=True, relu="0h"),
                        [TensorType(np.dtype(dtype), s) for s in ((k,), (k, n), (n,))])
    x = rng.standard_normal(k).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    for wl in (w, np.asfortranarray(w)):
        (got,) = exe(x, wl, b)
        _assert_close(got, _expected(x, wl, b, "0h"), x, w, dtype)


def test_concurrent_calls_from_two_python_threads(threads):
    rng = np.random.default_rng(9)
    k, n = 784, 512
    exe = compile_graph(_graph((1, k), (k, n), np.float32, bias=True, relu="h0"),
                        [TensorType(np.dtype(np.float32), s) for s in ((1, k), (k, n), (n,))])
    cases = [(rng.standard_normal((1, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32),
              rng.standard_normal(n).astype(np.float32)) for _ in range(2)]
    want = [exe(*c)[0] for c in cases]
    errors = []

    def work(i):
        try:
            for _ in range(50):
                np.testing.assert_array_equal(exe(*cases[i])[0], want[i])
        except AssertionError as exc:
            errors.append(exc)

    run_threads(work, range(2))
    assert not errors
    _assert_close(want[0], _expected(*cases[0], "h0"), cases[0][0], cases[0][1], np.float32)


def test_epilogue_fused_only_when_nothing_else_reads_the_intermediate():
    """A product whose result is also a graph output, or a bias computed in the graph, keeps the
    bias add as its own op; the values equal NumPy's either way."""
    rng = np.random.default_rng(10)
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(np.float32), (1, 20)))
    w = g.add_input("w", TensorType(np.dtype(np.float32), (20, 30)))
    b = g.add_input("b", TensorType(np.dtype(np.float32), (30,)))
    h = _op(g, "np.matmul", x, w)
    b2 = _op(g, "np.multiply", b, b)   # a computed bias: not fused
    y = _op(g, "np.add", h, b2)
    z = _op(g, "np.add", h, b)         # h has two readers: nothing fused
    g.set_outputs([h, y, z])
    exe = compile_graph(g, [TensorType(np.dtype(np.float32), s) for s in ((1, 20), (20, 30), (30,))])
    assert "+ bias" not in exe.explain()
    xs, ws, bs = (rng.standard_normal(s).astype(np.float32) for s in ((1, 20), (20, 30), (30,)))
    got = exe(xs, ws, bs)
    want = (xs @ ws, xs @ ws + bs * bs, xs @ ws + bs)
    for a, e in zip(got, want):
        _assert_close(a, e, xs, ws, np.float32)


def test_gemv_refuses_bad_construction():
    ok = dict(vec=0, mat=1, out=2, k_axis=0, dtype=np.float32, fallback=lambda env, n: None)
    with pytest.raises(ValueError, match="k_axis"):
        blocks.Gemv(**{**ok, "k_axis": 2})
    with pytest.raises(ValueError, match="activation"):
        blocks.Gemv(**ok, activation="gelu")
    with pytest.raises(ValueError, match="float32 and float64"):
        blocks.Gemv(**{**ok, "dtype": np.int32})
    with pytest.raises(ValueError, match="fallback"):
        blocks.Gemv(**{**ok, "fallback": None})
    with pytest.raises(ValueError, match="spin"):
        blocks.set_team_spin_us(-1)


@pytest.mark.parametrize("k,n", [(1, 1), (3, 5), (8, 8), (9, 4)])
def test_small_products_with_a_fused_bias_keep_it(k, n):
    """A product small enough for the small-K pass whose bias/ReLU the GEMV step absorbs runs as that
    GEMV step: the bias and ReLU are applied, never dropped."""
    nt = pytest.importorskip("numtrace")   # the frontend traces the program (tests_cpu runs without it)

    def f(x, w, b):
        return np.maximum(x @ w + b, 0.0)

    rng = np.random.default_rng(k * 10 + n)
    args = (rng.standard_normal((1, k)), rng.standard_normal((k, n)), rng.standard_normal(n))
    traced = nt.trace(f, args, backend="cpu", check_trace=False)
    for _ in range(3):
        args = (rng.standard_normal((1, k)), rng.standard_normal((k, n)), rng.standard_normal(n) + 5.0)
        np.testing.assert_allclose(traced(*args), f(*args), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [2, 3, 5, 8])
@pytest.mark.parametrize("shape", [(1, 1), (9, 17), (64, 33), (130, 513), (784, 512), (0, 5)], ids=str)
def test_a_few_rows_of_x_share_one_pass_over_w(dtype, m, shape, threads):
    """(M, K) @ (K, N) for M <= GEMV_MAX_M with a run-time W runs on the GEMV kernels, every layout of
    W and x (rows of x and y apart by more than a row), with the bias and ReLU fused; each row of
    the result has the bits of the one-vector product of that row."""
    rng = np.random.default_rng(m * 100 + sum(shape))
    k, n = shape
    exe = compile_graph(_graph((m, k), shape, dtype, bias=True, relu="h0"),
                        [TensorType(np.dtype(dtype), s) for s in ((m, k), shape, (n,))])
    one = compile_graph(_graph((1, k), shape, dtype, bias=True, relu="h0"),
                        [TensorType(np.dtype(dtype), s) for s in ((1, k), shape, (n,))])
    stats = exe.stats()
    assert stats["gemv"] == 1 and stats["gemv_rows_of_x"] == 1 and stats["fallbacks"] == 0
    x = rng.standard_normal((m, k)).astype(dtype)
    x[0, : k // 2] = -0.0
    w = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    wide = np.zeros((m, 2 * k + 1), dtype)
    wide[:, :k] = x
    for xl in (x, wide[:, :k]):
        for name, wl in _layouts(w).items():
            (got,) = exe(xl, wl, b)
            _assert_close(got, _expected(xl, wl, b, "h0"), xl, w, dtype)
            if name in ("c", "f", "strided_rows"):   # the others are NumPy's (BLAS's bits)
                for i in range(m):
                    np.testing.assert_array_equal(got[i], one(xl[i:i + 1], wl, b)[0][0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_few_rows_special_values(dtype):
    """NaN and inf in one row of x stay in that row; -0.0 rows sum to NumPy's zeros."""
    rng = np.random.default_rng(11)
    m, k, n = 4, 70, 40
    x = rng.standard_normal((m, k)).astype(dtype)
    x[1, 3] = np.nan
    x[2, :] = -0.0
    w = rng.standard_normal((k, n)).astype(dtype)
    w[5, 7] = np.inf
    exe = compile_graph(_graph((m, k), (k, n), dtype),
                        [TensorType(np.dtype(dtype), s) for s in ((m, k), (k, n))])
    (got,) = exe(x, w)
    with np.errstate(invalid="ignore"):   # inf * 0 in NumPy's own product
        want = x @ w
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[:, 7], want[:, 7])
    np.testing.assert_array_equal(np.signbit(got[2]), np.signbit(want[2]))
    ok = np.ones(n, bool)
    ok[7] = False
    _assert_close(got[[0, 3]][:, ok], want[[0, 3]][:, ok], x[[0, 3]], w[:, ok], dtype)


def test_more_rows_or_constant_weights_stay_off_the_gemv_kernels():
    """Nine rows of x go to BLAS; a constant W at a few rows to the packed-weight kernels."""
    rng = np.random.default_rng(12)
    exe = compile_graph(_graph((9, 20), (20, 30), np.float32),
                        [TensorType(np.dtype(np.float32), s) for s in ((9, 20), (20, 30))])
    assert exe.stats()["gemv"] == 0
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(np.float32), (3, 20)))
    wv = rng.standard_normal((20, 30)).astype(np.float32)
    w = _op(g, "prim.Constant", value=wv)
    g.set_outputs([_op(g, "np.matmul", x, w)])
    exe = compile_graph(g, [TensorType(np.dtype(np.float32), (3, 20))])
    assert exe.stats()["gemv"] == 0 and exe.stats()["packed_matmuls"] == 1
    xs = rng.standard_normal((3, 20)).astype(np.float32)
    _assert_close(exe(xs)[0], xs @ wv, xs, wv, np.float32)


@pytest.mark.parametrize("spin", [0, 50])
def test_team_gemvs_are_counted(spin):
    """stats() counts the GEMV steps big enough for the thread team (GEMV_PARALLEL_MIN multiply-adds);
    with 2 threads and the spin on, each of their calls runs on the team or, backing off, on the
    calling thread alone (team_counts), with the same bits as one thread; with the spin off, on the
    calling thread without the team."""
    rng = np.random.default_rng(11)
    shapes = ((1, 784), (784, 512), (512,))
    exe = compile_graph(_graph(shapes[0], shapes[1], np.float32, bias=True, relu="h0"),
                        [TensorType(np.dtype(np.float32), s) for s in shapes])
    small = compile_graph(_graph((1, 9), (9, 5), np.float32), [TensorType(np.dtype(np.float32), s)
                                                                for s in ((1, 9), (9, 5))])
    assert exe.stats()["gemv_team"] == 1 and small.stats()["gemv_team"] == 0
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    try:
        set_num_threads(1)
        want = exe(x, w, b)[0]
        set_num_threads(2)
        blocks.set_team_spin_us(spin)
        before = blocks.team_counts()
        for _ in range(20):
            np.testing.assert_array_equal(exe(x, w, b)[0], want)
        after = blocks.team_counts()
    finally:
        set_num_threads(old)
        blocks.set_team_spin_us(old_spin)
    ran = {key: after[key] - before[key] for key in after}
    assert ran["jobs"] + ran["solo_runs"] == (20 if spin else 0)
    # A back-off ends a job; the misses before it may come from earlier tests' jobs (they carry over).
    assert ran["jobs_shared"] <= ran["jobs"] and ran["backoffs"] <= ran["jobs"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("k,n", [(320, 130), (784, 512), (200, 1000)])
def test_team_pieces_cut_by_columns_keep_one_threads_bits(dtype, m, k, n):
    """Row chunks that do not divide among the threads (5, 13 or 4 chunks of 64 rows on 2 or 3
    threads) are cut into one column range per thread; every output keeps the bits one thread gives
    (its k-order sum does not depend on the cut), tail columns and the few-rows form included."""
    rng = np.random.default_rng(k + n + m)
    shapes = ((m, k), (k, n), (n,))
    exe = compile_graph(_graph(shapes[0], shapes[1], dtype, bias=True, relu="0h"),
                        [TensorType(np.dtype(dtype), s) for s in shapes])
    x, w, b = (rng.standard_normal(s).astype(dtype) for s in shapes)
    w[::7, ::5] = -0.0
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    try:
        set_num_threads(1)
        assert exe.stats()["gemv_team_columns"] == 0
        want = exe(x, w, b)[0]
        blocks.set_team_spin_us(100)
        for nthreads in (2, 3):
            set_num_threads(nthreads)
            chunks = -(-k // 64)
            assert exe.stats()["gemv_team_columns"] == (1 if chunks % nthreads else 0)
            for _ in range(5):
                np.testing.assert_array_equal(exe(x, w, b)[0], want)
    finally:
        set_num_threads(old)
        blocks.set_team_spin_us(old_spin)
    _assert_close(want, _expected(x, w, b, "0h"), x, w, dtype)
