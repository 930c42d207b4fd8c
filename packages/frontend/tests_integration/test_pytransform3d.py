"""pytransform3d: batched rotation conversions and coordinates (batch n), single rotations (fixed shapes)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytransform3d")

import pytransform3d.batch_rotations as pb
import pytransform3d.coordinates as pc
import pytransform3d.rotations as pr
import pytransform3d.transformations as pt
from _harness import Case, check, params

FIXED = (5, 5, 5)  # fixed shapes: three calls with new values


def quats(n, rng):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def spherical(n, rng):
    return np.stack([rng.uniform(0.5, 2.0, n), rng.uniform(0.1, 3.0, n), rng.uniform(-3.0, 3.0, n)], axis=1)


def C(name, func, make, **kw):
    return Case("pytransform3d", name, func, make, **kw)


CASES = [
    C("matrices_from_quaternions", pb.matrices_from_quaternions, lambda n, r: (quats(n, r),)),
    C("quaternions_from_matrices", pb.quaternions_from_matrices,
      lambda n, r: (pb.matrices_from_quaternions(quats(n, r)),)),
    C("batch_concatenate_quaternions", pb.batch_concatenate_quaternions,
      lambda n, r: (quats(n, r), quats(n, r))),
    C("batch_q_conj", pb.batch_q_conj, lambda n, r: (quats(n, r),)),
    C("axis_angles_from_quaternions", pb.axis_angles_from_quaternions, lambda n, r: (quats(n, r),)),
    C("matrices_from_compact_axis_angles", pb.matrices_from_compact_axis_angles,
      lambda n, r: (r.normal(size=(n, 3)),)),
    C("norm_vectors", pb.norm_vectors, lambda n, r: (r.normal(size=(n, 3)),)),
    C("angles_between_vectors", pb.angles_between_vectors,
      lambda n, r: (r.normal(size=(n, 3)), r.normal(size=(n, 3)))),
    C("cross_product_matrices", pb.cross_product_matrices, lambda n, r: (r.normal(size=(n, 3)),)),
    C("cartesian_from_spherical", pc.cartesian_from_spherical, lambda n, r: (spherical(n, r),)),
    C("spherical_from_cartesian", pc.spherical_from_cartesian, lambda n, r: (r.normal(size=(n, 3)),)),
    C("cylindrical_from_cartesian", pc.cylindrical_from_cartesian, lambda n, r: (r.normal(size=(n, 3)),)),
    C("matrix_from_quaternion", pr.matrix_from_quaternion, lambda n, r: (quats(1, r)[0],), sizes=FIXED),
    C("quaternion_from_matrix", pr.quaternion_from_matrix,
      lambda n, r: (pr.matrix_from_quaternion(quats(1, r)[0]),), sizes=FIXED),
    C("concatenate_quaternions", pr.concatenate_quaternions,
      lambda n, r: (quats(1, r)[0], quats(1, r)[0]), sizes=FIXED),
    C("matrix_from_euler", lambda e: pr.matrix_from_euler(e, 0, 1, 2, True),
      lambda n, r: (r.uniform(-1.0, 1.0, 3),), sizes=FIXED),
    C("transform", lambda A2B, P: pt.transform(A2B, P, strict_check=False),
      lambda n, r: (pt.transform_from(pr.matrix_from_quaternion(quats(1, r)[0]), r.normal(size=3)),
                    pt.vectors_to_points(r.normal(size=(n, 3))))),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_pytransform3d(case, backend):
    check(case, backend)
