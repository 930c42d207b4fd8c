"""Probes of float32 ``add.at``/``subtract.at`` on the Triton backend (`BodyEmitter._add_float32`):
signed zeros, NaN/inf, values and targets around 2**-100 and the smallest normal, under a GPU's flushing
atomic add (`gpu_float_atomics`) and without it, compared bit for bit with NumPy where one add per
element makes the order irrelevant."""

import numpy as np
import pytest
from gpu_compile_check import assert_relaxed_atomics, sass_flushing
from gpu_compile_check import enabled as gpu_compile_enabled
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import type_of
from numtrace_ir.types import TensorType
from numtrace_triton import Backend, Tuning, generate
from numtrace_triton.aot import compile_for_gpu
from test_gathers import _at, gpu_float_atomics  # noqa: F401  (a fixture)

F32 = np.float32
TINY = float(np.finfo(F32).tiny)
SUB = float(np.finfo(F32).smallest_subnormal)


def _bits_equal(got, expected):
    """Equal bit for bit, NaN payloads aside."""
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.int32), expected[~nan].view(np.int32))


@pytest.fixture(params=[False, True], ids=["atomics", "flushing_atomics"])
def flush(request):
    """Each test twice: with the backend's atomics as they are, and under a GPU's flushing atomic add."""
    if request.param:
        request.getfixturevalue("gpu_float_atomics")
    return request.param


def _exact(args, ufunc, index=("input",)):
    """The trace's ``ufunc.at`` on args, in the kernel (no host step where the target has elements),
    equal to NumPy's bit for bit."""
    exe, got, expected = _at(args, ufunc, index)
    assert args[0].size == 0 or "host step" not in exe.explain()
    _bits_equal(got, expected)


def _one_each(a, v, ufunc):
    a, v = np.array(a, F32), np.array(v, F32)
    idx = np.arange(len(a))[::-1].copy()
    with np.errstate(all="ignore"):  # inf - inf: NumPy's warning is the frontend's concern
        exe, got, expected = _at([a, idx, v[::-1].copy()], ufunc)
    assert "host step" not in exe.explain()
    _bits_equal(got, expected)


@pytest.mark.parametrize("ufunc", ["numpy.add", "numpy.subtract"])
def test_signed_zeros_nan_inf(ufunc, flush):
    z = [-0.0, 0.0]
    a = [x for x in z for _ in z] + [np.nan, np.inf, -np.inf, 1.0, 0.0, 1e-40, -np.inf, np.inf, 1e-40, -0.0]
    v = [y for _ in z for y in z] + [1.0, -np.inf, np.inf, np.nan, np.nan, np.inf, -1e-40, 1e-40, np.nan,
                                     -1e-40]
    _one_each(a, v, ufunc)
    snan, neg_nan = np.array([0x7F800001, -0x400000], np.int32).view(F32)  # signalling NaN, -NaN
    _one_each([snan, 0.0, neg_nan, 1e-40, snan], [1e-40, snan, -0.0, neg_nan, 1.0], ufunc)


def _around(x):
    x = F32(x)
    return [x, np.nextafter(x, F32(0)), np.nextafter(x, F32(np.inf)), -x]


@pytest.mark.parametrize("ufunc", ["numpy.add", "numpy.subtract"])
def test_values_and_targets_near_the_thresholds(ufunc, flush):
    """Every pair of a target and a value among floats near 0, the smallest subnormal and normal,
    2**-100 and 1, one add per element."""
    near = (SUB, 3 * SUB, TINY, 2 * TINY, 2.0**-124, 2.0**-110, 2.0**-101, 2.0**-100, 2.0**-99, 1.0)
    pts = sorted({float(p) for x in near for p in _around(x)} | {0.0, -0.0})
    pts += [-2.0**-100 + 2.0**-124, 2.0**-100 - 2.0**-124, -TINY + SUB, TINY - SUB]
    a, v = np.meshgrid(np.array(pts, F32), np.array(pts, F32))
    _one_each(a.ravel(), v.ravel(), ufunc)


def test_random_bit_patterns(flush):
    """Targets and values drawn from every float32 bit pattern's exponent range, one add per element."""
    rng = np.random.default_rng(11)
    n = 3000
    exp = rng.integers(0, 256, (2, n)).astype(np.uint32)
    exp[:, rng.random(n) < 0.5] = rng.integers(0, 30, (2, 1)).astype(np.uint32)  # tiny ones often
    bits = (rng.integers(0, 2, (2, n)).astype(np.uint32) << 31) | (exp << 23) | rng.integers(
        0, 1 << 23, (2, n)).astype(np.uint32)
    a, v = bits.view(F32)
    _one_each(a, v, "numpy.add")


@pytest.mark.parametrize("ufunc", ["numpy.add", "numpy.subtract"])
def test_rows_negative_indices_and_a_broadcast_scalar(ufunc, flush):
    """Row indices (negative ones among them) into a 2-d target, subnormal values: exact in any order."""
    rng = np.random.default_rng(3)
    a = (rng.integers(-3, 4, (5, 3)) * SUB).astype(F32)
    idx = rng.integers(-5, 5, 40)
    v = (rng.integers(-20, 21, (40, 3)) * SUB).astype(F32)
    for args in ([a, idx, v], [a, idx, np.array(-0.0, F32)], [a, idx, np.array(7 * SUB, F32)],
                 [a, np.array(-1), v[0]], [a.T.copy(), idx[:3], v[:3].T.copy()]):
        _exact(args, ufunc, ("input",) if args[0] is a else (slice(None), "input"))


def test_mixed_sizes_into_few_elements(flush):
    """Normal, tiny and subnormal values, NaN-free, into 3 elements: NumPy's sum within the tolerance."""
    rng = np.random.default_rng(4)
    v = (rng.standard_normal(600) * 2.0 ** rng.integers(-140, 2, 600)).astype(F32)
    idx = rng.integers(0, 3, 600)
    for a in (np.zeros(3, F32), np.array([SUB, -TINY, 1e-40], F32)):
        _, got, expected = _at([a, idx, v], "numpy.add")
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("a", "idx", "v"), [
    ([], [], []), ([1e-40], [], []), ([1e-40], [0, 0, -1], [1e-40, -0.0, 2.0]), ([-0.0], [0], [-0.0]),
    ([5.0, 1e-40], [1], [SUB]), ([np.nan], [0, 0], [SUB, 1.0])])
def test_empty_and_size_one_targets(a, idx, v, flush):
    args = [np.array(a, F32), np.array(idx, np.int64), np.array(v, F32)]
    for ufunc in ("numpy.add", "numpy.subtract"):
        _exact(args, ufunc)


def test_a_0d_index_and_value(flush):
    for a, i, v in (([1e-40, -0.0, 3.0], -2, -0.0), ([1e-40, -0.0], 0, 2e-40), ([1e-40], 0, 1.0),
                    ([-0.0], -1, -0.0)):
        for ufunc in ("numpy.add", "numpy.subtract"):
            args = [np.array(a, F32), np.array(i), np.array(v, F32)]
            _exact(args, ufunc)


@pytest.mark.parametrize(("n", "idx"), [(3, [0, 3]), (3, [-4]), (3, [1, 2**40]), (3, [-(2**62)]), (0, [0]),
                                        (1, [0, -2])])
def test_an_index_out_of_range_raises(n, idx):
    a, v = np.zeros(n, F32), np.full(len(idx), 1e-40, F32)
    idx = np.array(idx, np.int64)
    with pytest.raises(IndexError):
        np.add.at(a.copy(), idx, v)
    with pytest.raises(IndexError):
        _at([a, idx, v], "numpy.add")


def test_a_2d_index_and_zero_width_rows(flush):
    rng = np.random.default_rng(6)
    a = (rng.integers(-3, 4, 6) * SUB).astype(F32)
    idx = rng.integers(-6, 6, (4, 5))
    for args in ([a, idx, (rng.integers(-9, 9, (4, 5)) * SUB).astype(F32)],
                 [np.zeros((4, 0), F32), np.array([1, -1]), np.zeros((2, 0), F32)]):
        for ufunc in ("numpy.add", "numpy.subtract"):
            _exact(args, ufunc)
    # NumPy 2.4's add.at reads garbage for a value broadcast along a 2-d index's rows: compared with the
    # value broadcast beforehand.
    v = (rng.integers(-9, 9, 5) * SUB).astype(F32)
    _, got, _ = _at([a, idx, v], "numpy.add")
    _, _, expected = _at([a, idx, np.broadcast_to(v, idx.shape).copy()], "numpy.add")
    _bits_equal(got, expected)


_VARIANTS = {  # (a, index array, value), ufunc, index, the value squared in the kernel first
    "subtract_scalar": ((("float32", (1000,)), ("int64", (300,)), ("float32", ())), "numpy.subtract",
                        ("input",), False),
    "float16_value": ((("float32", (1000,)), ("int64", (300,)), ("float16", (300,))), "numpy.add",
                      ("input",), False),
    "bool_value": ((("float32", (1000,)), ("int32", (300,)), ("bool", (300,))), "numpy.add", ("input",),
                   False),
    "rows": ((("float32", (100, 7)), ("int64", (30,)), ("float32", (30, 7))), "numpy.add", ("input",), False),
    "columns": ((("float32", (7, 100)), ("int64", (30,)), ("float32", (7, 30))), "numpy.subtract",
                (slice(None), "input"), False),
    "fused_value": ((("float32", (1000,)), ("int64", (300,)), ("float32", (300,))), "numpy.add", ("input",),
                    True),
}


@pytest.mark.skipif(not gpu_compile_enabled()[0],
                    reason=f"no compile for a GPU here: {gpu_compile_enabled()[1]}")
@pytest.mark.parametrize("variant", sorted(_VARIANTS))
def test_every_float32_add_at_variant_flushes_only_in_its_atomic_add(variant):
    """Whatever feeds the value (a scalar, a conversion, row or column indices, a fused multiply), the
    sm_90 machine code flushes subnormals only in the float32 atomic add, and its atomics are relaxed,
    GPU-scoped: the atomic add, the atomic read (``OR``) and the compare-and-swap."""
    shapes, ufunc, index, square = _VARIANTS[variant]
    types = [TensorType(d, s) for d, s in shapes]
    g = Graph()
    xs = [g.add_input(f"x{i}", t) for i, t in enumerate(types)]
    if square:
        xs[2] = g.create_node("np.multiply", [xs[2], xs[2]],
                              attrs=registry.get("np.multiply").normalize_attrs({})).output
    g.set_outputs([g.create_node("np.ufunc.at", xs, attrs=registry.get("np.ufunc.at").normalize_attrs(
        {"ufunc": ufunc, "index": index})).output])
    results = compile_for_gpu(generate(g, types, Tuning.gpu()).kernels, arch=90, ptx=True, sass=True)
    atomic, = (r for r in results if r["name"].endswith("scatter_atomic"))
    sass = assert_relaxed_atomics(atomic, "add.f32", "cas.b32", "or.b32")
    assert {".".join(s.split(".")[:3]) for s in sass} == {"REDG.E.ADD", "ATOMG.E.CAS", "ATOMG.E.OR"}, sass
    assert {s for s in sass_flushing(atomic["sass"]) if not s.startswith("REDG.E.ADD.F32.")} == set(), \
        sass_flushing(atomic["sass"])


def test_many_blocks_chained_and_consumed(flush):
    """Thousands of subnormal values (several blocks) into 7 elements, twice in a row on the same array,
    the result then doubled in the same trace, called twice with new values: exact, as NumPy's."""
    rng = np.random.default_rng(8)
    n = 5000

    def args():
        return [(rng.integers(-3, 4, 7) * SUB).astype(F32), rng.integers(-7, 7, n),
                (rng.integers(-40, 41, n) * SUB).astype(F32), rng.integers(0, 7, 9), np.float32(-3 * SUB)]

    first = args()
    g = Graph()
    a, i, v, j, w = (g.add_input(f"x{k}", type_of(x)) for k, x in enumerate(first))
    at = registry.get("np.ufunc.at")
    once = g.create_node("np.ufunc.at", [a, i, v], attrs=at.normalize_attrs(
        {"ufunc": "numpy.add", "index": ("input",)})).output
    twice = g.create_node("np.ufunc.at", [once, j, w], attrs=at.normalize_attrs(
        {"ufunc": "numpy.subtract", "index": ("input",)})).output
    doubled = g.create_node("np.add", [twice, twice], attrs=registry.get("np.add").normalize_attrs({})).output
    g.set_outputs([doubled])
    exe = Backend().compile(g, [type_of(x) for x in first])
    assert "host step" not in exe.explain()
    for xs in (first, args()):
        expected = xs[0].copy()
        np.add.at(expected, xs[1], xs[2])
        np.subtract.at(expected, xs[3], xs[4])
        (got,) = exe(*xs)
        _bits_equal(got, expected + expected)
        assert np.count_nonzero(expected) > 3
