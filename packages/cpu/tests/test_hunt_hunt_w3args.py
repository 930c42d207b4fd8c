"""Hunt in run-time right operands read in place by the packed kernels, through the frontend: the
programs a user writes (B an argument sliced from a wider array, a stack with a broadcast or reversed
batch, a slice of a trace intermediate, one trace called with B's layout changing between calls and
from several Python threads, a weight changed in place between calls) with NaN, inf and -0.0 in B and
the epilogues the packed kernels fuse (bias, ReLU, residual) or leave to the passes after them (a
tanh GELU). Each is NumPy's value within the product tolerance, with NumPy's NaN/inf placement, and
bit for bit the same B in a layout the kernels pack per call (columns apart, Fortran order), at
the 128-row limit of reading in place and past it."""

import warnings

import numpy as np
import pytest
from test_packed import _assert_close
from threaded import run_threads

pytestmark = pytest.mark.usefixtures("numpy_quiet")   # NaN and inf on purpose


def _trace(fn, example):
    nt = pytest.importorskip("numtrace")   # the frontend traces the program (tests_cpu runs without it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nt.trace(fn, example, backend="cpu", check_trace=False)


def _direct_runs(traced):
    return sum(s.get("packed_direct_runs", 0) for s in traced.stats()["signatures"].values())


def _specials(w, rng):
    """w with NaN, +-inf and -0.0 at random places (a 0 of A times an inf of B is NaN, as in BLAS)."""
    for value, count in ((np.nan, 5), (np.inf, 5), (-np.inf, 5), (-0.0, 20)):
        w.flat[rng.integers(0, w.size, count)] = value
    return w


def _fortran_stack(b):
    """b's values with every product's (K, N) in Fortran order: a layout the kernels pack per call."""
    return np.moveaxis(np.asfortranarray(np.moveaxis(b, (-2, -1), (0, 1))), (0, 1), (-2, -1))


def _gelu(h):
    return 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))


PROGRAMS = {
    "plain": lambda a, w, bias, res: a @ w,
    "bias_relu": lambda a, w, bias, res: np.maximum(a @ w + bias, 0.0),
    "residual": lambda a, w, bias, res: res + np.dot(a, w),
    "gelu": lambda a, w, bias, res: _gelu(np.matmul(a, w) + bias),
    "einsum": lambda a, w, bias, res: np.einsum("mk,kn->mn", a, w),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("mkn", [(127, 257, 300), (128, 255, 33), (129, 256, 100), (9, 1, 257), (40, 2, 17)],
                         ids=str)
def test_a_sliced_argument_weight_gives_numpy_and_the_packed_bits(dtype, program, mkn, threads):
    """B = W[:, 3:3 + N] of a wider W (rows farther apart than N): NumPy's value and specials, the
    bits of the same B in Fortran order; read in place up to 128 rows of A only."""
    m, k, n = mkn
    rng = np.random.default_rng(m * k + n)
    fn = PROGRAMS[program]
    x = rng.standard_normal((m, k)).astype(dtype)
    x[1, :] = 0.0
    wide = _specials(rng.standard_normal((k, n + 300)).astype(dtype), rng)
    w = wide[:, 3:3 + n]
    bias = rng.standard_normal(n).astype(dtype)
    res = rng.standard_normal((m, n)).astype(dtype)
    traced = _trace(fn, (x, np.ascontiguousarray(w), bias, res))
    got = traced(x, w, bias, res)
    direct = _direct_runs(traced)
    packed = traced(x, np.repeat(w, 2, axis=1)[:, ::2], bias, res)   # columns apart: packed per call
    assert _direct_runs(traced) == direct
    if program != "einsum":   # (einsum is NumPy's; fewer rows may take the GEMV kernels)
        assert direct == (0 if m > 128 else 1 if m >= 127 else direct)
    if program != "einsum":   # (NumPy's einsum sums in an order of the layout)
        assert got.tobytes() == packed.tobytes()
    if program == "gelu":   # tanh: hold the product before it, then NumPy's placement of specials
        np.testing.assert_array_equal(np.isnan(got), np.isnan(fn(x, w, bias, res)))
        return
    _assert_close(got, fn(x, w, bias, res), x, w, dtype, res if program == "residual" else None)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stacked_weights_in_every_batch_layout(dtype, threads):
    """Stacks of B read in place: a broadcast batch (stride 0), a 2-D A over a stack, a reversed
    batch and sliced rows: NumPy's values, the bits of the stack in Fortran order."""
    rng = np.random.default_rng(3)
    k, n = 300, 100
    a3 = rng.standard_normal((4, 40, k)).astype(dtype)
    wide = _specials(rng.standard_normal((4, k, n + 7)).astype(dtype), rng)
    one = _specials(rng.standard_normal((k, n + 50)).astype(dtype), rng)[:, :n]
    cases = [(a3, np.broadcast_to(one, (4, k, n))), (a3, wide[:, :, 3:3 + n]), (a3, wide[::-1, :, :n]),
             (a3[0], wide[:, :, 2:2 + n])]
    for a, b in cases:
        traced = _trace(lambda p, q: p @ q, (a, np.ascontiguousarray(b)))
        got = traced(a, b)
        assert _direct_runs(traced) == 1, b.strides
        assert got.tobytes() == traced(a, _fortran_stack(b)).tobytes(), b.strides
        want = a @ b
        for i in range(b.shape[0]):
            _assert_close(got[i], want[i], a[i] if a.ndim == 3 else a, b[i], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_slice_of_an_intermediate_as_b(dtype, threads):
    """B a slice of values the trace computes (rows of the intermediate's width apart)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 300)).astype(dtype)
    w = _specials(rng.standard_normal((300, 150)).astype(dtype), rng)

    def cols(a, b):
        h = np.concatenate([b, b * 2.0], axis=1)
        return a @ h[:, 5:105] + 1.0

    def rows(a, b):
        h = np.tanh(a)
        return h[:, :40] @ h[:40]

    for fn, x_of, w_of in ((cols, lambda: x, lambda: np.concatenate([w, w * 2.0], axis=1)[:, 5:105]),
                           (rows, lambda: np.tanh(x)[:, :40], lambda: np.tanh(x)[:40])):
        traced = _trace(fn, (x, w))
        got = traced(x, w)
        assert _direct_runs(traced) == 1, fn.__name__
        want = fn(x, w)
        _assert_close(got - (1.0 if fn is cols else 0.0), want - (1.0 if fn is cols else 0.0), x_of(), w_of(),
                      dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_trace_over_changing_layouts_threads_and_updates(dtype, threads):
    """One trace called with B contiguous, sliced, in Fortran order and reversed (in turn, then from
    four Python threads at once) gives one set of bits; a B changed in place between calls is read as
    it is now."""
    rng = np.random.default_rng(5)
    k, n = 200, 100
    x = rng.standard_normal((64, k)).astype(dtype)
    wide = _specials(rng.standard_normal((k, n + 30)).astype(dtype), rng)
    w = wide[:, :n]
    traced = _trace(lambda a, b: np.maximum(a @ b, 0.0), (x, np.ascontiguousarray(w)))
    layouts = [np.ascontiguousarray(w), w, np.asfortranarray(w), np.ascontiguousarray(w[::-1])[::-1]]
    want = traced(x, layouts[2])
    _assert_close(want, np.maximum(x @ w, 0.0), x, w, dtype)
    for b in layouts * 2:
        assert traced(x, b).tobytes() == want.tobytes(), b.strides
    assert _direct_runs(traced) == 4
    bad = []

    def work(i):
        for j in range(20):
            if traced(x, layouts[(i + j) % 4]).tobytes() != want.tobytes():
                bad.append((i, j))

    run_threads(work, range(4))
    assert not bad
    wide[:5] = np.inf
    wide[7, ::3] = np.nan
    _assert_close(traced(x, w), np.maximum(x @ w, 0.0), x, w, dtype)
