"""Regressions found by differential hunting on the native mask reads, einsum and multi-array gathers:
each compiled graph against NumPy's own result (bit for bit where NumPy moves values, within the
project's tolerance where it sums)."""

import numpy as np
import pytest
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import assert_outputs_close, type_of
from numtrace_triton import Backend

RNG = np.random.default_rng(2026)
EINSUM = registry.get("np.einsum")


def _compile(build, *arrays):
    """``build(g, *inputs)`` returns the outputs of a graph over ``arrays``; compiled at their types."""
    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(a)) for i, a in enumerate(arrays)]
    outs = build(g, *xs)
    g.set_outputs(list(outs) if isinstance(outs, (tuple, list)) else [outs])
    return Backend().compile(g, [type_of(a) for a in arrays])


def _einsum(subscripts, *arrays):
    def build(g, *xs):
        return g.create_node("np.einsum", list(xs), attrs=EINSUM.normalize_attrs({"subscripts": subscripts})
                             ).outputs
    exe = _compile(build, *arrays)
    return exe, exe(*arrays)[0], np.einsum(subscripts, *arrays)


@pytest.mark.parametrize(("subscripts", "shapes"), [("ij,jk->ik", [(6, 64), (64, 4)]),
                                                    ("i,i->", [(200,), (200,)]),
                                                    ("bij,bkj->bik", [(2, 3, 40), (2, 5, 40)])])
def test_float16_contractions_sum_as_numpy_einsum_does(subscripts, shapes):
    """NumPy's einsum adds float16 products into a float16 accumulator, rounding each step; a matmul
    summing in float32 differs from it by more than float16's tolerance."""
    arrays = [RNG.standard_normal(s).astype(np.float16) for s in shapes]
    exe, got, expected = _einsum(subscripts, *arrays)
    assert_outputs_close((got,), (expected,), what="np.einsum")
    assert "float16 contraction" in exe.explain()


@pytest.mark.parametrize(("subscripts", "shapes"),
                         [("i,j->ij", [(5,), (4,)]), ("ij,ij->ij", [(3, 4), (3, 4)])])
def test_float16_products_without_sums_stay_native(subscripts, shapes):
    arrays = [RNG.standard_normal(s).astype(np.float16) for s in shapes]
    exe, got, expected = _einsum(subscripts, *arrays)
    np.testing.assert_array_equal(got, expected)
    assert "host step" not in exe.explain()


def _index(op, arrays, index):
    def build(g, *xs):
        return g.create_node(op, list(xs), attrs=registry.get(op).normalize_attrs({"index": index})).outputs
    return _compile(build, *arrays)


BIG = np.array(2**64 - 1, np.uint64)  # NumPy converts a 0-d index as a Python int: too large for intp


@pytest.mark.parametrize(("index", "make"), [
    (("input",), lambda x: [BIG]),
    (("input", "input"), lambda x: [BIG, np.array([1, 2])]),
    (("input", "input"), lambda x: [np.array([1, 2], np.uint64), BIG]),
])
def test_a_0d_uint64_index_past_intp_raises_not_wraps(index, make):
    x = np.arange(20.0).reshape(4, 5)
    idxs = make(x)
    with pytest.raises(OverflowError):
        x[tuple(idxs)]
    exe = _index("np.getitem", [x, *idxs], index)
    assert "host step" not in exe.explain()
    with pytest.raises((IndexError, OverflowError)):
        exe(x, *idxs)
    ok = [np.array(3, np.uint64) if i.ndim == 0 else i for i in idxs]
    np.testing.assert_array_equal(exe(x, *ok)[0], x[tuple(ok)])


def test_a_0d_uint64_assignment_index_past_intp_raises():
    a, value = np.zeros(5), np.array(1.0)
    with pytest.raises(OverflowError):
        a.copy()[BIG] = value
    exe = _index("np.setitem", [a, BIG, value], ("input",))
    with pytest.raises((IndexError, OverflowError)):
        exe(a, BIG, value)
    np.testing.assert_array_equal(exe(a, np.array(2, np.uint64), value)[0], [0, 0, 1, 0, 0])


def test_a_1d_uint64_index_still_wraps_as_numpy():
    x = np.arange(5.0)
    idx = np.array([2**64 - 1, 1], np.uint64)
    exe = _index("np.getitem", [x, idx], ("input",))
    np.testing.assert_array_equal(exe(x, idx)[0], x[idx])


def test_a_0d_uint64_ufunc_at_index_past_intp_raises():
    a, value = np.zeros(5), np.array(1.0)
    with pytest.raises(OverflowError):
        np.add.at(a.copy(), BIG, value)
    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(v)) for i, v in enumerate((a, BIG, value))]
    attrs = registry.get("np.ufunc.at").normalize_attrs({"ufunc": "numpy.add", "index": ("input",)})
    g.set_outputs(g.create_node("np.ufunc.at", xs, attrs=attrs).outputs)
    exe = Backend().compile(g, [type_of(v) for v in (a, BIG, value)])
    assert "host step" not in exe.explain()
    with pytest.raises((IndexError, OverflowError)):
        exe(a, BIG, value)
    np.testing.assert_array_equal(exe(a, np.array(2, np.uint64), value)[0], [0, 0, 1, 0, 0])
