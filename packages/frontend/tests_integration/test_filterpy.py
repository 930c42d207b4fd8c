"""filterpy: Kalman filter steps, smoothers and Gaussian helpers.

The "batch" of a Kalman step is the state dimension (x of shape (n,), P of
(n, n)); batch_filter and rts_smoother loop over n time steps in Python.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("filterpy")

from _harness import Case, check, params
from filterpy import stats
from filterpy.common import outer_product_sum
from filterpy.kalman import batch_filter, predict, rts_smoother, unscented_transform, update

DIMS = (1, 7, 60)
STEPS = (1, 7, 40)  # Python loops over time steps: keep the unrolled traces small


def spd(n, rng):
    a = rng.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def state(n, rng):
    return rng.normal(size=n), spd(n, rng)


def C(name, func, make, **kw):
    return Case("filterpy", name, func, make, **kw)


def cv_model(rng):  # constant-velocity model, 2 states, 1 measurement
    F = np.array([[1.0, 1.0], [0.0, 1.0]])
    return F, np.eye(2) * 0.01, np.array([[1.0, 0.0]]), np.array([[0.5]])


def track(n, rng):
    F, Q, H, R = cv_model(rng)
    zs = np.cumsum(rng.normal(size=n))[:, None]
    return (np.zeros(2), np.eye(2) * 10.0, zs,
            np.stack([F] * n), np.stack([Q] * n), np.stack([H] * n), np.stack([R] * n))


def smoothing_inputs(n, rng):
    F, Q, _, _ = cv_model(rng)
    return (rng.normal(size=(n, 2)), np.stack([spd(2, rng) for _ in range(n)]),
            np.stack([F] * n), np.stack([Q] * n))


def gaussian_pair(n, rng):  # x, mean, variance
    return rng.normal(size=n), rng.normal(size=n), rng.uniform(0.5, 2.0, n)


def sigma_set(n, rng):
    k = 2 * n + 1
    w = rng.uniform(0.1, 1.0, k)
    return rng.normal(size=(k, n)), w / w.sum(), w / w.sum(), spd(n, rng) * 0.1


CASES = [
    C("predict", predict, lambda n, r: (*state(n, r), r.normal(size=(n, n)), spd(n, r)), sizes=DIMS),
    C("update", update,
      lambda n, r: (*state(n, r), r.normal(size=n), spd(n, r), np.eye(n) + r.normal(size=(n, n)) * 0.1),
      sizes=DIMS),
    C("update_scalar_measurement", lambda x, P, z, R, H: update(x, P, z, R, H),
      lambda n, r: (*state(n, r), r.normal(size=1), np.array([[0.5]]), r.normal(size=(1, n))), sizes=DIMS),
    C("batch_filter", lambda *a: batch_filter(*a)[:2], track, sizes=STEPS),
    C("rts_smoother", lambda *a: rts_smoother(*a)[:2], smoothing_inputs, sizes=STEPS),
    C("unscented_transform", unscented_transform, sigma_set, sizes=(1, 7, 30)),
    C("outer_product_sum", outer_product_sum,
      lambda n, r: (r.normal(size=(n, 3)), r.normal(size=(n, 3)))),
    C("stats_gaussian", stats.gaussian, gaussian_pair),
    C("stats_mul", stats.mul, lambda n, r: (*gaussian_pair(n, r)[1:], *gaussian_pair(n, r)[1:])),
    C("stats_add", stats.add, lambda n, r: (*gaussian_pair(n, r)[1:], *gaussian_pair(n, r)[1:])),
    C("stats_mahalanobis", stats.mahalanobis,
      lambda n, r: (r.normal(size=n), r.normal(size=n), spd(n, r)), sizes=DIMS),
    C("stats_multivariate_multiply", stats.multivariate_multiply,
      lambda n, r: (r.normal(size=n), spd(n, r), r.normal(size=n), spd(n, r)), sizes=DIMS),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_filterpy(case, backend):
    check(case, backend)
