"""Hunt in the max/min of blocks of short rows (blocks.pxi's _extreme_rows, nt_simd.h's nt_row*): a
row of one NaN element gives that element, sign and payload included, as NumPy does and as the
row-by-row fold does (_lone_nan); rows of any length with a NaN, an infinity or an integer limit at
any position give NumPy's values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numtrace_cpu import compile_graph, compiler
from numtrace_ir import Graph, testing
from numtrace_ir.testing.clip_cases import same_bits
from test_codegen import _cache  # noqa: F401  (the kernel cache fixture, autouse)
from test_hunt_hunt_vq import _nan


def _reduce(name: str, x: np.ndarray, axis, mode: str, negate: bool = False, keepdims: bool = False):
    """`name(x, axis=axis)` (of -x where `negate`: a computed operand) compiled in `mode`, and the
    compiled program's stats."""
    g = Graph()
    t = testing.type_of(x)
    v = g.add_input("x", t)
    if negate:
        v = g.create_node("np.negative", [v]).outputs[0]
    g.set_outputs(g.create_node(name, [v], attrs={"axis": axis, "keepdims": keepdims}).outputs)
    old = compiler.set_mode(mode)
    try:
        exe = compile_graph(g, [t])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="raise"):
                (got,) = exe(x)
    finally:
        compiler.set_mode(old)
    return got, exe.stats()


@pytest.mark.parametrize("mode", ["off", "sync"])
@pytest.mark.parametrize("negate", [False, True], ids=["input", "computed"])
@pytest.mark.parametrize("name", ["np.max", "np.min"])
@pytest.mark.parametrize(("shape", "axis"), [((5, 1), 1), ((70, 1), 1), ((70, 1), -1), ((300, 1), 1),
                                             ((3, 4, 1), 2), ((1, 1), 1), ((1,), 0)], ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_rows_of_one_nan_keep_its_bits(dtype, shape, axis, name, negate, mode):
    """Rows of one element each, NaNs of both signs with a payload among numbers: NumPy's max/min
    of each row is its element, bit for bit."""
    values = [_nan(dtype, 1, 0x123), _nan(dtype, 0, 0x45), dtype(-2.5), dtype(3.0), _nan(dtype, 0, 0)]
    x = np.resize(np.array(values, dtype), int(np.prod(shape))).reshape(shape)
    got, _ = _reduce(name, x, axis, mode, negate)
    want = getattr(np, name[3:])(-x if negate else x, axis=axis)
    assert np.shape(got) == np.shape(want)
    assert same_bits(got, want).all(), (np.asarray(got).tobytes().hex(), np.asarray(want).tobytes().hex())


def test_rows_of_one_element_take_the_row_block_fold():
    """The shape above that exercises _extreme_rows (stats' extreme_rows_runs), so the bits test
    covers the block path and not only the row-by-row one."""
    x = np.full((70, 1), _nan(np.float64, 1, 7))
    got, stats = _reduce("np.max", x, 1, "off")
    assert stats["extreme_rows_runs"] == 1
    assert same_bits(got, np.max(x, axis=1)).all()
