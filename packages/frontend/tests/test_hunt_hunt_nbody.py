"""Hunted in the cpu backend's recomputed broadcasts (a cheap broadcast value computed again in each
later pass that reads it, its own pass dropped when nothing else reads it): user programs against
NumPy, on every backend the conftest runs."""

import warnings

import numpy as np
import numtrace as nt


def _traced(func, example, backend):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # the tracing run itself is NumPy's
        return nt.trace(func, example, backend=backend)


def _reports(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, sorted(str(w.message) for w in caught if issubclass(w.category, RuntimeWarning))


def scaled_differences(x, y, c):
    d = x[None, :] - y[:, None]     # a broadcast only the product reads
    return d * c


def test_broadcast_read_only_by_an_empty_pass_still_reports_its_overflow(backend):
    """c of shape (0, 1, 1): the product is empty, but NumPy computes d (and warns of its overflow);
    the pass that computes d again inside the product computes nothing."""
    traced = _traced(scaled_differences, (np.ones(3), np.ones(2), np.ones((2, 1, 1))), backend)
    args = (np.array([1.7e308, 1.0, 2.0]), np.array([-1.7e308, 0.0]), np.ones((0, 1, 1)))
    got, got_warns = _reports(lambda: traced(*args))
    want, want_warns = _reports(lambda: scaled_differences(*args))
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got_warns == want_warns == ["overflow encountered in subtract"]


def pairwise_forces_in_place(x, y):
    d = x[None, :] - y[:, None]     # computed again by the second reduction's pass
    a = d.sum(axis=1)
    x -= d.sum(axis=0)              # x written while d (from x's old contents) is still read
    return a, (d * d).sum(axis=0)


def test_update_of_an_operand_between_the_passes_that_read_its_broadcast(backend):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(40), rng.standard_normal(30)
    traced = _traced(pairwise_forces_in_place, (x.copy(), y.copy()), backend)
    for n, m in ((40, 30), (1, 30), (7, 1), (0, 3), (257, 129)):
        x, y = rng.standard_normal(n), rng.standard_normal(m)
        x[: min(n, 3)] = [np.nan, np.inf, -0.0][: min(n, 3)]
        tx, wx = x.copy(), x.copy()
        with np.errstate(invalid="ignore"):
            got, want = traced(tx, y), pairwise_forces_in_place(wx, y)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(tx, wx, rtol=1e-12, atol=1e-12)
