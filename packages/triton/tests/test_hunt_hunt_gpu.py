"""Hunt in the GPU form of the Triton backend (libdevice math, IEEE division, no FMA contraction),
without a GPU: its PTX for CUDA capability 90, and the interpreter's semantics at the edges where the
GPU's instructions are known to differ from NumPy's."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from conftest import INTERPRETER_ONLY
from gpu_compile_check import enabled
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import type_of
from numtrace_ir.types import TensorType
from numtrace_triton import Backend, Tuning, backend
from numtrace_triton.aot import compile_for_gpu
from test_gpu_math import _float_ufunc_ops, _kernels, _probe

needs_compiler = pytest.mark.skipif(not enabled()[0], reason=f"no compile for a GPU here: {enabled()[1]}")

# A float instruction that flushes a subnormal operand or result to zero; NumPy keeps subnormals.
# libdevice's IEEE form has approximate ``.ftz`` instructions of its own (``rcp.approx.ftz.f64``, PTX's
# only float64 one; ``ex2``/``lg2``/``rcp.approx.ftz.f32`` on range-reduced arguments or as seeds it
# refines): what ``enable_reflect_ftz`` switches is the flushing arithmetic around them.
FLUSH = re.compile(r"(?<![\w.])(?!\w+\.approx\.)[a-z0-9]+(?:\.[a-z0-9]+)*\.ftz(?:\.\w+)*")


@needs_compiler
def test_libdevice_keeps_subnormals():
    """Triton links libdevice in its flush-to-zero form unless told (``enable_reflect_ftz``): float32
    exp(-90) would be 0 on a GPU (NumPy: 8.2e-40), log(1e-40) -inf (NumPy: -92.1), sin(1e-40) 0,
    fmod(1e-40, 3) 0."""
    kernels = [_probe(fn) for fn in ("exp", "log", "sin", "cos", "tan", "cbrt", "fmod", "log10", "exp2",
                                     "log2", "pow")]
    results = compile_for_gpu(kernels, arch=90, ptx=True)
    flushing = {r["name"]: sorted(set(FLUSH.findall(r["ptx"]))) for r in results if FLUSH.search(r["ptx"])}
    assert not flushing, flushing


@needs_compiler
def test_no_float_kernel_flushes_subnormals():
    cases = [(op, k) for op, dtypes in _float_ufunc_ops() for k in _kernels(op, dtypes)]
    results = compile_for_gpu([k for _, k in cases], arch=90, ptx=True)
    flushing = {op.name: sorted(set(FLUSH.findall(r["ptx"]))) for (op, _), r in zip(cases, results)
                if FLUSH.search(r["ptx"])}
    assert not flushing, flushing


def _saturating_cast(self, src, dst_type):
    """PTX's ``cvt.rzi`` of a float to an integer: truncated, clamped to the type's range, NaN to 0."""
    from triton.runtime import interpreter

    dt = interpreter._get_np_dtype(dst_type)
    info = np.iinfo(dt)
    with np.errstate(invalid="ignore"):
        r = np.trunc(src.data.astype(np.float64))
        fits = (r >= float(info.min)) & (r < float(info.max) + 1)
        data = np.where(fits, np.where(fits, r, 0).astype(dt), np.where(r < 0, info.min, info.max)).astype(dt)
    return interpreter.TensorHandle(np.where(np.isnan(r), 0, data).astype(dt), dst_type.scalar)


def _as_on_a_gpu(monkeypatch):
    """Plans in the GPU's form, run by the interpreter converting floats to integers as a GPU does."""
    from triton.runtime import interpreter

    monkeypatch.setattr(backend, "_tuning", lambda: dataclasses.replace(Tuning.interpreter(), libdevice=True))
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_fp_to_si", _saturating_cast)
    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_fp_to_ui", _saturating_cast)


def _run(op, x, **attrs):
    g = Graph()
    v = g.add_input("x", TensorType(x.dtype, x.shape))
    g.set_outputs([g.create_node(op, [v], attrs=attrs).output])
    return Backend().compile(g, [TensorType(x.dtype, x.shape)])(x)[0]


@INTERPRETER_ONLY
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_rounding_integers_to_tens_past_the_end_of_their_type(monkeypatch, dtype):
    """np.round(int, -1) goes through float64 and back: 127 -> 130 -> -126 in int8, the int64 maximum
    -> the minimum (NumPy's cast), not the type's maximum that a saturating conversion gives."""
    _as_on_a_gpu(monkeypatch)
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, info.max // 2, 5, -15, 25], dtype=dtype)
    with np.errstate(invalid="ignore"):
        expected = np.round(x, -1)
    np.testing.assert_array_equal(_run("np.round", x, decimals=-1), expected)


@INTERPRETER_ONLY
@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
@pytest.mark.parametrize("dst", ["int8", "uint8", "int16", "uint16", "int32", "int64"])
def test_float_to_int_casts_out_of_range_in_the_gpu_form(monkeypatch, src, dst):
    """The GPU form's source, run in the interpreter with float-to-int conversion as a GPU does it
    (saturating): NaN, inf and out-of-range floats give NumPy's (x86) answer, the integer minimum
    (through int32 for the narrow types), not PTX's clamped value or 0."""
    _as_on_a_gpu(monkeypatch)
    values = [np.nan, np.inf, -np.inf, 1e20, -1e20, 300.7, -300.7, 70000.5, -70000.5, 3e9, -3e9, 5e9,
              1e19, -1e19, 2.0**63, -(2.0**63), 2.0**31, -(2.0**31), 0.0, -0.0, 7.9, -7.9]
    with np.errstate(over="ignore"):
        x = np.array(values).astype(src)
    got = _run("np.astype", x, dtype=np.dtype(dst))
    with np.errstate(invalid="ignore"):
        expected = x.astype(dst)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint64"])
@pytest.mark.parametrize("op", ["np.floor_divide", "np.remainder", "np.fmod", "np.divmod"])
def test_integer_division_by_zero_and_of_the_minimum_by_minus_one(op, dtype):
    """NumPy: 0 for a zero divisor, the minimum (wrapped) for minimum // -1. The kernel never divides
    by 0 or the minimum by -1 (``sdiv``'s undefined cases on a GPU, not the interpreter's: a GPU run
    confirms those lanes)."""
    info = np.iinfo(dtype)
    a = np.array([info.min, info.min, info.max, 7, info.max, 0, info.min + 1, 5], dtype=dtype)
    b = np.array([-1, 0, -1, 0, -1, -1, -1, 3] if info.min else [1, 0, 1, 0, info.max, 1, 1, 3], dtype=dtype)
    g = Graph()
    va, vb = g.add_input("a", TensorType(dtype, a.shape)), g.add_input("b", TensorType(dtype, b.shape))
    g.set_outputs(g.create_node(op, [va, vb]).outputs)
    got = Backend().compile(g, [TensorType(dtype, a.shape)] * 2)(a, b)
    with np.errstate(all="ignore"):
        expected = getattr(np, op[3:])(a, b)
    for x, y in zip(got, expected if isinstance(expected, tuple) else (expected,)):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def _minus_as_triton_3_6(self, input):
    """Triton 3.6's unary minus (the GPU run's Triton): ``0 - x`` for floats too, +0.0 for both zeros."""
    zero = self.tensor(self.builder.get_null_value(input.type.scalar.to_ir(self.builder)), input.type.scalar)
    return self.sub(zero, input, True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_subtract_at_keeps_a_negative_zero_under_triton_3_6s_minus(monkeypatch, dtype):
    """np.subtract.at(a, i, 0.0) leaves a -0.0 target -0.0 (-0.0 - 0.0); an atomic add of ``-value``
    written as Triton 3.6's ``0 - value`` adds +0.0 and makes it +0.0."""
    from triton.language.semantic import TritonSemantic

    monkeypatch.setattr(TritonSemantic, "minus", _minus_as_triton_3_6)
    a = np.array([-0.0, -0.0, 1.0, -0.0], dtype)
    idx = np.array([0, 3, 2])
    v = np.array([0.0, 0.0, -0.0], dtype)
    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(x)) for i, x in enumerate((a, idx, v))]
    attrs = registry.get("np.ufunc.at").normalize_attrs({"ufunc": "numpy.subtract", "index": ("input",)})
    g.set_outputs(g.create_node("np.ufunc.at", xs, attrs=attrs).outputs)
    exe = Backend().compile(g, [type_of(x) for x in (a, idx, v)])
    assert "tl.atomic_add" in exe.explain()
    expected = a.copy()
    np.subtract.at(expected, idx, v)
    got = exe(a, idx, v)[0]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    np.testing.assert_array_equal(got, expected)


# NaN, +-inf, negative values inside and outside int64's range, values past 2**32, 2**63, 2**64.
_UNSIGNED_EDGES = [np.nan, np.inf, -np.inf, -1.0, -0.5, -1.5, -300.7, -65504.0, -70000.5, -(2.0**31), -3e9,
                   -(2.0**32), -5e9, -(2.0**62), -(2.0**63), -1e19, -(2.0**64), -1e20, -1e300, 0.0, -0.0, 7.9,
                   255.9, 65535.9, 2.0**31, 2.0**32 - 1, 2.0**32, 5e9, 2.0**63 - 1024, 2.0**63, 1.5 * 2.0**63,
                   2.0**64 - 2048, 2.0**64, 1e19, 1e20, 3e38, 1e300, 65504.0]


def _cast_one_at_a_time(x, dst):
    """NumPy's casts of the elements of ``x`` one at a time: its scalar C cast (see below)."""
    with np.errstate(invalid="ignore"):
        return np.array([v.astype(dst) for v in x.ravel()], dtype=dst).reshape(x.shape)


@pytest.mark.parametrize("form", ["compiled", pytest.param("gpu-emulated", marks=INTERPRETER_ONLY)])
@pytest.mark.parametrize("src", ["float16", "float32", "float64"])
@pytest.mark.parametrize("dst", ["uint32", "uint64"])
def test_floats_cast_to_wide_unsigned_integers_as_numpy_on_x86(monkeypatch, form, src, dst):
    """NumPy's float -> uint32/uint64 on x86-64, where a GPU's ``cvt.rzi`` saturates (-1.0 -> 0):
    -1.0 -> 4294967295 (through int64), NaN and -inf -> 2**63 in uint64. The expected values are
    NumPy's casts of one element at a time: its vectorised float -> uint32 loop gives other answers
    for NaN and values out of [-2**31, 2**32) (0x80000000, or 0), by an element's position in the array.
    ``compiled`` runs on the GPU under ``NUMTRACE_TRITON_TESTS_ON_GPU=1``; ``gpu-emulated`` runs the
    GPU's form in the interpreter with a saturating conversion."""
    if form == "gpu-emulated":
        _as_on_a_gpu(monkeypatch)
    with np.errstate(over="ignore"):
        x = np.tile(np.array(_UNSIGNED_EDGES).astype(src), 40)   # 1520 elements
    got = _run("np.astype", x, dtype=np.dtype(dst))
    expected = _cast_one_at_a_time(x, dst)
    np.testing.assert_array_equal(got, expected)
    nan = 0 if dst == "uint32" else 2**63   # x86-64's answers, whatever the host running the test
    assert got[:4].tolist() == [nan, 0, nan, int(np.iinfo(dst).max)]   # NaN, inf, -inf, -1.0


@pytest.mark.parametrize("form", ["compiled", pytest.param("gpu-emulated", marks=INTERPRETER_ONLY)])
@pytest.mark.parametrize("dst", ["int8", "int32", "int64", "uint32", "uint64"])
@pytest.mark.parametrize("op", ["np.sum", "np.prod", "np.cumsum"])
def test_reductions_of_floats_with_an_integer_dtype_cast_as_numpy(monkeypatch, form, op, dst):
    """``np.sum(x, dtype=int)`` casts each float to the integer type first (NumPy's cast: -300.7 ->
    -44 in int8, NaN -> the minimum, -1.0 -> 2**64 - 1 in uint64), not a GPU's saturating one."""
    if form == "gpu-emulated":
        _as_on_a_gpu(monkeypatch)
    x = np.array([[-1.0, np.nan, -300.7, 3e9], [-1.0, 1.5, -1e20, 2.5]])
    g = Graph()
    v = g.add_input("x", TensorType(x.dtype, x.shape))
    attrs = registry.get(op).normalize_attrs({"axis": 1, "dtype": np.dtype(dst)})
    g.set_outputs([g.create_node(op, [v], attrs=attrs).output])
    got = Backend().compile(g, [TensorType(x.dtype, x.shape)])(x)[0]
    with np.errstate(over="ignore"):
        expected = getattr(np, op[3:])(_cast_one_at_a_time(x, dst), axis=1, dtype=dst)
    np.testing.assert_array_equal(got, expected)
