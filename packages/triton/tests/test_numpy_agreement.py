"""Results NumPy defines the same on every machine, compared bit for bit (signed zeros included):
integer comparisons across signedness and with Python ints outside the array's range (NEP 50),
rounding, signs, float16's own loops, NumPy's sqrt path of ``x ** 0.5``; and the results of math
functions at the ends of their range (within the project's ulp bound)."""

import math

import numpy as np
import pytest
from conftest import ON_GPU
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import assert_matches_numpy, clip_cases
from numtrace_ir.types import ScalarType, TensorType
from numtrace_triton import Backend

COMPARISONS = ["np.equal", "np.not_equal", "np.less", "np.less_equal", "np.greater", "np.greater_equal"]


def _run(op, *operands, attrs=None, nout=1):
    """``op`` on ``operands``: arrays are graph inputs, Python scalars are constants unless wrapped in a
    1-tuple (a runtime Python scalar input)."""
    g = Graph()
    values, args, types = [], [], []
    for i, v in enumerate(operands):
        if isinstance(v, np.ndarray):
            values.append(g.add_input(f"x{i}", TensorType(v.dtype, v.shape)))
            args.append(v)
            types.append(TensorType(v.dtype, v.shape))
        elif isinstance(v, tuple):
            kind = type(v[0]).__name__
            values.append(g.add_input(f"s{i}", ScalarType(kind)))
            args.append(v[0])
            types.append(ScalarType(kind))
        else:
            values.append(g.create_node("prim.Constant", [], attrs={"value": v}).output)
    node = g.create_node(op, values, attrs=attrs or {})
    g.set_outputs(node.outputs)
    out = Backend().compile(g, types)(*args)
    return out if nout > 1 else out[0]


def _same(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape, (got, expected)
    assert np.array_equal(got, expected, equal_nan=got.dtype.kind == "f"), (got, expected)
    if got.dtype.kind == "f":  # signs of zeros; a NaN's sign is not part of the result (a GPU's NaN is +)
        number = ~np.isnan(expected)
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(expected[number]),
                                      err_msg=f"{got} vs {expected}")


@pytest.mark.parametrize("op", COMPARISONS)
def test_int64_against_uint64_compares_values_exactly(op):
    """Their common type is float64, which rounds both 2**63 - 1 and 2**63 to 2**63."""
    a = np.array([2**63 - 1, -1, 0, 5, -(2**63), 2**63 - 1], np.int64)
    b = np.array([2**63, 2**64 - 1, 0, 5, 0, 2**63 - 1], np.uint64)
    fn = getattr(np, op[3:])
    _same(_run(op, a, b), fn(a, b))
    _same(_run(op, b, a), fn(b, a))


OUT_OF_RANGE = [("int8", 1000), ("int8", -1000), ("uint8", -1), ("uint8", 256), ("int64", 2**63),
                ("int64", -(2**63) - 1), ("uint64", -1), ("uint64", 2**64), ("int16", 2**70),
                ("int32", -(2**70)), ("int8", 127)]


@pytest.mark.parametrize(("dtype", "value"), OUT_OF_RANGE)
@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_with_a_python_int_outside_the_arrays_range(op, dtype, value):
    """NEP 50: the int is compared by value (``int8 < 1000`` is all True), not cast to int8."""
    info = np.iinfo(dtype)
    a = np.array([info.min, -1 if info.min else 0, 0, 1, info.max], dtype)
    fn = getattr(np, op[3:])
    _same(_run(op, a, value), fn(a, value))
    _same(_run(op, value, a), fn(value, a))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint64"])
def test_comparison_with_a_runtime_python_int_outside_the_arrays_range(dtype):
    """``x < x.shape[0]`` at a size past the dtype's range; the int is a runtime scalar input here."""
    a = np.arange(0, 100, 7).astype(dtype)
    for value in (300, -1, 2**40):
        _same(_run("np.less", a, (value,)), a < value)
        _same(_run("np.equal", a, (value,)), a == value)


def test_arithmetic_with_a_python_int_outside_the_arrays_range_raises_as_numpy_does():
    a = np.array([1, 2], np.int8)
    with pytest.raises(Exception, match="out of bounds for int8") as info:
        _run("np.add", a, 300)
    with pytest.raises(type(info.value.__cause__ or info.value)):
        np.add(a, 300)


ROUNDING = {
    np.float64: [2.0**52 + 1, 2.0**52 + 3, -(2.0**52 + 1), 2.0**53 - 1, 2.0**60, 0.49999999999999994],
    np.float32: [2.0**23 + 1, 2.0**23 + 3, -(2.0**23 + 1), 2.0**24 - 1, 0.49999997],
}
SMALL = [-0.0, 0.0, -0.5, -0.3, 0.3, 0.5, 1.5, 2.5, -2.5, -1.5, 3.7, -3.7, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_rint_and_round_exact_ties_large_integers_and_signed_zeros(dtype):
    x = np.array(SMALL + ROUNDING.get(dtype, []), dtype)
    _same(_run("np.rint", x), np.rint(x))
    _same(_run("np.round", x, attrs={"decimals": 0}), np.round(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_sign_and_modf_keep_numpys_zeros(dtype):
    x = np.array([-0.0, 0.0, -3.0, 2.0, -2.5, 0.25, np.inf, -np.inf, np.nan], dtype)
    _same(_run("np.sign", x), np.sign(x))
    frac, whole = _run("np.modf", x, nout=2)
    _same(frac, np.modf(x)[0])
    _same(whole, np.modf(x)[1])


@pytest.mark.parametrize("op", ["np.maximum", "np.minimum", "np.fmax", "np.fmin"])
def test_float16_extremes_of_equal_zeros_take_the_first(op):
    a = np.array([0.0, -0.0, 0.0, -0.0, np.nan, 1.0, np.nan], np.float16)
    b = np.array([-0.0, 0.0, 0.0, -0.0, 1.0, np.nan, np.nan], np.float16)
    fn = getattr(np, op[3:])
    _same(_run(op, a, b), fn(a, b))


@pytest.mark.parametrize("decimals", [-2, -1, 1, 2, 3])
def test_float16_round_with_decimals_scales_in_float16(decimals):
    """NumPy multiplies and divides in float16: 60000 * 100 overflows to inf there."""
    x = np.array([1.005, 2.675, 0.125, 123.456, 60000, -0.004, 655.0, -0.0], np.float16)
    with np.errstate(over="ignore"):
        expected = np.round(x, decimals)
    _same(_run("np.round", x, attrs={"decimals": decimals}), expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_hyperbolic_functions_at_the_ends_of_the_range(dtype):
    """sinh/cosh stay finite up to where they overflow (past log(max), not log(max) - log 2), sinh of
    a subnormal is itself, arccosh of a huge value is finite."""
    big = 710.0 if dtype == np.float64 else 89.0
    tiny = [5e-324, -1e-310, 1e-300] if dtype == np.float64 else [1e-45, -1e-40, 1e-30]
    x = np.array([big, -big, big + 0.5, 30.0, -25.0, 19.5, 9.5, 0.0, -0.0] + tiny, dtype)
    for op in ("np.sinh", "np.cosh"):
        got = _run(op, x)
        with np.errstate(over="ignore"):
            expected = getattr(np, op[3:])(x)
        np.testing.assert_array_equal(np.isinf(got), np.isinf(expected))
        assert_matches_numpy(got, expected, op, [x])
    _same(_run("np.sinh", np.array(tiny, dtype)), np.sinh(np.array(tiny, dtype)))
    huge = np.array([np.finfo(dtype).max, 1e300 if dtype == np.float64 else 3e38, 1e10, 5000.0], dtype)
    got = _run("np.arccosh", huge)
    assert np.isfinite(got).all()
    assert_matches_numpy(got, np.arccosh(huge), "np.arccosh", [huge])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_power_of_one_half_takes_numpys_sqrt_path(dtype):
    """For a lone exponent 0.5 NumPy's loop computes sqrt: nan for -inf, -0.0 for -0.0."""
    x = np.array([-np.inf, -0.0, 0.0, 4.0, np.inf, np.nan, 2.0], dtype)
    with np.errstate(invalid="ignore"):
        _same(_run("np.power", x, 0.5), np.power(x, 0.5))
        _same(_run("np.power", x, np.array([0.5], dtype)), np.power(x, np.array([0.5], dtype)))
        _same(_run("np.power", x, np.array(0.5, dtype)), np.power(x, np.array(0.5, dtype)))
        edge = x[:2]
        _same(_run("np.power", edge, np.full(2, 0.5, dtype)), np.power(edge, np.full(2, 0.5, dtype)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("value", [-1.0, 0.0, 0.5, 1.0, 2.0, 3.0])
def test_a_lone_run_time_exponent_takes_numpys_branches(dtype, value):
    """A run-time exponent NumPy's loop reads with stride 0 (0-d, a Python float, one element broadcast):
    1 / x, 1, sqrt, x, x * x at -1, 0, 0.5, 1, 2, bit for bit; pow otherwise. One element of the
    result's own shape is read with its stride: pow (+inf at -inf ** 0.5)."""
    rng = np.random.default_rng(3)
    tiny = float(np.finfo(dtype).smallest_subnormal)
    x = np.concatenate([[-np.inf, np.inf, -0.0, 0.0, np.nan, tiny, -tiny, 1.0, -1.0],
                        rng.standard_normal(40) * 1e3]).astype(dtype)
    with np.errstate(all="ignore"):
        for e in (np.array(value, dtype), np.array([value], dtype), (value,)):
            got, want = _run("np.power", x, e), np.power(x, e[0] if isinstance(e, tuple) else e)
            if value == 3.0:
                np.testing.assert_allclose(got, want, rtol=1e-5)   # pow: within the ulp bound
            else:
                _same(got, want)
        one = x[:1]
        _same(_run("np.power", one, np.array([value], dtype)), np.power(one, np.array([value], dtype)))


def test_integer_power_with_a_negative_exponent_raises_as_numpy_does():
    a, b = np.array([2, 3, 4]), np.array([1, -1, 2])
    with pytest.raises(Exception, match="negative integer powers") as info:
        _run("np.power", a, b)
    assert isinstance(info.value, ValueError) or isinstance(info.value.__cause__, ValueError)
    np.testing.assert_array_equal(_run("np.power", a, np.array([1, 0, 2])), a ** np.array([1, 0, 2]))
    u = np.array([1, 0, 3], np.uint8)
    np.testing.assert_array_equal(_run("np.power", np.array([2, 3, 4], np.uint8), u),
                                  np.array([2, 3, 4], np.uint8) ** u)


@pytest.mark.parametrize("op", ["np.cumsum", "np.cumprod"])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_cumulative_reduction_of_a_0d_array(op, axis):
    x = np.array(3.5)
    _same(_run(op, x, attrs={"axis": axis}), getattr(np, op[3:])(x, axis=axis))


def test_matmul_output_reshaped_then_combined_with_a_broadcast_constant():
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((6, 4)), rng.standard_normal((4, 3)), rng.standard_normal(6)
    g = Graph()
    va, vb = g.add_input("a", TensorType(a.dtype, a.shape)), g.add_input("b", TensorType(b.dtype, b.shape))
    m = g.create_node("np.matmul", [va, vb]).output
    r = g.create_node("np.reshape", [m], attrs={"shape": (3, 6)}).output
    k = g.create_node("prim.Constant", [], attrs={"value": c}).output
    g.set_outputs([g.create_node("np.add", [r, k]).output])
    (out,) = Backend().compile(g, [TensorType(a.dtype, a.shape), TensorType(b.dtype, b.shape)])(a, b)
    np.testing.assert_allclose(out, (a @ b).reshape(3, 6) + c, rtol=1e-12)
    assert math.isfinite(float(out.sum()))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16", "bool"])
def test_small_integer_matmul_wraps_as_numpy_does(dtype):
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2 if dtype == "bool" else 100, (5, 40)).astype(dtype)
    b = rng.integers(0, 2 if dtype == "bool" else 100, (40, 3)).astype(dtype)
    _same(_run("np.matmul", a, b), a @ b)


@pytest.mark.parametrize("op", ["np.cumsum", "np.cumprod"])
def test_looped_cumulative_reduction_into_int8_wraps_as_numpy_does(op):
    x = np.random.default_rng(2).integers(-3, 4, (2, 5000)).astype(np.int8)
    expected = getattr(np, op[3:])(x, axis=1, dtype=np.int8)
    _same(_run(op, x, attrs={"axis": 1, "dtype": np.dtype("int8")}), expected)


def test_clip_is_numpys_bit_for_bit():
    """np.clip's -0.0/0.0 ties and NaNs (x's or a bound's, by NumPy's two clip loops), a_min > a_max,
    every kind of bound. A NaN's own bits only in the interpreter (a GPU's NaN is +)."""
    for what, inputs, attrs in clip_cases.cases():
        if "n=5 " not in what:   # one length per case: each compiles its kernel
            continue
        g, arrays = clip_cases.graph(inputs, attrs)
        with np.errstate(all="ignore"):
            want = registry.get("np.clip").reference(*inputs, **attrs)
        (got,) = Backend().compile(g, [TensorType(a.dtype, a.shape) for a in arrays])(*arrays)
        same = clip_cases.same_bits(got, want)
        if ON_GPU and want.dtype.kind == "f":
            same |= np.isnan(want) & np.isnan(got)
        assert same.all(), f"{what}: at {np.flatnonzero(~same.ravel())[:4]}"
