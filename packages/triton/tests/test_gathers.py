"""Gathers run as kernels (``x[idx]``, ``np.take``, ``np.take_along_axis``): equal to NumPy for every
index form NumPy takes (negative, unsigned, any rank, any axis, strided sources), and an index out of
range raises NumPy's IndexError instead of reading past the array."""

import ctypes

import numpy as np
import pytest
from conftest import INTERPRETER_ONLY, ON_GPU
from gpu_compile_check import assert_relaxed_atomics, assert_relaxed_reductions, sass_flushing
from gpu_compile_check import enabled as gpu_compile_enabled
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import type_of
from numtrace_ir.types import TensorType
from numtrace_triton import Backend, Tuning, generate
from numtrace_triton.aot import compile_for_gpu

RNG = np.random.default_rng(5)
GPU_COMPILE = pytest.mark.skipif(not gpu_compile_enabled()[0],
                                 reason=f"no compile for a GPU here: {gpu_compile_enabled()[1]}")


def _compile(op, arrays, **attrs):
    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(a)) for i, a in enumerate(arrays)]
    g.set_outputs(g.create_node(op, xs, attrs=registry.get(op).normalize_attrs(attrs)).outputs)
    return Backend().compile(g, [type_of(a) for a in arrays])


def _check(op, arrays, **attrs):
    exe = _compile(op, arrays, **attrs)
    assert "host step" not in exe.explain()
    (got,) = exe(*arrays)
    expected = registry.get(op).reference(*arrays, **registry.get(op).normalize_attrs(attrs))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    return exe


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint16", "bool", "float16"])
@pytest.mark.parametrize("index_dtype", ["int64", "int32", "uint8", "int8"])
def test_getitem_with_an_integer_array(dtype, index_dtype):
    x = (RNG.standard_normal((6, 3)) * 10).astype(dtype)
    idx = np.array([[0, 5], [2, 2], [1, 4]], index_dtype)
    if idx.dtype.kind == "i":
        idx[1, 0] = -1
    _check("np.getitem", [x, idx], index=("input",))
    _check("np.getitem", [x.T, idx % 3], index=(slice(None), "input"))


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1])
def test_take_on_every_axis_of_a_strided_array(axis):
    x = RNG.standard_normal((4, 5, 6)).transpose(2, 0, 1)[::2]  # (3, 4, 5), not contiguous
    n = x.size if axis is None else x.shape[axis]
    idx = RNG.integers(-n, n, (2, 3))
    _check("np.take", [x, idx], axis=axis)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_along_axis_with_broadcast_indices(axis):
    x = RNG.standard_normal((4, 5, 3))
    idx = np.argsort(x, axis=axis)
    _check("np.take_along_axis", [x, idx], axis=axis)
    _check("np.take_along_axis", [x, np.take(idx, [0], axis=axis)], axis=axis)


@pytest.mark.parametrize("bad", [6, -7, 100])
def test_an_index_out_of_range_raises_index_error(bad):
    x = RNG.standard_normal((6, 2))
    exe = _compile("np.getitem", [x, np.array([0, 1])], index=("input",))
    with pytest.raises(IndexError):
        x[np.array([0, bad])]
    with pytest.raises(IndexError, match="out of bounds"):
        exe(x, np.array([0, bad]))
    np.testing.assert_array_equal(exe(x, np.array([5, -6]))[0], x[[5, -6]])  # the next call is fine


def test_a_gather_feeds_a_fused_kernel_and_a_reduction():
    """An embedding lookup: the gather's kernel takes the tanh; the row sum reads the stored result."""
    w, tokens = RNG.standard_normal((10, 4)), np.array([[1, 9], [0, 3]])
    g = Graph()
    vw, vt = g.add_input("w", type_of(w)), g.add_input("t", type_of(tokens))
    e = g.create_node("np.getitem", [vw, vt], attrs={"index": ("input",)}).output
    h = g.create_node("np.tanh", [e]).output
    s = g.create_node("np.sum", [h], attrs={"axis": -1}).output
    g.set_outputs([h, s])
    exe = Backend().compile(g, [type_of(w), type_of(tokens)])
    got_h, got_s = exe(w, tokens)
    np.testing.assert_allclose(got_h, np.tanh(w[tokens]), rtol=1e-12)
    np.testing.assert_allclose(got_s, np.tanh(w[tokens]).sum(axis=-1), rtol=1e-12)


def _setitem(a, idx, value, index):
    g = Graph()
    va, vi, vv = (g.add_input(n, type_of(v)) for n, v in (("a", a), ("i", idx), ("v", value)))
    g.set_outputs([g.create_node("np.setitem", [va, vi, vv], attrs={"index": index}).output])
    return Backend().compile(g, [type_of(a), type_of(idx), type_of(value)])


@pytest.mark.parametrize("dtype", ["float64", "int8", "bool", "float16"])
def test_scatter_keeps_the_last_value_of_a_repeated_index(dtype):
    """NumPy assigns in index order: of repeated indices the last value stays, on any lane order."""
    a = np.zeros((6, 3), dtype)
    idx = np.array([[1, 4, 1], [-5, 0, 1]])
    value = (np.arange(18).reshape(2, 3, 3) % 7).astype(dtype)
    exe = _setitem(a, idx, value, ("input",))
    assert "host step" not in exe.explain()
    expected = a.copy()
    expected[idx] = value
    np.testing.assert_array_equal(exe(a, idx, value)[0], expected)


def test_scatter_along_a_later_axis_with_a_broadcast_value():
    a, idx, value = RNG.standard_normal((3, 5, 2)), np.array([4, 0, 4], np.uint8), RNG.standard_normal(2)
    expected = a.copy()
    expected[:, idx] = value
    (got,) = _setitem(a, idx, value, (slice(None), "input"))(a, idx, value)
    np.testing.assert_array_equal(got, expected)
    assert not np.shares_memory(got, a)


def test_a_scatter_index_out_of_range_raises_index_error():
    a, value = np.zeros((4, 2)), np.ones(2)
    exe = _setitem(a, np.array([0, 1]), value, ("input",))
    with pytest.raises(IndexError, match="out of bounds"):
        exe(a, np.array([0, 4]), value)


@INTERPRETER_ONLY
def test_a_scatter_uploads_only_its_inputs_and_flag_per_call(monkeypatch):
    """The claims start at -1 on every call, filled on the device (in the copy's kernel): a call copies
    no host array the size of ``a`` to the device, and a second call with other indices starts afresh."""
    a, value = RNG.standard_normal(5000), RNG.standard_normal(300)
    exe = _setitem(a, RNG.integers(0, 5000, 300), value, ("input",))
    assert len(exe.kernels) == 3  # the copy (and the fill), the claims, the writes
    uploaded = []
    upload = exe.allocator.upload
    monkeypatch.setattr(exe.allocator, "upload", lambda array: uploaded.append(array.nbytes) or upload(array))
    for idx in (RNG.integers(-20, 20, 300), RNG.integers(0, 5000, 300), np.zeros(300, np.int64)):
        uploaded.clear()
        expected = a.copy()
        expected[idx] = value
        np.testing.assert_array_equal(exe(a, idx, value)[0], expected)
        assert sum(uploaded) <= a.nbytes + idx.nbytes + value.nbytes + 4, uploaded


def _compile_scatters_for_gpu(dtype, ufunc, setitem=False):
    """The sm_90 compile of ``ufunc.at(a, idx, v)`` (and ``a[idx] = v``), by kernel name."""
    a, idx, v = TensorType(dtype, (1000,)), TensorType("int64", (300,)), TensorType(dtype, (300,))
    g = Graph()
    va, vi, vv = (g.add_input(n, t) for n, t in (("a", a), ("i", idx), ("v", v)))
    at = g.create_node("np.ufunc.at", [va, vi, vv], attrs=registry.get("np.ufunc.at").normalize_attrs(
        {"ufunc": ufunc, "index": ("input",)})).output
    outputs = [at]
    if setitem:
        outputs.insert(0, g.create_node("np.setitem", [va, vi, vv], attrs={"index": ("input",)}).output)
    g.set_outputs(outputs)
    kernels = generate(g, [a, idx, v], Tuning.gpu()).kernels
    return {r["name"].rsplit("_", 1)[-1]: r for r in compile_for_gpu(kernels, arch=90, sass=True)}


@GPU_COMPILE
def test_scatter_atomics_are_relaxed_reductions_on_a_gpu():
    """The kernel boundaries order a scatter's fill, claims and writes, so its atomics need no
    acquire/release: each is a fire-and-forget ``red``, not an ordered ``atom`` waiting for its old value
    (but for float32 add.at's compare-and-swap, `test_float_add_at_keeps_subnormals_on_a_gpu`)."""
    results = _compile_scatters_for_gpu("float32", "numpy.add", setitem=True)
    assert_relaxed_reductions(results["claim"], "max.s32")
    assert_relaxed_atomics(results["atomic"], "add.f32", "cas.b32")


@GPU_COMPILE
@pytest.mark.parametrize("ufunc", ["numpy.add", "numpy.subtract"])
def test_float_add_at_keeps_subnormals_on_a_gpu(ufunc):
    """A GPU's float32 atomic add flushes subnormals to zero (SASS ``RED.E.ADD.F32.FTZ.RN``): it adds
    only values it adds exactly (`test_float32_add_at_keeps_subnormals`), the others are swapped in by
    a compare-and-swap loop whose addition keeps subnormals (no other instruction flushes). float64's
    atomic add keeps them (``RED.E.ADD.F64.RN``)."""
    f32 = _compile_scatters_for_gpu("float32", ufunc)["atomic"]
    sass = assert_relaxed_atomics(f32, "add.f32", "cas.b32")
    assert {s.split(".")[0] for s in sass} == {"REDG", "ATOMG"} and any(".CAS" in s for s in sass), sass
    assert all(s.startswith("RED") and ".ADD.F32." in s for s in sass_flushing(f32["sass"])), \
        sass_flushing(f32["sass"])
    f64 = _compile_scatters_for_gpu("float64", ufunc)["atomic"]
    assert_relaxed_reductions(f64, "add.f64")
    assert not sass_flushing(f64["sass"]), sass_flushing(f64["sass"])


def _at(arrays, ufunc, index=("input",)):
    exe = _compile("np.ufunc.at", arrays, ufunc=ufunc, index=index)
    (got,) = exe(*arrays)
    return exe, got, registry.get("np.ufunc.at").reference(*arrays, ufunc=ufunc, index=index)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32", "uint64"])
@pytest.mark.parametrize("ufunc", ["numpy.add", "numpy.subtract", "numpy.maximum", "numpy.minimum"])
def test_integer_ufunc_at_by_atomics_is_exact(ufunc, dtype):
    if ufunc == "numpy.subtract" and dtype.startswith("u"):
        pytest.skip("unsigned subtract.at runs as a host step")
    a = RNG.integers(0, 50, (7, 3)).astype(dtype)
    idx = np.array([0, 6, 6, -1, 2, 0, 0])
    v = RNG.integers(0, 50, (7, 3)).astype(dtype)
    exe, got, expected = _at([a, idx, v], ufunc)
    assert "host step" not in exe.explain() and "tl.atomic_" in exe.explain()
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_add_at_by_atomics_is_within_the_summation_tolerance(dtype):
    a = RNG.standard_normal((4, 5)).astype(dtype)
    idx = RNG.integers(-5, 5, 40)
    v = RNG.standard_normal((4, 40)).astype(dtype)
    exe, got, expected = _at([a, idx, v], "numpy.add", (slice(None), "input"))
    assert "host step" not in exe.explain() and "tl.atomic_add" in exe.explain()
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)


@pytest.fixture
def gpu_float_atomics(monkeypatch):
    """The interpreter's float32 atomic add made a GPU's (``red.add.f32``): subnormal operands and
    results flushed to zero of their sign. On a GPU the hardware does it."""
    if ON_GPU:
        return
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    add = interpreter.InterpreterBuilder.create_atomic_rmw

    def flush(x):
        return np.copysign(np.float32(0), x) if 0 < abs(x) < np.finfo(np.float32).tiny else x

    def flushing_add(self, op, ptr, val, mask, sem, scope):
        if op != ir.ATOMIC_OP.FADD or val.data.dtype != np.float32:
            return add(self, op, ptr, val, mask, sem, scope)
        old = np.zeros_like(val.data)
        for i in np.flatnonzero(np.broadcast_to(mask.data, ptr.data.shape)):
            cell = ctypes.c_float.from_address(int(ptr.data.flat[i]))
            old.flat[i] = cell.value
            cell.value = flush(flush(old.flat[i]) + flush(val.data.flat[i]))
        return interpreter.TensorHandle(old, val.dtype.scalar)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_atomic_rmw", flushing_add)


SUB = float(np.finfo(np.float32).smallest_subnormal)


@pytest.mark.parametrize("ufunc", ["numpy.add", "numpy.subtract"])
@pytest.mark.parametrize(("a", "v"), [
    ([0.0, 1e-39, 1e-38, -0.0, 1.2e-38, 3.0, 1e-39], [1e-40, -9e-40, -9.99e-39, 0.0, -1.1e-38, 1e-40, 0.0]),
    ([5e-39, -0.0, 0.0, 2.0**-100, -2.0**-100], [2.0**-100, 0.0, -0.0, -2.0**-100 + 2.0**-123, SUB]),
])
def test_float32_add_at_keeps_subnormals(ufunc, a, v, gpu_float_atomics):
    """NumPy's float32 addition keeps subnormal operands and results (1e-40 + 0 is 1e-40, not 0), bit
    for bit, as a GPU's float32 atomic add does not (`gpu_float_atomics`)."""
    a, v = np.array(a, np.float32), np.array(v, np.float32)
    exe, got, expected = _at([a, np.arange(len(a))[::-1].copy(), v[::-1].copy()], ufunc)
    assert "host step" not in exe.explain()
    np.testing.assert_array_equal(got.view(np.int32), expected.view(np.int32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_add_at_of_repeated_indices_keeps_subnormals(dtype, gpu_float_atomics):
    """Subnormal values added many times into a few elements (sums of subnormals are exact, in any
    order), beside normal ones (within the summation tolerance); and one subnormal value broadcast
    over rows named by a 0-d index."""
    tiny = float(np.finfo(dtype).smallest_subnormal)
    a = (RNG.integers(-3, 4, 5) * tiny).astype(dtype)
    idx = RNG.integers(-5, 5, 300)
    v = (RNG.integers(-50, 51, 300) * tiny).astype(dtype)
    for ufunc in ("numpy.add", "numpy.subtract"):
        _, got, expected = _at([a, idx, v], ufunc)
        np.testing.assert_array_equal(got, expected)
        assert np.all(expected != 0)  # the flushing atomic would leave zeros
    v[::3] = RNG.standard_normal(100)
    _, got, expected = _at([a, idx, v], "numpy.add")
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6)
    rows = np.zeros((6, 4), dtype)
    _, got, expected = _at([rows, np.array(-2), np.array(100 * tiny, dtype)], "numpy.add")
    np.testing.assert_array_equal(got, expected)
    assert got[4].tolist() == [100 * tiny] * 4


@INTERPRETER_ONLY
def test_float32_add_at_swaps_only_where_a_small_value_changes_the_element(monkeypatch):
    """Ordinary values take the atomic add and zeros (``x + 0.0`` is ``x``) change nothing: neither runs
    the compare-and-swap loop, whose rounds contend on repeated indices. Subnormals into zeros do."""
    from triton.runtime import interpreter

    swaps = []
    cas = interpreter.InterpreterBuilder.create_atomic_cas
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_atomic_cas",
                        lambda self, *args: swaps.append(1) or cas(self, *args))
    a, idx = RNG.standard_normal(8).astype(np.float32), RNG.integers(0, 8, 500)
    for v in (RNG.standard_normal(500), np.zeros(500), np.full(500, -0.0), np.full(500, 1e-40)):
        swaps.clear()
        _, got, expected = _at([a, idx, v.astype(np.float32)], "numpy.add")
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        assert not swaps
    swaps.clear()
    _, got, expected = _at([np.zeros(8, np.float32), idx, np.full(500, 1e-40, np.float32)], "numpy.add")
    np.testing.assert_array_equal(got, expected)
    assert swaps


@pytest.mark.parametrize(("ufunc", "dtype"), [("numpy.maximum", "float64"), ("numpy.multiply", "int64"),
                                              ("numpy.add", "int8"), ("numpy.add", "float16")])
def test_ufunc_at_without_an_atomic_is_a_host_step(ufunc, dtype):
    a = np.array([1, 2, 3], dtype)
    v = np.array([-np.inf, 5, 7] if dtype == "float64" else [4, 5, 7], dtype)
    exe, got, expected = _at([a, np.array([0, 0, 2]), v], ufunc)
    assert "host step" in exe.explain()
    np.testing.assert_array_equal(got, expected)


def test_ufunc_at_index_out_of_range_raises_index_error():
    a, v = np.zeros(4), np.ones(2)
    exe = _compile("np.ufunc.at", [a, np.array([0, 1]), v], ufunc="numpy.add", index=("input",))
    with pytest.raises(IndexError, match="out of bounds"):
        exe(a, np.array([0, 4]), v)
    np.testing.assert_array_equal(exe(a, np.array([3, 3]), v)[0], [0, 0, 0, 2])
@pytest.mark.parametrize(("index", "shapes"), [
    (("input", "input"), [(4,), (4,)]),
    (("input", "input"), [(3, 1), (1, 5)]),  # x[i[:, None], j]
    ((slice(None), "input", "input"), [(2, 3), (3,)]),
    (("input", slice(None), "input"), [(4,), (4,)]),  # apart: the broadcast dims come first
    (("input", "input", "input"), [(2,), (2,), ()]),
])
@pytest.mark.parametrize("dtype", ["float64", "int8", "bool"])
def test_getitem_with_several_integer_arrays(index, shapes, dtype):
    x = (RNG.standard_normal((6, 5, 4)) * 10).astype(dtype)
    axes = [k for k, e in enumerate(index) if e == "input"]
    idxs = [np.asarray(RNG.integers(-x.shape[a], x.shape[a], s)) for a, s in zip(axes, shapes)]
    exe = _check("np.getitem", [x, *idxs], index=index)
    assert "pointwise" in exe.explain()
    _check("np.getitem", [x.transpose(2, 1, 0)[::-1][:, :, :4], *[i % 4 for i in idxs]], index=index)


def test_several_arrays_raise_index_error_per_axis():
    """An index in range for the flattened array but not for its own axis still raises."""
    x = np.arange(12.0).reshape(3, 4)
    exe = _compile("np.getitem", [x, np.array([0, 1]), np.array([1, 4])], index=("input", "input"))
    with pytest.raises(IndexError):
        exe(x, np.array([0, 1]), np.array([1, 4]))
