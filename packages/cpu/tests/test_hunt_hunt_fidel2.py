"""Hunt around np.clip's NaN bounds on the CPU backend: a bound computed by a max/min reduction keeps
NumPy's NaN bits (a NaN reduced alone is itself)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numtrace_ir.testing.clip_cases import same_bits

nt = pytest.importorskip("numtrace")   # the frontend traces the programs (tests_cpu runs without it)


def _trace(fn, example):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nt.trace(fn, example, backend="cpu", check_trace=False)


@pytest.mark.xfail(strict=True, reason="the CPU backend's max/min reductions give +NaN for a NaN of "
                   "either sign: a -NaN reduced alone (0-d or one element) comes back +NaN, where NumPy "
                   "gives the element itself; np.clip(x, lo.min(), hi) then fills with the wrong NaN")
@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("shape", [(), (1,)])
def test_a_reduced_nan_keeps_its_sign(reduce, shape):
    lo = np.full(shape, -np.nan)

    def fn(x, lo):
        return getattr(lo, reduce)(), np.clip(x, getattr(lo, reduce)(), 1.0)

    x = np.zeros(3)
    traced = _trace(fn, (x, lo))
    for got, want in zip(traced(x, lo), fn(x, lo)):
        assert same_bits(got, want).all()
