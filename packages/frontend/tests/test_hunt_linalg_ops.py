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
