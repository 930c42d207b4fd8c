"""The packed kernels (nt_gemm.h, packed.pxi) behind products whose right operand is a trace constant,
module state or a run-time value, and the bias/residual/ReLU epilogue fused into them: differential
against NumPy over shapes (K = 1, odd M and N, tails of the register tile, 3-D inputs), dtypes, weight
layouts, special values and signed zeros, 1 and 2 threads (bit-identical), concurrent calls, and
weights changed between calls (never a stale pack)."""


import numpy as np
import pytest
from numtrace_cpu import blas_threads, compile_graph, get_num_threads, set_num_threads
from numtrace_cpu.classify import SMALL_K
from numtrace_cpu.isa import blocks
from numtrace_cpu.products import RUNTIME_MIN_ROWS
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from threaded import run_threads

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # special values on purpose

SHAPES = [(2, 1, 1), (3, 1, 7), (5, 3, 2), (7, 17, 33), (9, 64, 31), (13, 300, 65), (33, 257, 129),
          (64, 256, 32), (1000, 40, 10), (3, 5, 1000), (130, 600, 70)]
EPS = {np.float32: 2e-6, np.float64: 1e-14}
SOURCES = ["constant", "state", "runtime"]
EPILOGUES = [(), ("bias",), ("bias", "relu"), ("bias", "residual"), ("residual", "relu_zero_first"),
             ("bias", "residual", "relu")]


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _graph(x_shape, w, dtype, epilogue=(), *, constant):
    """x @ W then the epilogue ops; W a prim.Constant holding `w` (constant) or graph input 1 (else).
    Inputs: x, [w], then the bias (N,) and residual operands the epilogue reads."""
    t = np.dtype(dtype)
    g = Graph()
    x = g.add_input("x", TensorType(t, x_shape))
    wv = _op(g, "prim.Constant", value=w) if constant else g.add_input("w", TensorType(t, w.shape))
    h = _op(g, "np.matmul", x, wv)
    for name in epilogue:
        if name == "bias":
            h = _op(g, "np.add", h, g.add_input("b", TensorType(t, (w.shape[1],))))
        elif name == "residual":
            h = _op(g, "np.add", g.add_input("r", TensorType(t, h.type.shape)), h)
        else:
            zero = _op(g, "prim.Constant", value=0)
            h = _op(g, "np.maximum", h, zero) if name == "relu" else _op(g, "np.maximum", zero, h)
    g.set_outputs([h])
    return g


def _compile(x_shape, w, dtype, epilogue=(), *, source):
    """The executable of _graph with W `source`: "constant", "state" (module state) or "runtime"."""
    constant = source == "constant"
    g = _graph(x_shape, w, dtype, epilogue, constant=constant)
    types = [v.type for v in g.inputs]
    exe = compile_graph(g, types, state=(1,) if source == "state" else ())
    s = exe.stats()
    if not epilogue and w.shape[0] <= SMALL_K and w.shape[1] <= SMALL_K:
        assert s["small_matmuls"] == 1   # the small-K pass beats any packing there
        return exe
    if source == "runtime" and int(np.prod(x_shape[:-1])) < RUNTIME_MIN_ROWS:
        assert s["packed_matmuls"] == 0   # too few rows to repay packing
        return exe
    assert s["packed_matmuls"] == 1 and s["fallbacks"] == 0
    assert s["packed_constant"] == int(constant) and s["packed_runtime"] == int(source == "runtime")
    assert s["packed_epilogue_ops"] == len(epilogue)
    return exe


def _expected(x, w, epilogue, b=None, r=None):
    with np.errstate(all="ignore"):   # inf * 0 in the special-value cases
        h = x @ w
        for name in epilogue:
            h = h + b if name == "bias" else r + h if name == "residual" else (
                np.maximum(h, 0) if name == "relu" else np.maximum(0, h))
    return h


def _assert_close(got, want, x, w, dtype, r=None):
    """Within float rounding of NumPy: the kernels sum in another order than BLAS."""
    scale = np.abs(np.nan_to_num(x, nan=0, posinf=0, neginf=0)) @ np.abs(np.nan_to_num(w, nan=0, posinf=0,
                                                                                          neginf=0))
    if r is not None:
        scale = scale + np.abs(np.nan_to_num(r, nan=0, posinf=0, neginf=0))
    tol = EPS[dtype] * (w.shape[0] + 4) * (scale + 1)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    ok = np.isfinite(want)
    assert np.all(np.abs(got[ok] - want[ok]) <= np.broadcast_to(tol, want.shape)[ok])


def _operands(rng, x_shape, n, dtype, epilogue):
    b = rng.standard_normal(n).astype(dtype) if "bias" in epilogue else None
    r = rng.standard_normal(x_shape[:-1] + (n,)).astype(dtype) if "residual" in epilogue else None
    return b, r


def _call(exe, x, w, b, r, source):
    args = [x] + ([] if source == "constant" else [w]) + [v for v in (b, r) if v is not None]
    (got,) = exe(*args)
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("source", SOURCES)
def test_products_equal_numpy(dtype, shape, source, threads):
    m, k, n = shape
    rng = np.random.default_rng(m * k + n)
    w = rng.standard_normal((k, n)).astype(dtype)
    x = rng.standard_normal((m, k)).astype(dtype)
    for epilogue in EPILOGUES:
        exe = _compile(x.shape, w, dtype, epilogue, source=source)
        b, r = _operands(rng, x.shape, n, dtype, epilogue)
        got = _call(exe, x, w, b, r, source)
        _assert_close(got, _expected(x, w, epilogue, b, r), x, w, dtype, r)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_input_and_strided_rows(dtype, threads):
    """A (B, S, K) input is B*S rows; an input whose rows are a fixed step apart is read in place."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((48, 37)).astype(dtype)
    x = rng.standard_normal((3, 11, 48)).astype(dtype)
    exe = _compile(x.shape, w, dtype, ("bias", "residual"), source="constant")
    b, r = _operands(rng, x.shape, 37, dtype, ("bias", "residual"))
    want = _expected(x, w, ("bias", "residual"), b, r)
    _assert_close(_call(exe, x, w, b, r, "constant"), want, x, w, dtype, r)
    for source in ("state", "runtime"):
        exe2 = _compile((20, 48), w, dtype, ("bias",), source=source)
        big = rng.standard_normal((40, 96)).astype(dtype)
        for xs in (big[::2, :48], big[::2, ::2], np.asfortranarray(big[:20, :48])):   # the last two: fallback
            _assert_close(_call(exe2, xs, w, b, None, source), xs @ w + b, xs, w, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("source", ["state", "runtime"])
def test_weight_layouts_of_module_state(dtype, source, threads):
    """A weight packed per call is packed from whatever strides it has: transposed, reversed, strided,
    a broadcast row (stride 0)."""
    rng = np.random.default_rng(4)
    k, n = 70, 45
    w = rng.standard_normal((k, n)).astype(dtype)
    x = rng.standard_normal((17, k)).astype(dtype)
    exe = _compile(x.shape, w, dtype, ("bias", "relu"), source=source)
    b = rng.standard_normal(n).astype(dtype)
    big = np.zeros((2 * k, 3 * n), dtype)
    big[::2, ::3] = w
    for wl in (w, np.asfortranarray(w), np.ascontiguousarray(w[::-1, ::-1])[::-1, ::-1], big[::2, ::3],
               np.broadcast_to(w[3], (k, n))):
        _assert_close(_call(exe, x, wl, b, None, source), _expected(x, wl, ("bias", "relu"), b), x, w, dtype)


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values_and_zero_signs(dtype, source):
    """NaN and inf in weights and inputs propagate as NumPy's BLAS gives them (inf * 0 is NaN); a sum of
    -0.0 products is +0.0; zero rows and columns; ReLU keeps np.maximum's zero signs."""
    rng = np.random.default_rng(5)
    m, k, n = 19, 70, 41
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    x[2, 3] = np.nan
    x[4, 5] = np.inf
    x[6, :] = 0.0
    x[7, :] = -0.0
    w[5, 7] = np.inf
    w[8, 9] = -np.inf
    w[10, 30] = np.nan
    w[:, 11:20] = 0.0
    w[:, 20:22] = -0.0
    b = rng.standard_normal(n).astype(dtype)
    b[11:15] = -0.0
    b[15:20] = 0.0
    for epilogue in ((), ("bias",), ("bias", "relu"), ("bias", "relu_zero_first")):
        exe = _compile(x.shape, w, dtype, epilogue, source=source)
        got = _call(exe, x, w, b if epilogue else None, None, source)
        want = _expected(x, w, epilogue, b)
        _assert_close(got, want, x, w, dtype)
        zeros = want == 0
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


@pytest.mark.parametrize("mkn", [(130, 700, 300), (128, 1024, 256)], ids=str)
def test_one_and_two_threads_agree_bit_for_bit(mkn):
    """Each output is one sum in k order whatever thread runs its unit, however the work is split (a
    weight packed per call splits its few column panels before the rows)."""
    m, k, n = mkn
    rng = np.random.default_rng(6)
    w = rng.standard_normal((k, n)).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    results = []
    old = get_num_threads()
    try:
        for source in SOURCES:
            exe = _compile(x.shape, w, np.float32, source=source)
            for nthreads in (1, 2, 3):
                set_num_threads(nthreads)
                results.append(_call(exe, x, w, None, None, source))
    finally:
        set_num_threads(old)
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])
    _assert_close(results[0], x @ w, x, w, np.float32)


@pytest.mark.parametrize("nthreads", [64, 100, 300])
def test_many_threads_and_many_panels_keep_the_units_of_a_job_in_bounds(nthreads):
    """More threads than column panels per team job: a weight packed per call, split into narrow
    panel chunks first, still needs at most NT_TEAM_MAX_UNITS of them per job (no zero units per job
    to divide by)."""
    m, k, n = 16, 16, 4800   # 300 float64 panels (150 float32)
    rng = np.random.default_rng(8)
    w = rng.standard_normal((k, n))
    x = rng.standard_normal((m, k))
    exe = _compile(x.shape, w, np.float64, source="runtime")
    old = get_num_threads()
    try:
        set_num_threads(nthreads)
        got = _call(exe, x, w, None, None, "runtime")
    finally:
        set_num_threads(old)
    _assert_close(got, x @ w, x, w, np.float64)


def test_module_state_changed_between_calls_is_never_stale(threads):
    """A state weight written in place, or another array passed in its place, is what the next call
    reads; a constant is packed once and kept."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((300, 90)).astype(np.float32)
    x = rng.standard_normal((64, 300)).astype(np.float32)
    for source in ("state", "runtime"):
        exe = _compile(x.shape, w, np.float32, source=source)
        _assert_close(_call(exe, x, w, None, None, source), x @ w, x, w, np.float32)
        w[:150] *= -2.0                                     # in place
        _assert_close(_call(exe, x, w, None, None, source), x @ w, x, w, np.float32)
        w2 = rng.standard_normal((300, 90)).astype(np.float32)   # another array
        _assert_close(_call(exe, x, w2, None, None, source), x @ w2, x, w2, np.float32)
    const = _compile(x.shape, w, np.float32, source="constant")
    want = x @ w
    for _ in range(3):
        _assert_close(_call(const, x, w, None, None, "constant"), want, x, w, np.float32)


def test_concurrent_calls_from_two_python_threads(threads):
    rng = np.random.default_rng(8)
    w = rng.standard_normal((256, 200)).astype(np.float32)
    exes = [_compile((96, 256), w, np.float32, ("bias", "relu"), source=c) for c in SOURCES]
    cases = [(rng.standard_normal((96, 256)).astype(np.float32), rng.standard_normal(200).astype(np.float32))
             for _ in range(2)]
    want = [[_call(e, x, w, b, None, c) for x, b in cases] for e, c in zip(exes, SOURCES)]
    errors = []

    def work(i):
        try:
            for _ in range(20):
                for e, c, ws in zip(exes, SOURCES, want):
                    np.testing.assert_array_equal(_call(e, cases[i][0], w, cases[i][1], None, c), ws[i])
        except AssertionError as exc:
            errors.append(exc)

    run_threads(work, range(2))
    assert not errors
    _assert_close(want[0][0], np.maximum(cases[0][0] @ w + cases[0][1], 0), cases[0][0], w, np.float32)


def test_which_products_of_run_time_values_stay_with_blas():
    """Products of two run-time values run on the packed kernels from RUNTIME_MIN_ROWS rows of A and on the
    GEMV kernels below; complex products and broadcast stacks stay with NumPy's matmul (equal to NumPy's
    bit for bit)."""
    rng = np.random.default_rng(11)
    m = RUNTIME_MIN_ROWS
    for a_shape, b_shape, dtype, packed in (((m - 1, 30), (30, 20), np.float32, False),
                                            ((m + 1, 30), (30, 20), np.float32, True),
                                            ((2, m // 2, 30), (30, 20), np.float64, True),
                                            ((2, m, 30), (1, 30, 20), np.float32, False),
                                            ((1, m, 30), (3, 30, 20), np.float64, False),
                                            ((m, 30), (30, 20), np.complex64, False)):
        t = np.dtype(dtype)
        g = Graph()
        a = g.add_input("a", TensorType(t, a_shape))
        b = g.add_input("b", TensorType(t, b_shape))
        g.set_outputs([_op(g, "np.matmul", a, b)])
        for state in ((), (1,)):
            exe = compile_graph(g, [a.type, b.type], state=state)
            s = exe.stats()
            few_rows_state = state == (1,) and a_shape[0] == m - 1 and t.kind == "f"
            assert s["packed_matmuls"] == (packed or few_rows_state)
            assert s["packed_runtime"] == (packed and not state)
            # a few rows of x times a run-time W (2 to GEMV_MAX_M) run on the GEMV kernels instead
            assert s["gemv"] == (a_shape[0] == m - 1 and not state and t.kind == "f")
            assert ("BLAS matmul" in exe.explain()) == (s["packed_matmuls"] == 0 and s["gemv"] == 0)
            av = rng.standard_normal(a_shape).astype(dtype)
            bv = rng.standard_normal(b_shape).astype(dtype)
            (got,) = exe(av, bv)
            if s["packed_matmuls"] or s["gemv"]:
                np.testing.assert_allclose(got, av @ bv, rtol=1e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(got, av @ bv)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(40, 0, 7), (40, 7, 0), (0, 7, 9), (40, 1, 1), (17, 1, 33), (16, 9, 1),
                                 (257, 31, 65), (41, 513, 97)], ids=str)
def test_run_time_operands_at_edge_sizes(dtype, mkn, threads):
    """Zero, one and odd sizes, and sizes past the register tile and the k block, of two run-time
    operands: NumPy's values (zeros for K == 0, empty results), with the epilogue."""
    m, k, n = mkn
    rng = np.random.default_rng(m + 7 * k + 31 * n)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    b, r = _operands(rng, x.shape, n, dtype, ("bias", "residual"))
    g = _graph(x.shape, w, dtype, ("bias", "residual", "relu"), constant=False)
    exe = compile_graph(g, [v.type for v in g.inputs])
    assert exe.stats()["packed_runtime"] == int(m >= RUNTIME_MIN_ROWS)   # K == 0: NumPy at run time
    got = _call(exe, x, w, b, r, "runtime")
    _assert_close(got, _expected(x, w, ("bias", "residual", "relu"), b, r), x, w, dtype, r)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("state", [(1,), ()], ids=["state", "runtime"])
def test_stacks_of_products_as_in_attention(dtype, state, threads):
    """Stacks of module-state or run-time right operands: (H, S, D) @ (H, D, S) with transposed views,
    4-D stacks, a stack deeper than one team job, stacks whose leading dims do not merge (NumPy
    fallback)."""
    rng = np.random.default_rng(12)
    t = np.dtype(dtype)
    shapes = (((4, 128, 64), (4, 64, 128)), ((2, 3, 9, 17), (2, 3, 17, 33)), ((300, 3, 5), (300, 5, 2)),
              ((5, 1, 40), (5, 40, 70)))
    if not state:   # enough rows to repay packing a run-time operand
        shapes = (((4, 128, 64), (4, 64, 128)), ((2, 3, 17, 17), (2, 3, 17, 33)), ((300, 16, 5), (300, 5, 2)))
    for a_shape, b_shape in shapes:
        g = Graph()
        a = g.add_input("a", TensorType(t, a_shape))
        b = g.add_input("b", TensorType(t, b_shape))
        r = g.add_input("r", TensorType(t, a_shape[:-1] + b_shape[-1:]))
        g.set_outputs([_op(g, "np.add", _op(g, "np.matmul", a, b), r)])
        exe = compile_graph(g, [a.type, b.type, r.type], state=state)
        assert exe.stats()["packed_matmuls"] == 1 and exe.stats()["packed_epilogue_ops"] == 1
        av = rng.standard_normal(a_shape).astype(dtype)
        bv = rng.standard_normal(b_shape).astype(dtype)
        rv = rng.standard_normal(r.type.shape).astype(dtype)
        bt = np.ascontiguousarray(np.swapaxes(bv, -1, -2))
        big = np.zeros(a_shape[:-1] + (2 * a_shape[-1],), dtype)
        big[..., ::2] = av
        layouts = ((av, bv), (av, np.swapaxes(bt, -1, -2)), (big[..., ::2], bv), (av[::-1][::-1], bv[::-1]))
        for al, bl in layouts:
            (got,) = exe(al, bl, rv)
            want = al @ bl + rv
            scale = np.abs(al) @ np.abs(bl) + np.abs(rv)
            assert np.all(np.abs(got - want) <= EPS[dtype] * (b_shape[-2] + 4) * (scale + 1))


def test_residual_computed_after_the_product_is_not_fused():
    """A residual whose pass runs after the product (it reads another product's result) stays its own
    add: the product cannot read a value not yet computed."""
    rng = np.random.default_rng(10)
    t = np.dtype(np.float32)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    g = Graph()
    x = g.add_input("x", TensorType(t, (8, 16)))
    h = _op(g, "np.matmul", x, _op(g, "prim.Constant", value=w))
    r = _op(g, "np.exp", _op(g, "np.matmul", x, _op(g, "prim.Constant", value=w.T.copy())))
    g.set_outputs([_op(g, "np.add", h, r)])
    exe = compile_graph(g, [x.type])
    xs = rng.standard_normal((8, 16)).astype(np.float32)
    (got,) = exe(xs)
    _assert_close(got, xs @ w + np.exp(xs @ w.T), xs, w, np.float32, np.exp(xs @ w.T))
    assert exe.stats()["packed_matmuls"] == 2 and "+ residual" not in exe.explain()


def test_packed_refuses_bad_construction():
    ok = dict(a=0, b=1, out=2, dtype=np.float32, fallback=lambda env, n: None)
    with pytest.raises(ValueError, match="float32 and float64"):
        blocks.PackedMatmul(**{**ok, "dtype": np.int32})
    with pytest.raises(ValueError, match="fallback"):
        blocks.PackedMatmul(**{**ok, "fallback": None})
    with pytest.raises(ValueError, match="unknown epilogue"):
        blocks.PackedMatmul(**ok, epilogue=[("gelu", None)])
    with pytest.raises(ValueError, match="needs its one value"):
        blocks.PackedMatmul(**ok, epilogue=[("bias", -1)])
    with pytest.raises(ValueError, match="2-D"):
        blocks.pack_weights(np.zeros(3, np.float32))


@pytest.mark.skipif(not blas_threads.available(), reason="NumPy's BLAS is not a bundled OpenBLAS")
def test_blas_products_run_on_one_openblas_thread(monkeypatch):
    """numtrace's own BLAS calls, large ones too, hold OpenBLAS to one thread while they run (its pool
    would spin on and compete with numtrace's threads for the cores) and restore the count after, also
    on errors."""
    get, put = blas_threads._FUNCTIONS
    seen = []
    old = get()
    put(2)
    try:
        blas_threads.one_thread(lambda env, n: seen.append(get()))([], 1)
        assert seen == [1] and get() == 2

        def fails(env, n):
            raise RuntimeError("boom")
        with pytest.raises(RuntimeError, match="boom"):
            blas_threads.one_thread(fails)([], 1)
        assert get() == 2
    finally:
        put(old)
    rng = np.random.default_rng(13)
    t = np.dtype(np.float32)
    g = Graph()
    a = g.add_input("a", TensorType(t, (4, 128, 64)))
    b = g.add_input("b", TensorType(t, (1, 64, 128)))   # a broadcast stack: BLAS
    g.set_outputs([_op(g, "np.matmul", a, b)])
    exe = compile_graph(g, [a.type, b.type])
    assert exe.stats()["packed_matmuls"] == 0
    av = rng.standard_normal((4, 128, 64)).astype(np.float32)
    bv = rng.standard_normal((1, 64, 128)).astype(np.float32)
    # OpenBLAS sums in another order on one thread than on two: equal to float rounding
    _assert_close(exe(av, bv)[0], av @ bv, av[0], bv[0], np.float32)
    # a large complex product (no packed or GEMV kernel): BLAS, on one thread too
    real = np.matmul
    t = np.dtype(np.complex64)

    def spy(*args, **kwargs):
        seen.append(get())
        return real(*args, **kwargs)
    g = Graph()
    a = g.add_input("a", TensorType(t, (4, 2048)))
    b = g.add_input("b", TensorType(t, (2048, 1024)))
    g.set_outputs([_op(g, "np.matmul", a, b)])
    monkeypatch.setattr(np, "matmul", spy)   # read when the executable is made
    exe = compile_graph(g, [a.type, b.type])
    monkeypatch.undo()
    assert exe.stats()["packed_matmuls"] == 0
    seen.clear()
    put(2)
    try:
        av = (rng.standard_normal((4, 2048)) + 1j * rng.standard_normal((4, 2048))).astype(np.complex64)
        bv = (rng.standard_normal((2048, 1024)) + 1j * rng.standard_normal((2048, 1024))).astype(np.complex64)
        np.testing.assert_allclose(exe(av, bv)[0], av @ bv, rtol=1e-3, atol=1e-2)
        assert seen == [1] and get() == 2
    finally:
        put(old)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kn", [(9, 5), (15, 33), (16, 32), (17, 1), (33, 70), (300, 31)], ids=str)
def test_transposed_run_time_weight_packs_as_a_contiguous_one(dtype, kn, threads):
    """A run-time B that is a transposed view (its k adjacent, as attention's keys: packed 16 rows of k
    at a time through register transposes on AVX-512) gives the bits of the same B passed contiguous,
    NaN, inf and -0.0 included, at sizes around the 16-row blocks and the 32-column panels."""
    k, n = kn
    rng = np.random.default_rng(k * n)
    x = rng.standard_normal((20, k)).astype(dtype)
    bt = rng.standard_normal((n, k)).astype(dtype)
    bt.flat[::7] = -0.0
    bt.flat[3::29] = np.nan
    bt.flat[5::31] = np.inf
    g = _graph(x.shape, bt.T, dtype, constant=False)
    exe = compile_graph(g, [v.type for v in g.inputs])
    assert exe.stats()["packed_runtime"] == 1
    with np.errstate(all="ignore"):
        (got,) = exe(x, bt.T)
        (want,) = exe(x, np.ascontiguousarray(bt.T))
        ref = x @ bt.T
    assert got.tobytes() == want.tobytes()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = np.isfinite(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=1e-4, atol=1e-4 * k)


def _team_calls(exe, x, w, b, source, calls, spin_us):
    """(one thread's result, `calls` results at two threads with the team spinning `spin_us`, what the
    team counted over those calls)."""
    old, old_spin = get_num_threads(), blocks.team_spin_us()
    try:
        set_num_threads(1)
        want = _call(exe, x, w, b, None, source)
        set_num_threads(2)
        blocks.set_team_spin_us(spin_us)
        before = blocks.team_counts()
        got = [_call(exe, x, w, b, None, source) for _ in range(calls)]
        after = blocks.team_counts()
    finally:
        set_num_threads(old)
        blocks.set_team_spin_us(old_spin)
    return want, got, {key: after[key] - before[key] for key in after}


@pytest.mark.parametrize("spin_us", [0, 50])
def test_products_leave_the_team_spinning_for_the_next_one(spin_us):
    """A packed product, like a GEMV, leaves the team's workers spinning for NUMTRACE_TEAM_SPIN_US,
    so that a transformer block's next product finds them awake: each product of a block woke a
    sleeping worker that joined late, and two threads ran the block no faster than one. Each call
    is a job after which the workers spin or, during a back-off, a run on the calling thread alone;
    spin 0 lets them sleep at once. The bits are one thread's either way."""
    rng = np.random.default_rng(9)
    w = rng.standard_normal((256, 256)).astype(np.float32)
    x = rng.standard_normal((128, 256)).astype(np.float32)
    exe = _compile(x.shape, w, np.float32, ("bias",), source="runtime")
    b = rng.standard_normal(256).astype(np.float32)
    want, got, delta = _team_calls(exe, x, w, b, "runtime", 20, spin_us)
    if spin_us:
        assert delta["jobs_spinning"] + delta["solo_runs"] == 20, delta
    else:
        assert delta["jobs_spinning"] == delta["solo_runs"] == 0 and delta["jobs"] >= 1, delta
    for g in got:
        np.testing.assert_array_equal(g, want)


def _direct_runs(exe):
    return exe.stats()["packed_direct_runs"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(9, 5, 32), (20, 70, 45), (33, 300, 100), (128, 256, 768), (9, 600, 64)],
                         ids=str)
def test_run_time_weight_read_in_place_gives_the_bits_of_a_packed_one(dtype, mkn, threads):
    """A run-time B with contiguous rows is read where it lies (its full column panels; a partial last
    panel is packed): the same values in the same order as the weight packed once, so the same bits,
    NaN, inf and -0.0 included, over blocks of k (K > 256), partial panels and fused epilogues."""
    m, k, n = mkn
    rng = np.random.default_rng(m + k + n)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    w.flat[::11] = -0.0
    w.flat[3::37] = np.nan
    w.flat[5::41] = np.inf
    x[1, :] = -0.0
    x[2, 4 % k] = -np.inf
    epilogue = ("bias", "relu")
    b = rng.standard_normal(n).astype(dtype)
    b[::3] = -0.0
    runtime = _compile(x.shape, w, dtype, epilogue, source="runtime")
    constant = _compile(x.shape, w, dtype, epilogue, source="constant")
    got = _call(runtime, x, w, b, None, "runtime")
    assert _direct_runs(runtime) == 1
    want = _call(constant, x, w, b, None, "constant")
    assert got.tobytes() == want.tobytes()
    _assert_close(got, _expected(x, w, epilogue, b), x, w, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_which_run_time_weights_are_read_in_place(dtype, threads):
    """Rows a multiple of 4 KB apart (their panels share a few L1 sets), reversed or transposed, fewer
    columns than a panel, or rows more than 16 KB apart are packed per call; rows a few KB apart are
    read in place. Every layout gives the bits of the contiguous weight packed once."""
    rng = np.random.default_rng(9)
    k, n = 40, 64
    x = rng.standard_normal((24, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    itemsize = np.dtype(dtype).itemsize
    runtime = _compile(x.shape, w, dtype, source="runtime")
    constant = _compile(x.shape, w, dtype, source="constant")
    want = _call(constant, x, w, None, None, "constant")

    def within(cols):   # w as the first n columns of rows `cols` elements long
        big = np.zeros((k, cols), dtype)
        big[:, :n] = w
        return big[:, :n]

    layouts = [(w, 1), (within(1000), 1), (within(4096 // itemsize), 0), (within(8192 // itemsize), 0),
               (within(20000 // itemsize), 0), (np.ascontiguousarray(w[::-1])[::-1], 0),
               (np.asfortranarray(w), 0)]
    for wl, direct in layouts:
        before = _direct_runs(runtime)
        got = _call(runtime, x, wl, None, None, "runtime")
        assert _direct_runs(runtime) - before == direct, wl.strides
        assert got.tobytes() == want.tobytes()
    narrow = w[:, :blocks.GEMM_MICRO_TILE[1 if dtype == np.float32 else 2] - 1]
    exe = _compile(x.shape, narrow, dtype, source="runtime")
    _call(exe, x, narrow, None, None, "runtime")
    assert _direct_runs(exe) == 0
    tall = rng.standard_normal((129, k)).astype(dtype)   # more rows than _GEMM_DIRECT_MAX_ROWS
    exe = _compile(tall.shape, w, dtype, source="runtime")
    got = _call(exe, tall, w, None, None, "runtime")
    assert _direct_runs(exe) == 0
    assert got[:24].tobytes() == _call(runtime, tall[:24], w, None, None, "runtime").tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", ["one", "odd", "vector"])
@pytest.mark.parametrize("source", SOURCES)
def test_panel_of_one_vector_of_columns_gives_the_bits_of_a_full_one(dtype, width, source, threads):
    """A last panel whose columns fit one vector (an output layer of 10 classes) runs the half register
    tile (nt_gemm.h's nt_gemm_htile): each column is the same k-order sum as the same column in a
    full panel, so the same bits, over blocks of k (K > 256), a last row block shorter than the tile,
    NaN, inf, -0.0 and the fused epilogue."""
    nr = blocks.GEMM_MICRO_TILE[1 if dtype == np.float32 else 2]
    n = {"one": 1, "odd": nr // 4 + 1, "vector": nr // 2}[width]
    m, k = 2 * blocks.GEMM_MICRO_TILE[0] + 3, 600
    rng = np.random.default_rng(n)
    x = rng.standard_normal((m, k)).astype(dtype)
    wide = rng.standard_normal((k, nr + n)).astype(dtype)   # its first panel full, holding the n columns
    wide.flat[::13] = -0.0
    wide[7, 0] = np.nan
    wide[9, n - 1] = np.inf
    x[1, :] = -0.0
    w = np.ascontiguousarray(wide[:, :n])
    epilogue = ("bias", "relu")
    b = rng.standard_normal(nr + n).astype(dtype)
    b[::3] = -0.0
    got = _call(_compile(x.shape, w, dtype, epilogue, source=source), x, w, b[:n], None, source)
    full = _call(_compile(x.shape, wide, dtype, epilogue, source=source), x, wide, b, None, source)
    assert got.tobytes() == np.ascontiguousarray(full[:, :n]).tobytes()
    _assert_close(got, _expected(x, w, epilogue, b[:n]), x, w, dtype)


def test_team_threshold_counts_the_columns_the_kernels_run():
    """A product goes to the team by the multiply-adds its kernels run, its last panel's columns
    rounded up (packed.pxi's GEMM_PARALLEL_MIN): a classifier's head of 10 classes at batch 512
    (655k real, 1M run on 16-lane vectors) is shared by two threads, with one thread's bits."""
    nr = blocks.GEMM_MICRO_TILE[1]
    run = nr // 2 if 10 <= nr // 2 else nr   # the columns of the panel the kernels run
    m, k = blocks.GEMM_PARALLEL_MIN // (run * 128), 128
    assert m * k * 10 < blocks.GEMM_PARALLEL_MIN <= m * k * run
    rng = np.random.default_rng(10)
    w = rng.standard_normal((k, 10)).astype(np.float32)
    x = rng.standard_normal((m, k)).astype(np.float32)
    exe = _compile(x.shape, w, np.float32, ("bias",), source="state")
    b = rng.standard_normal(10).astype(np.float32)
    want, got, delta = _team_calls(exe, x, w, b, "state", 10, 50)
    assert delta["jobs_spinning"] + delta["solo_runs"] == 10, delta   # each call asked for the team
    for g in got:
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["rows_8kb_apart", "reversed_rows", "tall_x"])
def test_run_time_weight_packed_per_call_gives_the_bits_of_a_packed_one(dtype, layout, threads):
    """A run-time B packed per call with contiguous rows is packed row by row (every panel of the unit
    from one run of each row), and each unit prefetches the next block of k or the next unit's rows
    (nt_gemm.h): over several blocks of k, units of several panels and a partial last panel, with rows
    8 KB apart, in reverse order (negative steps) or a tall x, the bits of the weight packed once."""
    rng = np.random.default_rng(21)
    m, k, n = (130 if layout == "tall_x" else 40), 600, 1000
    x = rng.standard_normal((m, k)).astype(dtype)
    w = rng.standard_normal((k, n)).astype(dtype)
    w.flat[::13] = -0.0
    w.flat[7::101] = np.nan
    if layout == "rows_8kb_apart":
        big = np.zeros((k, 4096 // np.dtype(dtype).itemsize * 2), dtype)
        big[:, :n] = w
        wl = big[:, :n]
    elif layout == "reversed_rows":
        wl = np.ascontiguousarray(w[::-1])[::-1]
    else:
        wl = w
    runtime = _compile(x.shape, w, dtype, ("bias",), source="runtime")
    constant = _compile(x.shape, w, dtype, ("bias",), source="constant")
    b = rng.standard_normal(n).astype(dtype)
    got = _call(runtime, x, wl, b, None, "runtime")
    assert _direct_runs(runtime) == 0
    assert got.tobytes() == _call(constant, x, w, b, None, "constant").tobytes()
    _assert_close(got, _expected(x, w, ("bias",), b), x, w, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("mk", [(19, 9), (64, 64), (21, 300)], ids=str)
def test_narrow_panels_give_the_bits_of_full_panels(dtype, source, mk, threads):
    """A column panel of at most one vector of columns (attention's p @ v at 16 columns a head) runs on
    half tiles (nt_gemm_htile): each output is the same sum in the same order as in a full panel, so
    the columns of a narrow product have the bits of the same columns of a wide one, NaN, inf and -0.0,
    partial row blocks, blocks of k (K > 256) and the fused epilogue included."""
    m, k = mk
    nr = blocks.GEMM_MICRO_TILE[1 if dtype == np.float32 else 2]
    rng = np.random.default_rng(m + k)
    x = rng.standard_normal((m, k)).astype(dtype)
    x[1, :] = -0.0
    x[2, 3] = -np.inf
    wide = rng.standard_normal((k, 2 * nr)).astype(dtype)
    wide.flat[::13] = -0.0
    wide.flat[5::41] = np.nan
    b = rng.standard_normal(2 * nr).astype(dtype)
    b[::3] = -0.0
    epilogue = ("bias", "relu")
    full = _call(_compile(x.shape, wide, dtype, epilogue, source=source), x, wide, b, None, source)
    for n in (1, nr // 2 - 1, nr // 2, nr + 3, nr + nr // 2):   # the last panel at most half a panel wide
        w = np.ascontiguousarray(wide[:, :n])
        got = _call(_compile(x.shape, w, dtype, epilogue, source=source), x, w, b[:n], None, source)
        assert got.tobytes() == np.ascontiguousarray(full[:, :n]).tobytes(), n
        _assert_close(got, _expected(x, w, epilogue, b[:n]), x, w, dtype)


def _heads(a, heads):
    """(B, S, H * D) -> (B, H, S, D): a view whose two leading dims do not merge into one step."""
    b, s, hd = a.shape
    return a.reshape(b, s, heads, hd // heads).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bshd", [(3, 64, 4, 16), (2, 9, 3, 40), (30, 8, 10, 4)], ids=str)
def test_stacks_of_head_views_run_at_a_table_of_offsets(dtype, bshd, threads):
    """Attention's q @ k.T and p @ v on heads viewed out of (B, S, H * D): the stack's leading dims do
    not merge into one step, so the products run at a table of each product's offsets (before: NumPy's
    matmul). Each product has the bits of the same product on contiguous copies (one step apart), a
    residual epilogue of another layout and a stack deeper than one team job (300 products) included;
    a v of one vector's columns a head is read where it lies."""
    b, s, h, d = bshd
    rng = np.random.default_rng(b * s + h * d)
    t = np.dtype(dtype)
    qkv = rng.standard_normal((b, s, 3 * h * d)).astype(dtype)
    qkv.flat[::29] = -0.0
    qkv.flat[7::97] = np.nan
    q, k, v = (_heads(a, h) for a in np.split(qkv, 3, axis=-1))
    p = rng.standard_normal((b, h, s, s)).astype(dtype)
    resid = _heads(rng.standard_normal((b, s, h * s)).astype(dtype), h)   # (B, H, S, S), not mergeable
    cases = ((q, np.swapaxes(k, -1, -2), resid), (p, v, None))
    for av, bv, rv in cases:
        g = Graph()
        a_in = g.add_input("a", TensorType(t, av.shape))
        b_in = g.add_input("b", TensorType(t, bv.shape))
        out = _op(g, "np.matmul", a_in, b_in)
        ins = [av, bv]
        if rv is not None:
            r_in = g.add_input("r", TensorType(t, rv.shape))
            out = _op(g, "np.add", out, r_in)
            ins.append(rv)
        g.set_outputs([out])
        exe = compile_graph(g, [v.type for v in g.inputs])
        (got,) = exe(*ins)
        assert exe.stats()["packed_stack_offset_runs"] == 1 and exe.stats()["packed_matmuls"] == 1
        if bv is v:   # full panels, or one vector's columns a head, are read where they lie
            nr = blocks.GEMM_MICRO_TILE[1 if dtype == np.float32 else 2]
            assert _direct_runs(exe) == int((d >= nr or 2 * d == nr) and s <= 128)
        (flat,) = exe(*(np.ascontiguousarray(x) for x in ins))
        assert exe.stats()["packed_stack_offset_runs"] == 1   # contiguous copies: one step apart
        assert got.tobytes() == flat.tobytes()
        with np.errstate(all="ignore"):
            want = av @ bv + (0 if rv is None else rv)
        _assert_close(got.reshape(-1, got.shape[-1]), want.reshape(-1, want.shape[-1]),
                      np.nan_to_num(av).reshape(-1, av.shape[-1]), np.ones(bv.shape[-2:], dtype) *
                      np.nanmax(np.abs(bv)), dtype)


def _special(rng, shape, dtype):
    """Normal values with NaN of both signs (and a payload), infinities, signed zeros and ties at 0."""
    v = rng.standard_normal(shape).astype(dtype)
    flat = v.reshape(-1)
    bits = flat.view(np.int32 if dtype == np.float32 else np.int64)
    picks = rng.integers(0, flat.size, size=(7, max(1, flat.size // 11)))
    flat[picks[0]] = np.nan
    flat[picks[1]] = -np.nan
    flat[picks[2]] = np.inf
    flat[picks[3]] = -np.inf
    flat[picks[4]] = 0.0
    flat[picks[5]] = -0.0
    bits[picks[6]] |= 0x7F800001 if dtype == np.float32 else 0x7FF0000000000123   # a NaN payload
    return v


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(2, 12, 3), (9, 20, 10), (17, 40, 16), (11, 300, 45), (13, 70, 64),
                                 (12, 33, 96), (37, 260, 33)], ids=str)
@pytest.mark.parametrize("source", SOURCES)
def test_epilogue_in_registers_is_the_stored_products_ops_bit_for_bit(dtype, mkn, source):
    """The epilogue runs on the tile's registers before the store (nt_gemm.h): each op must give the
    bits that op gives on the stored product (h + b, h + r, np.maximum(h, 0), np.maximum(0, h), in
    order), NaN payloads and zero signs included, on full and partial panels (N below, at and past
    one vector; N = 10 runs half tiles), row counts off the register tile, and K past one block."""
    m, k, n = mkn
    rng = np.random.default_rng(m + 31 * k + n)
    w = rng.standard_normal((k, n)).astype(dtype)
    x = rng.standard_normal((m, k)).astype(dtype)
    x[m // 2, :] = -0.0          # a row whose sums are +0 (ties of the ReLUs)
    if m > 2:
        x[1, 0] = np.inf         # inf * w: a row of infinities and NaNs (inf * 0 where w is 0)
        w[0, : n // 2] = 0.0
    plain = _call(_compile(x.shape, w, dtype, source=source), x, w, None, None, source).copy()
    b, r = _special(rng, (n,), dtype), _special(rng, (m, n), dtype)
    ibits = np.int32 if dtype == np.float32 else np.int64
    for epilogue in EPILOGUES[1:] + [("relu",), ("relu_zero_first",), ("residual",),
                                     ("bias", "relu_zero_first")]:
        exe = _compile(x.shape, w, dtype, epilogue, source=source)
        got = _call(exe, x, w, b if "bias" in epilogue else None, r if "residual" in epilogue else None,
                    source)
        want = plain.copy()
        for name in epilogue:
            want = (want + b if name == "bias" else want + r if name == "residual"
                    else np.maximum(want, 0) if name == "relu" else np.maximum(0, want))
        # NaN where NumPy's is (which of two NaN operands an add returns varies, docs/cpu.md)
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=str(epilogue))
        np.testing.assert_array_equal(got[~nan].view(ibits), want[~nan].view(ibits), err_msg=str(epilogue))
