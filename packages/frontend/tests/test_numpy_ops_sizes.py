"""The NaN-aware reductions, signal/calculus functions, vector products and FFTs are registry ops with
shape rules: a trace taken at one batch size runs at batch 1, an odd size and 1000 with no re-trace,
and returns what NumPy returns (exactly, or by the project's rule for sums: `assert_outputs_close`)."""

import warnings

import numpy as np
import numtrace as nt
import pytest
from numtrace_ir import registry, testing
from numtrace_ir.ops.nanfunctions import with_nans

try:
    from scipy.special import logsumexp as _bound_logsumexp
except ImportError:   # the SciPy cases skip
    _bound_logsumexp = None

K3 = np.array([0.25, -1.0, 0.5])
XP = np.linspace(-3.0, 3.0, 7)
FP = np.cos(XP)
M34 = np.arange(12.0).reshape(3, 4) / 7.0
W4 = np.array([[1.0, 2.0], [3.0, -1.0]])


def _nans(shape):
    def make(rng, n):
        return (with_nans(rng, rng.uniform(-3, 3, (n, *shape))),)

    return make


def _arrays(*shapes, dtype="f8"):
    """Arrays whose leading dim is the batch where the shape starts with None."""

    def make(rng, n):
        sizes = [tuple(n if d is None else d for d in s) for s in shapes]
        return tuple(rng.uniform(-3, 3, size).astype(dtype) for size in sizes)

    return make


def _spd(m, dtype="f8"):
    """A batch of symmetric positive-definite m x m matrices."""

    def make(rng, n):
        a = rng.uniform(-1, 1, (n, m, m))
        return ((a @ np.swapaxes(a, -1, -2) + m * np.eye(m)).astype(dtype),)

    return make


def _scatter(dtype="f8"):
    """A batch of values and of indices into it (negative ones too: NumPy wraps them)."""
    def make(rng, n):
        return rng.uniform(-3, 3, n).astype(dtype), rng.integers(-n, n, n)

    return make


def _rotations(rng, n):
    """A batch of plane rotations: complex eigenvalues in every matrix."""
    c, s = np.cos(t := rng.uniform(0.3, 2.8, n)), np.sin(t)
    return (np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2),)


def _at(ufunc, a, i, *value):
    ufunc.at(a, i, *value)
    return a


def _put(a, i, v, mode="raise"):
    np.put(a, i, v, mode=mode)
    return a


def _put_along(a, i, v, axis):
    np.put_along_axis(a, i, v, axis)
    return a


# (op name, function of the inputs, inputs at batch size n)
CASES = [
    ("np.nansum", lambda x: np.nansum(x, axis=0), _nans((3,))),
    ("np.nansum", lambda x: np.nansum(x, axis=1, keepdims=True), _nans((3,))),
    ("np.nanprod", lambda x: np.nanprod(x, axis=1), _nans((3,))),
    ("np.nanmean", lambda x: np.nanmean(x, axis=1), _nans((3,))),
    ("np.nanvar", lambda x: np.nanvar(x, axis=1, ddof=1), _nans((4,))),
    ("np.nanstd", lambda x: np.nanstd(x, axis=-1), _nans((3,))),
    ("np.nanmax", lambda x: np.nanmax(x, axis=1), _nans((3,))),
    ("np.nanmin", lambda x: np.nanmin(x, axis=1), _nans((3,))),
    ("np.nanargmax", lambda x: np.nanargmax(x, axis=1), _nans((3,))),
    ("np.nanargmin", lambda x: np.nanargmin(x, axis=1), _nans((3,))),
    ("np.nancumsum", lambda x: np.nancumsum(x, axis=0), _nans((3,))),
    ("np.nancumprod", lambda x: np.nancumprod(x, axis=1), _nans((3,))),
    ("np.ptp", lambda x: np.ptp(x, axis=0), _arrays((None, 3))),
    ("np.count_nonzero", lambda x: np.count_nonzero(x > 0, axis=0), _arrays((None, 3))),
    # NumPy's count is an intp scalar, not a weak Python int: float32 / count is float64
    ("np.count_nonzero", lambda x: x / np.count_nonzero(x > 0), _arrays((None,), dtype="f4")),
    ("np.average", lambda x, w: np.average(x, axis=0, weights=w), _arrays((None, 3), (None,))),
    ("np.average", lambda x: np.average(x, axis=1, returned=True), _arrays((None, 3))),
    ("np.cov", lambda x: np.cov(x), _arrays((3, None))),
    ("np.cov", lambda x, y: np.cov(x, y, rowvar=False, ddof=0), _arrays((None, 2), (None,))),
    ("np.corrcoef", lambda x: np.corrcoef(x, rowvar=False), _arrays((None, 3))),
    ("np.convolve", lambda x: np.convolve(x, K3), _arrays((None,))),
    ("np.convolve", lambda x: np.convolve(x, K3, mode="same"), _arrays((None,))),
    ("np.correlate", lambda x: np.correlate(x, K3, mode="full"), _arrays((None,))),
    ("np.interp", lambda x: np.interp(x, XP, FP), _arrays((None, 2))),
    ("np.diff", lambda x: np.diff(x, axis=0, prepend=0.0), _arrays((None, 3))),
    ("np.diff", lambda x, y: np.diff(x, append=y), _arrays((None,), (2,))),
    ("np.ediff1d", lambda x: np.ediff1d(x, to_begin=0.0), _arrays((None, 2))),
    ("np.cumulative_sum", lambda x: np.cumulative_sum(x, axis=0, include_initial=True), _arrays((None, 2))),
    ("np.cumulative_prod", lambda x: np.cumulative_prod(x, axis=1), _arrays((None, 2))),
    ("np.trapezoid", lambda x: np.trapezoid(x, axis=0), _arrays((None, 3))),
    ("np.gradient", lambda x: np.gradient(x, 0.5, axis=1), _arrays((None, 4))),
    ("np.cross", lambda a, b: np.cross(a, b), _arrays((None, 3), (None, 3))),
    ("np.cross", lambda a, b: np.cross(a, b, axisa=0), _arrays((3, None), (3,))),
    ("np.kron", lambda x: np.kron(x, W4), _arrays((None, 2))),
    ("np.vdot", lambda x, y: np.vdot(x, y), _arrays((None,), (None,))),
    ("np.vecdot", lambda x, y: np.vecdot(x, y), _arrays((None, 3), (None, 3))),
    ("np.matvec", lambda v: np.matvec(M34, v), _arrays((None, 4))),
    ("np.vecmat", lambda v: np.vecmat(v, M34), _arrays((None, 3))),
    ("np.fft.fft", lambda x: np.fft.fft(x), _arrays((None, 8))),
    ("np.fft.rfft", lambda x: np.fft.rfft(x, axis=0), _arrays((None, 2))),
    ("np.fft.irfft", lambda x: np.fft.irfft(x), _arrays((None, 5))),
    ("np.fft.fft2", lambda x: np.fft.fft2(x), _arrays((None, 4, 4), dtype="f4")),
    ("np.fft.rfftn", lambda x: np.fft.rfftn(x, axes=(1, 0)), _arrays((None, 6))),
    ("np.fft.fftshift", lambda x: np.fft.fftshift(x), _arrays((None, 3))),
    ("np.fft.ifftshift", lambda x: np.fft.ifftshift(x, axes=0), _arrays((None,))),
    # -- NaN order statistics, insert/delete/pad, grids, select, piecewise, special functions ---------
    ("np.nanmedian", lambda x: np.nanmedian(x, axis=1), _nans((5,))),
    ("np.nanmedian", lambda x: np.nanmedian(x, axis=0, keepdims=True), _nans((3,))),
    ("np.nanpercentile", lambda x: np.nanpercentile(x, 30, axis=1), _nans((5,))),
    ("np.nanpercentile", lambda x: np.nanpercentile(x, [10, 90], axis=1, method="nearest"), _nans((4,))),
    ("np.nanquantile", lambda x: np.nanquantile(x, [0.1, 0.5], axis=0), _nans((5,))),
    ("np.insert", lambda x: np.insert(x, 1, 5.0, axis=0), _arrays((None, 2))),
    ("np.insert", lambda x: np.insert(x, [0, 2], 0.5, axis=1), _arrays((None, 3))),
    ("np.insert", lambda x: np.insert(x, -1, x[:, 0], axis=1), _arrays((None, 3))),
    ("np.insert", lambda x: np.insert(x, slice(None, None, 2), 9.0), _arrays((None,))),
    ("np.delete", lambda x: np.delete(x, [0, 2], axis=1), _arrays((None, 4))),
    ("np.delete", lambda x: np.delete(x, 0, axis=0), _arrays((None, 3))),
    ("np.delete", lambda x: np.delete(x, slice(1, None, 2)), _arrays((None,))),
    ("np.delete", lambda x: np.delete(x, [-1, -2]), _arrays((None, 2))),
    ("np.concatenate", lambda x: np.append(x, [1.0, 2.0]), _arrays((None,))),
    ("np.pad", lambda x: np.pad(x, 2, mode="reflect"), _arrays((None,))),
    ("np.pad", lambda x: np.pad(x, ((1, 2), (0, 1)), mode="edge"), _arrays((None, 3))),
    ("np.pad", lambda x: np.pad(x, 2, mode="wrap"), _arrays((None, 3))),
    ("np.pad", lambda x: np.pad(x, 2, mode="linear_ramp", end_values=(1.0, -1.0)), _arrays((None,))),
    ("np.pad", lambda x: np.pad(x, 2, mode="mean"), _arrays((None,))),
    ("np.pad", lambda x: np.pad(x, (1, 3), mode="symmetric", reflect_type="odd"), _arrays((None,))),
    ("np.pad", lambda x: np.pad(x, ((0, 1), (2, 0)), mode="maximum", stat_length=1), _arrays((None, 3))),
    ("np.pad", lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=((1, 2), (3, 4))), _arrays((None, 2))),
    ("np.pad", lambda x: np.pad(x, 0, mode="median"), _arrays((None, 2))),
    ("np.meshgrid", lambda x, y: sum(np.meshgrid(x, y)), _arrays((None,), (3,))),
    ("np.meshgrid", lambda x, y: np.meshgrid(x, y, indexing="ij", sparse=True), _arrays((None,), (None, 2))),
    ("np.select", lambda x: np.select([x < -1, x > 1], [x * 2, x ** 2], default=0.0), _arrays((None,))),
    ("np.select", lambda x: np.select([x > 0], [x], default=7), _arrays((None, 2), dtype="f4")),
    ("np.setitem", lambda x: np.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v * 2]),
     _arrays((None,))),
    ("np.setitem", lambda x: np.piecewise(x, [x < -2.5], [np.sin, 0.5]), _arrays((None, 2))),
    ("np.sinc", lambda x: np.sinc(x), _arrays((None,))),
    ("np.sinc", lambda x: np.sinc(x), _arrays((None, 2), dtype="f4")),
    ("np.i0", lambda x: np.i0(x * 4), _arrays((None,))),
    # np.linalg decompositions (the results are NumPy's own LAPACK call's: compared exactly)
    ("np.linalg.eigh", lambda x: np.linalg.eigh(x), _spd(3)),
    ("np.linalg.eigh", lambda x: np.linalg.eigh(x, UPLO="U").eigenvectors, _spd(4, "f4")),
    ("np.linalg.eigvalsh", lambda x: np.linalg.eigvalsh(x), _spd(3)),
    ("np.linalg.eig", lambda x: np.linalg.eig(x), _rotations),
    ("np.linalg.eigvals", lambda x: np.linalg.eigvals(x), _spd(3)),
    ("np.linalg.svd", lambda x: np.linalg.svd(x, full_matrices=False), _arrays((None, 4, 3))),
    ("np.linalg.svd", lambda x: np.linalg.svd(x), _arrays((None, 3))),
    ("np.linalg.svd", lambda x: np.linalg.svd(x, compute_uv=False), _arrays((3, None))),
    ("np.linalg.svd", lambda x: np.linalg.svd(x, hermitian=True).S, _spd(3)),
    ("np.linalg.svdvals", lambda x: np.linalg.svdvals(x), _arrays((None, 3, 4), dtype="f4")),
    ("np.linalg.qr", lambda x: np.linalg.qr(x), _arrays((None, 4, 3))),
    ("np.linalg.qr", lambda x: np.linalg.qr(x, mode="complete").R, _arrays((None, 3))),
    ("np.linalg.qr", lambda x: np.linalg.qr(x, mode="r"), _arrays((3, None))),
    ("np.linalg.cholesky", lambda x: np.linalg.cholesky(x), _spd(3)),
    ("np.linalg.cholesky", lambda x: np.linalg.cholesky(x, upper=True), _spd(4, "f4")),
    ("np.linalg.slogdet", lambda x: np.linalg.slogdet(x), _arrays((None, 3, 3))),
    ("np.linalg.lstsq", lambda a, b: np.linalg.lstsq(a, b), _arrays((None, 3), (None,))),
    ("np.linalg.lstsq", lambda a, b: np.linalg.lstsq(a, b, rcond=0.1)[0], _arrays((None, 2), (None, 3))),
    ("np.linalg.pinv", lambda x: np.linalg.pinv(x), _arrays((None, 3, 4))),
    ("np.linalg.pinv", lambda x: np.linalg.pinv(x, rtol=None), _arrays((None, 3))),
    ("np.linalg.matrix_rank", lambda x: np.linalg.matrix_rank(x), _arrays((None, 3, 4))),
    ("np.linalg.cond", lambda x: np.linalg.cond(x), _arrays((None, 3, 3))),
    ("np.linalg.cond", lambda x: np.linalg.cond(x, 1), _arrays((None, 3, 3))),
    # searching and counting: searchsorted, digitize, isin, argwhere, unique, bincount, histogram
    ("np.searchsorted", lambda x: np.searchsorted(np.linspace(-2.0, 2.0, 9), x), _arrays((None,))),
    ("np.searchsorted", lambda a, x: np.searchsorted(np.sort(a), x, side="right"), _arrays((None,), (5,))),
    ("np.searchsorted", lambda a, x: np.sort(a).searchsorted(x), _arrays((5,), (None, 2), dtype="f4")),
    ("np.searchsorted", lambda a, x: np.searchsorted(a, x, sorter=np.argsort(a)), _arrays((None,), (3,))),
    ("np.digitize", lambda x: np.digitize(x, np.linspace(-2.0, 2.0, 9)), _arrays((None, 2))),
    ("np.digitize", lambda x: np.digitize(x, np.linspace(2.0, -2.0, 5), right=True), _arrays((None,))),
    ("np.digitize", lambda x, b: np.digitize(x, np.sort(b)), _arrays((None,), (4,))),
    ("np.isin", lambda x: np.isin(np.round(x), [0.0, 1.0, -2.0]), _arrays((None,))),
    ("np.isin", lambda x, y: np.isin(np.round(x), np.round(y), invert=True), _arrays((None, 2), (4,))),
    ("np.isin", lambda x, y: np.isin(np.round(y), np.round(x)), _arrays((None,), (4,))),
    ("np.isin", lambda x: np.isin(x.astype(np.int64), np.arange(-1, 2), kind="table"), _arrays((None,))),
    ("np.argwhere", lambda x: np.argwhere(x > 0), _arrays((None, 3))),
    ("np.argwhere", lambda x: np.argwhere(np.round(x)) * 2, _arrays((None,), dtype="f4")),
    ("np.unique", lambda x: np.unique(np.round(x)), _arrays((None,))),
    ("np.unique", lambda x: np.unique(np.round(x)) * 2.0, _arrays((None, 2), dtype="f4")),
    ("np.unique", lambda x: np.unique(np.round(x), True, True, return_counts=True), _arrays((None, 2))),
    ("np.unique", lambda x: np.unique(np.round(x / 2), axis=0, return_inverse=True, return_counts=True),
     _arrays((None, 2))),
    ("np.unique", lambda x: np.unique(x.astype(np.int32), sorted=False), _arrays((None,))),
    ("np.unique", lambda x: np.unique_values(x > 0), _arrays((None,))),
    ("np.unique", lambda x: np.unique_counts(np.round(x)), _arrays((None,))),
    ("np.unique", lambda x: np.unique_inverse(np.round(x)), _arrays((None, 3))),
    ("np.unique", lambda x: np.unique_all(np.round(x)), _arrays((None,))),
    ("np.bincount", lambda x: np.bincount((np.abs(x) * 2).astype(np.intp), minlength=7), _arrays((None,))),
    ("np.bincount", lambda x: np.bincount((np.abs(x) * 2).astype(np.int32)), _arrays((None,))),
    ("np.bincount", lambda x, w: np.bincount(np.abs(x).astype(np.intp), w), _arrays((None,), (None,))),
    ("np.histogram", lambda x: np.histogram(x, bins=5, range=(-2, 2)), _arrays((None,))),
    ("np.histogram", lambda x: np.histogram(x, bins=5), _arrays((None, 2), dtype="f4")),
    ("np.histogram", lambda x: np.histogram(x.astype(np.int64), 4), _arrays((None,))),
    ("np.histogram", lambda x, w: np.histogram(x, 4, (-2.0, 2.0), density=True, weights=w),
     _arrays((None, 2), (None, 2))),
    ("np.histogram", lambda x: np.histogram(x, bins=[-3.0, -1.0, 0.0, 0.5, 3.0]), _arrays((None,))),
    ("np.histogram", lambda x, b: np.histogram(x, bins=np.sort(b), density=True), _arrays((None,), (4,))),
    # scatters: ufunc.at, np.put, np.put_along_axis (written back into their first argument)
    ("np.ufunc.at", lambda x, i: _at(np.add, np.zeros_like(x, shape=(5,)), i % 5, x), _scatter()),
    ("np.ufunc.at", lambda x, i: _at(np.add, x.copy(), i, 1.5), _scatter()),
    ("np.ufunc.at", lambda x, i: _at(np.subtract, x * 2, i, x), _scatter()),
    ("np.ufunc.at", lambda x, i: _at(np.add, np.zeros_like(x, shape=(5,)), i % 5, x), _scatter("i8")),
    ("np.ufunc.at", lambda x, i: _at(np.maximum, np.zeros_like(x, shape=(5,)), i % 5, x), _scatter("i4")),
    ("np.ufunc.at", lambda x, i: _at(np.maximum, np.zeros_like(x, shape=(5,)), i % 5, x), _scatter()),
    ("np.ufunc.at", lambda x, i: _at(np.minimum, x.copy(), i, x[::-1]), _scatter()),
    ("np.ufunc.at", lambda x, i: _at(np.multiply, x.copy(), i, 0.5), _scatter()),
    ("np.ufunc.at", lambda x, i: _at(np.negative, x.copy(), i), _scatter()),
    ("np.ufunc.at", lambda x, i: _at(np.add, np.zeros_like(x, shape=(5, 3)), (slice(None), i % 3), x),
     _scatter()),
    ("np.ufunc.at", lambda x, i: _at(np.add, x.copy(), x > 0, 1.0), _scatter()),
    ("np.put", lambda x, i: _put(x.copy(), i, x * 3), _scatter()),
    ("np.put", lambda x, i: _put(x.copy(), i * 7, [1.0, 2.0], mode="wrap"), _scatter()),
    ("np.put", lambda x, i: _put(x.copy(), i * 7, -1.0, mode="clip"), _scatter()),
    ("np.put_along_axis", lambda x, i: _put_along(np.stack([x, -x], axis=1), (i % 2)[:, None], 9.0, 1),
     _scatter()),
    # -- SciPy functions as ops ---------------------------------------------------------------------
    ("scipy.special.logsumexp", lambda x: _scipy_special().logsumexp(x, axis=1), _arrays((None, 4))),
    ("scipy.special.logsumexp", lambda x: _scipy_special().logsumexp(x), _arrays((None, 2), dtype="f4")),
    ("scipy.special.logsumexp", lambda x: x - _scipy_special().logsumexp(x, axis=-1, keepdims=True),
     _arrays((None, 3))),
]


def _scipy_special():
    return pytest.importorskip("scipy.special")


def _flat(r):
    return list(r) if isinstance(r, (tuple, list)) else [r]


@pytest.mark.triton
@pytest.mark.parametrize(("name", "fn", "make"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_one_trace_serves_every_size(name, fn, make, backend):
    rng = np.random.default_rng(7)
    traced = nt.trace(fn, make(rng, 8), backend=backend)
    ops = [n.op for n in traced.graph.nodes]
    assert name in ops, ops
    assert not any(o in ("prim.host_call", "prim.guard", "prim.dim") for o in ops), ops
    op = registry.get(name)
    for n in (1, 7, 1000):
        inputs = make(rng, n)
        with warnings.catch_warnings(record=True) as numpy_warned:   # cov of one observation warns
            warnings.simplefilter("always")
            expected = _flat(fn(*inputs))
        with warnings.catch_warnings(record=True) as traced_warned:
            warnings.simplefilter("always")
            got = _flat(traced(*inputs))
        assert [str(w.message) for w in traced_warned] == [str(w.message) for w in numpy_warned]
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            testing.assert_outputs_close(g, np.asarray(e), what=f"{name} at {n} on {backend}", op=op,
                                         inputs=inputs)
    assert traced.retraces == 0


def test_all_nan_slices_warn_as_numpy_does(backend):
    def f(x):
        return np.nanmean(x, axis=1), np.nanmax(x, axis=1)

    x = np.array([[1.0, np.nan], [2.0, 4.0]])
    traced = nt.trace(f, (x,), backend=backend)
    bad = np.array([[np.nan, np.nan], [2.0, 4.0], [1.0, 3.0]])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = traced(bad)
    assert {str(w.message) for w in seen} >= {"Mean of empty slice", "All-NaN slice encountered"}
    for g, e in zip(got, (np.array([np.nan, 3.0, 2.0]), np.array([np.nan, 4.0, 3.0]))):
        np.testing.assert_array_equal(g, e)
    with pytest.raises(RuntimeError, match="All-NaN slice"):   # NumPy's ValueError, with the node named
        nt.trace(lambda x: np.nanargmax(x, axis=1), (x,), backend=backend)(bad)


def test_unmodelled_arguments_are_host_calls(backend):
    x = np.array([[1.0, np.nan], [2.0, 4.0]])
    where = np.array([[True, False], [True, True]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = nt.trace(lambda x: np.nansum(x, axis=1, where=where), (x,), backend=backend,
                          check_trace=False)
    assert "prim.host_call" in str(traced.graph)
    np.testing.assert_array_equal(traced(x), np.nansum(x, axis=1, where=where))


@pytest.mark.triton
def test_fft_frequencies_follow_a_traced_length(backend):
    def f(x):
        return x * np.fft.fftfreq(x.shape[0]), np.fft.rfftfreq(x.shape[0], d=0.1)

    traced = nt.trace(f, (np.ones(8),), backend=backend)
    ops = [n.op for n in traced.graph.nodes]
    assert "prim.dynamic" in ops and not any(o in ("prim.host_call", "prim.guard") for o in ops), ops
    for n in (1, 7, 1000):
        x = np.linspace(-1.0, 1.0, n)
        for got, expected in zip(traced(x), f(x)):
            np.testing.assert_array_equal(got, expected)
    assert traced.retraces == 0
    with pytest.raises((ZeroDivisionError, RuntimeError), match="division by zero"):
        traced(np.ones(0))


def test_edits_raise_where_numpy_raises(backend):
    reflect = nt.trace(lambda x: np.pad(x, 1, mode="reflect"), (np.ones(3),), backend=backend)
    with pytest.raises((ValueError, RuntimeError), match="can't extend empty axis"):
        reflect(np.ones(0))
    np.testing.assert_array_equal(reflect(np.ones(1)), np.pad(np.ones(1), 1, mode="reflect"))
    insert = nt.trace(lambda x: np.insert(x, 3, 0.0), (np.ones(5),), backend=backend)
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        insert(np.ones(2))
    delete = nt.trace(lambda x: np.delete(x, [1, 4]), (np.ones(6),), backend=backend)
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
        delete(np.ones(3))
    width0 = nt.trace(lambda x: np.pad(x, 0, mode="wrap"), (np.ones((2, 3)),), backend=backend)
    np.testing.assert_array_equal(width0(np.ones((0, 3))), np.ones((0, 3)))


def test_unmodelled_edit_forms_stay_host_calls(backend):
    x = np.arange(6.0)
    cases = [
        lambda x: np.delete(x, [0, -1]),                     # both signs: the count depends on the size
        lambda x: np.delete(x, x > 2),                       # a traced mask
        lambda x: np.insert(x, slice(0, 4), [1.0, 2.0, 3.0, 4.0]),  # several values per slice position
    ]
    for fn in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = nt.trace(fn, (x,), backend=backend, check_trace=False)
        assert "prim.host_call" in str(traced.graph)
        np.testing.assert_array_equal(traced(x), fn(x))
    with pytest.raises(NotImplementedError, match="cannot be recorded"):   # nor can a host call take it
        nt.trace(lambda x: np.pad(x, 2, mode=lambda v, w, i, kw: None), (x,), backend=backend)


def test_nan_order_statistics_warn_on_all_nan_slices(backend):
    def f(x):
        return np.nanmedian(x, axis=1), np.nanquantile(x, 0.3, axis=1)

    traced = nt.trace(f, (np.array([[1.0, np.nan], [2.0, 4.0]]),), backend=backend)
    bad = np.array([[np.nan, np.nan], [2.0, 4.0], [1.0, 3.0]])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        got = traced(bad)
    assert "All-NaN slice encountered" in {str(w.message) for w in seen}
    for g, e in zip(got, (np.array([np.nan, 3.0, 2.0]), np.array([np.nan, 2.6, 1.6]))):
        np.testing.assert_allclose(g, e)
    assert traced.retraces == 0


def test_piecewise_of_a_reducing_function_keeps_numpy_test_for_empty_pieces(backend):
    def f(x):
        return np.piecewise(x, [x < 0], [lambda v: v - v.max(), lambda v: v])

    traced = nt.trace(f, (np.array([-1.0, 2.0, -3.0]),), backend=backend)
    assert "prim.guard" in [n.op for n in traced.graph.nodes]   # max of an empty piece would raise
    x = np.array([1.0, 2.0])
    with pytest.warns(nt.TracerWarning, match="re-tracing"):   # the piece is empty: NumPy skips the max
        np.testing.assert_array_equal(traced(x), f(x))


def test_pad_mode_empty_is_padded_with_some_values(backend):
    traced = nt.trace(lambda x: np.pad(x, (1, 2), mode="empty"), (np.ones(3),), backend=backend,
                      check_trace=False)   # NumPy's padding is uninitialized memory: nothing to compare
    assert "np.pad" in [n.op for n in traced.graph.nodes]
    got = traced(np.arange(5.0))
    assert got.shape == (8,) and got.dtype == np.float64
    np.testing.assert_array_equal(got[1:6], np.arange(5.0))


def test_logsumexp_bound_by_name_and_its_other_forms(backend):
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(3)

    def f(x):   # a module's name bound before tracing, as library code binds it
        return _bound_logsumexp(x, axis=0) + special.logsumexp(x, axis=1, b=np.full(x.shape[1], 0.5))[0]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)   # the b= form is SciPy's code, traced through
        traced = nt.trace(f, (rng.standard_normal((6, 3)),), backend=backend)
        assert "scipy.special.logsumexp" in [n.op for n in traced.graph.nodes]
        for n in (6, 1, 9):
            x = rng.standard_normal((n, 3))
            testing.assert_outputs_close(traced(x), f(x), what=f"at {n} on {backend}")
    x = np.array([[0.0, -np.inf], [np.inf, 1.0]])
    assert np.array_equal(_bound_logsumexp(x, axis=1), special.logsumexp(x, axis=1))   # untraced: SciPy's
