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


@pytest.mark.parametrize(("subscripts", "shapes"), [("i,j->ij", [(5,), (4,)]), ("ij,ij->ij", [(3, 4), (3, 4)])])
def test_float16_products_without_sums_stay_native(subscripts, shapes):
    arrays = [RNG.standard_normal(s).astype(np.float16) for s in shapes]
    exe, got, expected = _einsum(subscripts, *arrays)
    np.testing.assert_array_equal(got, expected)
    assert "host step" not in exe.explain()
