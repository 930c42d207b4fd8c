"""Hunted failures of the generated-kernel path (numtrace_cpu.codegen, numtrace_cpu.compiler): each
case once crashed or answered wrong; the generated path must give the interpreter's bits or refuse."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent("""
    import numpy as np, numtrace_cpu.compiler as c
    from numtrace_cpu import compile_graph
    from numtrace_ir import Graph
    from numtrace_ir.types import TensorType
    t = TensorType(np.dtype(np.float64), (1000,))
    g = Graph()
    x = g.add_input("x", t)
    k = g.create_node("prim.Constant", [], attrs={"value": 0.25}).output
    g.set_outputs([g.create_node("np.tanh", [g.create_node("np.multiply", [x, k]).output]).output])
    f = compile_graph(g, [t])
    v = np.linspace(-3.0, 3.0, 1000)
    (got,) = f(v)
    c.flush()
    (again,) = f(v)
    assert got.tobytes() == again.tobytes()
    print(f.stats()["generated_runs"])
""")


def _child(cache, mode):
    env = dict(os.environ, NUMTRACE_CACHE_DIR=str(cache), NUMTRACE_CODEGEN=mode)
    return subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage"])
@pytest.mark.parametrize("mode", ["sync", "1"])
def test_damaged_cached_kernel_is_compiled_again(tmp_path, damage, mode):
    """A truncated shared object in the cache killed the process with SIGBUS at dlopen (an empty or
    garbage one raised OSError from the call in sync mode): it is compiled again instead."""
    first = _child(tmp_path, "sync")
    assert first.returncode == 0, first.stderr
    (so,) = (tmp_path / "cpu-kernels").glob("*.so")
    data = so.read_bytes()
    assert (tmp_path / "cpu-kernels" / so.with_suffix(".sha256").name).exists()
    so.write_bytes({"truncated": data[:1000], "empty": b"", "garbage": bytes(range(256)) * 64}[damage])
    done = _child(tmp_path, mode)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert int(done.stdout.split()[-1]) >= 1   # the recompiled kernel runs
