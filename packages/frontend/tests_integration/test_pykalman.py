"""pykalman: Kalman filter and smoother over n time steps (a Python loop over steps), and one update."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pykalman")

from _harness import Case, check, params
from pykalman import KalmanFilter

STEPS = (1, 7, 40)  # Python loops over time steps: keep the unrolled traces small


def model():  # constant velocity, 2 states, 1 measurement
    return KalmanFilter(transition_matrices=np.array([[1.0, 1.0], [0.0, 1.0]]),
                        observation_matrices=np.array([[1.0, 0.0]]),
                        transition_covariance=np.eye(2) * 0.01, observation_covariance=np.array([[0.5]]),
                        initial_state_mean=np.zeros(2), initial_state_covariance=np.eye(2) * 10.0)


def observations(n, rng):
    return (np.cumsum(rng.normal(size=n))[:, None],)


def C(name, func, make, **kw):
    return Case("pykalman", name, func, make, **kw)


CASES = [
    C("filter", lambda z: model().filter(z), observations, sizes=STEPS),
    C("smooth", lambda z: model().smooth(z), observations, sizes=STEPS),
    C("loglikelihood", lambda z: np.asarray(model().loglikelihood(z)), observations, sizes=STEPS),
    C("filter_update", lambda m, P, z: model().filter_update(m, P, z),
      lambda n, r: (r.normal(size=2), np.eye(2) * r.uniform(0.5, 2.0), r.normal(size=1)), sizes=(5, 5, 5)),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_pykalman(case, backend):
    check(case, backend)
