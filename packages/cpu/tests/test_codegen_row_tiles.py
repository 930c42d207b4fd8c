"""Generated reductions of short rows in tiles of whole rows (codegen's _rows_units with reductions,
stats()["generated_row_tile_runs"]): softmax, log-softmax and a layer norm of exp over rows, whose
exp and log run through the build's loop table on a tile of rows and whose rows are folded by the
interpreter's own row fold, give the interpreter's bits on odd shapes, layouts, NaN/inf rows, and
1 and 2 threads."""

from __future__ import annotations

import numpy as np
import numtrace_cpu
import pytest
from numtrace_ir import Graph, testing
from test_codegen import _assert_same_bits, _cache, _compiled  # noqa: F401  (_cache: autouse fixture)


def _graph(x_type, build):
    g = Graph()
    x = g.add_input("x", x_type)

    def node(op, *args, **attrs):
        args = [a if not isinstance(a, float) else
                g.create_node("prim.Constant", [], attrs={"value": a}).output for a in args]
        return g.create_node(op, args, attrs=attrs).output
    g.set_outputs(list(build(node, x)))
    return g


def _softmax(node, x):
    e = node("np.exp", node("np.subtract", x, node("np.max", x, axis=-1, keepdims=True)))
    return (node("np.divide", e, node("np.sum", e, axis=-1, keepdims=True)),)


def _log_softmax(node, x):
    d = node("np.subtract", x, node("np.max", x, axis=-1, keepdims=True))
    total = node("np.sum", node("np.exp", d), axis=-1, keepdims=True)
    return (node("np.subtract", d, node("np.log", total)),)


def _exp_norm(node, x):
    """A layer norm of exp(x) over rows (mean and var of a table op's values), and tanh's row max."""
    e = node("np.exp", node("np.multiply", x, 0.5))
    c = node("np.subtract", e, node("np.mean", e, axis=-1, keepdims=True))
    v = node("np.var", e, axis=-1, keepdims=True)
    return (node("np.divide", c, node("np.sqrt", node("np.add", v, 1e-5))),
            node("np.max", node("np.tanh", x), axis=-1))


PROGRAMS = {"softmax": _softmax, "log_softmax": _log_softmax, "exp_norm": _exp_norm}
SHAPES = [(1024, 64), (1001, 7), (67, 13, 10), (300, 128), (2049, 1), (5, 3)]


def _values(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    rows = x.reshape(-1, shape[-1])
    if len(rows) > 8:   # rows of NaN, inf, -inf, -0.0, and one NaN among finite values
        rows[1], rows[3], rows[5], rows[7] = np.nan, np.inf, -np.inf, -0.0
        rows[8, -1] = np.nan
    return x


def _layouts(x):
    strided = np.empty(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)[..., ::2]
    strided[...] = x
    unaligned = np.frombuffer(bytearray(x.nbytes + 1), np.uint8)[1:].view(x.dtype).reshape(x.shape)
    unaligned[...] = x
    return {"C": x, "strided": strided, "unaligned": unaligned, "noncontiguous": testing.noncontiguous(x),
            "Fortran": np.asfortranarray(x)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_row_tiles_equal_interpreter(name, dtype, numpy_quiet):
    for shape in SHAPES:
        x = _values(shape, dtype)
        g = _graph(testing.type_of(x), PROGRAMS[name])
        gen, interp = _compiled(g, [testing.type_of(x)], "sync"), _compiled(g, [testing.type_of(x)], "off")
        old = numtrace_cpu.get_num_threads()
        try:
            for threads in (1, 2):
                numtrace_cpu.set_num_threads(threads)
                for layout, arg in _layouts(x).items():
                    before = gen.stats()["generated_row_tile_runs"]
                    got = gen(arg)
                    _assert_same_bits(got, interp(arg), f"{name} {shape} {layout}, {threads} threads")
                    if layout != "Fortran" and shape[-1] > 1:   # Fortran: rows along the columns
                        assert gen.stats()["generated_row_tile_runs"] > before, (name, shape, layout)
        finally:
            numtrace_cpu.set_num_threads(old)
        assert interp.stats()["generated_runs"] == 0
        if name == "softmax" and shape[-1] > 1:   # and NumPy's values, rows of NaN and inf as NumPy's
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            np.testing.assert_allclose(got[0], e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=0)


def test_row_tiles_source_calls_the_row_fold():
    """The kernel of a softmax's sum pass has the row tiles: exp through the loop table, then the
    interpreter's row fold; a pass without reductions, or with long rows, does not."""
    from numtrace_cpu import codegen
    from numtrace_cpu.steps import FusedStep

    x = np.zeros((100, 64), np.float32)
    exe = _compiled(_graph(testing.type_of(x), _softmax), [testing.type_of(x)])
    programs = [s.kernel.program for s in exe._steps if isinstance(s, FusedStep)]
    tiled = [p for p in programs if codegen.has_row_tiles(p)]
    assert tiled and all(p[5] for p in tiled)
    sources = [codegen.generate(p) for p in tiled]
    assert any(src and "red->fold_rows(" in src and "loops[" in src for src in sources)
    assert not codegen.has_row_tiles(((100, 1000), *tiled[0][1:]))
