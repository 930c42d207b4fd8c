"""haversine: great-circle distances between arrays of (lat, lon) points."""

from __future__ import annotations

import numpy as np
import pytest

hv = pytest.importorskip("haversine")

from _harness import Case, check, params  # noqa: E402


def points(n, rng):
    return np.stack([rng.uniform(-80.0, 80.0, n), rng.uniform(-170.0, 170.0, n)], axis=1)


def C(name, func, make, **kw):
    return Case("haversine", name, func, make, **kw)


CASES = [
    C("haversine_vector", hv.haversine_vector, lambda n, r: (points(n, r), points(n, r))),
    C("haversine_vector_miles", lambda a, b: hv.haversine_vector(a, b, hv.Unit.MILES, check=False),
      lambda n, r: (points(n, r), points(n, r))),
    C("haversine_vector_comb", lambda a, b: hv.haversine_vector(a, b, comb=True, check=False),
      lambda n, r: (points(n, r), points(3, r)), sizes=(1, 7, 300)),
    C("haversine_vector_normalize", lambda a, b: hv.haversine_vector(a, b, normalize=True),
      lambda n, r: (points(n, r) * 2.5, points(n, r))),
    C("inverse_haversine_vector", lambda p, d, a: hv.inverse_haversine_vector(p, d, a),
      lambda n, r: (points(n, r), r.uniform(1.0, 500.0, n), r.uniform(0.0, 6.0, n))),
    C("haversine_scalar", lambda p, q: np.asarray(hv.haversine(p, q)),
      lambda n, r: (points(1, r)[0], points(1, r)[0]), sizes=(5, 5)),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_haversine(case, backend):
    check(case, backend)
