"""The built-in reference backend: the protocol, value freeing, error messages, out=."""

import numpy as np
import numtrace as nt
import pytest
from numtrace.reference_backend import ReferenceBackend
from numtrace_ir import Graph, TensorType


def _graph():
    g = Graph()
    x = g.add_input("x", TensorType("float64", (3,)))
    a = g.create_node("np.exp", [x], loc="model.py:1").output
    b = g.create_node("np.negative", [a], loc="model.py:2").output
    g.set_outputs([b, x, b])
    return g


def test_protocol_and_fresh_outputs():
    backend = ReferenceBackend()
    assert backend.is_available() == (True, "")
    g = _graph()
    exe = backend.compile(g, [v.type for v in g.inputs])
    x = np.arange(3.0)
    b, x_out, b2 = exe(x)
    np.testing.assert_allclose(b, -np.exp(x))
    assert x_out is not x and not np.shares_memory(x_out, x)  # an input returned is copied
    assert b2 is not b  # a repeated output is a distinct array
    assert exe.stats()["nodes"] == 2


def test_values_are_freed_after_their_last_use():
    g = _graph()
    exe = ReferenceBackend().compile(g, [v.type for v in g.inputs])
    freed = [step.free for step in exe.steps]
    assert freed[0] == [] and freed[1] == [1]  # exp's result dies after negative reads it


def test_out_writes_into_given_arrays():
    g = _graph()
    exe = ReferenceBackend().compile(g, [v.type for v in g.inputs])
    outs = (np.empty(3), np.empty(3), np.empty(3))
    result = exe(np.ones(3), out=outs)
    assert all(r is o for r, o in zip(result, outs))
    with pytest.raises(ValueError, match="out\\[0\\] must be"):
        exe(np.ones(3), out=(np.empty(2), np.empty(3), np.empty(3)))


def test_errors_name_the_node_and_its_location():
    g = Graph()
    x = g.add_input("x", TensorType("int64", (2,)))
    y = g.create_node("np.floor_divide", [x, x], loc="model.py:7").output
    g.set_outputs([y])
    exe = ReferenceBackend().compile(g, [x.type])
    with np.errstate(divide="raise"), \
            pytest.raises(RuntimeError, match=r"np.floor_divide \(traced at model.py:7\)"):
        exe(np.zeros(2, np.int64))


def test_backend_listing():
    installed = nt.installed_backends()
    assert installed["reference"] == (True, "")
    assert "reference" in nt.available_backends()
