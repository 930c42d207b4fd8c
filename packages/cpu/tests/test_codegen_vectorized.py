"""The loops of generated kernels vectorize: GCC's own report (-fopt-info-vec) on the kernel's
source, for passes whose speed once fell by 8x without any test noticing (np.where's kept operands
ORed inside each select: clip_where_fill, 27 -> 238 us). A structural check, not a timing."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from numtrace_cpu import compiler
from numtrace_ir import Graph, testing
from test_codegen import _cache, _compiled  # noqa: F401  (the kernel cache fixture, autouse)


def _gcc_command() -> list[str]:
    command = compiler._command()
    if not command or "gcc" not in (compiler._toolchain[1] or "").lower():
        pytest.skip("GCC's -fopt-info-vec report needs GCC as the kernels' compiler")
    return command


def _kernel_source(executable) -> Path:
    found = re.search(r"ready at (\S+)\.so", executable.explain())
    assert found, executable.explain()
    return Path(found.group(1) + ".c")


def _vectorized_lines(source: Path, tmp_path) -> set[int]:
    command = [c for c in _gcc_command() if c != "-shared"]
    done = subprocess.run(command + ["-fopt-info-vec-optimized", "-c", str(source), "-o",
                                     str(tmp_path / "k.o")], capture_output=True, text=True, check=True)
    name = re.escape(source.name)
    return {int(m.group(1)) for m in re.finditer(rf"{name}:(\d+):\d+: optimized: loop vectorized",
                                                 done.stderr)}


def _element_loops(source: Path) -> list[int]:
    lines = source.read_text().splitlines()
    return [n + 1 for n, line in enumerate(lines) if "for (Py_ssize_t i = 0; i < n; i++)" in line]


def _clip_where_fill_graph(dtype, scale=None):
    """benchmarks/realistic.py's clip_where_fill: clip, a where, a masked fill (a where too); with
    `scale`, the clipped values times it (a multiply, which may overflow, under both wheres)."""
    g = Graph()
    x = g.add_input("x", testing.type_of(np.zeros(8, dtype)))

    def node(op, *args):
        return g.create_node(op, list(args)).outputs[0]

    def const(value):
        return g.create_node("prim.Constant", [], attrs={"value": value}).output

    y = node("np.minimum", const(1.0), node("np.maximum", const(-1.0), x))
    if scale is not None:
        y = node("np.multiply", y, const(scale))
    y = node("np.where", node("np.greater", node("np.absolute", x), const(2.5)), const(0.0), y)
    g.set_outputs([node("np.where", node("np.isnan", x), const(0.0), y)])
    return g


@pytest.mark.parametrize("scale", [None, 3.0], ids=["clip", "clip_times"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_where_pass_with_kept_operands_vectorizes(dtype, scale, tmp_path):
    """The element loops vectorize, with the multiply kept (ORed into seen) and without: clip's
    maximum and minimum and the wheres raise no flag NumPy reports, so clip_where_fill keeps none."""
    x = np.random.default_rng(0).standard_normal(100_003).astype(dtype)
    x[::7] = np.nan
    executable = _compiled(_clip_where_fill_graph(dtype, scale), [testing.type_of(x)], "sync")
    (got,) = executable(x)
    y = np.clip(x, -1.0, 1.0) * (scale or 1.0)
    want = np.where(np.isnan(x), 0.0, np.where(np.abs(x) > 2.5, 0.0, y)).astype(dtype)
    assert got.tobytes() == want.tobytes()
    source = _kernel_source(executable)
    assert ("seen" in source.read_text()) == (scale is not None), source.read_text()
    loops = _element_loops(source)
    assert loops, source.read_text()
    missed = [n for n in loops if n not in _vectorized_lines(source, tmp_path)]
    assert not missed, f"element loops at lines {missed} of {source} are not vectorized"


def _column_where_sum_graph(dtype, shape):
    """``np.sum(np.where(x > 0.5, x * 2.0, x - 1.0), axis=0)``: a column-mode pass over few columns."""
    g = Graph()
    x = g.add_input("x", testing.type_of(np.zeros(shape, dtype)))

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).outputs[0]

    def const(value):
        return g.create_node("prim.Constant", [], attrs={"value": value}).output

    picked = node("np.where", node("np.greater", x, const(0.5)), node("np.multiply", x, const(2.0)),
                  node("np.subtract", x, const(1.0)))
    g.set_outputs([node("np.sum", picked, axis=0)])
    return g


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_narrow_column_blocks_of_a_where_vectorize(dtype, tmp_path):
    """The column blocks of 1, 2, 3, 4 and 8 columns compute their values in one loop over the
    block's elements (per element, the where's select and kept operands ran scalar, the select as a
    branch: (20000, 4) took 67 us against 29 before np.where's operands were kept), and that loop
    vectorizes, as do the pass's other element loops."""
    x = np.random.default_rng(1).standard_normal((2000, 4)).astype(dtype)
    executable = _compiled(_column_where_sum_graph(dtype, x.shape), [testing.type_of(x)], "sync")
    (got,) = executable(x)
    assert executable.stats()["generated_column_runs"] == 1
    source = _kernel_source(executable)
    text = source.read_text()
    for ncol in (2, 4, 8):
        assert f"nt_gen_colsum{ncol}_" in text, f"the {ncol}-column block does not add its columns packed"
    loops = _element_loops(source)
    assert len(loops) >= 6, text   # five narrow column blocks, the tile loop of long reduced rows
    missed = [n for n in loops if n not in _vectorized_lines(source, tmp_path)]
    assert not missed, f"element loops at lines {missed} of {source} are not vectorized"
    np.testing.assert_allclose(got, np.sum(np.where(x > 0.5, x * 2.0, x - 1.0), axis=0, dtype=np.float64),
                               rtol=1e-5, atol=1e-3 if dtype == np.float32 else 1e-9)
