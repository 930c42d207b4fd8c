"""What the lowering claims to fuse really runs fused, and its shortcuts equal NumPy: every dtype the
interpreter computes in, constant powers, casts from storage-only dtypes, short innermost dims."""

import warnings
from fractions import Fraction

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph
from numtrace_cpu.isa import DTYPES, OPS
from numtrace_ir import Graph, testing
from numtrace_ir.types import TensorType

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # special values on purpose

# The dtypes the interpreter claims it computes in, read from its own tables: each must fuse.
COMPUTE_DTYPES = [dt for dt, code in DTYPES.items() if code in OPS["add"][2]]
FLOAT_DTYPES = [dt for dt in COMPUTE_DTYPES if dt.kind == "f"]
INT_DTYPES = [dt for dt in COMPUTE_DTYPES if dt.kind == "i"]
# The dtypes it only reads through a cast.
STORAGE_DTYPES = [dt for dt, code in DTYPES.items() if code not in OPS["add"][2]]


def _compile(types, body):
    """An executable for the graph `body(g, *inputs) -> outputs` over inputs of `types`."""
    g = Graph()
    ins = [g.add_input(f"x{i}", t) for i, t in enumerate(types)]
    outs = body(g, *ins)
    g.set_outputs(list(outs) if isinstance(outs, (list, tuple)) else [outs])
    return compile_graph(g, list(types))


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _const(g, value):
    return _op(g, "prim.Constant", value=value)


def _sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _assert_fused(exe, groups=1):
    st = exe.stats()
    assert st["fallbacks"] == 0, f"ran as NumPy fallback steps: {st['fallback_ops']}"
    assert st["fused_groups"] == groups, st


@pytest.mark.parametrize("dtype", COMPUTE_DTYPES, ids=str)
def test_elementwise_chain_fuses_for_every_compute_dtype(dtype):
    """A chain of ops the interpreter has kernels for in `dtype` is one fused pass, never per-op
    fallbacks (float64 once fell back everywhere: NumPy's float64 dtype compares equal to None)."""
    t = TensorType(dtype, (300,))

    def body(g, a, b):
        s = _op(g, "np.add", a, b)
        m = _op(g, "np.multiply", s, a)
        return _op(g, "np.where", _op(g, "np.greater", m, b), m, _op(g, "np.maximum", a, b))
    exe = _compile([t, t], body)
    _assert_fused(exe)
    a, b = _sample(dtype, 300, 1), _sample(dtype, 300, 2)
    (got,) = exe(a, b)
    s = a + b if dtype != np.bool_ else a | b
    m = s * a if dtype != np.bool_ else s & a
    np.testing.assert_array_equal(got, np.where(m > b, m, np.maximum(a, b)))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_float_chain_with_weak_scalars_fuses(dtype):
    t = TensorType(dtype, (257,))

    def body(g, a):
        e = _op(g, "np.exp", _op(g, "np.negative", a))
        return _op(g, "np.divide", _op(g, "np.add", _op(g, "np.multiply", a, _const(g, 2.0)), e),
                   _op(g, "np.add", _const(g, 1.0), _op(g, "np.absolute", a)))
    exe = _compile([t], body)
    _assert_fused(exe)
    a = _sample(dtype, 257)
    (got,) = exe(a)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, (a * 2.0 + np.exp(-a)) / (1 + np.abs(a)), rtol=1e-6 if dtype == np.float32
                               else 1e-14)


# -- np.power with a constant exponent ---------------------------------------------------------------

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.5, np.inf, -np.inf, np.nan, 1e-30, 3e30, 1e-200, 1e200, 7.0]
NUMPY_FAST = [-1, 0, 0.5, 1, 2, -1.0, 0.0, 1.0, 2.0]   # NumPy's own float power loop shortcuts
WIDENED = [3, 4, -2, 3.0, 4.0, -2.0]


def _power_exe(dtype, exponent, n):
    exe = _compile([TensorType(dtype, (n,))], lambda g, a: _op(g, "np.power", a, _const(g, exponent)))
    _assert_fused(exe)
    return exe


def _float_values(dtype):
    with np.errstate(over="ignore", under="ignore"):
        special = np.array(SPECIAL, np.float64).astype(dtype)
    return np.concatenate([special, _sample(dtype, 3000) * 10])


@pytest.mark.parametrize("exponent", NUMPY_FAST, ids=repr)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_power_numpy_shortcuts_are_bit_exact(dtype, exponent):
    x = _float_values(dtype)
    (got,) = _power_exe(dtype, exponent, x.size)(x)
    with np.errstate(all="ignore"):
        expected = np.power(x, exponent)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))   # -0.0 ** 0.5 is -0.0


@pytest.mark.parametrize("exponent", WIDENED, ids=repr)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_power_small_integer_exponents_match_pow(dtype, exponent):
    """float32 is raised in float64 and rounded once, which is within an ulp of NumPy's powf (itself
    not always correctly rounded); float64 products are within 2 ulp of pow."""
    x = _float_values(dtype)
    (got,) = _power_exe(dtype, exponent, x.size)(x)
    with np.errstate(all="ignore"):
        expected = np.power(x, exponent)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(got[~finite], expected[~finite])
    np.testing.assert_array_max_ulp(got[finite], expected[finite], maxulp=1 if dtype == np.float32 else 2)
    if dtype == np.float32:   # one rounding of the correctly rounded float64 power (not NumPy's pow,
        # whose last bit depends on the CPU): the exact power, rounded by Python's int division
        nonzero = finite & np.isfinite(x) & (x != 0)
        exact = np.array([float(Fraction(float(v)) ** int(exponent)) for v in x[nonzero]])
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got[nonzero], exact.astype(np.float32))


@pytest.mark.parametrize("exponent", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=str)
def test_power_of_integers_wraps_like_numpy(dtype, exponent):
    info = np.iinfo(dtype)
    x = np.concatenate([np.array([0, 1, -1, info.max, info.min, 46341, -3037000500], np.int64).astype(dtype),
                        _sample(dtype, 500)])
    (got,) = _power_exe(dtype, exponent, x.size)(x)
    expected = np.power(x, exponent)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


def test_power_of_integers_by_a_negative_exponent_still_raises():
    exe = _compile([TensorType(np.dtype(np.int64), (3,))], lambda g, a: _op(g, "np.power", a, _const(g, -1)))
    assert exe.stats()["fallback_ops"] == ["np.power"]
    with pytest.raises(RuntimeError, match="Integers to negative integer powers"):
        exe(np.arange(1, 4))


def test_power_by_other_constants_keeps_pow():
    """Other exponents call pow() per element: within ulps of NumPy's power, whose result depends on
    the CPU (its AVX-512 loop is not the C library's pow), so not bit for bit."""
    x = np.abs(_sample(np.dtype(np.float64), 500)) + 0.1
    for exponent in (2.5, -0.5, 5, 1.5):
        exe = _power_exe(np.dtype(np.float64), exponent, x.size)
        assert exe.stats()["fallbacks"] == 0
        (got,) = exe(x)
        testing.assert_matches_numpy(got, np.power(x, exponent), "np.power", (x, exponent))


def test_power_inside_a_float32_chain():
    """GELU-tanh's x ** 3 in float32: fused, and equal to NumPy's result."""
    t = TensorType(np.dtype(np.float32), (1000,))

    def body(g, x):
        cube = _op(g, "np.power", x, _const(g, 3))
        inner = _op(g, "np.add", x, _op(g, "np.multiply", _const(g, 0.044715), cube))
        return _op(g, "np.multiply", x, _op(g, "np.tanh", inner))
    exe = _compile([t], body)
    _assert_fused(exe)
    x = _sample(np.dtype(np.float32), 1000)
    (got,) = exe(x)
    np.testing.assert_allclose(got, x * np.tanh(x + 0.044715 * x ** 3), rtol=3e-6, atol=1e-7)


# -- casts from storage-only dtypes ----------------------------------------------------------------

@pytest.mark.parametrize("target", COMPUTE_DTYPES, ids=str)
@pytest.mark.parametrize("source", STORAGE_DTYPES, ids=str)
def test_astype_from_storage_dtypes_is_fused_and_exact(source, target):
    info = np.iinfo(source)
    x = np.concatenate([np.array([info.min, info.max, 0, 1], source), _sample(source, 700)])
    exe = _compile([TensorType(source, x.shape)], lambda g, a: _op(g, "np.astype", a, dtype=target))
    _assert_fused(exe)
    (got,) = exe(x)
    assert got.dtype == target
    np.testing.assert_array_equal(got, x.astype(target))


def test_uint8_image_normalized_in_one_pass():
    """``(img / 255.0 - mean) / std`` on a uint8 image: the cast joins the float pass."""
    img = np.random.default_rng(0).integers(0, 256, (40, 30, 3), dtype=np.uint8)
    mean, std = np.array([0.5, 0.4, 0.3], np.float32), np.array([0.2, 0.25, 0.3], np.float32)
    types = [TensorType(img.dtype, img.shape), TensorType(mean.dtype, (3,)), TensorType(std.dtype, (3,))]

    def body(g, x, m, s):
        f = _op(g, "np.divide", _op(g, "np.astype", x, dtype=np.dtype(np.float32)), _const(g, 255.0))
        return _op(g, "np.divide", _op(g, "np.subtract", f, m), s)
    exe = _compile(types, body)
    _assert_fused(exe)
    (got,) = exe(img, mean, std)
    np.testing.assert_array_equal(got, (img.astype(np.float32) / 255.0 - mean) / std)


def test_astype_to_uint8_is_not_claimed():
    exe = _compile([TensorType(np.dtype(np.float32), (5,))],
                   lambda g, a: _op(g, "np.astype", a, dtype=np.dtype(np.uint8)))
    assert exe.stats()["fallback_ops"] == ["np.astype"]
    x = np.array([0.5, 1.5, 254.9, 3.0, 7.0], np.float32)
    np.testing.assert_array_equal(exe(x)[0], x.astype(np.uint8))


@pytest.mark.parametrize("source", [np.int8, np.uint8, np.int16, np.uint16, np.uint32])
def test_reductions_read_storage_dtypes(source):
    """Summing small signed ints accumulates in int64 (fused); unsigned ones sum in uint64, which
    has no kernel and stays NumPy's."""
    x = _sample(np.dtype(source), (37, 11))
    t = TensorType(x.dtype, x.shape)
    exe = _compile([t], lambda g, a: [_op(g, "np.sum", a, axis=1), _op(g, "np.mean", a, axis=0)])
    assert exe.stats()["fallback_ops"] == ([] if x.dtype.kind == "i" else ["np.sum"])
    s, m = exe(x)
    np.testing.assert_array_equal(s, np.sum(x, axis=1))
    np.testing.assert_allclose(m, np.mean(x, axis=0), rtol=1e-12)


# -- short innermost dims: blocks of whole rows ------------------------------------------------------

ROW_SHAPES = [(1, 3), (51, 10), (52, 10), (1700, 3), (3000, 10), (5, 7, 1), (9, 128), (40, 129), (2, 33, 5)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", ROW_SHAPES, ids=str)
def test_short_last_axis_broadcasting(shape, threads):
    f32 = np.dtype(np.float32)
    x = _sample(f32, shape, 1)
    bias, col = _sample(f32, shape[-1:], 2), _sample(f32, shape[:-1] + (1,), 3)
    types = [TensorType(f32, shape), TensorType(f32, bias.shape), TensorType(f32, col.shape)]

    def body(g, a, b, c):
        y = _op(g, "np.multiply", _op(g, "np.add", a, b), c)
        return [y, _op(g, "np.maximum", y, b)]
    exe = _compile(types, body)
    _assert_fused(exe)
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    try:
        y, z = exe(x, bias, col)
        xt = np.asfortranarray(x)   # strided rows and a strided output
        out = [np.empty(shape, f32, order="F"), np.empty(shape, f32)]
        exe(xt, bias[::-1].copy()[::-1], col, out=out)
    finally:
        numtrace_cpu.set_num_threads(before)
    expected = (x + bias) * col
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(z, np.maximum(expected, bias))
    np.testing.assert_array_equal(out[0], expected)


@pytest.mark.parametrize("shape", ROW_SHAPES, ids=str)
def test_short_last_axis_reductions(shape):
    """Softmax and variance over a short last axis: each row of a block folds into its own output."""
    f64 = np.dtype(np.float64)
    x = _sample(f64, shape)

    def body(g, a):
        mx = _op(g, "np.max", a, axis=-1, keepdims=True)
        e = _op(g, "np.exp", _op(g, "np.subtract", a, mx))
        sm = _op(g, "np.divide", e, _op(g, "np.sum", e, axis=-1, keepdims=True))
        return [sm, _op(g, "np.var", a, axis=-1), _op(g, "np.min", a, axis=-1)]
    exe = _compile([TensorType(f64, shape)], body)
    assert exe.stats()["fallbacks"] == 0
    sm, var, mn = exe(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(sm, e / e.sum(axis=-1, keepdims=True), rtol=1e-13)
    np.testing.assert_allclose(var, np.var(x, axis=-1), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(mn, np.min(x, axis=-1))


# -- reductions over a leading axis: column mode ------------------------------------------------------

COLUMN_SHAPES = [(2, 1), (7, 5), (33, 16), (1000, 16), (513, 63), (40, 64), (300, 65), (50, 130), (9, 1000),
                 (3, 200, 7), (4, 1, 9)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", COLUMN_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=str)
def test_leading_axis_float_reductions(shape, dtype, threads):
    """mean/var/std/max/min over axis -2 of a C-ordered array walk it in memory order and fold each
    column into its own accumulator; an elementwise output and a broadcast input share the pass."""
    x = _sample(dtype, shape)
    x.flat[::17] = np.nan if shape[-2] > 30 else x.flat[::17]
    mu = _sample(dtype, shape[-1:], 5)
    ax = len(shape) - 2

    def body(g, a, m):
        d = _op(g, "np.subtract", a, m)
        return [d, _op(g, "np.sum", a, axis=ax), _op(g, "np.mean", d, axis=ax),
                _op(g, "np.var", a, axis=ax, ddof=1), _op(g, "np.std", a, axis=ax, keepdims=True),
                _op(g, "np.max", a, axis=ax), _op(g, "np.min", d, axis=ax, keepdims=True)]
    exe = _compile([TensorType(dtype, shape), TensorType(dtype, mu.shape)], body)
    _assert_fused(exe)
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # "Degrees of freedom <= 0", as NumPy says
            got = exe(x, mu)
    finally:
        numtrace_cpu.set_num_threads(before)
    d = x - mu
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # ddof=1 over a single row
        expected = [d, np.sum(x, axis=ax), np.mean(d, axis=ax), np.var(x, axis=ax, ddof=1),
                    np.std(x, axis=ax, keepdims=True), np.max(x, axis=ax), np.min(d, axis=ax, keepdims=True)]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for g_, e in zip(got, expected):
        assert g_.shape == e.shape and g_.dtype == e.dtype
        np.testing.assert_allclose(g_, e, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("shape", COLUMN_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.int8], ids=str)
def test_leading_axis_integer_and_bool_reductions(shape, dtype):
    x = _sample(np.dtype(dtype), shape)
    ax = len(shape) - 2
    ops = [("np.sum", np.sum), ("np.mean", np.mean)]   # int8: only read through a cast
    if dtype == np.bool_:
        ops = [("np.any", np.any), ("np.all", np.all)]
    elif dtype != np.int8:
        ops += [("np.max", np.max), ("np.min", np.min)]
    exe = _compile([TensorType(dtype, shape)], lambda g, a: [_op(g, name, a, axis=ax) for name, _ in ops])
    assert exe.stats()["fallbacks"] == 0
    for g_, (_, ref) in zip(exe(x), ops):
        e = ref(x, axis=ax)
        assert g_.dtype == e.dtype
        np.testing.assert_allclose(g_, e, rtol=1e-12)


def test_leading_axis_reduction_of_strided_and_fortran_inputs():
    x = _sample(np.dtype(np.float64), (400, 24))
    exe = _compile([TensorType(x.dtype, (200, 12))], lambda g, a: [_op(g, "np.mean", a, axis=0),
                                                                    _op(g, "np.var", a, axis=0)])
    for v in (x[::2, ::2], np.asfortranarray(x[:200, :12]), x[::-2, 3:15]):
        m, var = exe(v)
        np.testing.assert_allclose(m, v.mean(axis=0), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(var, v.var(axis=0), rtol=1e-12)


# -- ufuncs that are a constant multiple, and copies -----------------------------------------------

@pytest.mark.parametrize("name", ["np.deg2rad", "np.rad2deg"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32], ids=str)
def test_angle_conversions_are_fused_and_bit_exact(name, dtype):
    x = _sample(np.dtype(dtype), 4000) * 37
    exe = _compile([TensorType(x.dtype, x.shape)], lambda g, a: _op(g, name, a))
    _assert_fused(exe)
    (got,) = exe(x)
    expected = getattr(np, name[3:])(x)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", COMPUTE_DTYPES, ids=str)
def test_copy_joins_the_pass(dtype):
    x = _sample(dtype, (30, 7))
    exe = _compile([TensorType(dtype, x.shape)], lambda g, a: _op(g, "np.copy", a, order="F"))
    _assert_fused(exe)
    (got,) = exe(x)
    np.testing.assert_array_equal(got, x)
    assert not np.shares_memory(got, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_maximum_minimum_of_equal_zeros_give_numpys_sign(dtype):
    """np.maximum/np.minimum of equal operands give the second (NumPy's loops on x86): ReLU of -0.0 is
    +0.0, and the sign survives into 1/x. Every path: two arrays, a constant on either side, a pair
    loop (clip), the GEMV step's fused ReLU."""
    zeros = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.nan] * 3, dtype)
    other = np.array([-0.0, 0.0, 0.0, -0.0, 1.0, -1.0, 0.0] * 3, dtype)
    cases = [
        (lambda a, b: np.maximum(a, b), (zeros, other)),
        (lambda a, b: np.minimum(a, b), (zeros, other)),
        (lambda a, b: np.maximum(b, a), (zeros, other)),
        (lambda a, b: 1.0 / np.maximum(a, 0.0) + b, (zeros, other)),
        (lambda a, b: 1.0 / np.maximum(0.0, a) + b, (zeros, other)),
        (lambda a, b: 1.0 / np.minimum(a, -0.0) + b, (zeros, other)),
        (lambda a, b: 1.0 / np.minimum(np.maximum(a * 1.0, b), 0.0), (zeros, other)),
    ]
    nt = pytest.importorskip("numtrace")
    with np.errstate(divide="ignore", invalid="ignore"):
        for fn, args in cases:
            traced = nt.trace(fn, args, backend="cpu", check_trace=False)
            got, want = traced(*args), fn(*args)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        x = np.array([[-0.0, 0.0, -1.0, 2.0]], dtype)
        w = np.zeros((4, 3), dtype)
        b = np.array([-0.0, 0.0, -0.0], dtype)
        for relu in (lambda h: np.maximum(h, 0.0), lambda h: np.maximum(0.0, h)):
            def mlp(x, w, b, relu=relu):
                return relu(x @ w + b)
            traced = nt.trace(mlp, (x, w, b), backend="cpu", check_trace=False)
            assert "GEMV kernel" in traced.explain()
            np.testing.assert_array_equal(np.signbit(traced(x, w, b)), np.signbit(mlp(x, w, b)))
