"""argmin/argmax traced and compared with eager NumPy: the row loop (into.RowArg) on NaN payloads,
ties, unaligned inputs, the thread team's row boundaries and concurrent callers; and ``out=``
arrays that NumPy refuses (another shape, a float dtype for indices) or takes with an unsafe cast."""

import warnings

import numpy as np
import pytest
from threaded import run_threads

nt = pytest.importorskip("numtrace")
import numtrace_cpu  # noqa: E402

FLOATS = [np.float64, np.float32]
OPS = [np.argmin, np.argmax]


def _nans(dtype):
    """Quiet, negative, signalling and negative-payload NaNs of `dtype`."""
    if dtype == np.float64:
        bits = [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF4000000000000, 0xFFF0000000000001]
        return np.array(bits, np.uint64).view(np.float64)
    return np.array([0x7FC00000, 0xFFC00000, 0x7FA00000, 0xFF800001], np.uint32).view(np.float32)


def _assert_same(got, want):
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want, strict=True)


def _runs(traced):
    return sum(s["row_arg_runs"] for s in traced.stats()["signatures"].values())


@pytest.fixture
def two_threads():
    old = numtrace_cpu.get_num_threads()
    numtrace_cpu.set_num_threads(2)
    yield
    numtrace_cpu.set_num_threads(old)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", OPS)
def test_row_loop_nan_payloads_at_every_lane(op, dtype):
    """A row's first NaN wins whatever its sign and payload (signalling NaNs raise no warning), before
    or after the extreme, in rows of every length around the vector widths; traced at one row count,
    called at others."""
    rng = np.random.default_rng(11)
    for k in (1, 2, 7, 8, 9, 15, 16, 17, 64, 1000):
        rows = []
        for pos in sorted({0, 1, k // 2, k - 2, k - 1} & set(range(k))):
            for nan in _nans(dtype):
                for fill in (None, -np.inf, np.inf, -0.0):
                    r = rng.standard_normal(k).astype(dtype) if fill is None else np.full(k, fill, dtype)
                    r[pos] = nan
                    rows.append(r)
                    rows.append(np.where(np.arange(k) >= pos, nan, r).astype(dtype))
        x = np.array(rows)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            traced = nt.trace(lambda a: op(a, axis=-1), (x[:3],))
            for batch in (x, x[:1], x[5:]):
                _assert_same(traced(batch), op(batch, axis=-1))
        assert _runs(traced) >= 3


@pytest.mark.parametrize("dtype", FLOATS)
def test_row_loop_team_split_boundaries(dtype, two_threads):
    """Rows split over two threads at and around the parallel threshold (1 << 18 elements) and chunk
    boundaries: every row's answer is NumPy's, ties of -0/+0 and ±inf included."""
    rng = np.random.default_rng(12)
    values = np.array([-0.0, 0.0, 1.0, -np.inf, np.inf, np.nan, 0.5], dtype)
    for shape in ((1 << 18, 1), ((1 << 18) + 1, 1), (32769, 8), (3, 87382), (2, 1 << 17), (8191, 33)):
        x = values[rng.integers(0, len(values), shape)]
        x[rng.random(shape) < 0.5] = 0.0   # long runs of tied zeros
        for op in OPS:
            f = lambda a, op=op: (op(a, axis=-1), a.argmin(axis=-1, keepdims=True))
            traced = nt.trace(f, (x,), check_trace=False)
            for got, want in zip(traced(x), f(x)):
                _assert_same(got, want)
            assert _runs(traced) == 2


@pytest.mark.parametrize("dtype", FLOATS)
def test_row_loop_unaligned_and_view_inputs(dtype):
    """Inputs made from a byte buffer at an odd offset (unaligned), reversed rows and transposes give
    NumPy's indices (the row loop declines what it does not take)."""
    rng = np.random.default_rng(13)
    size = np.dtype(dtype).itemsize
    buf = rng.standard_normal(200).astype(dtype).tobytes()
    unaligned = np.frombuffer(buf, dtype, count=80, offset=size // 2).reshape(8, 10)
    aligned = np.frombuffer(buf, dtype, count=80, offset=size).reshape(8, 10)
    assert not unaligned.flags.aligned
    x = rng.standard_normal((8, 10)).astype(dtype)
    x[2, 7] = np.nan
    for op in OPS:
        traced = nt.trace(lambda a, op=op: op(a, axis=1), (x,))
        for a in (unaligned, aligned, x[:, ::-1], np.asfortranarray(x), x.T.copy().T, x[1:]):
            _assert_same(traced(a), op(a, axis=1))


def test_row_loop_from_two_python_threads(two_threads):
    """Two Python threads calling one trace at once (the team busy for one of them) each get their
    own answers."""
    rng = np.random.default_rng(14)
    xs = [rng.standard_normal((40000, 8)) for _ in range(2)]
    xs[0][rng.random(xs[0].shape) < 0.01] = np.nan

    def f(a):
        return np.argmax(a, axis=-1), np.argmin(a * 2.0, axis=1)

    traced = nt.trace(f, (xs[0],))
    wants = [f(x) for x in xs]
    bad = []

    def work(i):
        for _ in range(10):
            if not all(np.array_equal(g, w) for g, w in zip(traced(xs[i]), wants[i])):
                bad.append(i)

    run_threads(work, [i % 2 for i in range(4)])
    assert bad == []


def kmeans_assign(x, centers):
    d2 = ((x[:, None, :] - centers[None, :, :]) ** 2).sum(axis=-1)
    return np.argmin(d2, axis=1), d2.min(axis=1).sum()


@pytest.mark.parametrize("dtype", FLOATS)
def test_kmeans_assign_at_odd_sizes(dtype):
    """benchmarks/realistic.py's kmeans_assign at sizes other than the traced one, with duplicate
    centers (tied distances: the first center wins), points on centers and a NaN point."""
    rng = np.random.default_rng(15)
    centers = rng.standard_normal((8, 4)).astype(dtype)
    centers[5] = centers[2]
    traced = nt.trace(kmeans_assign, (rng.standard_normal((16, 4)).astype(dtype), centers))
    for n in (1, 3, 17, 4097):
        for c in (centers, centers[:3], np.repeat(centers[:1], 8, 0)):
            x = rng.standard_normal((n, 4)).astype(dtype)
            x[: n // 2] = c[rng.integers(0, len(c), n // 2)]
            if n > 3:
                x[3, 1] = np.nan
            (got, total), (want, want_total) = traced(x, c), kmeans_assign(x, c)
            _assert_same(got, want)
            assert type(total) is type(want_total)
            np.testing.assert_allclose(total, want_total, rtol=1e-5)


# -- out= that NumPy refuses, or takes with a cast -------------------------------------------------

def _outcome(f, *args):
    """f(*args) as ("ok", result, the mutated args) or ("raised", the exception type)."""
    args = tuple(a.copy() for a in args)
    try:
        return "ok", f(*args), args
    except (TypeError, ValueError) as e:
        return "raised", type(e)


def _traced_outcome(f, *args):
    """_outcome of tracing f (on copies of args) and calling the trace."""
    return _outcome(lambda *a: nt.trace(f, tuple(v.copy() for v in a), check_trace=False)(*a), *args)


@pytest.mark.parametrize("f, out", [
    (lambda x, o: np.argmin(x, axis=1, out=o), np.zeros((1, 6), np.intp)),
    (lambda x, o: np.argmin(x, axis=1, out=o), np.zeros((2, 6), np.intp)),
    (lambda x, o: x.argmin(axis=1, out=o), np.zeros((1, 6), np.intp)),
    (lambda x, o: np.argmax(x, out=o), np.zeros(1, np.intp)),
    (lambda x, o: np.argmax(x, axis=1, keepdims=True, out=o), np.zeros(6, np.intp)),
    (lambda x, o: np.max(x, axis=1, out=o), np.zeros((1, 6))),
    (lambda x, o: np.sum(x, axis=1, out=o), np.zeros((2, 6))),
])
def test_out_of_a_shape_numpy_refuses_raises(f, out):
    """NumPy refuses an out= of another shape than the result (argmin's, a reduction's); the trace
    raised nothing and broadcast the result into it."""
    x = np.random.default_rng(16).standard_normal((6, 9))
    assert _outcome(f, x, out) == ("raised", ValueError)
    assert _traced_outcome(f, x, out) == ("raised", ValueError)


@pytest.mark.parametrize("out_dtype", [np.int8, np.uint8, np.bool_, np.int16, np.int32, np.uint32, np.int64,
                                       np.uint64, np.float16, np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("method", [False, True])
def test_argmin_out_dtype_follows_numpy(out_dtype, method):
    """NumPy's argmin/argmax take an out= whose dtype casts safely to intp and write the indices back
    with an unsafe cast (int8 wraps): a float out raised nothing in the trace and held the indices as
    floats; a uint8 or bool out was refused."""
    x = np.random.default_rng(17).standard_normal((4, 300))
    x[:, 200:] -= 10   # indices past int8's range

    def f(a, o):
        r = a.argmax(axis=1, out=o) if method else np.argmin(a, axis=1, out=o)
        return r, o

    out = np.zeros(4, out_dtype)
    want = _outcome(f, x, out)
    got = _traced_outcome(f, x, out)
    assert got[0] == want[0]
    if want[0] == "raised":
        assert got[1] is want[1] is TypeError
        return
    for g, w in zip(got[1], want[1]):
        _assert_same(g, w)
    np.testing.assert_array_equal(got[2][1], want[2][1], strict=True)


@pytest.mark.parametrize("f, out", [
    (lambda x, o: np.add(x, 1.0, out=o, where=x > 0), np.zeros((6, 9))),
    (lambda x, o: np.maximum.reduce(x, axis=0, out=o), np.zeros(9)),
    (lambda x, o: np.argmax(x, out=o), np.zeros((), np.int16)),
    (lambda x, o: np.argmin(x, axis=-1, keepdims=True, out=o), np.zeros((6, 1), np.uint8)),
])
def test_out_numpy_takes_holds_numpy_values(f, out):
    """An out= of another dtype than the result that NumPy takes (checked against NumPy, where= among
    the call's keywords) holds NumPy's values."""
    x = np.random.default_rng(18).standard_normal((6, 9)).astype(np.float32)
    status, want, (_, want_out) = _outcome(f, x, out)
    got_status, got, (_, got_out) = _traced_outcome(f, x, out)
    assert status == got_status == "ok"
    _assert_same(got, want)
    np.testing.assert_array_equal(got_out, want_out, strict=True)
