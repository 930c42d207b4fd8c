"""The float-unary kernels (nt_vmath.h's vector math, the per-op loops) against NumPy: dense sweeps
over each function's domain measured in ulps of the correctly rounded result, every special value
exactly, non-contiguous and broadcast operands, 1 and 2 threads, and every ISA build this CPU runs."""

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph, isa, runtime
from numtrace_ir import Graph
from numtrace_ir.types import TensorType

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # special values on purpose

RUNNABLE = [b for b in isa.built() if isa.BUILDS[b][1] <= runtime.cpu_features()]
# Every float-only unary op the interpreter has (from its own tables).
FLOATS = {isa.DTYPES[np.dtype(np.float32)], isa.DTYPES[np.dtype(np.float64)]}
FLOAT_UNARY = sorted(name for name, (_, cat, dts) in isa.OPS.items() if cat == 0 and set(dts) == FLOATS)

# Largest error, in ulps of the correctly rounded result (docs/cpu.md, "Accuracy of float math").
# Ops not listed are correctly rounded (floor, sqrt, 1/x, ...: 0.5 at most).  float32 is computed in
# double and rounded once (0.5 plus a double's error in float ulps), except exp and tanh, which have
# float32 kernels of their own (nt_simd.h).
ULPS_F64 = {"exp": 1, "expm1": 1, "exp2": 1, "log": 1, "log1p": 1, "log2": 1, "log10": 1, "sin": 1, "cos": 1,
            "tanh": 1.5, "arcsin": 1, "arctan": 1}
ULPS_F32 = {"exp": 1, "tanh": 6}
# Still the C library's function in double (glibc documents up to 3-4 ulp for some of these).
LIBM = {"tan", "arccos", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "cbrt"}

# Where each function is swept: (low, high, log-uniform in |x| with both signs).
DOMAINS = {
    "exp": [(-1, 1, False), (-746, 710, False), (-40, 40, False), (1e-300, 1e-5, True)],
    "expm1": [(-1, 1, False), (-746, 710, False), (-3, 3, False), (1e-300, 1e-5, True)],
    "log": [(0, 2, False), (0.99, 1.01, False), (1e-320, 1e300, True)],
    "log2": [(0, 2, False), (0.99, 1.01, False), (1e-320, 1e300, True)],
    "log10": [(0, 2, False), (0.99, 1.01, False), (1e-320, 1e300, True)],
    "exp2": [(-1, 1, False), (-1080, 1030, False), (-60, 60, False), (1e-300, 1e-5, True)],
    "log1p": [(-1, 1, False), (-0.999999, 10, False), (1e-300, 1e-3, True), (1e-3, 1e300, True)],
    "sin": [(-10, 10, False), (-1e5, 1e5, False), (1e-300, 1e-3, True), (1e3, 1e12, True)],
    "cos": [(-10, 10, False), (-1e5, 1e5, False), (1e-300, 1e-3, True), (1e3, 1e12, True)],
    "tanh": [(-1, 1, False), (-25, 25, False), (0.5, 0.6, False), (1e-300, 1e-3, True)],
    "arcsin": [(-1, 1, False), (0.45, 0.55, False), (0.97, 1, False), (1e-300, 1e-3, True)],
    "arctan": [(-3, 3, False), (0.4, 0.7, False), (1.1, 2.5, False), (1e-300, 1e300, True)],
}
DEFAULT_DOMAINS = [(-4, 4, False), (1e-300, 1e300, True)]

SPECIAL = np.array([
    0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 5e-324, -5e-324, 1e-310, -1e-310,
    2.2250738585072014e-308, -2.2250738585072014e-308, 1e-20, -1e-20, 2.0 ** -27, 2.0 ** -54, 3e-17,
    1.7976931348623157e308, -1.7976931348623157e308, 1e300, -1e300,
    708.0, -708.0, np.nextafter(708.0, 0), 709.78, 709.7827128933840, 709.79, 710.0, -708.4, -709.1,
    -745.1, -745.13321910194110, -745.2, -746.0, 88.72, 88.73, -103.97, -104.0, -87.3, 20.0, -20.0, 22.0,
    7.9, 2.0 ** 28, -(2.0 ** 28), np.nextafter(2.0 ** 28, 0), 1e22, np.pi, np.pi / 2, -np.pi / 2, 0.975,
    -0.975, np.nextafter(1.0, 0), -np.nextafter(1.0, 0), np.nextafter(1.0, 2), np.nextafter(-1.0, -2),
    np.nextafter(-1.0, 0), 1e-5, 0.4999999, 0.5000001, 4.5, -4.5, 2.5, -2.5])

# The reference needs more precision than double: x86's 80-bit long double (whose functions are
# within an ulp of their own, 2^-11 of a double's); elsewhere NumPy's own float64 result, itself
# within about an ulp, hence one ulp of slack.
EXTENDED = np.finfo(np.longdouble).nmant >= 63
SLACK = 0.0 if EXTENDED else 1.0


def _compile(dtype, shape, body):
    g = Graph()
    x = g.add_input("x0", TensorType(dtype, shape))
    g.set_outputs([body(g, x)])
    return compile_graph(g, [TensorType(dtype, shape)])


def _op(g, name, *inputs):
    return g.create_node(name, list(inputs), attrs={}).output


@pytest.fixture(params=RUNNABLE)
def build(request):
    """Kernels compiled inside the test run on this ISA build (the vector math exists only in the
    builds with FMA; the baseline keeps the C library)."""
    runtime.use_blocks(isa.load(request.param))
    yield request.param
    runtime.use_blocks(isa.blocks)


def _run(name, x):
    exe = _compile(x.dtype, x.shape, lambda g, a: _op(g, f"np.{name}", a))
    assert exe.stats()["fallbacks"] == 0
    (got,) = exe(x)
    return got


def _error(name, x, got):
    """Each element's error in ulps of x's dtype (at the correctly rounded result): 0.5 at most for
    a correctly rounded function.  NaN against NaN and equal infinities are 0, a class mismatch
    (NaN or inf against a number) is inf."""
    fn = getattr(np, name)
    with np.errstate(all="ignore"):
        ref = fn(x.astype(np.longdouble if EXTENDED else np.float64))
        want = ref.astype(x.dtype)
        err = np.abs(got.astype(ref.dtype) - ref) / np.spacing(np.abs(want)).astype(ref.dtype)
    err = err.astype(np.float64)
    inexact = ~np.isfinite(got) | ~np.isfinite(want)
    same = (np.isnan(got) & np.isnan(want)) | (got == want)
    err[inexact] = np.where(same[inexact], 0.0, np.inf)
    return err, want


def _sweep(lo, hi, log, n, seed):
    rng = np.random.default_rng(seed)
    if log:
        return np.exp(rng.uniform(np.log(lo), np.log(hi), n)) * rng.choice([-1.0, 1.0], n)
    return rng.uniform(lo, hi, n)


def _bound(name, dtype, build):
    if dtype == np.float32:
        return ULPS_F32.get(name, 0.501) + SLACK
    libm = name in LIBM or (build == "baseline" and name in ULPS_F64)   # no vector math there
    return (4 if libm else ULPS_F64.get(name, 0.5)) + SLACK


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_dense_sweep_within_the_stated_ulps(name, dtype, build):
    bound = _bound(name, dtype, build)
    for k, (lo, hi, log) in enumerate(DOMAINS.get(name, DEFAULT_DOMAINS)):
        with np.errstate(all="ignore"):
            x = _sweep(lo, hi, log, 40_003, k).astype(dtype)
        got = _run(name, x)
        err, want = _error(name, x, got)
        worst = int(np.argmax(err))
        assert err[worst] <= bound, (f"{name}({x[worst]!r}) = {got[worst]!r}, want {want[worst]!r} "
                                     f"({err[worst]} ulp > {bound}) on [{lo}, {hi}]")


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_special_values(name, dtype, build):
    """NaN, infinities, signed zeros, subnormals and every fast-range edge: the same class of result as
    NumPy (NaN, and inf and 0 with their signs, exactly), finite results within the bound."""
    with np.errstate(all="ignore"):
        x = SPECIAL.astype(dtype)
        want = getattr(np, name)(x)
    got = _run(name, x)
    exact = ~np.isfinite(want) | (want == 0) | ~np.isfinite(got) | (got == 0)
    np.testing.assert_array_equal(got[exact], want[exact], err_msg=f"{name} at {x[exact]}")
    signed = exact & ~np.isnan(want)   # a NaN's sign bit is not part of the result
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]),
                                  err_msg=f"{name} at {x[signed]}")
    err, _ = _error(name, x, got)
    assert err.max() <= _bound(name, dtype, build), f"{name} at {x[np.argmax(err)]}: {err.max()} ulp"


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["exp", "log", "sin", "cos", "tanh", "expm1", "log1p", "arcsin", "log2",
                                  "log10", "exp2", "arctan", "floor", "sqrt", "reciprocal"])
def test_strided_and_broadcast_operands_equal_the_contiguous_result(name, threads, build):
    """In a fused pass with a strided operand and a broadcast one, each element's result is the one a
    contiguous call gives (lanes do not depend on their neighbours or on the block split)."""
    shape = (700, 1001)   # over a million elements x instructions: splits over threads
    rng = np.random.default_rng(3)
    base = rng.uniform(-0.99, 0.99, (shape[0], 2 * shape[1]))
    base[::7, ::5] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, 800.0], base[::7, ::5].shape)
    x = base[:, ::2]                                   # strided innermost dim
    row = rng.uniform(0.5, 1.5, shape[1])              # broadcast over rows
    g = Graph()
    a = g.add_input("x0", TensorType(np.dtype(np.float64), shape))
    b = g.add_input("x1", TensorType(np.dtype(np.float64), row.shape))
    g.set_outputs([_op(g, "np.multiply", _op(g, f"np.{name}", a), b)])
    exe = compile_graph(g, [TensorType(np.dtype(np.float64), shape),
                            TensorType(np.dtype(np.float64), row.shape)])
    before = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(threads)
    try:
        (got,) = exe(x, row)
    finally:
        numtrace_cpu.set_num_threads(before)
    want = _run(name, np.ascontiguousarray(x)) * row
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", ["fmax", "fmin", "copysign", "maximum", "minimum"])
def test_float_binary_selects_match_numpy_exactly(name, dtype, build):
    """fmax/fmin ignore a NaN operand, maximum/minimum propagate it, for every pair of special values.
    The sign of the result for a pair of zeros is left open: NumPy's own loops disagree on it (its
    vector loop and its scalar tail answer fmin(0.0, -0.0) differently)."""
    v = np.array([np.nan, -np.inf, -1.5, -0.0, 0.0, 1e-310, 2.0, np.inf], dtype)
    a, b = (m.ravel() for m in np.meshgrid(v, v))
    t = TensorType(np.dtype(dtype), a.shape)
    g = Graph()
    x, y = g.add_input("x0", t), g.add_input("x1", t)
    g.set_outputs([_op(g, f"np.{name}", x, y)])
    (got,) = compile_graph(g, [t, t])(a, b)
    want = getattr(np, name)(a, b)
    np.testing.assert_array_equal(got, want)
    signed = (a != 0) | (b != 0) | (name == "copysign")
    np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))


VMATH = ["exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sin", "cos", "tanh", "arcsin", "arctan"]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", VMATH)
def test_flagged_lanes_in_one_part_of_a_chunk_leave_the_others_alone(name, dtype, build):
    """A chunk whose vector body has no flagged lane leaves its part of the lane flags unwritten: a
    flagged value in the body of one chunk, then a clean chunk, then a flagged value in the padded
    tail of the last one. Every element equals its value computed on its own (the kernels do not
    depend on a lane's place), so a stale flag that sent a clean lane to the C library shows."""
    specials = np.array([np.nan, -np.inf, np.inf, 1e300, -0.75], dtype)
    with np.errstate(all="ignore"):
        alone = _run(name, specials)
    fill = np.array([0.3], dtype)
    (clean,) = _run(name, np.repeat(fill, 16))[:1]
    for k, special in enumerate(specials):
        x = np.repeat(fill, 256 * 2 + 21)
        spots = [5, 256 * 2 + 18]
        x[spots] = special
        with np.errstate(all="ignore"):
            got = _run(name, x)
        want = np.full_like(x, clean)
        want[spots] = alone[k]
        np.testing.assert_array_equal(got.view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}"),
                                      err_msg=f"{name}({special!r}) among {fill[0]!r}")


@pytest.mark.skipif(not {"avx2", "avx512"} <= set(RUNNABLE), reason="needs the avx2 and avx512 builds")
@pytest.mark.parametrize("name", ["exp", "tanh"])
def test_float32_exp_and_tanh_equal_across_the_vector_builds(name):
    """The AVX-512 build's sixteen-lane float32 exp and tanh (nt_simd.h) against the AVX2 build's
    eight lanes: the same bits on every 61st float32 bit pattern (NaN, inf, subnormals, the clamps'
    edges included), at lengths whose tails fill 1 to 15 lanes."""
    x = (np.arange(0, 1 << 32, 61, dtype=np.uint64).astype(np.uint32)).view(np.float32)
    outs = {}
    for build in ("avx2", "avx512"):
        runtime.use_blocks(isa.load(build))
        try:
            outs[build] = [_run(name, x[:n]).view(np.uint32) for n in (x.size, 1, 15, 17, 31)]
        finally:
            runtime.use_blocks(isa.blocks)
    for a, b in zip(outs["avx2"], outs["avx512"]):
        np.testing.assert_array_equal(a, b)
