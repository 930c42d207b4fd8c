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


def _setitem(a, idx, value, index):
    g = Graph()
    va, vi, vv = (g.add_input(n, type_of(v)) for n, v in (("a", a), ("i", idx), ("v", value)))
    g.set_outputs([g.create_node("np.setitem", [va, vi, vv], attrs={"index": index}).output])
    return Backend().compile(g, [type_of(a), type_of(idx), type_of(value)])(a, idx, value)


@pytest.mark.parametrize("index_dtype", ["int64", "uint8"])
def test_an_index_out_of_range_raises_even_when_the_result_is_empty(index_dtype):
    """NumPy checks the index of a gather or scatter whose result holds no element: an index past an
    axis of an array with another empty axis is an IndexError, never an empty answer."""
    empty_rows, empty_cols = np.zeros((0, 4)), np.zeros((3, 0))
    cases = [(empty_cols, ("input",), 5), (empty_rows, (slice(None), "input"), 4)]
    for x, index, bad in cases:
        idx = np.array([bad], index_dtype)
        with pytest.raises(IndexError):
            x[index[:-1] + (idx,)]
        with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
            _run("np.getitem", [x, idx], index=index)
        with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
            _setitem(x, idx, np.float64(1.0), index)
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        _setitem(empty_rows, np.array([0], index_dtype), np.float64(1.0), ("input",))
    got, expected = _run("np.getitem", [empty_cols, np.array([2], index_dtype)], index=("input",))
    assert got.shape == expected.shape == (1, 0)
    (got,) = [_setitem(empty_cols, np.array([2, 1], index_dtype), np.float64(1.0), ("input",))[0]]
    assert got.shape == (3, 0)


@pytest.mark.parametrize("index", [("input",), (slice(None), "input")])
def test_uint64_indices_wrap_through_intp_as_numpy_casts_them(index):
    """NumPy casts a uint64 index array to intp: 2**64 - 3 is -3, a valid index counted from the end
    (a spurious IndexError before); 2**63 + 2 stays out of range."""
    x = RNG.standard_normal((4, 5))
    idx = np.array([2**64 - 3, 1, 2**64 - 1], np.uint64)
    got, expected = _run("np.getitem", [x, idx], index=index)
    np.testing.assert_array_equal(got, expected)
    got, expected = _run("np.take_along_axis", [x, np.full((1, 5), 2**64 - 4, np.uint64)], axis=0)
    np.testing.assert_array_equal(got, expected)
    a, value = x.copy(), np.float64(7.0)
    a[index[:-1] + (idx,)] = value
    np.testing.assert_array_equal(_setitem(x.copy(), idx, value, index)[0], a)
    with pytest.raises(IndexError, match="out of bounds"):
        _run("np.getitem", [x, np.array([2**63 + 2], np.uint64)], index=index)
