"""NumPy's floating-point warnings and errors from a traced call, on every backend the conftest runs
(the reference, the cpu where installed; not Triton, which has no floating-point flags:
docs/guide/warnings.md): the user programs the promise is about (a log of zeros, a standardization with
a zero-variance column, ``np.errstate(all="raise")`` around the call, a mean over an empty axis)."""

import warnings

import numpy as np
import numtrace as nt
import pytest
from numtrace_ir.testing import assert_outputs_close, fp_reports


def _reports(fn):
    return fp_reports(fn)[:2]


def _traced(func, example, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the tracing run itself is NumPy's
        return nt.trace(func, example, backend=backend)


def log_of_zeros(x):
    return np.log(x * 0)


def standardize(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


def empty_mean(x):
    return x.mean(axis=0), x.var(axis=0)


@pytest.mark.parametrize(("func", "example", "call"), [
    (log_of_zeros, np.ones(4), np.ones(4)),
    (standardize, np.arange(12.0).reshape(4, 3), np.array([[1.0, 2.0, 5.0], [3.0, 2.0, 7.0]])),
    (empty_mean, np.ones((2, 3)), np.ones((0, 3))),
])
def test_call_reports_like_numpy(backend, func, example, call):
    traced = _traced(func, (example,), backend)
    for state in ({}, {"all": "raise"}, {"all": "ignore"}, {"invalid": "ignore"}):
        with np.errstate(**state):
            want, want_raised, expected = fp_reports(lambda: func(call))
            for _ in range(2):   # every call, as NumPy
                got, got_raised, actual = fp_reports(lambda: traced(call))
                assert (got, got_raised) == (want, want_raised), state
                if want_raised is None:   # a call that warned still returns NumPy's answer
                    assert_outputs_close(actual, expected, what=str(state))


def test_errstate_raise_raises_from_traced_call(backend):
    traced = _traced(log_of_zeros, (np.ones(3),), backend)
    with np.errstate(all="raise"), \
            pytest.raises(FloatingPointError, match="divide by zero encountered in log"):
        traced(np.ones(3))
    traced = _traced(standardize, (np.arange(12.0).reshape(4, 3),), backend)
    x = np.array([[1.0, 2.0, 5.0], [3.0, 4.0, 7.0]])
    with np.errstate(all="raise"):
        assert np.array_equal(traced(x), standardize(x))   # nothing raised where NumPy raises nothing


def quiet_inside(x):
    with np.errstate(divide="ignore"):
        y = np.log(x * 0)    # NumPy says nothing here, whatever the caller's state
    return y + np.log(x)     # the caller's state applies here


def strict_inside(x):
    with np.errstate(all="raise"):
        return np.log(x)


def test_errstate_inside_the_function_scopes_its_ops(backend):
    traced = _traced(quiet_inside, (np.ones(3),), backend)
    assert "errstate(divide=ignore)" in str(traced.graph)
    for x in (np.array([0.0, 1.0]), np.array([1.0, 2.0])):
        for state in ({}, {"all": "raise"}, {"all": "ignore"}):
            with np.errstate(**state):
                want = _reports(lambda x=x: quiet_inside(x))
                assert _reports(lambda x=x: traced(x)) == want, (x, state)


def test_errstate_raise_inside_the_function(backend):
    traced = _traced(strict_inside, (np.ones(3),), backend)
    for state in ({}, {"all": "ignore"}):
        with np.errstate(**state):
            want = _reports(lambda: strict_inside(np.zeros(2)))
            assert want[1] is not None
            assert _reports(lambda: traced(np.zeros(2))) == want


def test_errstate_inside_survives_save_and_load(tmp_path, backend):
    traced = _traced(quiet_inside, (np.ones(3),), backend)
    traced.save(tmp_path / "t.nt")
    loaded = nt.load(tmp_path / "t.nt", backend=backend)
    x = np.array([0.0, 1.0])
    want = _reports(lambda: quiet_inside(x))
    assert _reports(lambda: loaded(x)) == want


def branchy_quiet(x):
    k = 1.0 if x.shape[0] > 2 else 2.0    # a guard on the shape: other shapes trace again
    with np.errstate(divide="ignore"):
        y = np.log(x * 0)
    return y * k


def test_errstate_inside_holds_in_a_trace_made_again_for_new_shapes(backend):
    traced = _traced(branchy_quiet, (np.ones(3),), backend)
    for _ in range(2):   # the first call traces again ("re-tracing branchy_quiet()"), the second runs
        got = _reports(lambda: traced(np.ones(2)))
    assert got == _reports(lambda: branchy_quiet(np.ones(2))) == ([], None)
