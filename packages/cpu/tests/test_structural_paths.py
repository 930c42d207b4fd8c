"""The structural paths outside the fused interpreter, against NumPy and the registry reference:
scans by the scan kernel (their producing pass writing into the result, scanned in place), joins
whose parts the producing pass writes straight into the joined array, and tiny-K products. Each
test also checks in `stats()` that its path ran, so a silent fallback to NumPy fails it."""

import warnings

import numpy as np
import numtrace_cpu
import pytest
from graph_programs import RUNNABLE
from numtrace_cpu import compile_graph, isa
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _const(g, value):
    return _op(g, "prim.Constant", value=value)


def _graph(types, body):
    g = Graph()
    ins = [g.add_input(f"x{i}", t) for i, t in enumerate(types)]
    outs = body(g, *ins)
    g.set_outputs(list(outs) if isinstance(outs, (list, tuple)) else [outs])
    return g


def _values(rng, shape, dtype, special=True):
    x = rng.standard_normal(shape) * 3
    if dtype.kind in "iu":
        return rng.integers(-1000, 1000, shape).astype(dtype)
    x = x.astype(dtype)
    if special and x.size > 4:
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 3)] = [np.nan, np.inf, -0.0]
    return x


def _run(g, inputs, threads):
    """The cpu backend's outputs (the second call reuses the arena) and the reference's."""
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            expected = tuple(np.asarray(v) for v in testing.run_reference(g, inputs))
            exe = compile_graph(g, [v.type for v in g.inputs])
            exe(*inputs)
            got = exe(*inputs)
    finally:
        numtrace_cpu.set_num_threads(before)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.dtype == b.dtype and a.shape == b.shape
    return exe, got, expected


def _strided(x, strided):
    return testing.noncontiguous(x) if strided else x


# -- scans --------------------------------------------------------------------------------------------

# int32 and below accumulate in int64 (the kernel widens them); bool values from _values(...) > 0.
SCAN_DTYPES = [np.dtype(d) for d in ("float64", "float32", "int64", "int32", "int16", "int8", "bool")]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("dtype", SCAN_DTYPES, ids=str)
@pytest.mark.parametrize("shape,axis", [((1,), 0), ((7,), 0), ((1000,), None), ((3, 513), 1), ((3, 513), 0),
                                        ((2, 1, 5), -1), ((4, 6, 3), 1), ((4, 6, 3), None), ((5, 3, 7), 0),
                                        ((64, 16385), 1), ((16385, 64), 0), ((2, 700, 1030), 1)])
@pytest.mark.parametrize("op", ["np.cumsum", "np.cumprod"])
def test_scan_equals_numpy_bit_for_bit(op, shape, axis, dtype, strided, threads):
    """The scan kernel adds (multiplies) strictly left to right like NumPy's accumulate, so floats
    equal NumPy's cumsum/cumprod bit for bit (NaN, inf and -0.0 included) and ints wrap alike."""
    if np.prod(shape) > 1 << 19 and (op == "np.cumprod" or strided):
        pytest.skip("one large case per dtype is enough for the parallel lines")
    rng = np.random.default_rng(len(shape) * 31 + shape[-1])
    x = _strided(_values(rng, shape, dtype) if dtype != np.bool_ else rng.random(shape) < 0.5, strided)
    if op == "np.cumprod" and dtype.kind == "f":
        x = _strided(rng.uniform(0.5, 1.5, shape).astype(dtype), strided)
    g = _graph([TensorType(dtype, shape)], lambda g, a: _op(g, op, a, axis=axis))
    exe, (got,), (expected,) = _run(g, [x], threads)
    np.testing.assert_array_equal(got, expected, strict=True)
    np.testing.assert_array_equal(got, (np.cumsum if op == "np.cumsum" else np.cumprod)(x, axis=axis),
                                  strict=True)
    st = exe.stats()
    assert st["scans"] == 1 and st["numpy_into"] == [] and st["fallbacks"] == 0, st


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [2, 3, 1000, 4097])
@pytest.mark.parametrize("dtype", [np.dtype("float64"), np.dtype("float32")], ids=str)
def test_scan_of_a_fused_pass_runs_in_place(n, dtype, threads):
    """``np.cumsum((p[1:] - p[:-1]) / p[:-1])``: the pass computing the returns writes them into the
    result, and the scan runs there in place (no buffer between them). Correctly rounded ops only,
    so the whole result is NumPy's bit for bit."""
    rng = np.random.default_rng(n)
    p = rng.uniform(90, 110, n).astype(dtype)

    def body(g, a):
        now, before = (_op(g, "np.getitem", a, index=(k,)) for k in (slice(1, None), slice(None, -1)))
        r = _op(g, "np.divide", _op(g, "np.subtract", now, before), before)
        return _op(g, "np.cumsum", r, axis=None)

    g = _graph([TensorType(dtype, (n,))], body)
    exe, (got,), (expected,) = _run(g, [p], threads)
    np.testing.assert_array_equal(got, expected, strict=True)
    st = exe.stats()
    assert st["scans_in_place"] == 1 and st["fused_groups"] == 1 and st["buffer_slots"] == 0, st
    assert "in place" in exe.explain()


def test_scan_keeps_its_input_when_it_is_read_elsewhere():
    """A fused value the scan and something else read (here a graph output) stays its own array."""
    def body(g, a):
        r = _op(g, "np.multiply", a, _const(g, 2.0))
        return r, _op(g, "np.cumsum", r, axis=0)

    x = np.arange(10.0)
    g = _graph([TensorType(np.dtype("float64"), (10,))], body)
    exe, got, expected = _run(g, [x], 1)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b, strict=True)
    assert exe.stats()["scans"] == 1 and exe.stats()["scans_in_place"] == 0


def test_moving_average_epilogue():
    """``(c[w:] - c[:-w]) / w`` over a scan: the scan then one fused pass reading its views."""
    def body(g, a):
        c = _op(g, "np.cumsum", a, axis=None)
        d = _op(g, "np.subtract", _op(g, "np.getitem", c, index=(slice(8, None),)),
                _op(g, "np.getitem", c, index=(slice(None, -8),)))
        return _op(g, "np.divide", d, _const(g, 8.0))

    x = np.random.default_rng(3).standard_normal(1000)
    g = _graph([TensorType(np.dtype("float64"), (1000,))], body)
    exe, (got,), (expected,) = _run(g, [x], 1)
    np.testing.assert_array_equal(got, expected, strict=True)
    assert exe.stats()["scans"] == 1 and exe.stats()["fused_groups"] == 1


def test_scan_of_a_fused_mask_widens_without_running_in_place():
    """``np.cumsum(x > 0)`` counts in int64: the scan reads the pass's bool output (its own buffer:
    another dtype cannot share the result's memory)."""
    x = np.random.default_rng(2).standard_normal(1001)
    g = _graph([TensorType(np.dtype("float64"), (1001,))],
               lambda g, a: _op(g, "np.cumsum", _op(g, "np.greater", a, _const(g, 0.0)), axis=0))
    exe, (got,), (expected,) = _run(g, [x], 1)
    np.testing.assert_array_equal(got, expected, strict=True)
    assert exe.stats()["scans"] == 1 and exe.stats()["scans_in_place"] == 0


def test_scan_with_an_unsupported_cast_is_left_to_numpy():
    """cumsum of uint8 accumulates in uint64, which the kernel does not take: NumPy's loop runs it."""
    x = np.arange(0, 250, dtype=np.uint8)
    g = _graph([TensorType(np.dtype("uint8"), (250,))], lambda g, a: _op(g, "np.cumsum", a, axis=0))
    exe, (got,), (expected,) = _run(g, [x], 1)
    np.testing.assert_array_equal(got, expected, strict=True)
    assert exe.stats()["scans"] == 0 and exe.stats()["numpy_into"] == ["np.cumsum"]


# -- joins written in place ---------------------------------------------------------------------------

@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("dtype", [np.dtype(d) for d in ("float64", "float32", "int64", "int32")], ids=str)
@pytest.mark.parametrize("shape", [(1,), (7,), (1000,), (3, 5), (4, 1, 9), (1 << 19,)])
@pytest.mark.parametrize("join,axis", [("np.stack", -1), ("np.stack", 0), ("np.concatenate", 0),
                                       ("np.concatenate", -1), ("np.column_stack", None),
                                       ("np.hstack", None), ("np.vstack", None)])
def test_join_of_fused_parts_is_written_in_place(join, axis, shape, dtype, strided, threads):
    """``np.stack([r * cos t, r * sin t], axis=-1)`` and the other joins: the pass computing the
    parts writes them into the joined array (interleaved for a last stack axis), equal to NumPy
    (the parts use correctly rounded ops, so bit for bit)."""
    if shape == (1 << 19,) and (strided or dtype != np.float64):
        pytest.skip("one large case per join is enough for the parallel pass")
    rng = np.random.default_rng(shape[-1])
    r, t = (_strided(_values(rng, shape, dtype), strided) for _ in range(2))
    attrs = {} if axis is None else {"axis": axis}

    def body(g, a, b):
        parts = [_op(g, "np.multiply", a, _op(g, "np.square", b)), _op(g, "np.add", a, b)]
        return _op(g, join, *parts, **attrs)

    g = _graph([TensorType(dtype, shape)] * 2, body)
    exe, (got,), (expected,) = _run(g, [r, t], threads)
    np.testing.assert_array_equal(got, expected, strict=True)
    st = exe.stats()
    assert st["parts_in_place"] == 2 and st["fused_groups"] == 1 and st["buffer_slots"] == 0, st
    assert st["numpy_into"] == [] and st["fallbacks"] == 0, st


def test_join_copies_the_parts_no_pass_writes():
    """A join of fused parts and an input: the fused parts are written in place, the input copied
    into its place; a part given twice is copied both times; an intermediate join (read by a later
    pass) works alike."""
    def body(g, a, b):
        p, q = _op(g, "np.exp", a), _op(g, "np.negative", a)
        j = _op(g, "np.stack", p, b, q, axis=1)
        twice = _op(g, "np.concatenate", q, q)
        return _op(g, "np.multiply", j, _const(g, 2.0)), twice

    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(33), rng.standard_normal(33)
    g = _graph([TensorType(np.dtype("float64"), (33,))] * 2, body)
    exe, (j, twice), (j_want, twice_want) = _run(g, [x, y], 1)
    # exp's column is math-library work (within ulps of NumPy's, times 2 exactly); the rest is exact.
    testing.assert_matches_numpy(j[:, 0], j_want[:, 0], "np.exp", [x])
    np.testing.assert_array_equal(j[:, 1:], j_want[:, 1:], strict=True)
    np.testing.assert_array_equal(twice, twice_want, strict=True)
    assert exe.stats()["parts_in_place"] == 2 and "not written in place" in exe.explain()


def test_a_stack_of_0d_parts_writes_into_the_result():
    """0-d parts stacked (``np.array([a[0] * b[0], ...])``): each part's place is a 0-d view of the
    result, not a NumPy scalar that a pass would write into and lose."""
    def body(g, a, b):
        p = _op(g, "np.multiply", _op(g, "np.getitem", a, index=(0,)), _op(g, "np.getitem", b, index=(0,)))
        q = _op(g, "np.subtract", _op(g, "np.getitem", a, index=(1,)), _op(g, "np.getitem", b, index=(1,)))
        r = _op(g, "np.exp", _op(g, "np.getitem", a, index=(2,)))
        return _op(g, "np.stack", p, q, r, _op(g, "np.sum", b), axis=0)

    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    g = _graph([TensorType(np.dtype("float64"), (3,))] * 2, body)
    _, got, expected = _run(g, [x, y], 1)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-15)


def test_join_with_a_cast_or_an_output_part_copies():
    """A part of another dtype than the result, or one the caller also gets, is not redirected."""
    def body(g, a, b):
        p = _op(g, "np.multiply", a, _const(g, 3))           # int64
        q = _op(g, "np.multiply", b, _const(g, 2.0))         # float64, also an output
        return _op(g, "np.concatenate", p, q, axis=0), q

    x, y = np.arange(5), np.linspace(0, 1, 4)
    g = _graph([TensorType(np.dtype("int64"), (5,)), TensorType(np.dtype("float64"), (4,))], body)
    exe, got, expected = _run(g, [x, y], 1)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b, strict=True)
    assert exe.stats()["parts_in_place"] == 0


@pytest.mark.parametrize("join,index", [("np.stack", (0,)), ("np.concatenate", ("input",)),
                                        ("np.column_stack", (slice(None), 0))])
def test_a_part_read_after_the_joined_array_is_assigned_keeps_its_values(join, index):
    """``s = np.stack([a, b]); s[0] = 0; a - 1``: the assignment is given the joined array's buffer, so
    a part read after it must not be that memory (it is computed into its own buffer and copied)."""
    def body(g, a, b):
        p, q = _op(g, "np.multiply", a, _const(g, 2.0)), _op(g, "np.add", b, _const(g, 1.0))
        s = _op(g, join, p, q)
        keys = [_const(g, np.array([0, 1]))] if "input" in index else []
        s2 = _op(g, "np.setitem", s, *keys, _const(g, 0.0), index=index)
        return s2, _op(g, "np.subtract", p, _const(g, 1.0))

    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(6), rng.standard_normal(6)
    g = _graph([TensorType(np.dtype("float64"), (6,))] * 2, body)
    exe, got, expected = _run(g, [x, y], 1)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b, strict=True)
    st = exe.stats()
    assert st["setitems_in_place"] == 1 and st["parts_in_place"] == 1, st   # q still written in place


@pytest.mark.parametrize("join", ["np.stack", "np.concatenate"])
def test_0d_parts_are_written_into_the_joined_array(join):
    """``np.stack([x.sum(), x.max()])``: each 0-d part's place is a 0-d view of the result, not a
    NumPy scalar copied out of it (which the pass would write instead)."""
    def body(g, a):
        parts = [_op(g, "np.sum", _op(g, "np.multiply", a, a)), _op(g, "np.max", a)]
        if join == "np.concatenate":
            parts = [_op(g, "np.reshape", p, shape=(1,)) for p in parts]
        return _op(g, join, *parts)

    rng = np.random.default_rng(3)
    g = _graph([TensorType(np.dtype("float64"), (4, 3))], body)
    for x in (rng.standard_normal((4, 3)), rng.standard_normal((4, 3)) * 7):
        exe, (got,), (expected,) = _run(g, [x], 1)
        np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_join_into_a_callers_out_array():
    """With ``out=`` the parts are written into the caller's (strided) array."""
    def body(g, a, b):
        return _op(g, "np.stack", _op(g, "np.sin", a), _op(g, "np.cos", b), axis=-1)

    rng = np.random.default_rng(9)
    x, y = rng.standard_normal(100), rng.standard_normal(100)
    g = _graph([TensorType(np.dtype("float64"), (100,))] * 2, body)
    exe = compile_graph(g, [v.type for v in g.inputs])
    big = np.zeros((100, 4))
    (res,) = exe(x, y, out=[big[:, ::2]])
    # The same values as a fresh output, bit for bit; NumPy's sin/cos within ulps (math-library ops).
    np.testing.assert_array_equal(big[:, ::2], exe(x, y)[0])
    testing.assert_matches_numpy(big[:, 0], np.sin(x), "np.sin", [x])
    testing.assert_matches_numpy(big[:, 2], np.cos(y), "np.cos", [y])
    assert res is not None and not big[:, 1::2].any()


# -- tiny-K products ----------------------------------------------------------------------------------

@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("dtype", [np.dtype("float64"), np.dtype("float32")], ids=str)
@pytest.mark.parametrize("a_shape,b_shape", [((1, 3), (3,)), ((7, 3), (3,)), ((5, 64, 3), (3,)),
                                             ((9, 1), (1,)), ((11, 8), (8,)), ((6, 5), (5, 2)),
                                             ((3, 4, 8), (8, 8)), ((1 << 19, 3), (3,)), ((1, 1, 2), (2, 1))])
@pytest.mark.parametrize("b_kind", ["input", "constant"])
def test_small_k_matmul_equals_blas_within_rounding(a_shape, b_shape, b_kind, dtype, strided, threads):
    """``img @ [0.299, 0.587, 0.114]``-style products: the K products of each output summed in order,
    within float rounding of NumPy's matmul (BLAS may pair or fuse them differently)."""
    if a_shape[0] == 1 << 19 and strided:
        pytest.skip("one large case per dtype is enough for the parallel pass")
    rng = np.random.default_rng(a_shape[-1] * 7 + len(a_shape))
    a = _strided(_values(rng, a_shape, dtype, special=False), strided)
    b = _values(rng, b_shape, dtype, special=False)
    if b_kind == "input":
        b = _strided(b, strided)
        g = _graph([TensorType(dtype, a_shape), TensorType(dtype, b_shape)],
                   lambda g, x, w: _op(g, "np.matmul", x, w))
        inputs = [a, b]
    else:
        g = _graph([TensorType(dtype, a_shape)], lambda g, x: _op(g, "np.matmul", x, _const(g, b)))
        inputs = [a]
    exe, (got,), (expected,) = _run(g, inputs, threads)
    eps = np.finfo(dtype).eps
    bound = 4 * a_shape[-1] * eps * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(got.astype(np.float64) - (a.astype(np.float64) @ b.astype(np.float64))) <= bound)
    np.testing.assert_allclose(got, expected, rtol=0, atol=float(np.max(bound, initial=0)))
    st = exe.stats()
    assert st["small_matmuls"] == 1 and st["matmuls"] == 0, st
    # two calls; rows back to back (one 1-D right operand, more than one row) on the vectorized loop
    packed = len(b_shape) == 1 and not strided and np.prod(a_shape[:-1]) > 1
    assert st["small_matmul_packed_runs"] == (2 if packed else 0), st


@pytest.mark.parametrize("dtype", [np.dtype("float64"), np.dtype("float32")], ids=str)
@pytest.mark.parametrize("a_shape,b_shape", [((4, 3), (3,)), ((4, 2), (2, 5)), ((2, 4, 7), (7, 3))])
def test_small_k_sums_of_negative_zeros_are_positive_zero(a_shape, b_shape, dtype):
    """NumPy's matmul sums from +0: -0.0 products give +0.0, as BLAS does."""
    a = -np.zeros(a_shape, dtype)
    g = _graph([TensorType(dtype, a_shape)],
               lambda g, x: _op(g, "np.matmul", x, _const(g, np.ones(b_shape, dtype))))
    exe, (got,), (expected,) = _run(g, [a], 1)
    assert exe.stats()["small_matmuls"] == 1
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    assert not np.signbit(got).any()


def test_small_k_special_values_propagate():
    """NaN and inf in a row give NumPy's NaN/inf in that row's output only."""
    a = np.ones((6, 3))
    a[1, 0], a[2, 2], a[3, 1] = np.nan, np.inf, -np.inf
    a[4] = [np.inf, -np.inf, 0.0]
    w = np.array([0.299, 0.587, 0.114])
    g = _graph([TensorType(np.dtype("float64"), (6, 3))], lambda g, x: _op(g, "np.matmul", x, _const(g, w)))
    exe, (got,), (expected,) = _run(g, [a], 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(got[~np.isnan(got)], expected[~np.isnan(expected)])


@pytest.mark.parametrize("build", RUNNABLE)
@pytest.mark.parametrize("dtype", [np.dtype("float64"), np.dtype("float32")], ids=str)
@pytest.mark.parametrize("k", range(1, 9))
def test_small_k_rows_back_to_back_give_the_strided_loops_bits(k, dtype, build):
    """Rows laid out back to back run nt_smallk.h's vectorized loop, rows with a gap between them the
    generic strided loop: the same sums in the same order, so the same bits in every build, NaN, inf,
    signed zeros and subnormals included, at row counts around the vector widths and from an odd
    element offset (a line that starts mid-vector)."""
    blocks = isa.load(build)
    rng = np.random.default_rng(k)
    tiny = np.finfo(dtype).smallest_subnormal
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, tiny, -tiny, 1e30], dtype)
    for rows in (1, 7, 16, 33, 1000):
        wide = _values(rng, (rows + 1, k + 3), dtype)
        flat = wide.reshape(-1)
        flat[rng.integers(0, flat.size, 12)] = rng.choice(specials, 12)
        w = _values(rng, (k,), dtype, special=False)
        w[rng.integers(0, k)] = rng.choice([-0.0, 1e-30, 3.0])
        strided = wide[:rows, 1:k + 1]                    # rows k + 3 apart: the generic loop
        packed = np.empty(rows * k + 1, dtype)[1:].reshape(rows, k)   # back to back, one element in
        packed[...] = strided
        got, want = np.empty(rows, dtype), np.empty(rows, dtype)
        assert blocks.small_k_matmul(packed, w, got, 1) is (rows > 1)   # one row: one output, no loop
        assert blocks.small_k_matmul(strided, w, want, 1) is False
        np.testing.assert_array_equal(got.view(f"u{dtype.itemsize}"), want.view(f"u{dtype.itemsize}"))


@pytest.mark.parametrize("dtype,shapes", [("float64", ((10, 9), (9, 2))), ("float64", ((10, 3), (3, 9))),
                                          ("float16", ((10, 3), (3,))), ("complex128", ((10, 3), (3,)))])
def test_other_products_stay_blas(dtype, shapes):
    """K or m above 8, or a dtype the kernel does not take: NumPy's matmul, and the same values."""
    dt = np.dtype(dtype)
    g = _graph([TensorType(dt, s) for s in shapes], lambda g, x, w: _op(g, "np.matmul", x, w))
    rng = np.random.default_rng(1)
    exe, (got,), (expected,) = _run(g, [rng.standard_normal(s).astype(dt) for s in shapes], 1)
    np.testing.assert_array_equal(got, expected)
    assert exe.stats()["small_matmuls"] == 0, exe.stats()


def _merged_heads(producer, extra_output=False):
    """x (2, n, 4) -> producer -> transpose (1, 0, 2) -> reshape (n, 2 * m) -> - 1: attention merging
    its heads. `extra_output`: the transposed value is a graph output too (so it keeps its layout)."""
    def body(g, x, w):
        h = _op(g, "np.matmul", x, w) if producer == "product" else _op(g, "np.sin", x)
        t = _op(g, "np.transpose", h, axes=(1, 0, 2))
        n, m = t.type.shape[0], t.type.shape[2]
        r = _op(g, "np.reshape", t, shape=(n, 2 * m), order="C")
        out = _op(g, "np.subtract", r, _const(g, 1.0))
        return [out, t] if extra_output else out
    return body


@pytest.mark.parametrize("producer", ["product", "pass"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 2])
def test_copying_reshape_of_a_transposed_result_is_computed_in_place(producer, dtype, threads):
    """The product or pass writes its result in the layout of the reshape that copied it: the reshape
    and transpose are dropped, the bits those of the same steps writing their own buffer."""
    rng = np.random.default_rng(7)
    n, k, m = 37, 24, 40
    x = _values(rng, (2, n, k), np.dtype(dtype))
    w = _values(rng, (2, k, m), np.dtype(dtype), special=False)
    types = [testing.type_of(x), testing.type_of(w)]
    exe = compile_graph(_graph(types, _merged_heads(producer)), types)
    plain = compile_graph(_graph(types, _merged_heads(producer, extra_output=True)), types)
    assert exe.stats()["reshapes_in_place"] == 1 and plain.stats()["reshapes_in_place"] == 0
    assert "writes it in the layout of the reshape" in exe.explain()
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    try:
        with np.errstate(all="ignore"):
            exe(x, w)
            (got,), (want, _) = exe(x, w), plain(x, w)
    finally:
        numtrace_cpu.set_num_threads(before)
    assert got.tobytes() == want.tobytes()
    with np.errstate(all="ignore"):
        h = x @ w if producer == "product" else np.sin(x)
        numpy = np.reshape(np.transpose(h, (1, 0, 2)), (n, -1)) - 1.0
    np.testing.assert_allclose(got, numpy, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-4)


def test_reshape_kept_where_its_input_is_read_elsewhere_or_a_view():
    """Not rewritten: a transposed value that is also a graph output, or a reshape that is a view."""
    x = np.arange(2 * 3 * 4, dtype=np.float64).reshape(2, 3, 4)
    t = testing.type_of(x)

    def view_reshape(g, x):   # (2, 3, 4) -> transpose (0, 1, 2) -> reshape: a view, no copy
        h = _op(g, "np.sin", x)
        return _op(g, "np.reshape", _op(g, "np.transpose", h, axes=(0, 1, 2)), shape=(6, 4), order="C")
    exe = compile_graph(_graph([t], view_reshape), [t])
    assert exe.stats()["reshapes_in_place"] == 0
    np.testing.assert_allclose(exe(x)[0], np.sin(x).reshape(6, 4), rtol=1e-14)
    g = _graph([t, t], _merged_heads("pass", extra_output=True))
    exe = compile_graph(g, [t, t])
    assert exe.stats()["reshapes_in_place"] == 0
