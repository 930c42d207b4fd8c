"""numpy.polynomial: evaluating, fitting and differentiating power, Chebyshev, Legendre, Hermite series.

The batch is the number of points `x` (coefficients have a fixed length), or
for the coefficient arithmetic the number of coefficients.
"""

from __future__ import annotations

import numpy as np
import pytest
from _harness import Case, check, params
from numpy.polynomial import chebyshev as C_
from numpy.polynomial import hermite as H_
from numpy.polynomial import laguerre as L_
from numpy.polynomial import legendre as G_
from numpy.polynomial import polynomial as P_

COEFFS = 4


def points(n, rng):
    return rng.uniform(-1.0, 1.0, n), rng.normal(size=COEFFS)


def coeffs(n, rng):
    return (rng.normal(size=n),)


def samples(n, rng):
    x = np.sort(rng.uniform(-1.0, 1.0, n + 4))  # a fit of degree 3 needs at least 4 points
    return x, 1.0 + 2.0 * x - x**3 + rng.normal(size=x.size) * 0.01


def C(name, func, make, **kw):
    return Case("numpy_polynomial", name, func, make, **kw)


CASES = [
    C("polyval", P_.polyval, points),
    C("chebval", C_.chebval, points),
    C("legval", G_.legval, points),
    C("hermval", H_.hermval, points),
    C("lagval", L_.lagval, points),
    C("polyval_2d_coefficients", P_.polyval, lambda n, r: (r.uniform(-1, 1, n), r.normal(size=(COEFFS, 3)))),
    C("polyvander", lambda x: P_.polyvander(x, 3), lambda n, r: (r.uniform(-1, 1, n),)),
    C("chebvander", lambda x: C_.chebvander(x, 3), lambda n, r: (r.uniform(-1, 1, n),)),
    C("polyfit", lambda x, y: P_.polyfit(x, y, 3), samples),
    C("chebfit", lambda x, y: C_.chebfit(x, y, 3), samples),
    C("polyder", P_.polyder, coeffs),
    C("polyint", P_.polyint, coeffs),
    C("chebder", C_.chebder, coeffs, sizes=(2, 7, 40)),
    C("polymul", P_.polymul, lambda n, r: (r.normal(size=n), r.normal(size=3))),
    C("polyadd", P_.polyadd, lambda n, r: (r.normal(size=n), r.normal(size=n))),
    C("Polynomial_call", lambda c, x: np.polynomial.Polynomial(c)(x), lambda n, r: points(n, r)[::-1]),
    C("poly2cheb", C_.poly2cheb, coeffs, sizes=(1, 7, 40)),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_numpy_polynomial(case, backend):
    check(case, backend)
