"""Hunt in the GPU form of the Triton backend (libdevice math, IEEE division, no FMA contraction),
without a GPU: its PTX for CUDA capability 90, and the interpreter's semantics at the edges where the
GPU's instructions are known to differ from NumPy's."""

from __future__ import annotations

import re

import pytest
from gpu_compile_check import enabled
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
