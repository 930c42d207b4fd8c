"""Sums a generated kernel adds in registers (column units over widths the block does not unroll,
row blocks of short rows, a reduced dim of one row) keep a negated NaN's sign as NumPy does: a
plain C `s + v` of v = -x let GCC fold the add into `s - x`, which keeps x's NaN with x's sign.
Column blocks of a where with its output returned too, against the interpreter's bits, over the
layouts the block reads in place or gathers: a (m, 1) column, a strided and a reversed x, widths
past the unrolled ones, one and two threads."""

from __future__ import annotations

import numpy as np
import pytest
from numtrace_cpu import get_num_threads, set_num_threads
from numtrace_ir import Graph, testing
from test_codegen import _assert_same_bits, _cache, _compiled  # noqa: F401  (_cache: autouse fixture)


def _node(g, op, *args, **attrs):
    return g.create_node(op, list(args), attrs=attrs).output


def _negated_sum_graph(x, op, axis, where: bool) -> Graph:
    g = Graph()
    v = g.add_input("x", testing.type_of(x))
    neg = _node(g, "np.negative", v)
    if where:   # np.where's operands are kept: the column block's buffered path
        zero = g.create_node("prim.Constant", [], attrs={"value": 0.0}).output
        neg = _node(g, "np.where", _node(g, "np.greater", v, zero), v, neg)
    g.set_outputs([_node(g, op, neg, axis=axis)])
    return g


@pytest.mark.parametrize("where", [False, True], ids=["neg", "where_neg"])
@pytest.mark.parametrize("op", ["np.sum", "np.mean"])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shape", [(1, 5), (1, 20), (2, 3), (2, 9), (100, 5), (100, 9), (100, 20)], ids=str)
def test_sum_of_negated_nan_has_numpy_sign(shape, axis, op, where):
    """A column of +NaN negated sums to -NaN in NumPy whatever its order of adds (one NaN value)."""
    x = np.full(shape, np.nan)
    g = _negated_sum_graph(x, op, axis, where)
    want = getattr(np, op[3:])(np.where(x > 0, x, -x), axis=axis)
    got = _compiled(g, [testing.type_of(x)], "sync")(x)[0]
    assert np.signbit(want).all()
    assert np.asarray(got).tobytes() == want.tobytes(), f"{op} over axis {axis} of -NaN: {got}"


@pytest.mark.xfail(strict=True, reason="GCC folds (-x) * (-x) into x * x and (-x) + y into y - x in a "
                   "generated kernel (nt_opcodes.h's negative is a C `-`), so a NaN x keeps its sign where "
                   "NumPy's negation flips it; a sign-bit xor through the integer bits (not folded "
                   "by GCC 12) would keep it")
@pytest.mark.parametrize("op", ["np.multiply", "np.add"])
def test_negated_nan_in_a_product_or_sum_has_numpy_sign(op):
    x = np.full((4, 100), np.nan)
    g = Graph()
    v = g.add_input("x", testing.type_of(x))
    y = g.add_input("y", testing.type_of(x))
    neg = _node(g, "np.negative", v)
    g.set_outputs([_node(g, op, neg, neg if op == "np.multiply" else y)])
    ones = np.ones_like(x)
    got = _compiled(g, [testing.type_of(x)] * 2, "sync")(x, ones)[0]
    want = getattr(np, op[3:])(-x, -x if op == "np.multiply" else ones)
    assert np.signbit(want).all()
    assert np.asarray(got).tobytes() == want.tobytes()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("ncol", [5, 9, 17, 65])
def test_where_output_and_column_sum_over_gathered_layouts_equal_interpreter(ncol, threads):
    """``w = np.where(x > c, x * 2, -x); return w, w.sum(0)`` with c a (m, 1) column (filled across
    each block's rows), x strided or reversed (gathered) and NaNs of both signs: the interpreter's bits."""
    m = 20001   # a pass long enough for the thread team
    g = Graph()
    x = g.add_input("x", testing.type_of(np.zeros((m, ncol))))
    c = g.add_input("c", testing.type_of(np.zeros((m, 1))))
    two = g.create_node("prim.Constant", [], attrs={"value": 2.0}).output
    picked = _node(g, "np.greater", x, c)
    w = _node(g, "np.where", picked, _node(g, "np.multiply", x, two), _node(g, "np.negative", x))
    g.set_outputs([w, _node(g, "np.sum", w, axis=0), _node(g, "np.mean", w, axis=0)])
    rng = np.random.default_rng(ncol)
    xv = rng.standard_normal((m, ncol))
    xv.flat[rng.integers(0, xv.size, 30)] = np.nan
    xv.flat[rng.integers(0, xv.size, 10)] = -np.nan
    cv = rng.standard_normal((m, 1))
    wide = np.zeros((m, 2 * ncol))
    wide[:, ::2] = xv
    types = [testing.type_of(xv), testing.type_of(cv)]
    gen, interp = _compiled(g, types, "sync"), _compiled(g, types, "off")
    old = get_num_threads()
    set_num_threads(threads)
    try:
        for args in [(xv, cv), (wide[:, ::2], cv), (xv[::-1].copy()[::-1], cv[::-1].copy()[::-1])]:
            _assert_same_bits(gen(*args), interp(*args), f"where over {ncol} columns")
    finally:
        set_num_threads(old)
    assert gen.stats()["generated_column_runs"] >= 3
    assert gen.stats()["generated_team_runs"] >= 3 or threads == 1 or ncol < 64   # one unit per 64 columns


@pytest.mark.xfail(strict=True, reason="column mode sums each block of rows from +0 and adds that to the "
                   "column's total (interpreter and generated kernels alike): +inf in one block, then "
                   "-inf and a +NaN in the next give the +NaN, where NumPy's row-by-row sum gives "
                   "inf - inf's default -NaN")
@pytest.mark.parametrize("mode", ["off", "sync"])
@pytest.mark.parametrize("where", [False, True], ids=["times_one", "where"])
def test_inf_minus_inf_across_blocks_gives_numpy_nan(where, mode):
    x = np.ones((300, 4))
    x[0], x[128], x[129] = np.inf, -np.inf, np.nan   # 512 / 4 = 128 rows a block
    g = Graph()
    v = g.add_input("x", testing.type_of(x))
    if where:
        w = _node(g, "np.where", _node(g, "np.equal", v, v), v, v)
    else:
        one = g.create_node("prim.Constant", [], attrs={"value": 1.0}).output
        w = _node(g, "np.multiply", v, one)
    g.set_outputs([_node(g, "np.sum", w, axis=0)])
    run = _compiled(g, [testing.type_of(x)], mode)
    with np.errstate(invalid="ignore"):   # inf - inf
        got, want = run(x)[0], x.sum(axis=0)
    assert np.signbit(want).all()
    assert np.asarray(got).tobytes() == want.tobytes()
