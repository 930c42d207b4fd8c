"""transforms3d: quaternion, Euler, axis-angle and affine helpers.

Most take one quaternion / matrix (fixed shapes): those are traced once and
called with new values; `*_batch` cases loop over a batch in Python (the loop
count comes from the batch size, so new batch sizes must re-trace).
"""

from __future__ import annotations

import numpy as np
import pytest

t3d = pytest.importorskip("transforms3d")

from _harness import Case, check, params  # noqa: E402
from transforms3d import affines, axangles, euler, quaternions, zooms  # noqa: E402

FIXED = (5, 5, 5)  # fixed shapes: three calls with new values


def quat(rng, *lead):
    q = rng.normal(size=(*lead, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def C(name, func, make, sizes=FIXED, **kw):
    return Case("transforms3d", name, func, make, sizes=sizes, **kw)


def rotation(rng):
    return quaternions.quat2mat(quat(rng))


CASES = [
    C("qmult", quaternions.qmult, lambda n, r: (quat(r), quat(r))),
    C("qconjugate", quaternions.qconjugate, lambda n, r: (quat(r),)),
    C("qnorm", quaternions.qnorm, lambda n, r: (r.normal(size=4),)),
    C("qinverse", quaternions.qinverse, lambda n, r: (r.normal(size=4),)),
    C("quat2mat", quaternions.quat2mat, lambda n, r: (quat(r),)),
    C("mat2quat", quaternions.mat2quat, lambda n, r: (rotation(r),)),
    C("rotate_vector", quaternions.rotate_vector, lambda n, r: (r.normal(size=3), quat(r))),
    C("qexp", quaternions.qexp, lambda n, r: (r.normal(size=4) * 0.5,)),
    C("qlog", quaternions.qlog, lambda n, r: (quat(r),)),
    C("quat2axangle", quaternions.quat2axangle, lambda n, r: (quat(r),)),
    C("axangle2quat", quaternions.axangle2quat,
      lambda n, r: (r.normal(size=3), np.array(r.uniform(0.1, 3.0)))),
    C("euler2mat", euler.euler2mat, lambda n, r: tuple(np.array(a) for a in r.uniform(-3, 3, 3))),
    C("mat2euler", euler.mat2euler, lambda n, r: (rotation(r),)),
    C("axangle2mat", axangles.axangle2mat, lambda n, r: (r.normal(size=3), np.array(r.uniform(0.1, 3.0)))),
    C("affines_compose", affines.compose,
      lambda n, r: (r.normal(size=3), rotation(r), r.uniform(0.5, 2.0, 3))),
    C("affines_decompose44", affines.decompose44,
      lambda n, r: (affines.compose(r.normal(size=3), rotation(r), r.uniform(0.5, 2.0, 3)),)),
    C("zfdir2mat", zooms.zfdir2mat, lambda n, r: (np.array(r.uniform(0.5, 2.0)), r.normal(size=3))),
    # A Python loop over the batch: the trip count is the batch size.
    C("qmult_batch", lambda p, q: np.stack([quaternions.qmult(a, b) for a, b in zip(p, q)]),
      lambda n, r: (quat(r, n), quat(r, n)), sizes=(1, 7, 40)),
    C("quat2mat_batch", lambda q: np.stack([quaternions.quat2mat(a) for a in q]),
      lambda n, r: (quat(r, n),), sizes=(1, 7, 40)),
    C("quat2mat_range_batch", lambda q: np.stack([quaternions.quat2mat(q[i]) for i in range(q.shape[0])]),
      lambda n, r: (quat(r, n),), sizes=(1, 7, 40)),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_transforms3d(case, backend):
    check(case, backend)
