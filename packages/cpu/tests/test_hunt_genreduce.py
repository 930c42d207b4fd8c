"""Generated column-mode and row-block reductions (numtrace_cpu.codegen.folds_in_registers) against
the interpreter bit for bit and against NumPy: leading and middle axes over row counts about the
interpreter's 170-row blocks, widths about the unrolled ones and the 64-column split, C, Fortran,
reversed and broadcast inputs, one and two threads, int input to mean, keepdims reductions
broadcast back, and passes of more reductions than the registers hold (which stay interpreted).

Kernels compile synchronously here (mode ``sync``), so the generated path runs deterministically.
"""

from __future__ import annotations

import warnings

import numpy as np
import numtrace_cpu
import pytest
from numtrace_cpu import compile_graph, compiler
from numtrace_ir import Graph
from numtrace_ir.types import TensorType

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # special values on purpose


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NUMTRACE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kernels"))


def _both(graph, types):
    """The graph's executable with generated kernels, and one on the interpreter."""
    out = []
    for mode in ("sync", "off"):
        old = compiler.set_mode(mode)
        try:
            out.append(compile_graph(graph, types))
        finally:
            compiler.set_mode(old)
    return out


def _graph(dtype, shape, axis, extra):
    """``x * y`` summed and averaged (keepdims, and that broadcast back) over `axis`, ``x - y``
    summed, `y` averaged; `extra` more sums of ``x * y + k`` (past the registers' four)."""
    g = Graph()
    t = TensorType(np.dtype(dtype), shape)
    x, y = g.add_input("x", t), g.add_input("y", t)

    def node(op, *args, **attrs):
        return g.create_node(op, list(args), attrs=attrs).output

    e = node("np.multiply", x, y)
    m = node("np.mean", e, axis=axis, keepdims=True)
    outs = [node("np.sum", e, axis=axis), m, node("np.subtract", e, m),
            node("np.sum", node("np.subtract", x, y), axis=axis), node("np.mean", y, axis=axis)]
    for k in range(extra):
        c = g.create_node("prim.Constant", [], attrs={"value": k + 1}).output
        outs.append(node("np.sum", node("np.add", e, c), axis=axis))
    g.set_outputs(outs)
    return g, t


@np.errstate(all="ignore")
def _numpy(x, y, axis, extra):
    e = x * y
    m = np.mean(e, axis=axis, keepdims=True)
    return ([np.sum(e, axis=axis), m, e - m, np.sum(x - y, axis=axis), np.mean(y, axis=axis)]
            + [np.sum(e + (k + 1), axis=axis) for k in range(extra)])


def _values(rng, dtype, shape):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, shape, dtype=dtype)
    v = (rng.standard_normal(shape) * 10.0 ** rng.integers(-4, 4, shape)).astype(dtype)
    if v.size > 10:
        v.flat[::11] = -0.0
        v.flat[3::37] = np.nan
        v.flat[5::53] = np.inf
    return v


def _bits_up_to_nan_sign(a):
    """The array's bytes with every NaN made NumPy's positive quiet NaN: the sign a sum's NaN gets
    where NaNs of both signs meet is the C compiler's choice of operands (see
    test_nan_sign_of_column_sums_is_the_interpreters)."""
    a = np.array(a)
    if a.dtype.kind in "fc":
        a[np.isnan(a)] = np.nan
    return a.tobytes()


def _scale(x, y):
    """The largest finite term's magnitude: a sum's error bound grows with it, not with the sum."""
    def big(v):
        v = np.abs(v[np.isfinite(v)].astype(np.float64))
        return float(v.max(initial=1.0))
    return big(x) * big(y)


def _layouts(x, y):
    return [(x, y), (np.asfortranarray(x), np.asfortranarray(y)), (x[::-1, ::-1], y[::-1, ::-1]),
            (np.broadcast_to(x[:1], x.shape), y)]


def _check(dtype, shape, axis, extra=0):
    g, t = _graph(dtype, shape, axis, extra)
    gen, interp = _both(g, [t, t])
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    x, y = _values(rng, dtype, shape), _values(rng, dtype, shape)
    old = numtrace_cpu.get_num_threads()
    try:
        for threads in (1, 2):
            numtrace_cpu.set_num_threads(threads)
            for args in _layouts(x, y):
                got, want = gen(*args), interp(*args)
                for k, (a, b, c) in enumerate(zip(got, want, _numpy(*args, axis, extra))):
                    what = f"output {k} of {dtype} {shape} axis {axis} on {threads} threads"
                    assert a.dtype == b.dtype == c.dtype and a.shape == b.shape == c.shape, what
                    assert _bits_up_to_nan_sign(a) == _bits_up_to_nan_sign(b), \
                        f"{what}: generated kernel differs from the interpreter"
                    rtol = 1e-4 if a.dtype == np.float32 else 1e-10
                    np.testing.assert_allclose(a, c, rtol=rtol, atol=rtol * _scale(*args) * shape[axis],
                                               err_msg=what)
    finally:
        numtrace_cpu.set_num_threads(old)
    return gen.stats()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 169, 170, 171, 341, 1001])
@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 64, 65])
def test_leading_axis_reductions_generated(dtype, rows, width):
    """``sum``/``mean`` over axis 0 of an (rows, width) C array: column mode for every width."""
    s = _check(dtype, (rows, width), 0)
    assert s["generated_column_runs"] >= 1 or rows == 1 or width == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("width", [1, 2, 3, 4, 8, 9, 15, 16, 40])
def test_short_last_axis_reductions_generated(dtype, width):
    """``sum``/``mean`` over the last axis of a (1001, width) array: row blocks below 16."""
    s = _check(dtype, (1001, width), -1)
    assert s["generated_row_block_runs"] >= 1 or not 1 < width < 16


@pytest.mark.parametrize("shape", [(341, 3), (170, 8), (2000, 3)])
@pytest.mark.parametrize("axis", [0, 1])
def test_mean_of_ints_generated(shape, axis):
    """The mean of ints is a float sum of the cast values: generated, NumPy's float64 answer."""
    _check(np.int32, shape, axis)


@pytest.mark.parametrize("axis", [0, 1])
def test_more_reductions_than_registers(axis):
    """Seven reductions in one pass: more than the generated column units take."""
    _check(np.float64, (341, 5), axis, extra=3)


@pytest.mark.parametrize(("shape", "axis"), [((0, 5), 0), ((5, 0), 1), ((0, 3), 1), ((3, 0), 0)])
def test_empty_reductions(shape, axis):
    """Sums over an empty axis are 0, means NaN (NumPy's values); nothing is run generated."""
    g, t = _graph(np.float64, shape, axis, 0)
    gen, interp = _both(g, [t, t])
    x = np.zeros(shape)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # "Mean of empty slice", from NumPy and a call
        for a, b in zip(gen(x, x), interp(x, x)):
            assert a.tobytes() == b.tobytes()
        want = [np.sum(x, axis=axis), np.mean(x, axis=axis)]
        got = gen(x, x)
    for g, w in zip((got[0], got[4]), want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nan_sign_of_column_sums_is_the_interpreters(dtype):
    """``(x - y).sum(axis=0)`` of (rows, width) arrays, x[0] = +NaN, x[-1] = y[-1] = inf: the
    generated kernel's bits are the interpreter's, NaN sign included (docs/cpu.md's claim)."""
    for rows, width in [(170, 8), (171, 3), (341, 2), (341, 8)]:
        g = Graph()
        t = TensorType(np.dtype(dtype), (rows, width))
        x, y = g.add_input("x", t), g.add_input("y", t)
        g.set_outputs([g.create_node("np.sum", [g.create_node("np.subtract", [x, y]).output],
                                     attrs={"axis": 0}).output])
        gen, interp = _both(g, [t, t])
        xv, yv = np.zeros((rows, width), dtype), np.zeros((rows, width), dtype)
        xv[0], xv[-1], yv[-1] = np.nan, np.inf, np.inf
        assert gen(xv, yv)[0].tobytes() == interp(xv, yv)[0].tobytes(), (rows, width)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["np.sum", "np.mean"])
def test_nan_signs_meeting_in_any_blocks_are_the_interpreters(dtype, op):
    """A -NaN (inf - inf) and a +NaN in either order, in two row blocks (of at most 256 rows) of a
    column sum or mean: the generated kernel keeps the interpreter's NaN, sign included."""
    rows, width = 700, 5
    g = Graph()
    t = TensorType(np.dtype(dtype), (rows, width))
    x, y = g.add_input("x", t), g.add_input("y", t)
    diff = g.create_node("np.subtract", [x, y]).output
    g.set_outputs([g.create_node(op, [diff], attrs={"axis": 0}).output])
    gen, interp = _both(g, [t, t])
    for plus, minus in [(0, 699), (699, 0), (10, 350), (350, 10), (100, 300), (300, 100)]:
        xv, yv = np.zeros((rows, width), dtype), np.zeros((rows, width), dtype)
        xv[plus], xv[minus], yv[minus] = np.nan, np.inf, np.inf
        xv[plus, 1] = -np.nan    # a column whose two NaNs both have the sign bit set
        assert gen(xv, yv)[0].tobytes() == interp(xv, yv)[0].tobytes(), (op, plus, minus)
