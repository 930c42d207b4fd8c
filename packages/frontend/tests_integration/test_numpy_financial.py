"""numpy-financial: time-value-of-money functions, element-wise over arrays of loans."""

from __future__ import annotations

import numpy as np
import pytest

npf = pytest.importorskip("numpy_financial")

from _harness import Case, check, params  # noqa: E402


def loans(n, rng):
    rate = rng.uniform(0.001, 0.01, n)
    nper = rng.integers(12, 360, n).astype(float)
    pmt = -rng.uniform(100.0, 1000.0, n)
    pv = rng.uniform(1e3, 1e5, n)
    return rate, nper, pmt, pv


def cashflows(n, rng):
    values = rng.uniform(-100.0, 300.0, n)
    values[0] = -1000.0
    return (values,)


CASES = [
    Case("numpy_financial", "fv", npf.fv, lambda n, r: loans(n, r)),
    Case("numpy_financial", "fv_when_begin",
         lambda rate, nper, pmt, pv: npf.fv(rate, nper, pmt, pv, when="begin"),
         lambda n, r: loans(n, r)),
    Case("numpy_financial", "pv", lambda rate, nper, pmt, fv: npf.pv(rate, nper, pmt, fv),
         lambda n, r: loans(n, r)),
    Case("numpy_financial", "pmt", lambda rate, nper, pv: npf.pmt(rate, nper, pv),
         lambda n, r: (lambda a: (a[0], a[1], a[3]))(loans(n, r))),
    Case("numpy_financial", "nper", lambda rate, pmt, pv: npf.nper(rate, pmt, pv),
         lambda n, r: (lambda a: (a[0], a[2], a[3]))(loans(n, r))),
    Case("numpy_financial", "ipmt", lambda rate, per, nper, pv: npf.ipmt(rate, per, nper, pv),
         lambda n, r: (lambda a: (a[0], (a[1] // 2).copy(), a[1], a[3]))(loans(n, r))),
    Case("numpy_financial", "ppmt", lambda rate, per, nper, pv: npf.ppmt(rate, per, nper, pv),
         lambda n, r: (lambda a: (a[0], (a[1] // 3).copy(), a[1], a[3]))(loans(n, r))),
    Case("numpy_financial", "npv", lambda values: npf.npv(0.05, values), cashflows),
    Case("numpy_financial", "npv_rate_array", lambda rate, values: npf.npv(rate, values),
         lambda n, r: (np.array(r.uniform(0.01, 0.1)), cashflows(n, r)[0])),
    Case("numpy_financial", "mirr", lambda values: npf.mirr(values, 0.1, 0.12), cashflows),
    # The roots of a polynomial of degree n - 1 (an n-by-n eigenproblem, seconds at n = 1000).
    Case("numpy_financial", "irr", npf.irr, cashflows, sizes=(1, 7, 40)),
    Case("numpy_financial", "rate", lambda nper, pmt, pv, fv: npf.rate(nper, pmt, pv, fv),
         lambda n, r: (lambda a: (a[1], a[2], a[3], a[3] * 0.0))(loans(n, r))),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_numpy_financial(case, backend):
    check(case, backend)
