"""TracerWarning: every conversion that leaves the graph warns, naming the user's line."""

import warnings

import numpy as np
import numtrace as nt
import pytest

HERE = __file__


def _trace(f, *args):
    return nt.trace(f, args, backend="reference", check_trace=False)


def _assert_one_warning_here(record, match):
    ours = [w for w in record if issubclass(w.category, nt.TracerWarning)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert ours[0].filename == HERE
    assert match in str(ours[0].message)
    return ours[0]


X = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("convert, what", [
    (lambda x: bool(x.sum() > 0), "bool(x)"),
    (lambda x: int(x[0, 0]), "int(x)"),
    (lambda x: float(x.sum()), "float(x)"),
    (lambda x: complex(x[0, 0]), "complex(x)"),
    (lambda x: [0, 1, 2][x.astype(np.int64)[1, 2]], "an index"),
    (lambda x: x.sum().item(), "x.item()"),
    (lambda x: x.tolist(), "x.tolist()"),
    (lambda x: x.__array__(), "an ndarray"),
    (lambda x: np.asarray(x, order="C", like=None), "an ndarray"),
])
def test_conversions_warn_at_the_user_line_and_guard_the_value(convert, what):
    def f(x):
        convert(x)
        return x * 2.0

    with pytest.warns(nt.TracerWarning) as record:
        traced = _trace(f, X)
    w = _assert_one_warning_here(record, what)
    assert "guards it" in str(w.message)
    assert any(what in g for g in traced.guards)


def test_data_dependent_branch_is_guarded_and_traced_again_for_the_other_branch():
    def f(x):
        if x.sum() > 0:  # BRANCH
            return x * 2.0
        return x - 3.0

    with pytest.warns(nt.TracerWarning, match="bool") as record:
        traced = _trace(f, np.ones(3, np.float32))
    w = _assert_one_warning_here(record, "bool")
    with open(HERE) as src:
        assert "# BRANCH" in src.readlines()[w.lineno - 1]
    with pytest.warns(nt.TracerWarning, match="re-tracing"):
        np.testing.assert_allclose(traced(-np.ones(3, np.float32)), -4.0)  # the other branch
    np.testing.assert_allclose(traced(np.ones(3, np.float32)), 2.0)
    assert traced.stats()["retraces"] == 1


def _assert_guarded_and_retraced(f, guard):
    """No warning while tracing; the guard is listed; a call at another length traces again, correctly."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = _trace(f, X)
    assert any(g.startswith(guard) for g in traced.guards), traced.guards
    y = np.arange(12, dtype=np.float32).reshape(4, 3)
    with pytest.warns(nt.TracerWarning, match="re-tracing"):
        np.testing.assert_allclose(traced(y), f(y), rtol=1e-6)
    np.testing.assert_allclose(traced(X), f(X), rtol=1e-6)  # the first graph still serves its shapes
    assert traced.stats()["retraces"] == 1


def test_iteration_unrolls_over_a_guarded_length():
    def f(x):
        total = x[0] * 0.0
        for row in x:
            total = total + row
        return total

    _assert_guarded_and_retraced(f, "x.shape[0] == 2")


def test_len_and_range_of_a_shape_are_guarded():
    def f(x):
        total = x[0] * 0.0
        for i in range(len(x)):
            total = total + x[i] * float(i)
        return total

    _assert_guarded_and_retraced(f, "x.shape[0] == 2")


def test_numpy_function_without_an_op_is_traced_through_its_own_code():
    def f(x):
        return x + np.unwrap(x)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = _trace(f, X)
    assert not any(n.op in ("prim.Constant", "prim.host_call")
                   and getattr(n.outputs[0].type, "shape", None) == X.shape for n in traced.graph.nodes)
    y = np.linspace(0.0, 9.0, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(traced(y), f(y))


def test_arange_of_a_traced_size_is_recorded():
    def f(x):
        return x * np.arange(x.shape[1])[None, :] + np.arange(1, x.shape[0] + 1)[:, None]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = _trace(f, X)
        y = np.arange(12, dtype=np.float32).reshape(4, 3)
        np.testing.assert_allclose(traced(y), f(y))
    assert traced.guards == [] and traced.stats()["retraces"] == 0


def test_library_code_does_not_warn(recwarn):
    model = nt.nn.Sequential(nt.nn.Linear(3, 4, seed=0), nt.nn.GELU(), nt.nn.LayerNorm(4), nt.nn.ReLU())
    traced = nt.trace(model, X, backend="reference")
    assert [str(w.message) for w in recwarn] == []
    np.testing.assert_allclose(traced(X), model(X), rtol=1e-5)


def test_shape_reads_do_not_warn():
    def f(x):
        n, m = x.shape
        return x.reshape(n * m) * float(m)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = _trace(f, X)
    np.testing.assert_allclose(traced(np.ones((4, 3), np.float32)), np.full(12, 3.0))


def test_numpy_runtime_warnings_while_tracing_point_at_the_user_line():
    """NumPy's own warnings from the eager run (log(0), ...) name the user's line, as untraced NumPy's do."""
    def f(x):
        return np.log(x) * 2.0  # LOG

    with pytest.warns(RuntimeWarning, match="divide by zero encountered in log") as record:
        _trace(f, np.array([0.0, 1.0]))
    assert [w.filename for w in record] == [HERE]
    with open(HERE) as src:
        assert "# LOG" in src.readlines()[record[0].lineno - 1]


def test_numpy_error_state_set_inside_the_traced_function_is_obeyed():
    """The user's own ``np.errstate`` inside the function decides, as in eager NumPy: ignored errors stay
    silent, raised ones raise, and each op's warning names that op; the caller's state is left as it was."""
    def quiet(x):
        with np.errstate(divide="ignore"):
            return np.log(x) * 2.0

    def loud(x):
        with np.errstate(divide="raise"):
            return np.log(x)

    def two(x):
        return np.log(x), 1.0 / x  # TWO

    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _trace(quiet, np.array([0.0, 1.0]))
    with pytest.raises(FloatingPointError, match="divide by zero encountered in log"):
        _trace(loud, np.array([0.0, 1.0]))
    with pytest.warns(RuntimeWarning) as record:
        _trace(two, np.array([0.0, 1.0]))
    messages = sorted({str(w.message) for w in record})
    assert messages == ["divide by zero encountered in divide", "divide by zero encountered in log"]
    assert {w.filename for w in record} == {HERE}
    assert np.geterr() == before


@pytest.mark.parametrize("convert", [
    lambda x: np.asarray(x),
    lambda x: np.asanyarray(x) * 1.0,
    lambda x: np.array(x),
    lambda x: np.asarray(x, dtype=np.float64),
    lambda x: np.array(x, dtype=np.float32, copy=True),
    lambda x: np.array([x[0], x[1]]),
])
def test_asarray_and_array_of_a_traced_array_stay_traced(convert):
    """Library code begins with ``x = np.asarray(x)``: the result is the traced array (cast or copied as
    NumPy would), so the library's work is recorded, not frozen."""
    def f(x):
        y = convert(x)
        y[0] = 0.0 if y.dtype.kind == "f" else 0  # a copy protects x, asarray's result is x
        return x * 2.0, y

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = _trace(f, X)
    y = np.arange(12, dtype=np.float32).reshape(4, 3)
    for got, expected in zip(traced(y.copy()), f(y.copy())):
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype


# -- every TracerWarning names the user's line, wherever numtrace issues it ----------------------------

def _tracer_warnings(record):
    return [w for w in record if issubclass(w.category, nt.TracerWarning)]


def _first_rows(x):
    return x[: len(x) // 2] * 2.0   # len() of a traced array: guarded


def test_retrace_warning_names_the_calling_line():
    traced = _trace(_first_rows, np.ones((4, 3)))
    with pytest.warns(nt.TracerWarning, match="re-tracing") as record:
        traced(np.ones((6, 3)))  # CALL
    (w,) = _tracer_warnings(record)
    assert w.filename == HERE
    with open(HERE) as src:
        assert "# CALL" in src.readlines()[w.lineno - 1]


def test_retrace_warning_of_a_traced_module_names_the_calling_line():
    class Rows(nt.Module):
        def forward(self, x):
            return _first_rows(x)

    traced = nt.trace(Rows(), np.ones((4, 3)), backend="reference", check_trace=False)
    with pytest.warns(nt.TracerWarning, match="re-tracing") as record:
        traced(np.ones((6, 3)))
    assert [w.filename for w in _tracer_warnings(record)] == [HERE]


def test_already_traced_warning_names_the_calling_line():
    traced = _trace(_first_rows, np.ones((4, 3)))
    with pytest.warns(nt.TracerWarning, match="already traced") as record:
        nt.trace(traced, (np.ones((4, 3)),))
    assert [w.filename for w in _tracer_warnings(record)] == [HERE]


@pytest.mark.parametrize("as_module", [False, True])
def test_specialized_to_the_example_shapes_warning_names_the_trace_call(as_module):
    class Rows(nt.Module):
        def forward(self, x):
            return _first_rows(x)

    func = Rows() if as_module else _first_rows
    with pytest.warns(nt.TracerWarning, match="specialized to the example inputs' shapes") as record:
        nt.trace(func, np.ones((4, 3)), check_inputs=[(np.ones((6, 3)),)], backend="reference")
    assert [w.filename for w in _tracer_warnings(record)] == [HERE]


def test_data_dependent_branch_warning_says_how_to_stay_in_one_trace():
    def f(x):
        return x * 2.0 if x.sum() > 0 else x

    with pytest.warns(nt.TracerWarning) as record:
        _trace(f, X)
    assert "np.where instead of a branch" in str(_assert_one_warning_here(record, "bool(x)").message)


def _scale_by_first(x):
    return x * float(x[0])


def _noisy(x):
    return x + np.random.standard_normal(x.shape)


def _as_list(x):
    return [x * 2.0]


@pytest.mark.parametrize("func, x, checks, match", [
    (_scale_by_first, np.ones(3), [(np.full(3, 2.0),)], "shapes or values"),
    (_noisy, np.ones(3), None, "nondeterministic nodes"),
    (_as_list, np.ones(3), None, "returns a list"),
])
def test_checker_and_output_warnings_name_the_trace_call(func, x, checks, match):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        try:
            nt.trace(func, (x,), check_inputs=checks, backend="reference")
        except nt.TracingCheckError:
            pass  # the constant differs too: the warnings come first
    found = [w for w in _tracer_warnings(record) if match in str(w.message)]
    assert found and {w.filename for w in found} == {HERE}


def test_a_call_that_traces_again_warns_each_numpy_error_once():
    """A call that breaks a guard traces the function again and then runs the new graph: NumPy's
    "invalid value" warning is said once, as one eager call says it; "raise" still raises."""
    def f(x):
        if x.sum() > 0:
            return np.log(x)
        return np.log(-x)

    with pytest.warns(nt.TracerWarning):
        traced = _trace(f, np.ones(3))
    x = np.array([-1.0, 2.0, -5.0])
    with np.errstate(invalid="ignore"):
        expected = f(x)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = traced(x)
    np.testing.assert_array_equal(got, expected)
    runtime = [w for w in record if issubclass(w.category, RuntimeWarning)]
    assert [str(w.message) for w in runtime] == ["invalid value encountered in log"]
    with pytest.warns(nt.TracerWarning):
        fresh = _trace(f, np.ones(3))
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError), warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        fresh(x)
