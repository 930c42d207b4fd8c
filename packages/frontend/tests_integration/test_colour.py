"""colour-science: colour-space conversions and colour differences of n colours (arrays of shape (n, 3))."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

with warnings.catch_warnings():  # colour warns at import that matplotlib is missing
    warnings.simplefilter("ignore")
    colour = pytest.importorskip("colour")

from _harness import Case, check, params


def xyz(n, rng):
    return (rng.uniform(0.05, 0.95, (n, 3)),)


def lab(n, rng):
    return np.stack([rng.uniform(10, 90, n), rng.uniform(-60, 60, n), rng.uniform(-60, 60, n)], axis=1)


def C(name, func, make, **kw):
    return Case("colour", name, func, make, **kw)


CASES = [
    C("XYZ_to_Lab", colour.XYZ_to_Lab, xyz),
    C("Lab_to_XYZ", colour.Lab_to_XYZ, lambda n, r: (lab(n, r),)),
    C("XYZ_to_xyY", colour.XYZ_to_xyY, xyz),
    C("xyY_to_XYZ", colour.xyY_to_XYZ, xyz),
    C("XYZ_to_Luv", colour.XYZ_to_Luv, xyz),
    C("Lab_to_LCHab", colour.Lab_to_LCHab, lambda n, r: (lab(n, r),)),
    C("XYZ_to_sRGB", colour.XYZ_to_sRGB, xyz),
    C("sRGB_to_XYZ", colour.sRGB_to_XYZ, xyz),
    C("RGB_to_HSV", colour.RGB_to_HSV, xyz),
    C("RGB_to_HSL", colour.RGB_to_HSL, xyz),
    C("delta_E_CIE1976", lambda a, b: colour.delta_E(a, b, method="CIE 1976"),
      lambda n, r: (lab(n, r), lab(n, r))),
    C("delta_E_CIE2000", lambda a, b: colour.delta_E(a, b, method="CIE 2000"),
      lambda n, r: (lab(n, r), lab(n, r))),
    C("eotf_inverse_sRGB", colour.models.eotf_inverse_sRGB, xyz),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_colour(case, backend):
    check(case, backend)
