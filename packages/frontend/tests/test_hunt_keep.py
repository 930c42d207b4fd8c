"""Floating-point warnings of np.where's operands where the trace computes them otherwise than NumPy.

A ufunc's where= argument computes the op only where the mask holds: np.divide(n, d, out=z,
where=d != 0) divides no element by zero and warns nothing, but the trace records it as
np.where(mask, op(...), out), whose op runs on every element. And an operand computed from a constant
array is folded while tracing, so the calls never warn for it where NumPy warns at each call."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest
from numtrace_ir import testing

_MASKED_UFUNC = ("a ufunc's where= is recorded as np.where(mask, op(args), out): the op runs on the "
                 "masked-out elements too, so divide by zero / invalid are warned (FloatingPointError "
                 "under errstate(raise)) where NumPy, which skips those elements, reports nothing")

_PROGRAMS = {
    "divide": lambda n, d: np.divide(n, d, out=np.zeros_like(n), where=d != 0),
    "sqrt": lambda n, d: np.sqrt(n, out=np.zeros_like(n), where=n >= 0),
    "log": lambda n, d: np.log(n, out=np.full_like(n, -1.0), where=n > 0),
}


@pytest.mark.xfail(strict=True, reason=_MASKED_UFUNC)
@pytest.mark.parametrize("name", sorted(_PROGRAMS))
def test_a_ufuncs_where_argument_warns_only_for_selected_elements(name, backend):
    fn = _PROGRAMS[name]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        traced = nt.trace(fn, (np.ones(8), np.ones(8)), backend=backend, check_trace=False)
    n, d = np.array([1.0, -2.0, 0.0, 3.0, 4.0]), np.array([0.0, 1.0, 2.0, 0.0, 5.0])
    for state in ({"all": "warn"}, {"all": "raise"}):
        with np.errstate(**state):
            want = testing.fp_reports(lambda: fn(n, d))
            got = testing.fp_reports(lambda: traced(n, d))
        assert got[:2] == want[:2], f"np.errstate({state})"
        np.testing.assert_array_equal(got[2], want[2])


_FOLDED = ("np.log of a global array (a constant) is computed once while tracing and recorded as a "
           "constant: NumPy computes it, and warns 'divide by zero' / 'invalid' for log(0) and log(-1), "
           "at every call (np.where computes both operands); the trace's calls warn nothing")

_W = np.array([-1.0, 2.0, 0.0])


@pytest.mark.xfail(strict=True, reason=_FOLDED)
def test_a_where_operand_computed_from_a_constant_warns_at_each_call(backend):
    def fn(x):
        return np.where(x > 0, np.log(_W), 0) * x

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        traced = nt.trace(fn, (np.ones(3),), backend=backend, check_trace=False)
    x = np.array([1.0, -2.0, 3.0])
    with np.errstate(all="warn"):
        want = testing.fp_reports(lambda: fn(x))
        got = testing.fp_reports(lambda: traced(x))
    assert got[:2] == want[:2]
    np.testing.assert_array_equal(got[2], want[2])
