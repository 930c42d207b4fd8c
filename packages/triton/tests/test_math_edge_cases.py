"""Functions Triton lacks (or the interpreter cannot run) are built from exp/log/exp2/log2: their
special values (inf, nan, signed zero, huge and tiny magnitudes) must match NumPy's exactly, and
their accuracy must hold where naive formulas cancel."""

import numpy as np
import pytest
from numtrace_ir.graph import Graph
from numtrace_ir.types import TensorType
from numtrace_triton import Backend

SPECIAL = [
    0.0,
    -0.0,
    1e-30,
    -1e-30,
    1e-8,
    -1e-8,
    1e-3,
    -0.5,
    0.5,
    1.0,
    -1.0,
    2.0,
    10.0,
    -10.0,
    20.0,
    -20.0,
    88.0,
    -88.0,
    100.0,
    700.0,
    -700.0,
    1e30,
    -1e30,
    np.inf,
    -np.inf,
    np.nan,
]
UNARY = [
    "np.tanh",
    "np.expm1",
    "np.log1p",
    "np.sinh",
    "np.cosh",
    "np.exp",
    "np.log",
    "np.sqrt",
    "np.cbrt",
    "np.isnan",
    "np.isinf",
    "np.isfinite",
    "np.sign",
    "np.signbit",
    "np.rint",
    "np.trunc",
    "np.arcsinh",
    "np.arctanh",
    "np.log10",
    "np.reciprocal",
    "np.arctan",
    "np.arcsin",
    "np.arccos",
]
TOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}


def _run_unary(op, x):
    g = Graph()
    v = g.add_input("x", TensorType(x.dtype, x.shape))
    g.set_outputs([g.create_node(op, [v]).output])
    return Backend().compile(g, [TensorType(x.dtype, x.shape)])(x)[0]


def _run_binary(op, a, b):
    g = Graph()
    va, vb = g.add_input("a", TensorType(a.dtype, a.shape)), g.add_input("b", TensorType(b.dtype, b.shape))
    g.set_outputs([g.create_node(op, [va, vb]).output])
    return Backend().compile(g, [TensorType(a.dtype, a.shape), TensorType(b.dtype, b.shape)])(a, b)[0]


def _check(got, expected, dtype):
    assert got.dtype == expected.dtype
    if expected.dtype.kind == "b":
        np.testing.assert_array_equal(got, expected)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.isinf(got) & (got > 0), np.isinf(expected) & (expected > 0))
    np.testing.assert_array_equal(np.isinf(got) & (got < 0), np.isinf(expected) & (expected < 0))
    finite = np.isfinite(expected)
    np.testing.assert_allclose(got[finite], expected[finite], rtol=TOL[np.dtype(dtype)], atol=0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", UNARY)
def test_unary_special_values(op, dtype):
    x = np.array(SPECIAL, dtype=dtype)
    with np.errstate(all="ignore"):
        expected = getattr(np, op[3:])(x)
    _check(_run_unary(op, x), expected, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inverse_trigonometry_across_its_domain(dtype):
    x = np.linspace(-1, 1, 401).astype(dtype)
    for op in ("np.arcsin", "np.arccos", "np.arctan"):
        _check(_run_unary(op, x), getattr(np, op[3:])(x), dtype)
    wide = np.concatenate([np.geomspace(1e-6, 1e6, 101), -np.geomspace(1e-6, 1e6, 101)]).astype(dtype)
    _check(_run_unary("np.arctan", wide), np.arctan(wide), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cancellation_prone_functions_stay_accurate_near_zero(dtype):
    x = np.geomspace(1e-12, 1e-2, 41).astype(dtype)
    x = np.concatenate([x, -x])
    for op in ("np.tanh", "np.expm1", "np.log1p", "np.sinh"):
        _check(_run_unary(op, x), getattr(np, op[3:])(x), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_special_cases(dtype):
    bases = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 10.0, np.inf, -np.inf, np.nan], dtype)
    exps = np.array([0.0, 1.0, 2.0, 3.0, -1.0, -2.0, 0.5, -0.5, 2.5, 40.0, np.inf, -np.inf, np.nan], dtype)
    a, b = np.meshgrid(bases, exps)
    with np.errstate(all="ignore"):
        expected = np.power(a, b)
    _check(_run_binary("np.power", a, b), expected, dtype)


def test_integer_power_wraps_like_numpy():
    a = np.array([0, 1, -1, 2, -2, 3, 7, -9, 12345], np.int64)
    b = np.array([0, 1, 2, 3, 10, 31, 62, 63, 5], np.int64)
    np.testing.assert_array_equal(_run_binary("np.power", a, b), np.power(a, b))
    a32, b32 = a.astype(np.int32), np.array([0, 1, 2, 3, 30, 31, 20, 15, 2], np.int32)
    np.testing.assert_array_equal(_run_binary("np.power", a32, b32), np.power(a32, b32))


@pytest.mark.parametrize("op", ["np.floor_divide", "np.remainder", "np.fmod"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_division_signs_and_zero_divisors(op, dtype):
    vals = np.array([-7, -6, -1, 0, 1, 5, 6, 7], dtype)
    a, b = np.meshgrid(vals, np.array([-3, -2, -1, 0, 1, 2, 3], dtype))
    with np.errstate(all="ignore"):
        expected = getattr(np, op[3:])(a, b)
    got = _run_binary(op, a, b)
    if np.dtype(dtype).kind == "f":
        _check(got, expected, dtype)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("op", ["np.left_shift", "np.right_shift"])
def test_shifts_past_the_bit_width(op):
    a = np.array([1, -1, 5, -8, 2**40, -(2**40)], np.int64)
    b = np.array([0, 1, 63, 64, 65, 200], np.int64)
    x, y = np.meshgrid(a, b)
    np.testing.assert_array_equal(_run_binary(op, x, y), getattr(np, op[3:])(x, y))


@pytest.mark.parametrize(
    "op",
    [
        "np.maximum",
        "np.minimum",
        "np.fmax",
        "np.fmin",
        "np.logaddexp",
        "np.hypot",
        "np.copysign",
        "np.logaddexp2",
        "np.heaviside",
        "np.arctan2",
    ],
)
def test_binary_nan_and_inf_semantics(op):
    vals = np.array([-np.inf, -1.5, -0.0, 0.0, 2.0, np.inf, np.nan])
    a, b = np.meshgrid(vals, vals)
    with np.errstate(all="ignore"):
        expected = getattr(np, op[3:])(a, b)
    _check(_run_binary(op, a, b), expected, np.float64)


@pytest.mark.parametrize("op", ["np.maximum", "np.minimum"])
def test_maximum_minimum_of_equal_zeros_give_the_second(op):
    """Of equal operands maximum/minimum give the second, as NumPy's loops on x86 do: the sign of a
    zero (ReLU of -0.0 is +0.0) is NumPy's whatever the device's own max instruction does."""
    vals = np.array([-0.0, 0.0, 1.0, np.nan], np.float32)
    a, b = np.meshgrid(vals, vals)
    got, expected = _run_binary(op, a, b), getattr(np, op[3:])(a, b)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_copysign_and_signbit_read_a_nans_sign_bit(dtype):
    """np.copysign and np.signbit take a NaN's sign bit as NumPy does (x86's default NaN, from
    inf * 0 or inf - inf, is negative): the kernels compared b < 0, so copysign(1.0, -nan) was +1.0
    (the frontend fuzzer's scalar_const_pow step: -inf where NumPy gives +inf), and copysign of a NaN
    magnitude kept its sign."""
    nan = np.array(np.nan, dtype)
    vals = np.array([-nan, nan, -0.0, 0.0, -2.0, 3.0, -np.inf, np.inf], dtype)
    a, b = np.meshgrid(vals, vals)
    got, expected = _run_binary("np.copysign", a, b), np.copysign(a, b)
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), expected.view(f"u{expected.itemsize}"))
    g = Graph()
    x = g.add_input("x", TensorType(np.dtype(dtype), vals.shape))
    g.set_outputs([g.create_node("np.signbit", [x]).output])
    exe = Backend().compile(g, [TensorType(np.dtype(dtype), vals.shape)])
    np.testing.assert_array_equal(np.asarray(exe(vals)[0]), np.signbit(vals))
