"""Differential hunts against NumPy on the Triton backend's gathers and scatters: shapes a trace
was not planned for (one index, one row), where earlier kernels crashed or read wrong data."""

import numpy as np
import pytest
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.testing import type_of
from numtrace_triton import Backend

RNG = np.random.default_rng(11)


def _run(op, arrays, **attrs):
    g = Graph()
    xs = [g.add_input(f"x{i}", type_of(a)) for i, a in enumerate(arrays)]
    attrs = registry.get(op).normalize_attrs(attrs)
    node = g.create_node(op, xs, attrs=attrs)
    g.set_outputs([g.create_node("np.multiply", [node.output, node.output]).output])
    (got,) = Backend().compile(g, [type_of(a) for a in arrays])(*arrays)
    return got, registry.get(op).reference(*arrays, **attrs) ** 2


@pytest.mark.parametrize("index_dtype", ["int64", "uint8", "int8"])
@pytest.mark.parametrize("index", [("input",), (slice(None), "input")])
def test_a_single_index_gathers_a_row_or_column_of_any_length(index, index_dtype):
    """One index is uniform over the kernel's block: its out-of-range flag is stored through a
    pointer as wide as the block's mask (a 1-element pointer with a wider mask crashed)."""
    x = RNG.standard_normal((5, 7))
    for i in ([1], [-1] if index_dtype != "uint8" else [4]):
        got, expected = _run("np.getitem", [x, np.array(i, index_dtype)], index=index)
        assert got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    with pytest.raises(IndexError, match="out of bounds"):
        _run("np.getitem", [x, np.array([9], index_dtype)], index=index)
