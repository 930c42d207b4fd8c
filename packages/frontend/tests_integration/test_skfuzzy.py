"""scikit-fuzzy: membership functions on a universe of n points, their combination and defuzzification."""

from __future__ import annotations

import numpy as np
import pytest

fuzz = pytest.importorskip("skfuzzy")

from _harness import Case, check, params  # noqa: E402


def universe(n, rng):
    return (np.sort(rng.uniform(0.0, 10.0, n)),)


def membership(n, rng):
    x = np.sort(rng.uniform(0.0, 10.0, n))
    return x, fuzz.trimf(x, [2.0, 5.0, 8.0]) + rng.uniform(0.0, 0.1, n)


def C(name, func, make, **kw):
    return Case("skfuzzy", name, func, make, **kw)


CASES = [
    C("trimf", lambda x: fuzz.trimf(x, [2.0, 5.0, 8.0]), universe),
    C("trapmf", lambda x: fuzz.trapmf(x, [1.0, 3.0, 6.0, 9.0]), universe),
    C("gaussmf", lambda x: fuzz.gaussmf(x, 5.0, 1.5), universe),
    C("gauss2mf", lambda x: fuzz.gauss2mf(x, 3.0, 1.0, 7.0, 2.0), universe),
    C("gbellmf", lambda x: fuzz.gbellmf(x, 2.0, 3.0, 5.0), universe),
    C("sigmf", lambda x: fuzz.sigmf(x, 5.0, 2.0), universe),
    C("smf", lambda x: fuzz.smf(x, 2.0, 8.0), universe),
    C("zmf", lambda x: fuzz.zmf(x, 2.0, 8.0), universe),
    C("pimf", lambda x: fuzz.pimf(x, 1.0, 4.0, 6.0, 9.0), universe),
    C("psigmf", lambda x: fuzz.psigmf(x, 2.0, 3.0, -2.0, 7.0), universe),
    C("gaussmf_array_parameters", fuzz.gaussmf,
      lambda n, r: (*universe(n, r), np.array(5.0), np.array(r.uniform(1.0, 2.0)))),
    C("defuzz_centroid", lambda x, m: np.asarray(fuzz.defuzz(x, m, "centroid")), membership),
    C("defuzz_mom", lambda x, m: np.asarray(fuzz.defuzz(x, m, "mom")), membership),
    C("defuzz_bisector", lambda x, m: np.asarray(fuzz.defuzz(x, m, "bisector")), membership,
      sizes=(2, 7, 100)),
    C("interp_membership", lambda x, m: np.asarray(fuzz.interp_membership(x, m, 4.2)), membership),
    C("fuzzy_and", lambda x, m, y: fuzz.fuzzy_and(x, m, x, y)[1],
      lambda n, r: (*membership(n, r), r.uniform(0.0, 1.0, n))),
    C("fuzzy_not", fuzz.fuzzy_not, lambda n, r: (r.uniform(0.0, 1.0, n),)),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_skfuzzy(case, backend):
    check(case, backend)
