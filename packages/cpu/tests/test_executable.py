"""The executable's contract: input checks before any kernel, out=, fresh outputs, layouts, threads,
the compile cache, stats."""

import warnings

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import Backend, compile_graph
from numtrace_ir import Graph
from numtrace_ir.types import ScalarType, TensorType
from threaded import run_threads

F32 = np.dtype(np.float32)


def _w1_graph(shape=("N",)):
    g = Graph()
    a, b, c, d = (g.add_input(n, TensorType(F32, shape)) for n in "abcd")
    one = g.create_node("prim.Constant", [], attrs={"value": 1}).output
    ab = g.create_node("np.multiply", [a, b]).output
    num = g.create_node("np.add", [ab, c]).output
    e = g.create_node("np.exp", [g.create_node("np.negative", [d]).output]).output
    den = g.create_node("np.add", [one, g.create_node("np.absolute", [a]).output]).output
    g.set_outputs([g.create_node("np.divide", [g.create_node("np.multiply", [num, e]).output, den]).output])
    return g


def _w1(a, b, c, d):
    return (a * b + c) * np.exp(-d) / (1 + np.abs(a))


def _inputs(n, seed=0, dtype=F32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(dtype) for _ in range(4)]


@pytest.mark.parametrize("n", [0, 1, 7, 511, 512, 513, 1023, 1024, 1025, 16385, 300_001])  # BLOCK, CHUNK
def test_w1_sizes_and_threads(n):
    exe = compile_graph(_w1_graph(), [TensorType(F32, (n,))] * 4)
    xs = _inputs(n)
    before = numtrace_cpu.get_num_threads()
    for threads in (1, 2, 3):
        numtrace_cpu.set_num_threads(threads)
        try:
            (got,) = exe(*xs)
        finally:
            numtrace_cpu.set_num_threads(before)
        np.testing.assert_allclose(got, _w1(*xs), rtol=1e-5, atol=1e-6)
    assert exe.stats()["fused_groups"] == 1 and exe.stats()["fallbacks"] == 0


def test_layouts_readonly_broadcast_fortran():
    n = 3000
    exe = compile_graph(_w1_graph(), [TensorType(F32, (n,))] * 4)
    xs = _inputs(2 * n)
    strided = [x[::2] for x in xs]
    for x in strided:
        x.flags.writeable = False
    bcast = np.broadcast_to(np.float32(0.5), (n,))
    args = [strided[0], bcast, strided[2], strided[3]]
    np.testing.assert_allclose(exe(*args)[0], _w1(*args), rtol=1e-5, atol=1e-6)
    g = Graph()
    x = g.add_input("x", TensorType(F32, (37, 41)))
    y = g.add_input("y", TensorType(F32, (41,)))
    g.set_outputs([g.create_node("np.add", [g.create_node("np.tanh", [x]).output, y]).output])
    exe2 = compile_graph(g, [TensorType(F32, (37, 41)), TensorType(F32, (41,))])
    xf = np.asfortranarray(np.random.default_rng(1).standard_normal((37, 41)).astype(F32))
    yv = np.linspace(-1, 1, 82, dtype=F32)[::2]
    np.testing.assert_allclose(exe2(xf, yv)[0], np.tanh(xf) + yv, rtol=1e-5, atol=1e-6)


def test_bad_inputs_rejected_before_running():
    exe = compile_graph(_w1_graph(), [TensorType(F32, (8,))] * 4)
    xs = _inputs(8)
    with pytest.raises(TypeError, match="expected 4 inputs"):
        exe(*xs[:3])
    with pytest.raises(TypeError, match="dtype float64"):
        exe(xs[0].astype(np.float64), *xs[1:])
    with pytest.raises(ValueError, match=r"shape \(9,\)"):
        exe(np.zeros(9, F32), *xs[1:])
    with pytest.raises(ValueError, match=r"shape \(8, 1\)"):
        exe(np.zeros((8, 1), F32), *xs[1:])
    with pytest.raises(TypeError, match="numpy.ndarray"):
        exe([0.0] * 8, *xs[1:])
    with pytest.raises(ValueError, match=r"out\[0\]"):
        exe(*xs, out=(np.zeros(8, np.float64),))
    with pytest.raises(ValueError, match="1 arrays"):
        exe(*xs, out=())
    ro = np.zeros(8, F32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        exe(*xs, out=(ro,))


def test_out_and_fresh_outputs():
    exe = compile_graph(_w1_graph(), [TensorType(F32, (100,))] * 4)
    xs = _inputs(100)
    out = np.empty(100, F32)
    (res,) = exe(*xs, out=(out,))
    assert res is out
    np.testing.assert_allclose(out, _w1(*xs), rtol=1e-5, atol=1e-6)
    first = exe(*xs)[0]
    second = exe(*_inputs(100, seed=1))[0]
    assert first is not second and not np.shares_memory(first, second)
    np.testing.assert_allclose(first, _w1(*xs), rtol=1e-5, atol=1e-6)
    # out= aliasing an input is computed aside and copied
    a = xs[0].copy()
    expected = _w1(a, *xs[1:])
    exe(a, *xs[1:], out=(a,))
    np.testing.assert_allclose(a, expected, rtol=1e-5, atol=1e-6)
    for bad in (out, (o for o in (out,)), (out, out)):   # not a sequence of one array
        with pytest.raises(ValueError, match="out= must be a sequence of 1 arrays"):
            exe(*xs, out=bad)


def test_outputs_that_are_inputs_constants_or_repeats_are_copies():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (4,)))
    c = g.create_node("prim.Constant", [], attrs={"value": np.arange(4, dtype=F32)}).output
    y = g.create_node("np.add", [x, c]).output
    g.set_outputs([x, c, y, y])
    exe = compile_graph(g, [TensorType(F32, (4,))])
    xv = np.ones(4, F32)
    ox, oc, oy, oy2 = exe(xv)
    assert ox is not xv and not np.shares_memory(ox, xv)
    oc[:] = 99
    assert np.array_equal(exe(xv)[1], np.arange(4, dtype=F32))
    assert oy is not oy2 and np.array_equal(oy, oy2) and np.array_equal(oy, xv + np.arange(4, dtype=F32))


def test_scalar_inputs_and_outputs():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (5,)))
    s = g.add_input("s", ScalarType("float"))
    y = g.create_node("np.multiply", [x, s]).output
    g.set_outputs([y, g.create_node("np.sum", [y]).output])
    exe = compile_graph(g, [TensorType(F32, (5,)), ScalarType("float")])
    xv = np.arange(5, dtype=F32)
    y_, total = exe(xv, 2.5)
    assert y_.dtype == F32 and np.allclose(y_, xv * 2.5) and total.dtype == F32 and np.isclose(total, 25.0)
    with pytest.raises(TypeError, match="Python float"):
        exe(xv, "2.5")


def test_concurrent_calls_share_one_executable():
    n = 200_000
    exe = compile_graph(_w1_graph(), [TensorType(F32, (n,))] * 4)
    data = [_inputs(n, seed=s) for s in range(4)]
    expected = [_w1(*xs) for xs in data]
    errors = []

    def work(k):
        try:
            for _ in range(5):
                (got,) = exe(*data[k])
                np.testing.assert_allclose(got, expected[k], rtol=1e-5, atol=1e-6)
        except Exception as e:
            errors.append(e)

    _run_threads(work, 4)
    assert not errors, errors
    assert exe.stats()["arenas"] >= 1


def _run_threads(work, n: int) -> None:
    run_threads(work, range(n))


def test_backend_caches_per_signature_and_replans_new_shapes():
    backend = Backend()
    assert backend.is_available() == (True, "")
    g = _w1_graph()
    e1 = backend.compile(g, [TensorType(F32, (10,))] * 4)
    assert backend.compile(g, [TensorType(F32, (10,))] * 4) is e1
    e2 = backend.compile(g, [TensorType(F32, (20,))] * 4)
    assert e2 is not e1
    np.testing.assert_allclose(e2(*_inputs(20))[0], _w1(*_inputs(20)), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="concrete"):
        backend.compile(g, [TensorType(F32, ("N",))] * 4)
    with pytest.raises(TypeError):
        backend.compile(g, [np.float32] * 4)


def test_buffers_are_reused_by_liveness():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (64, 64)))
    v = x
    for _ in range(6):   # matmul chain: every intermediate is a planned buffer
        v = g.create_node("np.matmul", [v, x]).output
    g.set_outputs([v])
    exe = compile_graph(g, [TensorType(F32, (64, 64))])
    xv = np.eye(64, dtype=F32) * 0.5
    np.testing.assert_allclose(exe(xv)[0], np.linalg.matrix_power(xv, 7), rtol=1e-6)
    st = exe.stats()
    assert st["matmuls"] == 6 and st["buffer_slots"] == 2 and st["buffer_bytes"] == 2 * 64 * 64 * 4


def test_thread_setting_validation():
    with pytest.raises(ValueError):
        numtrace_cpu.set_num_threads(0)
    with pytest.raises(ValueError):
        numtrace_cpu.set_num_threads(True)
    assert numtrace_cpu.get_num_threads() >= 1


def test_views_keep_their_buffer_alive():
    g = Graph()
    x = g.add_input("x", TensorType(F32, (16, 16)))
    m1 = g.create_node("np.matmul", [x, x]).output
    t = g.create_node("np.transpose", [m1]).output            # a view of m1's buffer
    m2 = g.create_node("np.matmul", [x, g.create_node("np.negative", [x]).output]).output
    m3 = g.create_node("np.matmul", [m2, x]).output
    r = g.create_node("np.reshape", [t], attrs={"shape": (256,)}).output   # a copy (t is transposed)
    s = g.create_node("np.add", [t, m3]).output
    g.set_outputs([s, r, t])
    exe = compile_graph(g, [TensorType(F32, (16, 16))])
    xv = np.random.default_rng(5).standard_normal((16, 16)).astype(F32)
    want_t = (xv @ xv).T
    got_s, got_r, got_t = exe(xv)
    np.testing.assert_allclose(got_s, want_t + (xv @ -xv) @ xv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got_r, want_t.reshape(256), rtol=1e-5)
    np.testing.assert_allclose(got_t, want_t, rtol=1e-5)
    assert not np.shares_memory(got_t, got_s)
    assert exe.stats()["views"] == 2 and exe.stats()["fallbacks"] == 0


def test_views_of_arena_buffers_are_bound_once_per_arena():
    """A view of an intermediate is made when its arena is, not per call: each arena's views must be
    of its own buffers (calls in flight at once use different arenas), and a view NumPy has to copy
    (a reshape of a transposed buffer) still runs per call."""
    g = Graph()
    x = g.add_input("x", TensorType(F32, (8, 6)))
    c = g.create_node("np.cumsum", [x], attrs={"axis": 1}).output
    t = g.create_node("np.transpose", [c]).output
    tail = g.create_node("np.getitem", [t], attrs={"index": (slice(1, None),)}).output
    flat = g.create_node("np.reshape", [t], attrs={"shape": (48,)}).output
    g.set_outputs([g.create_node("np.multiply", [tail, tail]).output,
                   g.create_node("np.negative", [flat]).output])
    exe = compile_graph(g, [TensorType(F32, (8, 6))])
    assert [s.nodes[0].op for s in exe._arena_views] == ["np.transpose", "np.getitem"]
    errors = []

    def work(k):
        xv = np.random.default_rng(k).standard_normal((8, 6)).astype(F32)
        want_t = np.cumsum(xv, axis=1).T
        for _ in range(50):
            sq, neg = exe(xv)
            if not (np.array_equal(sq, want_t[1:] * want_t[1:]) and np.array_equal(neg, -want_t.reshape(48))):
                errors.append(k)

    _run_threads(work, 4)
    assert not errors and exe.stats()["arenas"] >= 1


def test_view_of_a_0d_value_that_numpy_returns_as_a_scalar():
    # np.flip of a 0-d array returns a NumPy scalar, which a fused pass cannot take as an operand.
    g = Graph()
    x = g.add_input("x", TensorType(F32, ()))
    s = g.create_node("np.sin", [x]).output
    f = g.create_node("np.flip", [s], attrs={"axis": None}).output
    g.set_outputs([g.create_node("np.negative", [f]).output, f])
    exe = compile_graph(g, [TensorType(F32, ())])
    neg, flipped = exe(np.array(3.0, F32))
    assert type(neg) is np.ndarray and type(flipped) is np.ndarray
    np.testing.assert_allclose(neg, -np.sin(np.float32(3.0)), rtol=1e-6)
    np.testing.assert_allclose(flipped, np.sin(np.float32(3.0)), rtol=1e-6)

@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")   # np.matrix
def test_ndarray_subclass_inputs_are_refused_but_memmap(tmp_path):
    # The graph has ndarray semantics: a masked array's mask or np.matrix's 2-d rows would be ignored.
    g = Graph()
    x = g.add_input("x", TensorType(F32, (3, 4)))
    row = g.create_node("np.getitem", [x], attrs={"index": (0,)}).output
    g.set_outputs([g.create_node("np.negative", [row]).output, row])
    exe = compile_graph(g, [TensorType(F32, (3, 4))])
    xv = np.arange(12, dtype=F32).reshape(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        matrix = np.asmatrix(xv)
    for arg in (matrix, np.ma.masked_array(xv, mask=xv > 5)):
        with pytest.raises(TypeError, match="input 0 is a .* ndarray subclass"):
            exe(arg)
    mapped = np.memmap(tmp_path / "x.bin", dtype=F32, mode="w+", shape=(3, 4))
    mapped[:] = xv
    neg, r = exe(mapped)
    assert type(neg) is np.ndarray and type(r) is np.ndarray
    np.testing.assert_array_equal(neg, -xv[0])
    np.testing.assert_array_equal(r, xv[0])


def test_an_input_of_an_equal_dtype_by_another_type_number_runs():
    g = Graph()
    x = g.add_input("x", TensorType(np.int64, (5,)))
    g.set_outputs([g.create_node("np.add", [x, x]).output])
    exe = compile_graph(g, [TensorType(np.int64, (5,))])
    arg = np.arange(5, dtype=np.longlong)
    assert arg.dtype == np.int64 and arg.dtype.num != np.dtype(np.int64).num
    np.testing.assert_array_equal(exe(arg)[0], 2 * np.arange(5))
    out = np.empty(5, np.longlong)
    (got,) = exe(arg, out=[out])
    assert got is out
    np.testing.assert_array_equal(out, 2 * np.arange(5))

def test_large_outputs_recycle_memory_only_once_released():
    n = 1 << 19   # 2 MiB of float32: a recycled block
    exe = compile_graph(_w1_graph(), [TensorType(F32, (n,))] * 4)
    xs = _inputs(n)
    want = _w1(*xs)
    first = exe(*xs)[0]
    addresses = {first.ctypes.data}
    view = first[::3]
    del first
    second = exe(*xs)[0]
    assert not np.shares_memory(view, second)
    np.testing.assert_allclose(view, want[::3], rtol=1e-5, atol=1e-6)
    addresses.add(second.ctypes.data)
    del second, view
    third = exe(*xs)[0]   # both blocks are free again: one of them is reused
    assert third.flags.writeable and third.flags.c_contiguous
    np.testing.assert_allclose(third, want, rtol=1e-5, atol=1e-6)
    assert third.ctypes.data in addresses
