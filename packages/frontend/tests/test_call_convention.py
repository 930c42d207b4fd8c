"""The call convention the frontend hands its backends (`numtrace_ir.CallSpec`), and a new signature
specialized once: the backend's `specialize` is the only one, checking included."""

import math
import sys
import warnings

import numpy as np
import numtrace as nt
import pytest
from numtrace_ir import CallSpec


@pytest.fixture
def specialized(monkeypatch):
    """The graphs `numtrace_ir.specialize` is called on (by whichever module calls it), in order."""
    original = sys.modules["numtrace_ir.specialize"].specialize
    calls = []

    def spy(graph, types, **kwargs):
        calls.append(graph)
        return original(graph, types, **kwargs)

    for module in list(sys.modules.values()):
        if module.__name__.startswith("numtrace") and getattr(module, "specialize", None) is original:
            monkeypatch.setattr(module, "specialize", spy)
    return calls


def scaled(x):
    return x.sum(axis=0) / math.sqrt(x.shape[0])    # a guard on x.shape[0]


def twice(x):
    return x * 2.0


@pytest.mark.triton
def test_a_new_signature_is_specialized_once(backend, specialized):
    traced = nt.trace(twice, (np.ones((3, 2)),), backend=backend, check_trace=False)
    for rows in (3, 5, 3, 5, 7):
        np.testing.assert_array_equal(traced(np.ones((rows, 2))), np.full((rows, 2), 2.0))
    assert len(specialized) == 3 and all(g is traced.graph for g in specialized)


def test_check_inputs_that_break_a_guard_specialize_the_traced_graph_once_per_signature(backend, specialized):
    x, bigger = np.ones((4, 3)), np.ones((9, 3))
    with pytest.warns(nt.TracerWarning, match="specialized to the example inputs' shapes"):
        traced = nt.trace(scaled, (x,), check_inputs=[(bigger,), (bigger,)], backend=backend)
    assert sum(g is traced.graph for g in specialized) == 1   # the check inputs' signature, once
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(traced(bigger), scaled(bigger))   # the re-trace the check made
        np.testing.assert_allclose(traced(x), scaled(x))
    assert traced.retraces == 1
    assert sum(g is traced.graph for g in specialized) == 2


def test_the_call_spec_says_what_is_written_and_returned(backend):
    def step(w, g):
        w -= 0.5 * g
        return w, (w * w).sum()

    w, g = np.ones(4), np.arange(4.0)
    traced = nt.trace(step, (w.copy(), g), backend=backend)
    assert traced.call_spec == CallSpec(num_args=2, num_results=1, written=(0,), returned=((0, 0),),
                                        name="step", input_names=traced.call_spec.input_names)
    got_w, total = traced(w, g)
    assert got_w is w
    np.testing.assert_array_equal(w, 1.0 - 0.5 * g)
    np.testing.assert_allclose(total, (w * w).sum())
    with pytest.raises(ValueError, match="shares memory"):
        traced(w, w)
