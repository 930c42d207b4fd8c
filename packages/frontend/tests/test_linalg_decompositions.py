"""np.linalg decompositions traced as registry ops: NumPy's errors kept (at trace time and when the graph
runs), NumPy's namedtuples, results whose type NumPy decides from the values (eig's real or complex
dtype, lstsq's residuals length), and the argument forms left to host calls."""

import numpy as np
import numtrace as nt
import pytest

LinAlgError = np.linalg.LinAlgError


def _spd(rng, *shape):
    a = rng.uniform(-1, 1, shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _rotations(n):
    t = np.linspace(0.5, 2.5, n)
    c, s = np.cos(t), np.sin(t)
    return np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)


def _linalg_error_in(exc: BaseException) -> bool:
    while exc is not None:
        if isinstance(exc, LinAlgError):
            return True
        exc = exc.__cause__
    return False


def _ops(traced):
    return [n.op for n in traced.graph.nodes]


@pytest.mark.parametrize(
    ("fn", "x", "error"),
    [
        (np.linalg.eigh, np.ones((3, 4)), LinAlgError),
        (np.linalg.cholesky, np.ones(3), LinAlgError),
        (np.linalg.svd, np.ones(3), LinAlgError),
        (lambda x: np.linalg.svd(x, hermitian=True), np.ones((2, 3)), LinAlgError),
        (np.linalg.qr, np.ones(3), LinAlgError),
        (np.linalg.slogdet, np.ones((2, 3)), LinAlgError),
        (np.linalg.eigvals, np.ones((2, 2), np.float16), TypeError),
        (np.linalg.cholesky, -np.eye(2), LinAlgError),
        (np.linalg.cond, np.ones((0, 3)), LinAlgError),
        (lambda x: np.linalg.qr(x, mode="sideways"), np.ones((2, 2)), ValueError),
        (lambda x: np.linalg.pinv(x, rcond=0.1, rtol=0.1), np.ones((2, 2)), ValueError),
    ],
)
def test_numpy_errors_at_trace_time(fn, x, error, backend):
    with pytest.raises(error):
        fn(x)
    with pytest.raises(error):
        nt.trace(fn, (x,), backend=backend)


@pytest.mark.parametrize(
    ("fn", "good", "bad"),
    [
        (np.linalg.cholesky, np.eye(3)[None] * 2, -np.eye(3)[None]),
        (lambda x: np.linalg.cholesky(x, upper=True), np.eye(2), np.array([[1.0, 2.0], [2.0, 1.0]])),
        (np.linalg.cond, np.eye(3)[:2], np.eye(3)[:0]),   # empty matrices
        (lambda x: np.linalg.cholesky(x.astype(np.complex64)), np.eye(2), -np.eye(2)),
    ],
)
def test_numpy_errors_when_the_graph_runs(fn, good, bad, backend):
    traced = nt.trace(fn, (good,), backend=backend)
    with pytest.raises(Exception) as eager:
        fn(bad)
    with pytest.raises(Exception) as got:
        traced(bad)
    assert _linalg_error_in(got.value), got.value
    assert str(eager.value) in str(got.value)
    assert traced.retraces == 0


@pytest.mark.parametrize("dtype", ["i4", "i8", "bool", "f4", "f8", "c8"])
def test_dtypes_as_numpy(dtype, backend):
    rng = np.random.default_rng(3)
    x = (_spd(rng, 2, 3, 3) + 6 * np.eye(3)).astype(dtype) if dtype != "bool" else np.eye(3, dtype=bool)[None]

    def f(a):
        w, v = np.linalg.eigh(a)
        u, s, vh = np.linalg.svd(a)
        return w, v, u, s, vh, np.linalg.cholesky(a), np.linalg.slogdet(a).logabsdet, np.linalg.pinv(a)

    traced = nt.trace(f, (x,), backend=backend)
    assert "prim.host_call" not in _ops(traced)
    for got, expected in zip(traced(x), f(x)):
        assert got.dtype == np.asarray(expected).dtype, (got.dtype, expected.dtype)
        np.testing.assert_array_equal(got, expected)   # the same LAPACK call on the same data


def test_namedtuple_fields_inside_the_trace(backend):
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, (5, 3))

    def f(a):
        r = np.linalg.svd(a, full_matrices=False)
        q = np.linalg.qr(a)
        s = np.linalg.slogdet(a.T @ a)
        return r.U * r.S, r.Vh, q.Q, q.R, s.sign * s.logabsdet

    traced = nt.trace(f, (x,), backend=backend)
    for n in (4, 9):
        y = rng.uniform(-1, 1, (n, 3))
        for got, expected in zip(traced(y), f(y)):
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    assert traced.retraces == 0


def test_eig_dtype_follows_the_values_by_retracing(backend):
    rng = np.random.default_rng(5)
    spd = _spd(rng, 4, 2, 2)
    traced = nt.trace(np.linalg.eigvals, (spd,), backend=backend)
    assert traced(spd).dtype == np.float64
    rot = _rotations(4)
    with pytest.warns(nt.TracerWarning, match="re-tracing.*eigenvalue"):   # the traced real type is refused
        got = traced(rot)
    assert got.dtype == np.complex128
    np.testing.assert_array_equal(got, np.linalg.eigvals(rot))
    assert traced.retraces == 1


def test_loaded_eig_trace_refuses_the_other_dtype(tmp_path, backend):
    rng = np.random.default_rng(6)
    spd = _spd(rng, 3, 2, 2)
    nt.trace(lambda a: np.linalg.eig(a), (spd,), backend=backend).save(tmp_path / "eig.nt")
    loaded = nt.load(tmp_path / "eig.nt", backend=backend)
    for got, expected in zip(loaded(spd), np.linalg.eig(spd)):
        np.testing.assert_array_equal(got, expected)
    with pytest.raises(nt.GuardError, match="eigenvalue"):
        loaded(_rotations(3))


def test_lstsq_residuals_length_is_data_dependent(backend):
    rng = np.random.default_rng(7)
    a, b = rng.uniform(-1, 1, (6, 3)), rng.uniform(-1, 1, (6, 2))
    traced = nt.trace(lambda a, b: np.linalg.lstsq(a, b), (a, b), backend=backend)
    low = rng.uniform(-1, 1, (6, 1)) @ rng.uniform(-1, 1, (1, 3))   # rank 1: no residuals
    for x, y in ((a, b), (low, b), (a[:2], b[:2]), (a[:0], b[:0])):
        expected = np.linalg.lstsq(x, y)
        got = traced(x, y)
        assert [np.shape(g) for g in got] == [np.shape(e) for e in expected]
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
    assert traced.retraces == 0


@pytest.mark.parametrize(
    ("fn", "x"),
    [
        (lambda a: np.linalg.qr(a, mode="raw")[1], np.arange(12.0).reshape(4, 3) ** 0.5),
        (lambda a: np.linalg.pinv(a, rcond=np.array([0.1, 0.2])), np.arange(18.0).reshape(2, 3, 3) % 5),
        (lambda a: a * np.linalg.matrix_rank(a[0]), np.arange(6.0).reshape(2, 3)),
    ],
)
def test_unmodelled_forms_are_host_calls(fn, x, backend):
    with pytest.warns(nt.TracerWarning):
        traced = nt.trace(fn, (x,), backend=backend, check_trace=False)
    assert "prim.host_call" in _ops(traced)
    np.testing.assert_array_equal(traced(x), fn(x))
