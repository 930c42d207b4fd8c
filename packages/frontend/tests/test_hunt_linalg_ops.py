"""Wrong answers and unclear errors found by hunting the np.linalg decomposition ops: each a minimal
program whose traced call answered differently from eager NumPy."""

import numpy as np
import numtrace as nt
import pytest


def _spd(rng, *shape):
    a = rng.uniform(-1, 1, shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize(
    "fn",
    [np.linalg.eigh, np.linalg.eig, np.linalg.svd, np.linalg.qr, np.linalg.slogdet,
     lambda a: np.linalg.lstsq(a, a[:, 0])],
)
def test_returned_numpy_namedtuples_keep_their_type(fn, backend, tmp_path):
    x = _spd(np.random.default_rng(1), 3, 3)
    expected = fn(x)
    traced = nt.trace(fn, (x,), backend=backend)
    traced.save(tmp_path / "t.nt")
    for got in (traced(x), nt.load(tmp_path / "t.nt", backend=backend)(x)):
        assert type(got) is type(expected)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)


def _rotations(n):
    t = np.linspace(0.5, 2.5, n)
    c, s = np.cos(t), np.sin(t)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


@pytest.mark.triton
@pytest.mark.parametrize(
    "fn",
    [
        lambda a: a.astype(np.linalg.eigvals(a).dtype),
        lambda a: np.zeros(2, np.linalg.eig(a).eigenvalues.dtype),
        lambda a: a * 2 if np.iscomplexobj(np.linalg.eigvals(a)) else a * 3,
    ],
)
def test_eig_kind_read_only_through_the_dtype_is_guarded(fn, backend):
    """The eig node's values are unused (only their dtype, fixed at trace time, is): its kind check must
    still run, so a call whose eigenvalues are of the other kind re-traces instead of keeping it."""
    spd, rot = _spd(np.random.default_rng(2), 3, 2, 2), _rotations(3)
    for first, second in ((spd, rot), (rot, spd)):
        traced = nt.trace(fn, (first,), backend=backend)
        with pytest.warns(nt.TracerWarning, match="re-tracing"):
            got = traced(second)
        expected = fn(second)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
