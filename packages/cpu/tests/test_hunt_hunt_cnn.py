"""Hunt on products that read an im2col's stacked windows in place (products.gathered_operand,
packed.pxi's _gathered): programs a user writes, against NumPy."""

import sys
import threading

import numpy as np
import pytest
from numtrace_cpu import compile_graph
from numtrace_ir import Graph
from numtrace_ir.testing import assert_outputs_close
from numtrace_ir.types import TensorType


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
        threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
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
