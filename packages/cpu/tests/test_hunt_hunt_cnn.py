"""Hunt on products that read an im2col's stacked windows in place (products.gathered_operand,
packed.pxi's _gathered): programs a user writes, against NumPy."""

import sys

import numpy as np
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import Graph
from numtrace_ir.testing import assert_outputs_close
from numtrace_ir.types import TensorType
from threaded import run_threads


def _op(g, name, *inputs, **attrs):
    return g.create_node(name, list(inputs), attrs=attrs).output


def _shifted_windows_graph(w_shape, x_shape, n, dtype=np.float32):
    """W @ np.stack([x[:, 0:n], x[:, 1:n+1], x[:, 2:n+2]], axis=1).reshape(3 * rows, n)."""
    t = np.dtype(dtype)
    g = Graph()
    w = g.add_input("w", TensorType(t, w_shape))
    x = g.add_input("x", TensorType(t, x_shape))
    windows = [_op(g, "np.getitem", x, index=(slice(None), slice(i, i + n))) for i in range(3)]
    s = _op(g, "np.stack", *windows, axis=1)
    r = _op(g, "np.reshape", s, shape=(3 * x_shape[0], n), order="C")
    g.set_outputs([_op(g, "np.matmul", w, r)])
    return g


def test_a_small_k_product_of_stacked_windows_keeps_its_stack():
    """K = 6, N = 4: the small-K kernel runs the product, so the stack it reads must be made (the
    gather skipped the stack and the small-K kernel got no operand: a TypeError)."""
    g = _shifted_windows_graph((16, 6), (2, 6), 4)
    exe = compile_graph(g, [v.type for v in g.inputs])
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 6)).astype(np.float32)
    x = rng.standard_normal((2, 6)).astype(np.float32)
    (got,) = exe(w, x)
    want = w @ np.stack([x[:, 0:4], x[:, 1:5], x[:, 2:6]], axis=1).reshape(6, 4)
    assert_outputs_close(got, want, what="small-K product of stacked windows")


def test_concurrent_calls_alternating_three_layouts():
    """Threads switching often (a tiny switch interval) while calling with inputs of three layouts:
    a call must never read one layout's cached key with another's offset tables."""
    g = _shifted_windows_graph((16, 12), (4, 40), 38)
    exe = compile_graph(g, [v.type for v in g.inputs])
    assert exe.stats()["packed_gathered"] == 1
    rng = np.random.default_rng(1)
    w = rng.standard_normal((16, 12)).astype(np.float32)
    x = rng.standard_normal((4, 40)).astype(np.float32)
    args = (x, rng.standard_normal((8, 120)).astype(np.float32)[::2, ::3], np.asfortranarray(x[::-1]))
    wants = [w @ np.stack([a[:, 0:38], a[:, 1:39], a[:, 2:40]], axis=1).reshape(12, 38) for a in args]
    errors = []

    def work(k):
        for i in range(600):
            j = (k + i) % 3
            (got,) = exe(w, args[j])
            if not np.allclose(got, wants[j], rtol=1e-4, atol=1e-5):
                errors.append((k, i, j))
                return

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        run_threads(work, range(3))
    finally:
        sys.setswitchinterval(old)
    assert not errors
    assert exe.stats()["packed_gathered_runs"] == 1800


def test_a_stack_that_casts_its_windows_is_made_with_its_dtype():
    """np.stack(float64 windows, dtype=np.float32): NumPy rounds the windows to float32 (1e39 -> inf,
    and inf * 0 -> NaN in the product); reading the float64 windows instead kept them finite."""
    t64, t32 = np.dtype(np.float64), np.dtype(np.float32)
    g = Graph()
    w = g.add_input("w", TensorType(t32, (16, 12)))
    x = g.add_input("x", TensorType(t64, (4, 40)))
    windows = [_op(g, "np.getitem", x, index=(slice(None), slice(i, i + 38))) for i in range(3)]
    s = _op(g, "np.stack", *windows, axis=1, dtype=t32)
    r = _op(g, "np.reshape", s, shape=(12, 38), order="C")
    g.set_outputs([_op(g, "np.matmul", w, r)])
    exe = compile_graph(g, [v.type for v in g.inputs])
    rng = np.random.default_rng(2)
    wv = rng.standard_normal((16, 12)).astype(np.float32)
    wv[:, 3] = 0.0
    xv = rng.standard_normal((4, 40))
    xv[1, 5] = 1e39
    with np.errstate(over="ignore", invalid="ignore"):
        want = wv @ np.stack([xv[:, i:i + 38] for i in range(3)], axis=1, dtype=np.float32).reshape(12, 38)
        (got,) = exe(wv, xv)
    assert np.isnan(want).any()
    assert_outputs_close(got, want, what="product of a casting stack")


def _conv_stack_graph(x_shape, w_shape, kernel, stride, dtype, axis, rshape):
    """W @ np.stack(the kernel's strided windows of x (N, C, H, W), axis).reshape(rshape)."""
    (kh, kw), (sh, sw) = kernel, stride
    oh, ow = (x_shape[2] - kh) // sh + 1, (x_shape[3] - kw) // sw + 1
    rows = [slice(i, i + sh * (oh - 1) + 1, sh) for i in range(kh)]
    cols = [slice(j, j + sw * (ow - 1) + 1, sw) for j in range(kw)]
    index = [(slice(None), slice(None), r, c) for r in rows for c in cols]
    t = np.dtype(dtype)
    g = Graph()
    w = g.add_input("w", TensorType(t, w_shape))
    x = g.add_input("x", TensorType(t, x_shape))
    s = _op(g, "np.stack", *[_op(g, "np.getitem", x, index=ix) for ix in index], axis=axis)
    g.set_outputs([_op(g, "np.matmul", w, _op(g, "np.reshape", s, shape=rshape, order="C"))])

    def numpy(wv, xv):
        return wv @ np.stack([xv[ix] for ix in index], axis=axis).reshape(rshape)
    return g, numpy


def test_stack_axes_and_reshapes_against_numpy():
    """Seeded random convolutions: kernel, stride, odd sizes, the stack's axis and where the reshape
    cuts the stacked dims into (batch, K, N), called on contiguous, strided, Fortran-ordered and
    flipped inputs; whichever of them the kernels read in place, NumPy's answer."""
    rng = np.random.default_rng(3)
    gathered = 0
    for _ in range(40):
        dtype = (np.float32, np.float64)[int(rng.integers(2))]
        n, c = (int(v) for v in rng.integers(1, 4, 2))
        kh, kw, sh, sw = (int(v) for v in rng.integers(1, 4, 4))
        h, w = kh + int(rng.integers(0, 30)), kw + int(rng.integers(0, 12))
        oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
        axis = int(rng.integers(0, 5))
        dims = [n, c, oh, ow]
        dims.insert(axis, kh * kw)
        cut1 = int(rng.integers(0, 4))
        cut2 = int(rng.integers(cut1 + 1, 5))
        b, k, m = (int(np.prod(d, dtype=np.int64)) for d in (dims[:cut1], dims[cut1:cut2], dims[cut2:]))
        rshape = (b, k, m) if b > 1 else (k, m)
        wv = rng.standard_normal((int(rng.integers(8, 40)), k)).astype(dtype)
        xv = rng.standard_normal((n, c, h, w)).astype(dtype)
        g, numpy = _conv_stack_graph(xv.shape, wv.shape, (kh, kw), (sh, sw), dtype, axis, rshape)
        exe = compile_graph(g, [v.type for v in g.inputs])
        big = rng.standard_normal((n + 1, c + 1, 2 * h + 1, 3 * w + 2)).astype(dtype)
        for arg in (xv, big[:n, 1:, 1::2, 2::3], np.asfortranarray(xv), xv[:, ::-1, ::-1]):
            (got,) = exe(wv, arg)
            assert_outputs_close(got, numpy(wv, arg), what=f"{dtype.__name__} axis {axis} -> {rshape}")
        gathered += exe.stats()["packed_gathered_runs"]
    assert gathered > 40


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through ctypes")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_windows_at_an_unreadable_page_are_read_within_their_array(dtype):
    """Inputs whose first or last element touches a page that may not be read: the panels are filled
    from the windows (16-wide masked copies, stride 2 included, gathers, loops) without a fault."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page, keep = mmap.PAGESIZE, []

    def guarded(shape, at_front, rng):
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        pages = (nbytes + page - 1) // page + 2
        m = mmap.mmap(-1, pages * page)
        buf = (ctypes.c_char * (pages * page)).from_buffer(m)
        addr = ctypes.addressof(buf)
        assert libc.mprotect(addr, page, 0) == 0 and libc.mprotect(addr + (pages - 1) * page, page, 0) == 0
        keep.append((m, buf))
        start = page if at_front else (pages - 1) * page - nbytes
        a = np.frombuffer(m, dtype=dtype, count=int(np.prod(shape)), offset=start).reshape(shape)
        a[...] = rng.standard_normal(shape)
        return a

    rng = np.random.default_rng(4)
    convs = [(2, 3, 13, 37, 16, (3, 3), (1, 1)), (1, 2, 9, 33, 8, (3, 3), (2, 2)),
             (2, 1, 40, 5, 8, (3, 3), (1, 1)), (3, 2, 11, 18, 12, (2, 3), (3, 2))]
    for n, c, h, w, o, kernel, stride in convs:
        kk = kernel[0] * kernel[1]
        oh, ow = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
        wv = rng.standard_normal((o, c * kk)).astype(dtype)
        g, numpy = _conv_stack_graph((n, c, h, w), wv.shape, kernel, stride, dtype, 2, (n, c * kk, oh * ow))
        exe = compile_graph(g, [v.type for v in g.inputs])
        for at_front in (False, True):
            x = guarded((n, c, h, w), at_front, rng)
            nhwc = guarded((n, h, w, c), at_front, rng).transpose(0, 3, 1, 2)
            for arg in (x, x[:, :, ::-1, ::-1], nhwc):
                (got,) = exe(wv, arg)
                assert_outputs_close(got, numpy(wv, arg), what=f"{(n, c, h, w)} next to an unreadable page")
        assert exe.stats()["packed_gathered_runs"] == 6


def test_windows_that_are_copies_are_stacked_by_numpy():
    """Windows that are reshapes of strided slices are copies, each in its own allocation: the kernel
    never addresses one allocation from another's pointer, so NumPy stacks them (same values)."""
    t = np.dtype(np.float32)
    g = Graph()
    w = g.add_input("w", TensorType(t, (16, 3)))
    x = g.add_input("x", TensorType(t, (4, 40)))
    windows = [_op(g, "np.reshape", _op(g, "np.getitem", x, index=(slice(None), slice(i, i + 38))),
                   shape=(-1,), order="C") for i in range(3)]
    s = _op(g, "np.stack", *windows, axis=0)
    g.set_outputs([_op(g, "np.matmul", w, _op(g, "np.reshape", s, shape=(3, 152), order="C"))])
    exe = compile_graph(g, [v.type for v in g.inputs])
    rng = np.random.default_rng(5)
    wv = rng.standard_normal((16, 3)).astype(np.float32)
    for xv in (rng.standard_normal((4, 40)).astype(np.float32),
               rng.standard_normal((8, 80)).astype(np.float32)[::2, ::2]):
        (got,) = exe(wv, xv)
        want = wv @ np.stack([xv[:, i:i + 38].reshape(-1) for i in range(3)]).reshape(3, 152)
        assert_outputs_close(got, want, what="product of copied windows")
    assert exe.stats()["packed_gathered_runs"] == 0
