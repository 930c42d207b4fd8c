"""Traced max/min reductions over rows, columns and whole arrays holding signaling and signed NaNs
with payloads, bit for bit against NumPy (float32 and float64, interpreter and generated kernels),
and rows of a strided view, whose NaN NumPy takes from its scalar loop."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_codegen import _cache  # noqa: F401  (the kernel cache fixture, autouse)


def _nan(dtype, sign: int, payload: int, quiet: bool):
    if np.dtype(dtype).itemsize == 4:
        bits = (0x7FC00000 if quiet else 0x7F800000) | payload | (sign << 31)
        return np.array([bits], np.uint32).view(dtype)[0]
    bits = (0x7FF8000000000000 if quiet else 0x7FF0000000000000) | payload | (sign << 63)
    return np.array([bits], np.uint64).view(dtype)[0]


@pytest.fixture(params=["off", "sync"])
def mode(request):
    from numtrace_cpu import compiler
    old = compiler.set_mode(request.param)
    yield request.param
    compiler.set_mode(old)


def _rows(dtype, n: int, quiet: bool, seed: int) -> np.ndarray:
    """(6, n) rows, each but one with one to three NaNs of random signs and payloads."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((6, n)).astype(dtype)
    for r in range(5):
        for j in rng.choice(n, min(n, r % 3 + 1), replace=False):
            x[r, j] = _nan(dtype, int(rng.integers(2)), int(rng.integers(1, 1 << 20)), quiet)
    return x


def _check(fn, dtype, lengths, quiet):
    nt = pytest.importorskip("numtrace")   # the frontend traces the program (tests_cpu runs without it)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = nt.trace(fn, (_rows(dtype, lengths[0], quiet, 0),), backend="cpu", check_trace=False)
    bits = f"u{np.dtype(dtype).itemsize}"
    for seed, n in enumerate(lengths):
        x = _rows(dtype, n, quiet, seed)
        want, got = np.asarray(fn(x)), np.asarray(traced(x))
        assert want.dtype == got.dtype and want.shape == got.shape
        np.testing.assert_array_equal(got.view(bits), want.view(bits), err_msg=f"n={n}")


PROGRAMS = {
    "max_rows": lambda x: np.max(x, axis=1),
    "min_rows_keepdims": lambda x: np.min(x, axis=-1, keepdims=True),
    "max_columns": lambda x: np.max(x, axis=0),
    "minimum_reduce_columns": lambda x: np.minimum.reduce(x),
    "method_max_all": lambda x: x.max(),
    "max_rows_of_negated": lambda x: np.max(-x, axis=1),
}
LENGTHS = [2, 7, 8, 9, 16, 17, 33, 10000]


@pytest.mark.parametrize("quiet", [False, True], ids=["signaling", "quiet"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_extreme_nan_bits_are_numpys(name, dtype, quiet, mode):
    _check(PROGRAMS[name], dtype, LENGTHS, quiet)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.xfail(strict=True, reason="np.max over the rows of a strided view (x[:, ::2]): NumPy's "
                   "strided loop returns the row's first NaN itself; the cpu backend gives the "
                   "contiguous loop's NaN (the default +NaN where the first NaN lies in the vector part)")
def test_strided_row_nan_bits_are_numpys(dtype, mode):
    _check(lambda x: np.max(x[:, ::2], axis=1), dtype, [33, 64], True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.xfail(strict=True, reason="np.max(np.asfortranarray(x), axis=2) of a C-ordered x: NumPy folds "
                   "the reduced axis of the Fortran-ordered copy (the outer one in memory) element by "
                   "element and keeps the row's first NaN; the trace reduces x's contiguous rows and gives "
                   "the vector loop's default +NaN")
def test_max_of_a_fortran_copy_keeps_numpys_nan(dtype, mode):
    nt = pytest.importorskip("numtrace")

    def fn(x):
        return np.max(np.asfortranarray(x), axis=2)
    x = np.ones((3, 4, 17), dtype)
    x[1, 2, 3] = _nan(dtype, 1, 5, True)
    traced = nt.trace(fn, (x,), backend="cpu", check_trace=False)
    bits = f"u{np.dtype(dtype).itemsize}"
    np.testing.assert_array_equal(traced(x).view(bits), fn(x).view(bits))


@pytest.mark.xfail(strict=True, reason="np.max(x, axis=(0, 2)) of a float32 (3, 4, 9) x whose only NaN "
                   "is x[2, 0, 8] (the output's last run): NumPy keeps that NaN (0xffc00005); the cpu "
                   "backend gives the default +NaN to every row of several runs (blocks.pxi's _store)")
def test_nan_in_the_last_run_of_a_two_axis_max(mode):
    nt = pytest.importorskip("numtrace")
    x = np.ones((3, 4, 9), np.float32)
    x[2, 0, 8] = _nan(np.float32, 1, 5, True)
    traced = nt.trace(lambda x: np.max(x, axis=(0, 2)), (x,), backend="cpu", check_trace=False)
    np.testing.assert_array_equal(traced(x).view("u4"), np.max(x, axis=(0, 2)).view("u4"))


_CAST_VALUES = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 2.0**31, -2.0**31 - 1, 2.0**63, 2.0**64, 300.0,
                         -1.0, 255.5, -0.5, 2.0**32, 1e10, 3.0])


@pytest.mark.parametrize("dst", [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64, np.bool_])
@pytest.mark.parametrize("state", ["warn", "ignore", "raise"])
def test_out_of_range_float_casts_are_numpys(dst, state, mode):
    """(x * 1.0).astype(dst) of NaN, infinities and values dst does not hold: NumPy's x86 values, and
    its 'invalid' warning (or error, or nothing) under np.errstate, at the traced size and others."""
    nt = pytest.importorskip("numtrace")

    def fn(x):
        return (x * 1.0).astype(dst) if dst is not np.bool_ else (x * 1.0).astype(dst) + 0
    traced = nt.trace(fn, (np.ones(4),), backend="cpu", check_trace=False)
    for n in (16, 5, 1000):
        x = np.resize(_CAST_VALUES, n)
        outcomes = []
        for f in (fn, traced):
            with warnings.catch_warnings(record=True) as caught, np.errstate(invalid=state):
                warnings.simplefilter("always")
                try:
                    outcomes.append((f(x).tobytes(), None))
                except FloatingPointError as e:   # the trace's names the node first
                    outcomes.append((None, str(e).rsplit(": ", 1)[-1]))
            outcomes[-1] += (sorted(str(w.message) for w in caught),)
        assert outcomes[0] == outcomes[1], f"n={n}"
