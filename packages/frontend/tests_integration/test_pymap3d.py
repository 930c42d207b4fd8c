"""pymap3d: geodetic / ECEF / ENU / NED / AER conversions, element-wise over arrays of points."""

from __future__ import annotations

import numpy as np
import pytest

pm = pytest.importorskip("pymap3d")

from _harness import Case, check, params  # noqa: E402


def geodetic(n, rng):
    return rng.uniform(-80.0, 80.0, n), rng.uniform(-180.0, 180.0, n), rng.uniform(-100.0, 5000.0, n)


def origin(n, rng):
    return rng.uniform(-60.0, 60.0, n), rng.uniform(-170.0, 170.0, n), rng.uniform(0.0, 500.0, n)


def local(n, rng):  # east/north/up (or north/east/down) offsets in meters
    return rng.uniform(-5e3, 5e3, n), rng.uniform(-5e3, 5e3, n), rng.uniform(10.0, 2e3, n)


def aer(n, rng):
    return rng.uniform(0.0, 360.0, n), rng.uniform(1.0, 89.0, n), rng.uniform(10.0, 1e4, n)


def ecef(n, rng):
    return pm.geodetic2ecef(*geodetic(n, rng))


def lat(n, rng):
    return (rng.uniform(-85.0, 85.0, n),)


def lat_alt(n, rng):
    return rng.uniform(-85.0, 85.0, n), rng.uniform(-100.0, 5000.0, n)


def cat(*makers):
    return lambda n, rng: tuple(a for m in makers for a in m(n, rng))


def C(name, func, make, **kw):
    return Case("pymap3d", name, func, make, **kw)


CASES = [
    C("geodetic2ecef", pm.geodetic2ecef, geodetic),
    C("geodetic2ecef_rad", lambda la, lo, h: pm.geodetic2ecef(la, lo, h, deg=False),
      lambda n, r: (r.uniform(-1.4, 1.4, n), r.uniform(-3.1, 3.1, n), r.uniform(0.0, 1e3, n))),
    C("ecef2geodetic", pm.ecef2geodetic, ecef),
    C("geodetic2enu", pm.geodetic2enu, cat(geodetic, origin)),
    C("enu2geodetic", pm.enu2geodetic, cat(local, origin)),
    C("ecef2enu", pm.ecef2enu, cat(ecef, origin)),
    C("enu2ecef", pm.enu2ecef, cat(local, origin)),
    C("enu2aer", pm.enu2aer, local),
    C("aer2enu", pm.aer2enu, aer),
    C("geodetic2aer", pm.geodetic2aer, cat(geodetic, origin)),
    C("aer2geodetic", pm.aer2geodetic, cat(aer, origin)),
    C("ecef2aer", pm.ecef2aer, cat(ecef, origin)),
    C("aer2ecef", pm.aer2ecef, cat(aer, origin)),
    C("geodetic2ned", pm.geodetic2ned, cat(geodetic, origin)),
    C("ned2geodetic", pm.ned2geodetic, cat(local, origin)),
    C("ned2ecef", pm.ned2ecef, cat(local, origin)),
    C("ecef2ned", pm.ecef2ned, cat(ecef, origin)),
    C("enu2uvw", pm.enu2uvw, cat(local, lambda n, r: origin(n, r)[:2])),
    C("uvw2enu", pm.uvw2enu, cat(local, lambda n, r: origin(n, r)[:2])),
    C("ecef2enuv", pm.ecef2enuv, cat(local, lambda n, r: origin(n, r)[:2])),
    C("geodetic2geocentric", pm.geodetic2geocentric, lat_alt),
    C("geocentric2geodetic", pm.geocentric2geodetic, lat_alt),
    C("geodetic2isometric", pm.geodetic2isometric, lat),
    C("geodetic2conformal", pm.geodetic2conformal, lat),
    C("geodetic2rectifying", pm.geodetic2rectifying, lat),
    C("geodetic2authalic", pm.geodetic2authalic, lat),
    C("geodetic2parametric", pm.geodetic2parametric, lat),
    C("parametric2geodetic", pm.parametric2geodetic, lat),
    C("geocentric_radius", pm.geocentric_radius, lat),
    C("rcurve_transverse", pm.rcurve.transverse, lat),
    C("rcurve_meridian", pm.rcurve.meridian, lat),
    C("geodetic2spherical", pm.geodetic2spherical, geodetic),
    # Python loops over the points: the trip count comes from the batch size, a guard re-traces.
    C("geodetic2ecef_range_loop",
      lambda la, lo, h: np.stack([np.stack(pm.geodetic2ecef(la[i], lo[i], h[i]))
                                  for i in range(la.shape[0])]),
      geodetic, sizes=(1, 7, 40)),
    C("ecef2enu_len_loop",
      lambda x, y, z, la, lo, h: np.stack([np.stack(pm.ecef2enu(x[i], y[i], z[i], la[i], lo[i], h[i]))
                                           for i in range(len(x))]),
      cat(ecef, origin), sizes=(1, 7, 40)),
]


@pytest.mark.parametrize(("case", "backend"), params(CASES))
def test_pymap3d(case, backend):
    check(case, backend)
