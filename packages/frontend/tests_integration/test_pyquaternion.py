"""pyquaternion: the `Quaternion` class built from a traced array of 4, its products and rotations."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyquaternion")

from _harness import Case, check, params
from pyquaternion import Quaternion

FIXED = (5, 5, 5)  # fixed shapes: three calls with new values


def quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def Q(q):
    return Quaternion(array=q)


def C(name, func, make, sizes=FIXED, **kw):
    return Case("pyquaternion", name, func, make, sizes=sizes, **kw)


CASES = [
    C("rotation_matrix", lambda q: Q(q).rotation_matrix, lambda n, r: (quat(r),)),
    C("transformation_matrix", lambda q: Q(q).transformation_matrix, lambda n, r: (quat(r),)),
    C("rotate", lambda q, v: Q(q).rotate(v), lambda n, r: (quat(r), r.normal(size=3))),
    C("product", lambda p, q: (Q(p) * Q(q)).elements, lambda n, r: (quat(r), quat(r))),
    C("conjugate", lambda q: Q(q).conjugate.elements, lambda n, r: (r.normal(size=4),)),
    C("inverse", lambda q: Q(q).inverse.elements, lambda n, r: (r.normal(size=4),)),
    C("normalised", lambda q: Q(q).normalised.elements, lambda n, r: (r.normal(size=4),)),
    C("norm", lambda q: np.asarray(Q(q).norm), lambda n, r: (r.normal(size=4),)),
    C("exp", lambda q: Quaternion.exp(Q(q)).elements, lambda n, r: (r.normal(size=4) * 0.5,)),
    C("log", lambda q: Quaternion.log(Q(q)).elements, lambda n, r: (quat(r),)),
    C("slerp", lambda p, q: Quaternion.slerp(Q(p), Q(q), 0.3).elements, lambda n, r: (quat(r), quat(r))),
    C("absolute_distance", lambda p, q: np.asarray(Quaternion.absolute_distance(Q(p), Q(q))),
      lambda n, r: (quat(r), quat(r))),
    C("from_axis_angle", lambda a, t: Quaternion(axis=a, angle=t).elements,
      lambda n, r: (r.normal(size=3), np.array(r.uniform(0.1, 3.0)))),
    C("from_matrix", lambda m: Quaternion(matrix=m).elements, lambda n, r: (Q(quat(r)).rotation_matrix,)),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_pyquaternion(case, backend):
    check(case, backend)
