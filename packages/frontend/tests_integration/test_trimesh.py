"""trimesh: triangle, vector, point-cloud and transform helpers, vectorized over n triangles or points."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("trimesh")

from _harness import Case, check, params
from trimesh import geometry, points, transformations, triangles, util


def tris(n, rng):
    return (rng.normal(size=(n, 3, 3)),)


def vectors(n, rng):
    return (rng.normal(size=(n, 3)),)


def two_vectors(n, rng):
    return rng.normal(size=(n, 3)), rng.normal(size=(n, 3))


def barycentric(n, rng):
    weights = rng.uniform(0.05, 1.0, size=(n, 3))
    return rng.normal(size=(n, 3, 3)), weights / weights.sum(axis=1, keepdims=True)


def on_triangles(n, rng):
    (t,), w = tris(n, rng), rng.uniform(0.05, 1.0, size=(n, 3))
    return t, np.einsum("ni,nij->nj", w / w.sum(axis=1, keepdims=True), t)


def plane(n, rng):
    normal = rng.normal(size=3)
    return rng.normal(size=(n, 3)), normal / np.linalg.norm(normal), rng.normal(size=3)


def transform(n, rng):
    matrix = transformations.random_rotation_matrix(rng.uniform(size=3))
    matrix[:3, 3] = rng.normal(size=3)
    return rng.normal(size=(n, 3)), matrix


def point_sets(n, rng):  # the same n points (one per column) before and after a rigid motion
    v0 = rng.normal(size=(3, max(n, 3)))
    matrix = transformations.random_rotation_matrix(rng.uniform(size=3))
    return v0, matrix[:3, :3] @ v0 + rng.normal(size=(3, 1))


def C(name, func, make, **kw):
    return Case("trimesh", name, func, make, **kw)


CASES = [
    C("triangles_cross", triangles.cross, tris),
    C("triangles_area", lambda t: triangles.area(t), tris),
    C("triangles_normals", lambda t: triangles.normals(t), tris),
    C("triangles_angles", triangles.angles, tris),
    C("triangles_extents", triangles.extents, tris),
    C("triangles_barycentric_to_points", triangles.barycentric_to_points, barycentric),
    C("triangles_points_to_barycentric", triangles.points_to_barycentric, on_triangles),
    C("triangles_points_to_barycentric_cross",
      lambda t, p: triangles.points_to_barycentric(t, p, method="cross"), on_triangles),
    C("triangles_closest_point", triangles.closest_point,
      lambda n, r: (tris(n, r)[0], r.normal(size=(n, 3)))),
    C("util_unitize", util.unitize, vectors),
    C("util_unitize_valid", lambda v: util.unitize(v, check_valid=True), vectors),
    C("util_euclidean", util.euclidean, two_vectors),
    C("util_vector_hemisphere", util.vector_hemisphere, vectors),
    C("util_vector_to_spherical", util.vector_to_spherical, vectors),
    C("util_spherical_to_vector", util.spherical_to_vector,
      lambda n, r: (np.column_stack([r.uniform(-np.pi, np.pi, n), r.uniform(0.0, np.pi, n)]),)),
    C("util_diagonal_dot", util.diagonal_dot, two_vectors),
    C("util_row_norm", util.row_norm, vectors),
    C("util_stack_3D", util.stack_3D, lambda n, r: (r.normal(size=(n, 2)),)),
    C("points_point_plane_distance", points.point_plane_distance, plane),
    C("points_project_to_plane", lambda p, normal, origin: points.project_to_plane(p, normal, origin),
      plane),
    C("points_plane_fit", points.plane_fit, lambda n, r: (r.normal(size=(max(n, 3), 3)),)),
    C("points_major_axis", points.major_axis, lambda n, r: (r.normal(size=(max(n, 3), 3)),)),
    C("geometry_vector_angle", geometry.vector_angle, lambda n, r: (r.normal(size=(n, 2, 3)),)),
    C("transformations_transform_points", transformations.transform_points, transform),
    C("transformations_unit_vector", lambda v: transformations.unit_vector(v, axis=1), vectors),
    C("transformations_vector_norm", lambda v: transformations.vector_norm(v, axis=1), vectors),
    C("transformations_vector_product", lambda a, b: transformations.vector_product(a, b, axis=1),
      two_vectors),
    C("transformations_angle_between_vectors",
      lambda a, b: transformations.angle_between_vectors(a, b, axis=1), two_vectors),
    C("transformations_superimposition_matrix", transformations.superimposition_matrix, point_sets),
    C("transformations_affine_matrix_from_points", transformations.affine_matrix_from_points, point_sets),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_trimesh(case, backend):
    check(case, backend)
