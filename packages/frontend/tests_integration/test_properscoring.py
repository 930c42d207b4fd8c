"""properscoring: CRPS and Brier scores of ensemble / Gaussian forecasts for N observations."""

from __future__ import annotations

import numpy as np
import pytest

ps = pytest.importorskip("properscoring")

from _harness import Case, check, params  # noqa: E402


def ensemble(n, rng, members=9):
    return rng.normal(size=n), rng.normal(size=(n, members))


def C(name, func, make, **kw):
    return Case("properscoring", name, func, make, **kw)


CASES = [
    C("crps_ensemble", ps.crps_ensemble, ensemble),
    C("crps_ensemble_weighted", ps.crps_ensemble,
      lambda n, r: (*ensemble(n, r), r.uniform(0.1, 1.0, size=(n, 9)))),
    C("crps_gaussian", ps.crps_gaussian,
      lambda n, r: (r.normal(size=n), r.normal(size=n), r.uniform(0.5, 2, n))),
    C("brier_score", ps.brier_score, lambda n, r: ((r.random(n) > 0.5).astype(float), r.random(n))),
    C("threshold_brier_score", lambda o, f: ps.threshold_brier_score(o, f, np.array([-0.5, 0.0, 0.5])),
      ensemble),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_properscoring(case, backend):
    check(case, backend)
