"""Packed products that read B from an im2col's windows (products.gathered_operand, packed.pxi's
_gathered): ``W @ np.stack(windows, axis).reshape(...)`` as nn.Conv2d writes it, the stack never made.
Against NumPy over shapes (batch 1, odd sizes, strides, padding as a separate input), dtypes, special
values and signed zeros; bit for bit against the same product on the stacked copy, at 1 and 2 threads;
inputs of other layouts (their windows read where they lie) and reshapes the gather cannot read (NumPy's
stack instead)."""

import numpy as np
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import Graph
from numtrace_ir.types import TensorType
from threaded import run_threads

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # special values on purpose

# (batch, channels, height, width, out channels, kernel (kh, kw), stride (sh, sw))
CONVS = [(64, 1, 30, 30, 8, (3, 3), (1, 1)), (3, 8, 28, 28, 16, (3, 3), (2, 2)),
         (1, 2, 7, 9, 9, (3, 3), (1, 1)), (5, 3, 11, 6, 10, (2, 3), (2, 1)), (2, 4, 5, 5, 33, (1, 1), (1, 1)),
         (1, 1, 3, 40, 8, (3, 1), (1, 3))]


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _windows_index(x_shape, kernel, stride):
    (kh, kw), (sh, sw) = kernel, stride
    oh, ow = (x_shape[2] - kh) // sh + 1, (x_shape[3] - kw) // sw + 1
    rows = [slice(i, i + sh * (oh - 1) + 1, sh) for i in range(kh)]
    cols = [slice(j, j + sw * (ow - 1) + 1, sw) for j in range(kw)]
    return [(slice(None), slice(None), r, c) for r in rows for c in cols], oh, ow


def _conv_graph(x_shape, w_shape, kernel, stride, dtype, *, stacked=False, axis=2, rshape=None):
    """W (O, C*kh*kw) @ the stacked windows of x reshaped to (N, C*kh*kw, OH*OW): nn.Conv2d's im2col.
    `stacked`: the product's B is a graph input of the reshape's shape instead (the plain packed path)."""
    t = np.dtype(dtype)
    index, oh, ow = _windows_index(x_shape, kernel, stride)
    n, c = x_shape[:2]
    rshape = rshape or (n, c * len(index), oh * ow)
    g = Graph()
    w = g.add_input("w", TensorType(t, w_shape))
    if stacked:
        r = g.add_input("b", TensorType(t, rshape))
    else:
        x = g.add_input("x", TensorType(t, x_shape))
        windows = [_op(g, "np.getitem", x, index=ix) for ix in index]
        r = _op(g, "np.reshape", _op(g, "np.stack", *windows, axis=axis), shape=rshape)
    g.set_outputs([_op(g, "np.matmul", w, r)])
    return g


def _stack(x, kernel, stride, axis=2, rshape=None):
    index, oh, ow = _windows_index(x.shape, kernel, stride)
    s = np.stack([x[ix] for ix in index], axis=axis)
    return s.reshape(rshape or (x.shape[0], x.shape[1] * len(index), oh * ow))


def _compile(g, gathered=1, into=()):
    """The executable, checked to run one packed product (`gathered` of them from windows) and NumPy
    into a buffer for the ops `into` only."""
    exe = compile_graph(g, [v.type for v in g.inputs])
    s = exe.stats()
    assert s["packed_matmuls"] == 1 and s["packed_gathered"] == gathered and s["fallbacks"] == 0
    assert s["numpy_into"] == list(into)
    return exe


def _data(rng, conv, dtype, special=False):
    n, c, h, w_, o, (kh, kw), _ = conv
    x = rng.standard_normal((n, c, h, w_)).astype(dtype)
    w = rng.standard_normal((o, c * kh * kw)).astype(dtype)
    if special:
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, max(1, flat.size // 50))] = np.nan
        flat[rng.integers(0, flat.size, max(1, flat.size // 50))] = np.inf
        flat[rng.integers(0, flat.size, max(1, flat.size // 50))] = -np.inf
        flat[rng.integers(0, flat.size, max(1, flat.size // 10))] = -0.0
        w[:, 0] = -0.0
    return x, w


@pytest.mark.parametrize("special", [False, True], ids=["finite", "nan_inf_zeros"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("conv", CONVS, ids=str)
def test_gathered_product_equals_the_stacked_one_bit_for_bit(conv, dtype, special, threads):
    """Same values packed in the same places as from the stacked copy: the same bits, and NaN/inf/-0
    where NumPy's BLAS has them (the packed kernels' rule, test_packed.py)."""
    rng = np.random.default_rng(sum(map(hash, map(str, conv))) % 2**32)
    x, w = _data(rng, conv, dtype, special)
    kernel, stride = conv[5], conv[6]
    exe = _compile(_conv_graph(x.shape, w.shape, kernel, stride, dtype))
    b = _stack(x, kernel, stride)
    plain = _compile(_conv_graph(x.shape, w.shape, kernel, stride, dtype, stacked=True), gathered=0)
    (got,), (want,) = exe(w, x), plain(w, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    assert exe.stats()["packed_gathered_runs"] == 1
    with np.errstate(all="ignore"):
        ref = w @ b
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    ok = np.isfinite(ref)
    tol = {np.float32: 1e-4, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(got[ok], ref[ok], rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inputs_of_other_layouts_are_read_where_they_lie(dtype, threads):
    """A strided or Fortran-ordered x gives windows of other strides: the offsets are worked out again
    for them, and a call with the first layout again reads it right."""
    rng = np.random.default_rng(7)
    conv = (4, 3, 12, 10, 8, (3, 3), (2, 1))
    x, w = _data(rng, conv, dtype)
    kernel, stride = conv[5], conv[6]
    exe = _compile(_conv_graph(x.shape, w.shape, kernel, stride, dtype))
    big = rng.standard_normal((4, 6, 24, 30)).astype(dtype)
    for arg in (x, big[:, ::2, ::2, 1::3], np.asfortranarray(x), x[::-1], x):
        (got,) = exe(w, arg)
        want = w @ _stack(np.ascontiguousarray(arg), kernel, stride)
        np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-5)
    assert exe.stats()["packed_gathered_runs"] == 5


def test_a_reshape_the_gather_cannot_read_stacks_with_numpy():
    """Windows stacked first (axis 0) and reshaped so that a product's rows take windows apart: the
    kernels cannot read B as rows x columns of one product, so NumPy stacks them; the values are right."""
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    kernel, stride = (2, 2), (1, 1)
    rshape = (4, 5, 2 * 2 * 5)   # (4 windows, 2 batch, 2 channels, 5, 5) -> per window (5, 20)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    exe = _compile(_conv_graph(x.shape, w.shape, kernel, stride, np.float32, axis=0, rshape=rshape))
    (got,) = exe(w, x)
    want = w @ _stack(x, kernel, stride, axis=0, rshape=rshape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert exe.stats()["packed_gathered_runs"] == 0


def test_windows_of_several_values_are_not_gathered():
    """A stack of views of two different arrays stays NumPy's stack into a packed product."""
    t = TensorType(np.dtype(np.float32), (2, 3, 4))
    g = Graph()
    w = g.add_input("w", TensorType(np.dtype(np.float32), (8, 6)))
    a, b = g.add_input("a", t), g.add_input("b", t)
    ix = (slice(None), slice(None), slice(0, 4))
    s = _op(g, "np.stack", _op(g, "np.getitem", a, index=ix), _op(g, "np.getitem", b, index=ix), axis=1)
    g.set_outputs([_op(g, "np.matmul", w, _op(g, "np.reshape", s, shape=(2, 6, 4)))])
    exe = _compile(g, gathered=0, into=["np.stack"])
    rng = np.random.default_rng(9)
    wv, av, bv = (rng.standard_normal(v.type.shape).astype(np.float32) for v in g.inputs)
    (got,) = exe(wv, av, bv)
    np.testing.assert_allclose(got, wv @ np.stack([av, bv], axis=1).reshape(2, 6, 4), rtol=1e-5, atol=1e-5)


def test_concurrent_calls_with_other_layouts():
    """Threads calling one executable with inputs of two layouts: each call keeps the offset tables of
    its own layout while its kernels read them, whatever the other call caches meanwhile."""

    rng = np.random.default_rng(10)
    conv = (4, 3, 12, 10, 16, (3, 3), (2, 1))
    x, w = _data(rng, conv, np.float32)
    kernel, stride = conv[5], conv[6]
    exe = _compile(_conv_graph(x.shape, w.shape, kernel, stride, np.float32))
    strided = rng.standard_normal((4, 6, 24, 30)).astype(np.float32)[:, ::2, ::2, 1::3]
    wants = [w @ _stack(np.ascontiguousarray(a), kernel, stride) for a in (x, strided)]
    errors = []

    def work(k):
        arg, want = (x, strided)[k % 2], wants[k % 2]
        for _ in range(200):
            (got,) = exe(w, arg)
            if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                errors.append(k)
                return

    run_threads(work, range(4))
    assert not errors
