"""Hunt in NumPy's floating-point reports from a traced call (docs/guide/warnings.md), on every backend
the conftest runs: functions that write into their arguments, graphs that cannot run again, the
function's own ``np.errstate`` blocks, casts and products; each compared with NumPy on the same call."""

import warnings

import numpy as np
import numtrace as nt
import pytest


def _reports(fn):
    """The (category, message) of each RuntimeWarning `fn()` issues, and the FloatingPointError's
    message (or None)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fn()
            raised = None
        except FloatingPointError as exc:
            raised = str(exc).rsplit("FloatingPointError: ", 1)[-1]
    return sorted((w.category.__name__, str(w.message)) for w in caught
                  if issubclass(w.category, RuntimeWarning)), raised


def _traced(func, example, backend, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return nt.trace(func, example, backend=backend, **kwargs)


def _kinds(messages):
    """The kinds said (``divide by zero``...), whatever op the message names."""
    return sorted(m.split(" encountered in ")[0] for _, m in messages)


def divide_in_place(x, y):
    x /= y


def test_a_write_into_an_argument_reports_the_flags_it_raised(backend):
    """``x /= y`` with a zero: a backend writing into the caller's ``x`` cannot learn NumPy's report
    from a run on the ``inf`` left there (``inf / 0`` raises nothing): it still says the kinds."""
    traced = _traced(divide_in_place, (np.ones(8), np.ones(8)), backend)
    want_x, got_x = np.ones(8), np.ones(8)
    want = _reports(lambda: divide_in_place(want_x, np.zeros(8)))
    got = _reports(lambda: traced(got_x, np.zeros(8)))
    assert _kinds(got[0]) == _kinds(want[0]) == ["divide by zero"]
    assert np.array_equal(got_x, want_x)
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError, match="divide by zero encountered"):
        traced(np.ones(8), np.zeros(8))


def divide_then_scale(x, y):
    x /= y
    x *= 0


def assign_then_divide(x, y):
    x[1:3] = 5.0
    return x / y


@pytest.mark.xfail(strict=True, reason="under np.errstate(all='raise') NumPy raises at the op that raises, "
                   "with the writes before it (and its own) done; a traced call writes the arguments all "
                   "at once after the run, or not at all when it raises (reference; cpu writing back), "
                   "and the cpu kernels writing into x run the whole function first (x /= y; x *= 0: nan)")
@pytest.mark.parametrize("func", [divide_then_scale, assign_then_divide])
def test_raise_leaves_the_arguments_as_numpy_does(backend, func):
    traced = _traced(func, (np.ones(4), np.ones(4)), backend)
    want_x, got_x = np.ones(4), np.ones(4)
    with np.errstate(all="raise"):
        want = _reports(lambda: func(want_x, np.zeros(4)))
        got = _reports(lambda: traced(got_x, np.zeros(4)))
    assert got[1] is not None and want[1] is not None
    assert np.array_equal(got_x, want_x, equal_nan=True), (got_x, want_x)


_RNG = np.random.default_rng(0)


def mean_plus_noise(x):
    return x.mean(axis=0) + _RNG.random(x.shape[1])


def test_a_graph_with_a_random_draw_says_the_shape_warnings(backend):
    """A graph that is not run again (a draw would advance the generator) still says "Mean of empty
    slice" when the call's shapes make NumPy say it."""
    traced = _traced(mean_plus_noise, (np.ones((2, 3)),), backend, check_trace=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced(np.ones((0, 3)))   # traces again for the empty batch
    got, _ = _reports(lambda: traced(np.ones((0, 3))))
    want, _ = _reports(lambda: mean_plus_noise(np.ones((0, 3))))
    assert ("RuntimeWarning", "Mean of empty slice") in got
    said = [[w for w in r if "encountered" in w[1]] for r in (got, want)]
    assert _kinds(said[0]) == _kinds(said[1])


def quiet_log(x):
    with np.errstate(divide="ignore"):
        return np.log(x)


def loud_log(x):
    with np.errstate(divide="warn"):
        return np.log(x)


@pytest.mark.parametrize(("func", "trace_state", "call_state"), [
    (quiet_log, {"divide": "ignore"}, {}), (loud_log, {}, {"divide": "ignore"})])
def test_errstate_inside_holds_whatever_the_state_at_trace_time(backend, func, trace_state, call_state):
    with np.errstate(**trace_state):
        traced = _traced(func, (np.ones(3),), backend)
    with np.errstate(**call_state):
        assert _reports(lambda: traced(np.zeros(3))) == _reports(lambda: func(np.zeros(3)))


def quiet_square(x):
    with np.errstate(all="ignore"):   # under="ignore" is also NumPy's default
        return x * x


@np.errstate(divide="warn")
def decorated_log(x):
    return np.log(x)


def nested_blocks(x):
    with np.errstate(divide="ignore"):
        with np.errstate(invalid="warn", under="ignore"):
            y = np.log(x) * (x / x)
        return y + np.log(x) * x


_STATES = [{}, {"all": "raise"}, {"all": "ignore"}, {"all": "warn"}, {"under": "raise", "divide": "raise"}]


@pytest.mark.parametrize("func", [quiet_square, decorated_log, nested_blocks], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("trace_state", _STATES[:3], ids=str)
def test_the_functions_own_errstate_holds_at_every_caller_state(backend, func, dtype, trace_state):
    """Each kind a block names holds its mode whatever the caller's state at trace and call time,
    including a mode equal to the caller's at trace time (``all="ignore"`` keeps ``under="ignore"``)."""
    x = np.array([0.0, 1e-200, 1.0, -1.0, 1e-30], dtype)
    with np.errstate(**trace_state):
        traced = _traced(func, (np.ones(5, dtype),), backend)
    for call_state in _STATES:
        with np.errstate(**call_state):
            assert _reports(lambda: traced(x)) == _reports(lambda: func(x)), call_state


def relu_in_place(x):
    np.maximum(x, 0, out=x)


def relu_plus_noise(x):
    return np.maximum(x, 0) + _RNG.random(x.shape)


@pytest.mark.parametrize("func", [relu_in_place, relu_plus_noise])
def test_nan_through_a_comparison_says_nothing_in_a_call_not_run_again(backend, func):
    """NumPy's maximum, compares and isfinite of a nan raise no flag, and neither may a backend's
    kernels: a rerun through NumPy would hide it, but a call that is not rerun (it wrote into its
    argument, or draws) reports the kinds its kernels raised."""
    traced = _traced(func, (np.ones(8),), backend, check_trace=False)
    x = np.array([np.nan, -1.0, 2.0, 0.5] * 4)
    with np.errstate(all="raise"):
        want = _reports(lambda: func(x.copy()))
        assert _reports(lambda: traced(x.copy())) == want == ([], None)


_NAN_STEPS = {
    "sort": np.sort, "sign": np.sign, "clip_nan_low": lambda x: np.clip(x, np.nan, 1.0),
    "clip_nan_high": lambda x: np.clip(x, -1.0, np.nan), "clip": lambda x: np.clip(x, -0.5, 1.0),
    "nanmax": np.nanmax, "nanmin": np.nanmin, "max": np.max, "min": lambda x: x.min(axis=0),
    "argmax": np.argmax, "argmin": np.argmin, "greater": lambda x: x > 0.5, "less_equal": lambda x: x <= 0.5,
    "isfinite": np.isfinite, "fmax": lambda x: np.fmax(x, 0.0), "fmin": lambda x: np.fmin(x, 1.0),
    "minimum": lambda x: np.minimum(x, 1.0), "heaviside": lambda x: np.heaviside(x, 0.5),
    "where": lambda x: np.where(x > 0, x, -x), "to_int": lambda x: x.astype(np.int64),
    "to_int32": lambda x: (x * 2.0).astype(np.int32), "to_bool": lambda x: x.astype(bool),
    "inf_minus_inf": lambda x: x - x, "zero_times_inf": lambda x: x * 0.0, "sqrt": np.sqrt,
}


@pytest.mark.parametrize("draws", [False, True], ids=["rerun", "not_rerun"])
@pytest.mark.parametrize("name", list(_NAN_STEPS))
def test_nan_and_inf_report_what_numpy_reports(backend, name, draws):
    """NaN and infinities through sorts, clips with NaN bounds, nan-reductions, compares and casts: the
    call says exactly the kinds NumPy says (invalid for a NaN cast to an integer, inf - inf, 0 * inf;
    nothing for a compare of a NaN), both when it is rerun through NumPy and when a draw keeps it from
    being rerun (then the kernels' flags are what it reports)."""
    step = _NAN_STEPS[name]

    def func(x):
        return (step(x), _RNG.random(2)) if draws else step(x)

    traced = _traced(func, (np.ones(16),), backend, check_trace=False)
    for x in (np.array([np.nan, -1.0, 2.0, 0.5, np.inf, -np.inf, 0.0, -0.0] * 2), np.full(16, np.nan)):
        for state in ({}, {"all": "raise"}):
            with np.errstate(**state):
                want, want_raised = _reports(lambda x=x: func(x))
                got, got_raised = _reports(lambda x=x: traced(x))
            assert (_kinds(got), _kinds([("", got_raised)] if got_raised else [])) == \
                (_kinds(want), _kinds([("", want_raised)] if want_raised else [])), (x, state)


_CAST_VALUES = np.array([np.nan, 1.0, np.inf, -np.inf, 1e10, -1e20, 3.5, 300.0, -1.0, 1e300])


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint8, np.uint64, np.float32, np.float16])
def test_casts_report_like_numpy(backend, dtype):
    """A float cast to an integer (nan, inf, out of range: invalid) or to a narrower float (overflow),
    alone and inside a fused chain."""
    def cast(x):
        return x.astype(dtype), (x * 1.0).astype(dtype) + 1
    traced = _traced(cast, (np.ones(10),), backend)
    for state in ({}, {"all": "raise"}):
        with np.errstate(**state):
            assert _reports(lambda: traced(_CAST_VALUES)) == _reports(lambda: cast(_CAST_VALUES)), state


def quiet_product(a, b):
    with np.errstate(invalid="ignore"):
        return a @ b


@pytest.mark.parametrize("shapes", [((2, 2), (2, 2)), ((4, 3), (3,)), ((3,), (3, 4)), ((40, 30), (30, 20))])
def test_products_with_inf_times_zero_report_like_numpy(backend, shapes):
    """``inf * 0`` inside a product: NumPy's matmul says invalid (the GEMV and packed kernels too), and
    not inside the function's own ``np.errstate(invalid="ignore")``."""
    a, b = np.ones(shapes[0]), np.zeros(shapes[1])
    a.flat[0] = np.inf
    loud = _traced(lambda a, b: a @ b, (np.ones(shapes[0]), np.ones(shapes[1])), backend)
    quiet = _traced(quiet_product, (np.ones(shapes[0]), np.ones(shapes[1])), backend)
    for state in ({}, {"all": "raise"}):
        with np.errstate(**state):
            assert _reports(lambda: loud(a, b)) == _reports(lambda: a @ b), state
            assert _reports(lambda: quiet(a, b)) == ([], None), state


def assign(x, v):
    y = x.copy()
    y[1:3] = v
    return y


def assign_quietly(x, v):
    y = x.copy()
    with np.errstate(invalid="ignore", over="ignore"):
        y[1:3] = v
    return y


def assign_at(x, v, i):
    y = x.copy()
    y[i] = v
    return y


def assign_into(x, v):
    x[1:3] = v


@pytest.mark.parametrize("func", [assign, assign_quietly, assign_at, assign_into])
@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_an_assignment_that_casts_reports_once_in_its_own_state(backend, func, dtype):
    """``y[1:3] = v`` casting nan to an integer (invalid) or 1e300 to float32 (overflow): NumPy's
    assignment says it once per call, and not inside the function's own ``np.errstate``."""
    v = np.array([np.nan if dtype is np.int64 else 1e300, 1.0])
    args = (np.zeros(4, dtype), v) + ((np.array([0, 2]),) if func is assign_at else ())
    traced = _traced(func, tuple(np.array(a) for a in args), backend)
    for state in ({}, {"all": "ignore"}):
        with np.errstate(**state):
            want_args, got_args = [a.copy() for a in args], [a.copy() for a in args]
            want = _reports(lambda a=want_args: func(*a))
            assert _reports(lambda a=got_args: traced(*a)) == want, state
            assert all(np.array_equal(g, w, equal_nan=True) for g, w in zip(got_args, want_args))


def two_logs(x):
    a = np.log(x)
    b = np.log(x + 0.0)
    return a + b


def _reciprocal(x):
    return 1.0 / x


def a_log_and_a_helpers_divide(x):
    a = np.log(x)
    return a + _reciprocal(x)


@pytest.mark.parametrize("func", [two_logs, a_log_and_a_helpers_divide])
def test_warnings_are_issued_at_the_users_lines(backend, func):
    """The references a call reruns (and the reference backend) warn at the lines of the user's ops,
    a helper's included: under Python's 'default' filter (once per location) ops on two lines say
    two warnings, not one."""
    traced = _traced(func, (np.ones(3),), backend)

    def said(fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            fn()
        return [(w.filename, w.lineno) for w in caught if issubclass(w.category, RuntimeWarning)]
    want = said(lambda: func(np.zeros(3)))
    assert len(want) >= 2
    assert said(lambda: traced(np.zeros(3))) == want
