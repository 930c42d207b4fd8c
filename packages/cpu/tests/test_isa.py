"""Choosing the ISA build of the block loops: the widest the CPU runs, or the one NUMTRACE_CPU_ISA forces."""

import os
import subprocess
import sys

import numtrace_cpu
import pytest
from numtrace_cpu import isa, runtime

V3 = {"avx2", "fma"}
V4 = V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
ALL = ["avx512", "avx2", "baseline"]
RUNNABLE = [b for b in isa.built() if isa.BUILDS[b][1] <= runtime.cpu_features()]


@pytest.mark.parametrize(("features", "available", "want"), [
    (V4, ALL, "avx512"),
    (V4 - {"avx512vl"}, ALL, "avx2"),        # every AVX-512 subset the build uses is required
    (V3, ALL, "avx2"),
    ({"avx2"}, ALL, "baseline"),             # AVX2 without FMA is not x86-64-v3
    (set(), ALL, "baseline"),
    (V4, ["avx2", "baseline"], "avx2"),      # a platform that did not build avx512
    (V4, ["baseline"], "baseline"),
])
def test_the_widest_build_the_cpu_supports_is_chosen(features, available, want):
    assert isa.choose(features, available) == want


@pytest.mark.parametrize(("forced", "features", "match"), [
    ("avx1024", V4, "names no build"),
    ("avx512", V3, "lacks avx512bw, avx512cd, avx512dq, avx512f, avx512vl"),
    ("avx2", {"avx2"}, "lacks fma"),
])
def test_forcing_a_build_the_cpu_cannot_run_is_refused(forced, features, match):
    with pytest.raises(ValueError, match=match):
        isa.choose(features, ALL, forced)


def test_forcing_a_build_that_was_not_built_is_refused():
    with pytest.raises(ValueError, match="not part of this installation"):
        isa.choose(V4, ["avx2", "baseline"], "avx512")
    assert isa.choose(V3, ALL, "baseline") == "baseline"


def test_the_build_in_use_is_the_widest_this_cpu_runs():
    assert isa.BUILD == (os.environ.get("NUMTRACE_CPU_ISA") or RUNNABLE[0])
    assert numtrace_cpu.ISA == isa.BUILDS[isa.BUILD][0]
    assert numtrace_cpu.Backend.description.endswith(numtrace_cpu.ISA)


# ``np.tanh(x) * 2 + x.sum()`` as the tracer records it: the subprocess needs only this package.
_GRAPH = """graph(%0 : f32[1000]):
  %1 : f32[1000] = np.tanh(%0)
  %2 : int = prim.Constant[value=2]()
  %3 : f32[1000] = np.multiply(%1, %2)
  %4 : f32[] = np.sum[axis=None, dtype=None, keepdims=False, initial=None](%0)
  %5 : f32[1000] = np.add(%3, %4)
  return (%5)
"""


def _import_with(forced: str) -> subprocess.CompletedProcess:
    code = ("import numpy as np, numtrace_cpu, numtrace_cpu.isa as i, numtrace_ir as ir\n"
            f"g = ir.parse({_GRAPH!r})\n"
            "f = numtrace_cpu.compile_graph(g, [ir.TensorType(np.float32, (1000,))])\n"
            "(out,) = f(np.linspace(-1, 1, 1000, dtype=np.float32))\n"
            "print(i.BUILD, i.ISA, float(out.sum()))")
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, "NUMTRACE_CPU_ISA": forced},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("build", RUNNABLE)
def test_numtrace_cpu_isa_forces_each_build_this_cpu_runs(build):
    done = _import_with(build)
    assert done.returncode == 0, done.stderr
    name, isa_name, total = done.stdout.split()
    assert (name, isa_name) == (build, isa.BUILDS[build][0])
    assert abs(float(total)) < 1e-3   # an odd function plus 2x a zero sum, over a symmetric grid


@pytest.mark.parametrize("build", [b for b in isa.built() if b not in RUNNABLE])
def test_numtrace_cpu_isa_refuses_a_build_this_cpu_cannot_run(build):
    done = _import_with(build)
    assert done.returncode != 0 and "this CPU lacks" in done.stderr
