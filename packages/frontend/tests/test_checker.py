"""The trace checker: graph diffs, constant diffs, output mismatches, failing runs."""

import numpy as np
import numtrace as nt
import pytest

HERE = __file__


def loop_in_traced_fn(x):
    result = x[0]
    for i in range(x.shape[0]):
        result = result * x[i]
    return result


def test_seed_example_loop_with_check_inputs_is_specialized_and_retraced(rng):
    """The reference tracer's seed example: a loop over ``x.shape[0]`` unrolls. The trace guards the trip
    count, so check inputs of other lengths are traced again (said once per check), never wrong."""
    inputs = (rng.random((3, 4, 5)),)
    check_inputs = [(rng.random((4, 5, 6)),), (rng.random((2, 3, 4)),)]
    with pytest.warns(nt.TracerWarning, match="specialized to the example inputs' shapes") as record:
        traced = nt.trace(loop_in_traced_fn, inputs, check_inputs=check_inputs, backend="reference")
    assert len(record) == 2
    assert f"x.shape[0] == 3  # {HERE}:12" in traced.guards
    x = rng.random((5, 2, 2))
    with pytest.warns(nt.TracerWarning, match="re-tracing"):
        np.testing.assert_allclose(traced(x), loop_in_traced_fn(x))


def test_seed_example_loop_with_check_inputs_of_the_same_shape_raises_with_a_diff(rng):
    """Check inputs at the traced shapes that record another program, with no guard saying why (Python
    state the trace cannot see), still fail with a graph diff."""
    state = {"calls": 0}

    def f(x):
        state["calls"] += 1
        result = x[0]
        for i in range(state["calls"]):  # a trip count the graph cannot see
            result = result * x[i]
        return result

    inputs = (np.full((4, 2, 2), 0.6),)
    with pytest.raises(nt.TracingCheckError) as info, pytest.warns(nt.TracerWarning, match="does not match"):
        nt.trace(f, inputs, check_inputs=[(np.full((4, 2, 2), 0.9),)], backend="reference")
    message = str(info.value)
    assert "ERROR: Graphs differed across invocations!" in message
    assert "Graph diff:" in message
    assert "First diverging operator:" in message
    assert f"Check source location:\n\t\t{HERE}:" in message


def test_shape_generic_program_passes_check_inputs_of_other_shapes(rng):
    def f(x):
        return (x * x).sum(axis=-1).reshape(x.shape[0], 1) + 1.0

    traced = nt.trace(f, (rng.random((3, 4)),), check_inputs=[(rng.random((5, 4)),), (rng.random((1, 7)),)],
                      backend="reference")
    a = rng.random((6, 2))
    np.testing.assert_allclose(traced(a), f(a))


def test_constants_that_differ_across_invocations_are_reported(rng):
    state = {"calls": 0}

    def f(x):
        state["calls"] += 1
        return x + np.array([float(state["calls"])] * 4)  # Python state: a constant that changes

    with pytest.raises(nt.TracingCheckError) as info, pytest.warns(nt.TracerWarning, match="does not match"):
        nt.trace(f, (rng.random(4),), check_inputs=[(rng.random(4),)], backend="reference")
    message = str(info.value)
    assert "Constant nodes differed in value across invocations" in message
    assert "untraceable code" in message


def test_output_mismatch_warns_output_nr(rng):
    def f(x):
        return x * 2.0 + np.random.standard_normal(x.shape[0])  # nondeterministic

    with pytest.warns(nt.TracerWarning) as record:
        nt.trace(f, (rng.random(5),), backend="reference")
    messages = [str(w.message) for w in record]
    assert any(m.startswith("Output nr 1. of the traced function does not match the corresponding output of "
                            "the Python function") for m in messages)
    nondeterministic = [m for m in messages if "nondeterministic nodes" in m]
    assert len(nondeterministic) == 1
    assert "Did you forget to call .eval()" in nondeterministic[0]
    assert "np.random.standard_normal" in nondeterministic[0]


def test_fill_row_zero_with_random_row_warns_like_the_seed(rng):
    def fill_row_zero(x):
        x[0] = np.random.rand(*x.shape[1:2])
        return x

    with pytest.warns(nt.TracerWarning) as record:
        traced = nt.trace(fill_row_zero, (rng.random((3, 4)),), backend="reference")
    messages = [str(w.message) for w in record]
    assert any(m.startswith("Output nr 1.") for m in messages)
    assert any("nondeterministic nodes" in m for m in messages)
    out = traced(np.ones((3, 4)))
    np.testing.assert_array_equal(out[1:], 1.0)
    assert ((out[0] >= 0) & (out[0] < 1)).all()


def test_exception_while_running_the_trace_is_a_check_error(rng, monkeypatch):
    def failing(*args, **kwargs):
        raise FloatingPointError("the trace's own sinh")

    from numtrace_ir import registry

    monkeypatch.setattr(registry.get("np.sinh"), "impl", failing)  # only the trace runs the reference
    with pytest.raises(nt.TracingCheckError,
                       match="encountered an exception while running the trace") as info:
        nt.trace(np.sinh, (rng.random(4),), backend="reference")
    assert "the trace's own sinh" in str(info.value)


def test_exception_while_retracing_is_a_check_error(rng):
    with pytest.raises(nt.TracingCheckError, match="while re-tracing the function"):
        nt.trace(lambda x: x.reshape(2, -1), (rng.random(4),), check_inputs=[(rng.random(5),)],
                 backend="reference")


def test_exception_in_the_python_function_is_a_check_error(rng):
    calls = []

    def f(x):
        calls.append(1)
        if len(calls) == 3:
            raise ArithmeticError("boom")
        return x + 1.0

    with pytest.raises(nt.TracingCheckError, match="while running the Python function") as info:
        nt.trace(f, (rng.random(2),), backend="reference")
    assert "ArithmeticError: boom" in str(info.value)


def test_check_tolerance_is_used(rng, recwarn):
    state = {"n": 0}

    def drifting(x):
        state["n"] += 1
        return x * (1.0 + 1e-4 * (state["n"] == 3))  # the untraced check run drifts by 1e-4

    x = rng.random(3) + 1.0
    with pytest.warns(nt.TracerWarning, match="Output nr 1"):
        nt.trace(drifting, (x,), backend="reference")
    state["n"] = 0
    recwarn.clear()
    traced = nt.trace(drifting, (x,), backend="reference", check_tolerance=1e-3)
    assert len(recwarn) == 0 and state["n"] >= 3  # the drifting run was checked, within the tolerance
    np.testing.assert_allclose(traced(x), x)


def test_check_trace_false_skips_the_checker(rng, recwarn):
    """The checker calls the function again (on the example and on each check input): with
    check_trace=False it is called once, to trace it, and the check inputs' other length says nothing."""
    calls = []

    def counted(x):
        calls.append(x.shape)
        return loop_in_traced_fn(x)

    x, check = rng.random((3, 4)), rng.random((4, 4))
    traced = nt.trace(counted, (x,), check_trace=False, check_inputs=[(check,)], backend="reference")
    assert calls == [(3, 4)] and len(recwarn) == 0
    np.testing.assert_allclose(traced(x), loop_in_traced_fn(x))
    calls.clear()
    with pytest.warns(nt.TracerWarning, match="specialized to the example inputs' shapes"):
        nt.trace(counted, (x,), check_inputs=[(check,)], backend="reference")
    assert (4, 4) in calls and len(calls) > 1


def test_float32_products_with_cancellation_do_not_warn(rng, backend):
    # A layer of unscaled float32 weights: outputs near zero after cancellation carry the rounding of
    # terms ~30x larger, so the backend's summation order differs from NumPy's by more than 1e-5 there.
    w = rng.standard_normal((784, 512)).astype(np.float32)
    b = rng.standard_normal(512).astype(np.float32)

    def layer(x):
        return np.maximum(x @ w + b, 0)

    for batch in (1, 64, 256):
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        traced = nt.trace(layer, (x,), check_inputs=[(x[::-1].copy(),)], backend=backend)
        np.testing.assert_allclose(traced(x), layer(x), rtol=1e-4, atol=2e-4)


def test_a_drifting_product_still_warns_beside_reassociated_sums(rng, backend):
    w = rng.standard_normal((64, 8)).astype(np.float32)
    state = {"n": 0}

    def drifting(x):
        state["n"] += 1
        return (x @ w) * np.float32(1.0 + 1e-3 * (state["n"] == 3))  # the untraced check run drifts

    x = rng.standard_normal((4, 64)).astype(np.float32)
    with pytest.warns(nt.TracerWarning, match="Output nr 1"):
        nt.trace(drifting, (x,), backend=backend)
