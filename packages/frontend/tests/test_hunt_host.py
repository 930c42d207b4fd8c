"""Differential hunt for silent wrong answers through host calls and guards on data: a function is traced
at one input and called at other values and shapes; every call must return, and leave in the caller's
arrays, what eager NumPy does (or raise)."""

import os
import warnings

import numpy as np
import numtrace as nt
import pytest


def _trace(f, *args, backend="reference"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return nt.trace(f, tuple(np.copy(a) for a in args), check_trace=False, backend=backend)


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    if want is None:
        assert got is None
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    # Bit for bit (-0.0 is not 0.0), every NaN alike: NumPy's loops and the kernels differ in its sign.
    nan = np.isnan(want) if want.dtype.kind in "fc" else np.zeros(want.shape, bool)
    np.testing.assert_array_equal(np.isnan(got) if got.dtype.kind in "fc" else nan, nan)
    assert got[~nan].tobytes() == want[~nan].tobytes(), (got, want)


def _agree(traced, f, *args):
    """One call: the result and the caller's arrays afterwards equal eager NumPy's, or the call raises."""
    mine, theirs = [np.copy(a) for a in args], [np.copy(a) for a in args]
    try:
        want = f(*theirs)
    except Exception:  # NumPy refuses these inputs: the trace may refuse them as it likes
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        got = traced(*mine)
    _same(got, want)
    for a, b in zip(mine, theirs):
        _same(a, b)
    return True


# -- regressions ------------------------------------------------------------------------------------


def filled_like_shape(x):
    a = np.zeros(x.shape)
    np.copyto(a, 2.0)  # a scalar broadcast into an array whose shape follows x
    return a


def full_not_intercepted(x):
    return _FULL["full"](x.shape, 2.0)  # NumPy's own np.full: its empty() is intercepted, its copyto not


_FULL = {"full": np.full}


def broadcast_shapes(x):
    return np.ones(np.broadcast_shapes(x.shape, (1,)))  # np.empty(shape, dtype=[]): no traced array


def text_of_data(x):
    return x + float(f"{x[0]}") + len(str(x[1:]))


@pytest.mark.parametrize("f", [filled_like_shape, full_not_intercepted, broadcast_shapes, text_of_data])
def test_shape_or_data_leaving_the_graph_is_guarded(f, backend):
    traced = _trace(f, np.arange(3.0), backend=backend)
    for x in (np.arange(5.0) + 1, np.arange(3.0) + 10, np.arange(3.0), np.ones(1)):
        _agree(traced, f, x)


def test_copyto_of_a_scalar_into_an_argument_follows_its_shape(backend):
    def f(x):
        np.copyto(x, 2.0)

    traced = _trace(f, np.arange(3.0), backend=backend)
    for x in (np.arange(5.0), np.zeros(1)):
        _agree(traced, f, x)


@pytest.mark.parametrize("f", [
    lambda x: x + len(repr(x[0])),
    lambda x: x + len(repr(x[1:])),
    lambda x: x + len(repr(x.sum())) + len(repr(x.reshape(1, -1))),
], ids=["scalar", "array", "reduction-and-2d"])
def test_repr_of_data(f, backend):
    traced = _trace(f, np.arange(3.0), backend=backend)
    for x in (np.arange(3.0) + 10, np.arange(3.0) + 1e6, np.arange(3.0), np.full(4, -0.5)):
        _agree(traced, f, x)


# -- the seeded differential generator ---------------------------------------------------------------
# Each step maps (x, y) to a new x: y is an argument some steps write into. Host calls (functions the
# registry lacks, some with data-dependent result sizes), guards on data (branches, loops, int() as a slice
# bound, tolist, text) and writes through host calls, composed at random.


def _halve(x, y):
    for _ in range(8):  # a guard per iteration: the count follows the data (inf never gets there)
        if not (x.size and np.abs(x).max() > 2):
            break
        x = x / 2
    return x


def _put(x, y):
    np.put(y, [0], x[:1].sum())
    return x + y[0]


def _add_at(x, y):
    np.add.at(y, np.zeros(x.shape[0] % 3, dtype=np.intp), 1.5)
    return x * y.sum()


STEPS = [
    lambda x, y: np.abs(np.fft.rfft(x)) if x.size else x,
    lambda x, y: np.convolve(x, np.array([1.0, -1.0]), mode="same"),
    lambda x, y: np.unique(np.round(x)),
    lambda x, y: x[np.nonzero(x > 0)[0]],
    lambda x, y: np.trim_zeros(np.round(x)),
    lambda x, y: x * 2.0 if x.sum() > 0 else x - 1.0,
    lambda x, y: x * 3.0 if (x < 0).any() else x,
    lambda x, y: x[: int(abs(x[:1].sum())) % 4],
    lambda x, y: x + float(x.max()) if x.size else x,
    lambda x, y: np.array(x.tolist()[::-1]),
    lambda x, y: np.pad(x, (1, 0), mode="edge") if x.size else x,
    lambda x, y: np.sort_complex(x).real,
    lambda x, y: x + np.nanmean(y),
    lambda x, y: x + np.percentile(y, 30.0),
    lambda x, y: x + np.interp(0.5, np.sort(y), y),
    lambda x, y: np.histogram(y, bins=3)[0] + x[:1].sum(),
    lambda x, y: x + np.searchsorted(np.sort(y), 0.5),
    lambda x, y: x * len(f"{y[0]}"),
    lambda x, y: np.concatenate([x, [float(row.sum()) for row in y.reshape(-1, 1)]]),
    _halve,
    _put,
    _add_at,
    lambda x, y: (np.putmask(y, y > 0.5, 0.25), x + y.sum())[1],
    lambda x, y: (np.copyto(y, x.mean()) if x.size else None, x - y)[1] if x.shape == y.shape else x,
]


def _program(rng):
    steps = [STEPS[i] for i in rng.choice(len(STEPS), size=rng.integers(1, 4))]

    def f(x, y):
        for step in steps:
            x = step(x, y)
        return x

    return f


def _value(rng, n):
    x = rng.integers(-3, 4, size=n).astype(np.float64) * rng.choice([0.5, 1.0, 1.5])
    if n and rng.random() < 0.2:
        x[rng.integers(n)] = rng.choice([np.nan, -0.0, np.inf])
    return x


PROGRAMS = int(os.environ.get("NUMTRACE_HUNT_HOST_PROGRAMS", "40"))


@pytest.mark.parametrize("seed", range(PROGRAMS))
def test_random_host_programs_agree_with_numpy(seed, backend):
    rng = np.random.default_rng(seed)
    f = _program(rng)
    n = int(rng.integers(1, 5))
    x, y = _value(rng, n), _value(rng, n)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            f(x.copy(), y.copy())
            traced = _trace(f, x, y, backend=backend)
    except Exception:
        pytest.skip("NumPy or the tracer refuses the example")
    for _ in range(6):
        m = n if rng.random() < 0.6 else int(rng.integers(1, 6))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            _agree(traced, f, _value(rng, m), _value(rng, m))
