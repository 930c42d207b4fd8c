"""ahrs: orientation helpers, attitude error metrics and attitude filters over (N, ...) batches."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ahrs")

from _harness import Case, check, params
from ahrs.common import orientation
from ahrs.filters import AngularRate, Madgwick, Mahony, Tilt
from ahrs.utils import metrics

LOOPED = (1, 7, 40)  # the filters loop over the samples in Python: keep the unrolled traces small


def quats(n, rng):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def rotations(n, rng):
    return orientation.q2R(quats(n, rng))


def accel(n, rng):
    return np.array([0.0, 0.0, 9.81]) + rng.normal(scale=0.3, size=(n, 3))


def gyro(n, rng):
    return rng.normal(scale=0.05, size=(n, 3))


def pairwise(metric, R1, R2):
    return np.array([metric(a, b) for a, b in zip(R1, R2)])


def C(name, func, make, **kw):
    return Case("ahrs", name, func, make, **kw)


CASES = [
    C("q2R", orientation.q2R, lambda n, r: (quats(n, r),)),
    C("q2R_v2", lambda q: orientation.q2R(q, version=2), lambda n, r: (quats(n, r),)),
    C("q_conj", orientation.q_conj, lambda n, r: (quats(n, r),)),
    C("q_norm", orientation.q_norm, lambda n, r: (r.normal(size=(n, 4)),)),
    C("metrics_euclidean", metrics.euclidean, lambda n, r: (r.normal(size=(n, 3)), r.normal(size=(n, 3)))),
    C("metrics_chordal", metrics.chordal, lambda n, r: (rotations(n, r), rotations(n, r))),
    # These two compare one pair of 3x3 matrices (R1 @ R2.T): called per pair of the batch.
    C("metrics_identity_deviation", lambda R1, R2: pairwise(metrics.identity_deviation, R1, R2),
      lambda n, r: (rotations(n, r), rotations(n, r)), sizes=LOOPED),
    C("metrics_angular_distance", lambda R1, R2: pairwise(metrics.angular_distance, R1, R2),
      lambda n, r: (rotations(n, r), rotations(n, r)), sizes=LOOPED),
    C("metrics_qdist", metrics.qdist, lambda n, r: (quats(n, r), quats(n, r))),
    C("metrics_qeip", metrics.qeip, lambda n, r: (quats(n, r), quats(n, r))),
    C("metrics_qcip", metrics.qcip, lambda n, r: (quats(n, r), quats(n, r))),
    C("metrics_qad", metrics.qad, lambda n, r: (quats(n, r), quats(n, r))),
    C("metrics_rmse", metrics.rmse, lambda n, r: (r.normal(size=(n, 3)), r.normal(size=(n, 3)))),
    C("filters_Tilt", lambda acc: Tilt(acc=acc).Q, lambda n, r: (accel(n, r),)),
    C("filters_Madgwick", lambda gyr, acc: Madgwick(gyr=gyr, acc=acc).Q,
      lambda n, r: (gyro(n, r), accel(n, r)), sizes=LOOPED),
    C("filters_Mahony", lambda gyr, acc: Mahony(gyr=gyr, acc=acc).Q,
      lambda n, r: (gyro(n, r), accel(n, r)), sizes=LOOPED),
    C("filters_AngularRate", lambda gyr: AngularRate(gyr=gyr).Q, lambda n, r: (gyro(n, r),), sizes=LOOPED),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_ahrs(case, backend):
    check(case, backend)
