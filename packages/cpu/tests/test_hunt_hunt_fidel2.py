"""Hunt around np.clip's NaN bounds on the CPU backend: a bound computed by a max/min reduction keeps
NumPy's NaN bits (a NaN reduced alone is itself)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler
from numtrace_ir import Graph, testing
from numtrace_ir.testing.clip_cases import same_bits
from test_codegen import _cache  # noqa: F401  (the kernel cache fixture, autouse)
from test_hunt_hunt_vq import _nan


def _trace(fn, example):
    nt = pytest.importorskip("numtrace")   # the frontend traces the program (tests_cpu runs without it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nt.trace(fn, example, backend="cpu", check_trace=False)


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("shape", [(), (1,)])
def test_a_reduced_nan_keeps_its_sign(reduce, shape):
    lo = np.full(shape, -np.nan)

    def fn(x, lo):
        return getattr(lo, reduce)(), np.clip(x, getattr(lo, reduce)(), 1.0)

    x = np.zeros(3)
    traced = _trace(fn, (x, lo))
    for got, want in zip(traced(x, lo), fn(x, lo)):
        assert same_bits(got, want).all()


@pytest.mark.parametrize("mode", ["off", "sync"])
@pytest.mark.parametrize("computed", [False, True], ids=["input", "computed"])
@pytest.mark.parametrize("name", ["np.max", "np.min"])
@pytest.mark.parametrize(("shape", "axis"), [((), None), ((1,), None), ((1,), 0), ((5, 1), 1), ((1, 5), 0),
                                             ((1, 1, 3), (0, 1))], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_a_nan_reduced_alone_is_itself_on_the_backend(dtype, shape, axis, name, computed, mode):
    """Each reduced row holds one element (a NaN of either sign with a payload, or a number): NumPy
    gives the element itself, bits and all, and so does the backend, on an input and on a value the
    pass computes (np.negative flips the NaN's sign), on the interpreter and in generated kernels."""
    values = [_nan(dtype, 1, 0x123), _nan(dtype, 0, 0x123), dtype(-2.5), dtype(3.0)]
    x = np.resize(np.array(values, dtype), int(np.prod(shape))).reshape(shape)
    g = Graph()
    t = testing.type_of(x)
    v = g.add_input("x", t)
    if computed:
        v = g.create_node("np.negative", [v]).outputs[0]
    g.set_outputs(g.create_node(name, [v], attrs={"axis": axis}).outputs)
    old = compiler.set_mode(mode)
    try:
        (got,) = compile_graph(g, [t])(x)
    finally:
        compiler.set_mode(old)
    reduce = getattr(np, name[3:])
    want = reduce(np.negative(x) if computed else x, axis=axis)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    assert same_bits(got, want).all(), (got.tobytes(), np.asarray(want).tobytes())
