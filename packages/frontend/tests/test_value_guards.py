"""Values that leave the graph (``bool``, ``int``, ``float``, ``.item()``, ``.tolist()``) are guarded, never
frozen: every run checks them, a run where one differs is discarded and the function traced again (past
the re-trace limit it runs eagerly); a loaded trace raises ``GuardError``."""

import io
import warnings

import numpy as np
import numtrace as nt
import pytest
from numpy import array, zeros  # names bound before tracing, as libraries bind them

LEFT = "Converting a traced array"


def _trace(f, *args, backend="reference"):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", LEFT, nt.TracerWarning)
        return nt.trace(f, args, backend=backend)


def _agree(traced, f, *args):
    """One call: the trace's result and the caller's arrays afterwards equal eager NumPy's."""
    mine, theirs = [a.copy() for a in args], [a.copy() for a in args]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "numtrace: re-tracing", nt.TracerWarning)
        got = traced(*mine)
    np.testing.assert_array_equal(got, f(*theirs))
    for a, b in zip(mine, theirs):
        np.testing.assert_array_equal(a, b)


def branch(x):
    if x.sum() > 0:
        return x * 2.0
    return x - 3.0


def slice_bound(x, n):
    return x[: int(n[0])] * 2.0


def scale(x):
    return x * float(x.max()) + x.sum().item()


def as_list(x):
    return np.asarray([v * 2 for v in x.tolist()])


@pytest.mark.parametrize("f, values, retraces", [
    (branch, [np.ones(3), -np.ones(3), np.ones(3), np.zeros(3)], 1),   # guarded on the truth value
    (scale, [np.arange(3.0), np.ones(3), np.arange(3.0)], 1),
    (as_list, [np.arange(3.0), np.ones(3)], 1),
])
def test_value_that_left_the_graph_follows_the_input(f, values, retraces, backend):
    traced = _trace(f, values[0], backend=backend)
    assert traced.guards
    for v in values:
        _agree(traced, f, v)
    assert traced.stats()["retraces"] == retraces


def test_int_of_data_as_a_slice_bound(backend):
    x = np.arange(6.0)
    traced = _trace(slice_bound, x, np.array([2]), backend=backend)
    for n in (2, 4, 0, 4, 6):
        _agree(traced, slice_bound, x, np.array([n]))
    assert traced.stats()["retraces"] == 3


def test_discarded_run_does_not_write_into_the_caller(backend):
    def f(x):
        x += 1.0
        if x.sum() > 0:
            return x * 2.0
        return x * 3.0

    traced = _trace(f, np.ones(3), backend=backend)
    for v in (-5.0 * np.ones(3), np.ones(3), -5.0 * np.ones(3)):
        _agree(traced, f, v)   # the caller's array is written once, by the run that is kept


def test_past_the_retrace_limit_the_function_runs_eagerly():
    traced = _trace(slice_bound, np.arange(20.0), np.array([0]))
    with pytest.warns(nt.TracerWarning) as record:
        for n in range(1, 15):
            np.testing.assert_array_equal(traced(np.arange(20.0), np.array([n])),
                                          slice_bound(np.arange(20.0), np.array([n])))
    eager = [str(w.message) for w in record if "runs the Python function eagerly" in str(w.message)]
    assert len(eager) == 1 and "Keep that value an array" in eager[0]


def test_loaded_trace_raises_guard_error_on_a_miss():
    buffer = io.BytesIO()
    _trace(branch, np.ones(3)).save(buffer)
    loaded = nt.load(io.BytesIO(buffer.getvalue()))
    np.testing.assert_array_equal(loaded(np.full(3, 2.0)), branch(np.full(3, 2.0)))
    with pytest.raises(nt.GuardError, match="bool.*does not hold for these inputs"):
        loaded(-np.ones(3))


def total(x):
    """A Python float computed from the data, as ``numpy_financial.irr`` returns one (``.item()``)."""
    return float(x.sum())


def largest_and_scaled(x):
    return x / x.max(), x.max().item() > 2.0, int(x.argmax())


@pytest.mark.triton
@pytest.mark.parametrize("f", [total, largest_and_scaled])
def test_python_numbers_computed_from_data_are_returned(f, backend):
    traced = _trace(f, np.arange(3.0), backend=backend)
    for v in (np.arange(3.0), np.ones(3), np.array([5.0, 1.0, 0.5]), np.arange(3.0)):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "numtrace: re-tracing", nt.TracerWarning)
            got = traced(v)
        expected = f(v)
        assert type(got) is type(expected)
        for g, e in zip(*(o if isinstance(o, tuple) else (o,) for o in (got, expected))):
            assert type(g) is type(e)
            np.testing.assert_array_equal(g, e)


def test_python_number_past_the_retrace_limit_and_loaded():
    traced = _trace(total, np.zeros(4))
    with pytest.warns(nt.TracerWarning) as record:
        for n in range(1, 15):
            assert traced(np.full(4, float(n))) == 4.0 * n
    assert sum("runs the Python function eagerly" in str(w.message) for w in record) == 1
    buffer = io.BytesIO()
    _trace(total, np.ones(2)).save(buffer)
    loaded = nt.load(io.BytesIO(buffer.getvalue()))
    assert loaded(np.ones(2)) == 2.0
    with pytest.raises(nt.GuardError, match="does not hold for these inputs"):
        loaded(np.zeros(2))


def test_triton_checks_a_guard_on_data():
    if "triton" not in nt.available_backends():
        pytest.skip("triton is not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        traced = nt.trace(branch, (np.ones(3, np.float32),), backend="triton")
        for x in (np.ones(3, np.float32), -np.ones(3, np.float32)):
            np.testing.assert_allclose(traced(x), branch(x), rtol=1e-6)
    assert traced.stats()["retraces"] == 1


def test_creation_functions_bound_before_tracing_are_intercepted(backend):
    def f(x):
        return array([x[:1] * 2.0, x[-1:]]) + zeros(x.shape[0])[:2, None]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = nt.trace(f, (np.arange(4.0),), backend=backend)
    assert traced.guards == []
    for v in (np.arange(4.0) + 7.0, np.ones(9)):
        _agree(traced, f, v)
    assert traced.stats()["retraces"] == 0


def test_checker_says_which_guard_on_data_the_check_inputs_break():
    with pytest.warns(nt.TracerWarning) as record:
        traced = nt.trace(branch, (np.ones(3),), check_inputs=[(-np.ones(3),)], backend="reference")
    said = [str(w.message) for w in record if "specialized to the example inputs' shapes or values" in
            str(w.message)]
    assert len(said) == 1 and "bool(x) at" in said[0] and "test_value_guards.py" in said[0]
    np.testing.assert_array_equal(traced(-np.ones(3)), branch(-np.ones(3)))
