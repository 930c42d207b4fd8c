"""The GPU form of every float ufunc lowering, compiled to PTX for CUDA capability 90 without a GPU (as a
GPU launch compiles it: `Tuning.gpu()`, `COMPILE_OPTIONS`): no instruction that rounds otherwise than
NumPy. Arithmetic, division and sqrt must be IEEE's (no ``div.full``, ``sqrt.approx``, ``rcp.approx``)
and never contracted into an FMA; exp, log, sin, ... must come from libdevice, whose own range-reduced
``ex2.approx`` or FMAs keep CUDA's documented ulp bounds, never from Triton's approximate intrinsics.

An instruction of those kinds is allowed in a kernel only where a libdevice function its source calls
has it too (each function compiled alone, as a probe).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from gpu_compile_check import enabled
from numtrace_ir.graph import Graph
from numtrace_ir.types import TensorType
from numtrace_triton import Tuning, generate
from numtrace_triton.aot import compile_for_gpu
from numtrace_triton.elementwise import LOWERINGS
from numtrace_triton.emit_body import HEADER, LIBDEVICE_IMPORT, GeneratedKernel

pytestmark = pytest.mark.skipif(not enabled()[0], reason=f"no compile for a GPU here: {enabled()[1]}")

# Instructions whose result is not the correctly rounded one NumPy's arithmetic gives.
ROUNDING = re.compile(
    r"\b(?:(?:ex2|lg2|sin|cos|tanh|rcp|rsqrt|sqrt|div)\.approx|div\.full)(?:\.\w+)*|\bfma\.rn(?:\.\w+)*"
)
LIBDEVICE_CALL = re.compile(r"\blibdevice\.(\w+)\(")
FLOATS = ("float16", "float32", "float64")
N = 1000


def _float_ufunc_ops():
    """(op, the float dtypes NumPy computes it in) for every lowered ufunc op with float results."""
    found = []
    for key in LOWERINGS:
        op = key[0] if isinstance(key, tuple) else key
        if op.ufunc is None or any(op is o for o, _ in found):
            continue
        dtypes = []
        for dt in FLOATS:
            try:
                with np.errstate(all="ignore"):
                    res = op.ufunc(*[np.ones(2, dt)] * op.ufunc.nin)
            except TypeError:
                continue
            res = res if isinstance(res, tuple) else (res,)
            if all(r.dtype == dt for r in res):
                dtypes.append(dt)
        if dtypes:
            found.append((op, dtypes))
    return found


def _kernels(op, dtypes):
    """The GPU form of ``op`` on each dtype (independent chains of one kernel)."""
    g = Graph()
    outs, types = [], []
    for dt in dtypes:
        xs = [g.add_input(f"x{dt}_{i}", TensorType(dt, (N,))) for i in range(op.ufunc.nin)]
        types += [x.type for x in xs]
        outs += g.create_node(op.name, xs).outputs
    g.set_outputs(outs)
    return generate(g, types, Tuning.gpu()).kernels


def _probe(fn: str) -> GeneratedKernel:
    """``libdevice.fn`` alone on float32 and on float64 (one or two operands, as it takes)."""
    nargs = 2 if fn in ("fmod", "pow", "atan2", "hypot") else 1
    lines = []
    for i, ty in enumerate(("tl.float32", "tl.float64")):
        args = ", ".join(f"tl.load(p{2 * i} + offs).to({ty}) + {k}" for k in range(nargs))
        lines.append(f"    tl.store(p{2 * i + 1} + offs, libdevice.{fn}({args}))")
    head = f"@triton.jit\ndef probe_{fn}(p0, p1, p2, p3, BLOCK: tl.constexpr):\n"
    head += "    offs = tl.arange(0, BLOCK)\n"
    source = f"{HEADER}{LIBDEVICE_IMPORT}\n{head}" + "\n".join(lines) + "\n"
    sig = {"p0": "*fp32", "p1": "*fp32", "p2": "*fp64", "p3": "*fp64", "BLOCK": "constexpr"}
    return GeneratedKernel(f"probe_{fn}", source, [], [], (1,), {"BLOCK": 128}, 4, sig)


def _found(ptx: str) -> set[str]:
    return set(ROUNDING.findall(ptx))


def test_float_math_compiles_to_numpys_rounding_on_a_gpu():
    cases = [(op, k) for op, dtypes in _float_ufunc_ops() for k in _kernels(op, dtypes)]
    assert len({op.name for op, _ in cases}) > 40  # the registry's float ufuncs, not a handful
    calls = sorted({fn for _, k in cases for fn in LIBDEVICE_CALL.findall(k.source)})
    kernels = [k for _, k in cases] + [_probe(fn) for fn in calls]
    results = compile_for_gpu(kernels, arch=90, ptx=True)
    failed = [f"{r['name']}: {r['error']}" for r in results if not r["ok"]]
    assert not failed, "\n\n".join(failed)
    allowed = {fn: _found(r["ptx"]) for fn, r in zip(calls, results[len(cases):])}
    wrong = []
    for (op, k), r in zip(cases, results):
        extra = _found(r["ptx"]) - set().union(*(allowed[fn] for fn in LIBDEVICE_CALL.findall(k.source)))
        if extra:
            wrong.append(f"{op.name}: {sorted(extra)}\n{k.source}")
    assert not wrong, "instructions that round otherwise than NumPy:\n" + "\n".join(wrong)


def test_the_interpreters_form_has_no_libdevice_calls():
    """The interpreter runs ``tl`` math with NumPy and has no extern calls: its form must not call
    libdevice (which the GPU form does for exp)."""
    op = next(op for op, _ in _float_ufunc_ops() if op.name == "np.exp")
    g = Graph()
    x = g.add_input("x", TensorType("float32", (N,)))
    g.set_outputs(g.create_node(op.name, [x]).outputs)
    assert "libdevice.exp(" in generate(g, [x.type], Tuning.gpu()).kernels[0].source
    assert "libdevice" not in generate(g, [x.type], Tuning.interpreter()).kernels[0].source
