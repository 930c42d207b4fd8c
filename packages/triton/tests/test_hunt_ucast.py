"""Hunt around the float -> integer casts of the Triton backend's GPU form (NumPy's x86-64 answers where a
GPU's ``cvt.rzi`` saturates): casts fused after arithmetic, in a reduction's prologue and epilogue, in
stores (setitem, scatter, copyto), and the integer sums around them. Each program is compared with
NumPy on this machine, bit for bit where NumPy is deterministic (every float -> integer cast but its
float32/float64 -> uint32 array cast, see test_hunt_hunt_gpu).

``compiled`` runs the backend's own form (the GPU's under ``NUMTRACE_TRITON_TESTS_ON_GPU=1``);
``gpu-emulated`` runs the GPU's form in the interpreter with a saturating float -> integer conversion.
Findings kept here: a sum or cumsum with a boolean or sub-32-bit integer dtype was not wrapped to that
dtype before the ops fused after it (Triton's tl.sum/tl.cumsum widen to 32 bits; a looped boolean sum
added int1 accumulators modulo 2), and np.mean with an
integer dtype divided in float32 (Triton's integer ``/``) where NumPy divides in float64; np.var/np.std
with an integer dtype (NumPy truncates the mean to it) now run as host steps."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import INTERPRETER_ONLY
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import type_of
from numtrace_triton import Backend
from test_hunt_hunt_gpu import _UNSIGNED_EDGES, _as_on_a_gpu, _cast_one_at_a_time

FORMS = ["compiled", pytest.param("gpu-emulated", marks=INTERPRETER_ONLY)]
FLOATS = ["float16", "float32", "float64"]
# Every integer destination whose NumPy cast from a float is deterministic (uint32: from float16 only).
INTS = ["int8", "uint8", "int16", "uint16", "int32", "int64", "uint64"]
NARROW = ["bool", "int8", "uint8", "int16", "uint16"]
# The builder's edges, and the ends of the narrow types, subnormals, a NaN with its sign bit set.
EDGES = [*_UNSIGNED_EDGES, -np.nan, 127.5, -128.5, 256.0, 32767.5, -32768.9, 65536.0, -(2.0**31) - 1,
         2.0**31 - 1, 5e-324, 1e-40, -1e-40, 6e-8, -6e-8]


def _edges(src, n):
    with np.errstate(over="ignore"):
        return np.resize(np.array(EDGES).astype(src), n)


def _node(g, op, inputs, **attrs):
    return g.create_node(op, inputs, attrs=registry.get(op).normalize_attrs(attrs)).output


def _compile(build, arrays):
    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(a)) for i, a in enumerate(arrays)]
    g.set_outputs(build(g, *xs))
    return Backend().compile(g, [type_of(a) for a in arrays])


def _same(got, expected):
    assert len(got) == len(expected)
    for x, y in zip(got, expected):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def _form(monkeypatch, form):
    if form == "gpu-emulated":
        _as_on_a_gpu(monkeypatch)


# -- casts fused into kernels ----------------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(("src", "dst"), [(s, d) for s in FLOATS for d in INTS] + [("float16", "uint32")])
def test_float_casts_fused_after_arithmetic_as_numpy(monkeypatch, form, src, dst):
    """``(x * y).astype(dst)`` in one kernel over 1237 elements (several blocks, a ragged last one)."""
    _form(monkeypatch, form)
    x = _edges(src, 1237)
    y = np.ones_like(x)
    product = lambda g, a, b: _node(g, "np.multiply", [a, b])
    exe = _compile(lambda g, a, b: [_node(g, "np.astype", [product(g, a, b)], dtype=np.dtype(dst))], [x, y])
    with np.errstate(invalid="ignore"):
        _same(exe(x, y), [(x * y).astype(dst)])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("src", FLOATS)
@pytest.mark.parametrize("dst", INTS)
def test_float_casts_in_a_reductions_prologue_and_epilogue(monkeypatch, form, src, dst):
    """``max(x).astype(dst)`` (the cast after the reduction, on its rows) and ``sum(x.astype(dst))`` (the
    cast of each element before it), in one reduction kernel."""
    _form(monkeypatch, form)
    x = _edges(src, 7 * 31).reshape(7, 31)
    d = np.dtype(dst)

    def build(g, a):
        return [_node(g, "np.astype", [_node(g, "np.max", [a], axis=1)], dtype=d),
                _node(g, "np.sum", [_node(g, "np.astype", [a], dtype=d)], axis=1)]

    exe = _compile(build, [x])
    for a in (x, x[::-1].copy()):
        with np.errstate(invalid="ignore", over="ignore"):
            _same(exe(a), [a.max(axis=1).astype(d), a.astype(d).sum(axis=1)])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint64", "int16"])
def test_rounding_unsigned_integers_to_tens_past_the_end_of_their_type(monkeypatch, form, dtype):
    """np.round(uint, -1) goes through float64 and back: 255 -> 260 -> 4 in uint8, the uint64 maximum ->
    2**64 -> 0 (NumPy's cast), not a saturated maximum."""
    _form(monkeypatch, form)
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, info.max - 4, info.max - 5, info.max // 2, 5, 15, 25, 35], dtype=dtype)
    exe = _compile(lambda g, a: [_node(g, "np.round", [a], decimals=-1)], [x])
    with np.errstate(invalid="ignore"):
        _same(exe(x), [np.round(x, -1)])


# -- integer sums around the casts (findings) ---------------------------------------------------------------

# Persistent (one tile per row) and looped (the reduced extent past the GPU's 8192 and the interpreter's
# 16384 persistent limits: passes over chunks with a per-row carry; 16 chunks of the GPU's 2048 per row,
# 8 of the interpreter's 4096, so an int1 accumulator added modulo 2 ends 0 in every lane of a True row).
LAYOUTS = {"persistent": (4, 300), "looped": (3, 32768)}


def _narrow_input(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        x = rng.random(shape) < 0.002
        x[0] = True    # every lane of every chunk True: Triton's int1 add (modulo 2) would lose them
        x[1] = False
        return x
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["np.sum", "np.cumsum"])
@pytest.mark.parametrize("dtype", NARROW)
def test_a_narrow_sum_wraps_before_the_ops_fused_after_it(layout, op, dtype):
    """``sum(x, dtype=int8)`` wraps in int8 (``dtype=bool``: a logical or) before the ops after it read it:
    Triton's tl.sum/tl.cumsum widen booleans and integers under 32 bits to 32 bits, and only a store
    narrowed them back; a looped boolean sum added its int1 accumulators modulo 2. Was:
    ``np.sum(x, dtype=np.uint8).astype(float)`` 4706.0 where NumPy gives 98.0, ``np.cumsum(b, dtype=bool)``
    False from the 256th True on, ``np.sum(b, dtype=bool)`` of 32768 True False when looped."""
    x = _narrow_input(dtype, LAYOUTS[layout], seed=len(op) + len(dtype))
    d = np.dtype(dtype)

    def build(g, a):
        total = _node(g, op, [a], axis=1, dtype=d)
        return [_node(g, "np.astype", [total], dtype=np.dtype(np.float64)),
                _node(g, "np.equal", [total, _node(g, "np.max", [a], axis=1, keepdims=op == "np.cumsum")])]

    exe = _compile(build, [x])
    fn = getattr(np, op[3:])
    total = fn(x, axis=1, dtype=d)
    _same(exe(x), [total.astype(np.float64), total == x.max(axis=1, keepdims=op == "np.cumsum")])


@pytest.mark.parametrize("dtype", NARROW[1:])
def test_an_einsum_sum_of_narrow_integers_wraps_before_the_ops_fused_after_it(dtype):
    """``einsum('ij->i', int8)`` is int8 (wrapped) in NumPy; the backend rewrites it to a sum with
    ``dtype=int8``, which had the same unwrapped total (1410.0 for -126.0 after ``astype(float)``)."""
    x = _narrow_input(dtype, (9, 300), seed=9)
    exe = _compile(lambda g, a: [_node(g, "np.astype", [_node(g, "np.einsum", [a], subscripts="ij->i")],
                                       dtype=np.dtype(np.float64))], [x])
    _same(exe(x), [np.einsum("ij->i", x).astype(np.float64)])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("src", ["float64", "float32", "int64", "int16"])
@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"])
def test_mean_with_an_integer_dtype_divides_in_float64(layout, src, dtype):
    """NumPy's ``mean(x, dtype=int32)``: the int32 sum (each element cast, the sum wrapped) divided by the
    count in float64, cast to int32. Was: divided in float32 (Triton's integer ``/``), -1073741824 for
    -1073741823, and the narrow sums unwrapped (uint8: 129 for 1)."""
    rng = np.random.default_rng(7)
    shape = LAYOUTS[layout]
    if np.dtype(src).kind == "f":
        x = (rng.standard_normal(shape) * 3e9).astype(src)
    else:
        x = rng.integers(np.iinfo(src).min, np.iinfo(src).max, shape, endpoint=True).astype(src)
    exe = _compile(lambda g, a: [_node(g, "np.mean", [a], axis=1, dtype=np.dtype(dtype))], [x])
    # NumPy's float -> uint32 array cast depends on an element's position: its scalar cast's answers
    cast = _cast_one_at_a_time(x, dtype) if dtype == "uint32" and x.dtype.kind == "f" else x
    with np.errstate(invalid="ignore", over="ignore"):
        _same(exe(x), [np.mean(cast, axis=1, dtype=dtype)])


@pytest.mark.parametrize("op", ["np.var", "np.std"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
def test_var_and_std_with_an_integer_dtype_run_numpys_own(op, dtype):
    """NumPy's var(x, dtype=int32) truncates the mean to int32 and casts each squared deviation to it
    before summing (its std then refuses the sqrt's float64 into int32): a host step, not the float
    formula (was 6729 for NumPy's 6787). A float dtype stays in the kernel."""
    x = np.random.default_rng(3).standard_normal((5, 40)) * 100
    d = np.dtype(dtype)
    exe = _compile(lambda g, a: [_node(g, op, [a], axis=1, dtype=d)], [x])
    on_host = "with an integer or bool dtype= is not lowered" in exe.explain()
    assert on_host == (d.kind != "f")
    if op == "np.std" and d.kind != "f":
        with pytest.raises(TypeError, match="sqrt"):
            exe(x)
        return
    got, want = exe(x)[0], getattr(np, op[3:])(x, axis=1, dtype=d)
    if d.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5)
    else:
        _same([got], [want])


# -- stores of floats into integer arrays, traced by the frontend ------------------------------------------


def _trace(fn, example):
    nt = pytest.importorskip("numtrace")   # tests_triton runs without the frontend
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nt.trace(fn, example, backend="triton", check_trace=False)


def _fill(a, u):
    u[...] = a
    return u


def _fill_every_other(a, u):
    u[1::2] = a[::2][: u[1::2].shape[0]] * 1
    return u


def _scatter(a, u, i):
    u[i] = a
    return u


def _copyto(a, u):
    np.copyto(u, a + 0, casting="unsafe")
    return u


STORES = {"u[...] = f": _fill, "u[1::2] = f[::2] * 1": _fill_every_other, "u[idx] = f": _scatter,
          "np.copyto(u, f + 0, casting='unsafe')": _copyto}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("src", FLOATS)
@pytest.mark.parametrize("dst", INTS + ["uint32"])
@pytest.mark.parametrize("store", STORES)
def test_floats_stored_into_integer_arrays_as_numpy(monkeypatch, form, src, dst, store):
    """A float written into an integer argument (in place) takes NumPy's cast; into uint32 (float32 and
    float64: NumPy's array cast depends on the position) its scalar cast's, as ``astype`` gives."""
    _form(monkeypatch, form)
    fn = STORES[store]
    x = _edges(src, 53)
    u = np.zeros(53, dst)
    idx = np.random.default_rng(1).permutation(53)
    args = (x, u, idx) if fn is _scatter else (x, u)
    traced = _trace(fn, args)
    for a in (x, x[::-1].copy()):
        call = (a, u.copy(), *args[2:])
        with np.errstate(invalid="ignore"):
            want = fn(a, u.copy(), *args[2:])
        if dst == "uint32" and src != "float16":   # every element written once: the scalar casts
            want = fn(_cast_one_at_a_time(a, dst), np.zeros_like(u), *args[2:])
        got = traced(*call)
        _same([got, call[1]], [want, want])
