"""Hunt in float32 exp (1 + r with Fast2Sum) and column sums' NaNs: exp within 1 ulp of the correctly
rounded value over float32's range (subnormal results, the overflow edge, NaN/inf/-0), each element's
bits independent of the array's length, offset and stride; a column sum's NaN the same on the
interpreter and in generated kernels."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler
from numtrace_ir import Graph
from numtrace_ir.types import TensorType


def _both(graph, types):
    """The graph's executable with generated kernels, and one on the interpreter."""
    out = []
    for mode in ("sync", "off"):
        old = compiler.set_mode(mode)
        try:
            out.append(compile_graph(graph, types))
        finally:
            compiler.set_mode(old)
    return out


@pytest.fixture(scope="module", params=["generated", "interpreter"])
def exp32(request):
    """``np.exp`` of a float32 vector on the cpu backend (a graph compiled per length)."""
    made: dict = {}

    def call(x):
        if x.shape not in made:
            g = Graph()
            t = TensorType(np.dtype(np.float32), x.shape)
            g.set_outputs([g.create_node("np.exp", [g.add_input("x", t)]).output])
            made[x.shape] = _both(g, [t])[request.param == "interpreter"]
        return made[x.shape](x)[0]
    return call


def _ulps(got, x):
    """|got - exp(x)| in units of the float32 spacing at the correctly rounded result (2**-149 below)."""
    exact = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):   # (a result past float32's range casts to inf)
            spacing = np.maximum(np.spacing(np.abs(exact.astype(np.float32))).astype(np.float64), 2.0 ** -149)
    return np.abs(got.astype(np.float64) - exact) / spacing


def test_exp_float32_within_one_ulp_over_its_range(exp32):
    """Every 971st float32 in [0, 89) and (-104, 0] (subnormal results from -87.3 down, zero below -103.97):
    within 1 ulp, finite exactly where NumPy's is."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        pos = np.arange(0, np.float32(89.0).view(np.int32), 971, dtype=np.int32).view(np.float32)
        neg = -np.arange(0, np.float32(104.0).view(np.int32), 971, dtype=np.int32).view(np.float32)
        x = np.concatenate([pos, neg])
        got, want = exp32(x), np.exp(x)
    assert np.array_equal(np.isfinite(got), np.isfinite(want))
    assert _ulps(got, x)[np.isfinite(want)].max() <= 1.0


def test_exp_float32_special_values(exp32):
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 88.72283, np.nextafter(np.float32(88.72283), np.inf),
                  89.0, -87.33654, -103.97207, -103.97208, -104.0, np.finfo(np.float32).max,
                  -np.finfo(np.float32).max], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got, want = exp32(x), np.exp(x)
    exact = ~np.isfinite(want) | (want == 0) | (want == 1)
    np.testing.assert_array_equal(got[exact], want[exact])
    assert _ulps(got[~exact], x[~exact]).max() <= 1.0


def test_exp_float32_bits_do_not_depend_on_length_offset_or_stride(exp32):
    """The scalar tail and the vector lanes give the same bits: an element's exp is the same in a whole
    array, a slice at any offset and length, an unaligned copy and a strided view."""
    base = np.random.default_rng(0).uniform(-104, 89, 600).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        whole = exp32(base)
        for n, off in itertools.product([1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 65, 127], range(9)):
            want = whole[off:off + n].view(np.int32)
            unaligned = np.empty(n + 1, np.float32)[1:]
            unaligned[...] = base[off:off + n]
            for x in (base[off:off + n].copy(), unaligned, np.repeat(base[off:off + n], 2)[::2]):
                assert np.array_equal(exp32(x).view(np.int32), want), (n, off)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows, width", [(5, 2), (3, 2), (9, 2)])
def test_nan_sign_of_a_small_column_sum_is_the_same_on_both_paths(dtype, rows, width):
    """A column sum of (x - y) with a +NaN and a -NaN (inf - inf) in two rows keeps the first row's NaN
    on the interpreter (column mode) and in generated kernels, as NumPy's does (in a wider row, a
    column in NumPy's scalar tail may keep the last: its compiler's operand order)."""
    g = Graph()
    t = TensorType(np.dtype(dtype), (rows, width))
    x, y = g.add_input("x", t), g.add_input("y", t)
    diff = g.create_node("np.subtract", [x, y]).output
    g.set_outputs([g.create_node("np.sum", [diff], attrs={"axis": 0}).output])
    gen, interp = _both(g, [t, t])
    for plus, minus in itertools.permutations(range(rows), 2):
        xv, yv = np.zeros((rows, width), dtype), np.zeros((rows, width), dtype)
        xv[plus], xv[minus], yv[minus] = np.nan, np.inf, np.inf
        with np.errstate(invalid="ignore"):   # inf - inf
            want, got = np.sum(xv - yv, axis=0), (gen(xv, yv)[0], interp(xv, yv)[0])
        assert got[0].tobytes() == got[1].tobytes() == want.tobytes(), (plus, minus)
