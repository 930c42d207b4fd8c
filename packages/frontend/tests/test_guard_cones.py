"""A guard on data fed by math-library ops (exp, sin, arctan2, power, ...), float sums and products:
the backend computes what feeds the guard exactly as NumPy does, so the trace accepts the inputs it
was traced from and every input whose guarded value is the same, and returns NumPy's answer for others.
A backend's own kernels are within ulps of NumPy there, and a guard compares bit for bit."""

import warnings

import numpy as np
import numtrace as nt
import pytest


def exp_sum_scale(x):
    s = float(np.exp(x).sum())
    return x * s if s > 10.0 else x - s


def trig_branch(x):
    if np.sin(x).max() > 0.5:
        return np.arctan2(x, x[::-1]) * 2.0
    return np.cos(x) - 1.0


def angle_item(p):
    theta = np.arctan2(p[1], p[0]).item()
    return p * theta


def quaternion_exp(q):
    """transforms3d's qexp: w, v of a quaternion, a norm of v and a branch on it."""
    w, v = q[0], q[1:]
    vnorm = np.sqrt(np.dot(v, v))
    if vnorm < np.finfo(float).eps:
        return np.array([np.exp(w), 0.0, 0.0, 0.0])
    result = np.zeros(4)
    result[0] = np.exp(w) * np.cos(vnorm)
    result[1:] = np.exp(w) * np.sin(vnorm) * v / vnorm
    return result


def power_tolist(x):
    return np.asarray([t * 2.0 for t in (x ** 1.7 + np.log1p(x)).tolist()])


def mean_std_scale(x):
    m, s = float(np.tanh(x).mean()), float(np.tanh(x).std())
    return (x - m) / s


CASES = [
    (exp_sum_scale, lambda r, dt: (r.normal(size=301).astype(dt),)),
    (trig_branch, lambda r, dt: (r.normal(size=99).astype(dt) * 3,)),
    (angle_item, lambda r, dt: (r.normal(size=2).astype(dt),)),
    (quaternion_exp, lambda r, dt: (r.normal(size=4).astype(dt) * 0.5,)),
    (power_tolist, lambda r, dt: (r.uniform(0.1, 4.0, size=40).astype(dt),)),
    (mean_std_scale, lambda r, dt: (r.normal(size=33).astype(dt),)),
]


def _call(traced, *args):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "numtrace: re-tracing", nt.TracerWarning)
        return traced(*args)


@pytest.mark.triton
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("f, make", CASES, ids=[c[0].__name__ for c in CASES])
def test_guard_fed_by_ulp_bounded_ops_accepts_its_own_inputs(f, make, dtype, backend, rng):
    if f is quaternion_exp and dtype is np.float32:
        pytest.skip("builds float64 results")
    if backend == "triton" and (f is quaternion_exp or f is power_tolist):
        pytest.skip("Triton lowers neither np.dot of 1-d operands nor a join of 0-d values")
    example = make(rng, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        traced = nt.trace(f, example, backend=backend)
    assert traced.guards
    for k, args in enumerate([example, example, make(rng, dtype), example]):
        got, want = _call(traced, *[a.copy() for a in args]), f(*args)
        assert got.dtype == want.dtype   # outputs no guard reads are within ulps of NumPy's
        np.testing.assert_allclose(got, want, rtol=1e-13 if dtype is np.float64 else 1e-5)
        # The example never misses its guards: at most one re-trace, for the other input.
        assert traced.stats()["retraces"] == (0 if k < 2 else traced.stats()["retraces"]) <= 1


def test_the_rest_of_the_program_stays_in_fused_kernels():
    if "cpu" not in nt.available_backends():
        pytest.skip("cpu is not installed")

    def f(x):
        y = np.exp(x) * 2.0 + 1.0            # no guard reads it: fused, within ulps
        if np.sin(x).sum() > 0:              # sin and the sum feed the guard: NumPy computes them
            return y
        return -y

    x = np.linspace(-1.0, 2.0, 50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        traced = nt.trace(f, (x,), backend="cpu")
    (stats,) = traced.stats()["signatures"].values()
    assert stats["for_guards"] == 2 and stats["fused_nodes"] >= 3, stats
    assert "feeds a guard on data" in traced.explain()
    np.testing.assert_allclose(traced(x), f(x), rtol=1e-15)



def reversed_angles(x):
    """NumPy's arctan2 loop for a reversed (negative-stride) operand differs in the last bit from its
    loop for a contiguous one: the guard needs the slice kept NumPy's view."""
    return np.asarray(np.arctan2(x, x[::-1]).tolist()) * 2.0


@pytest.mark.triton
def test_guard_fed_through_a_strided_view_sees_numpys_layout(backend, rng):
    x = rng.normal(size=99)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        traced = nt.trace(reversed_angles, (x,), backend=backend)
    for _ in range(2):
        np.testing.assert_array_equal(_call(traced, x.copy()), reversed_angles(x))
    assert traced.stats()["retraces"] == 0
