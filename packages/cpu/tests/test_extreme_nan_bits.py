"""Which NaN a float max/min reduction returns, bit for bit against NumPy: contiguous rows of many
lengths (NumPy's loop gives the default NaN where the row's first NaN lies in its vector part, else
that NaN itself: blocks.pxi's _store_nan_result), columns (the first NaN), whole arrays and 3-d axes, with
several NaNs of both signs and their payloads, read in place and computed, on 1 and 2 threads, with
and without generated kernels. nanmax/nanmin still skip NaNs."""

from __future__ import annotations

import numpy as np
import numtrace_cpu
import pytest
from numtrace_ir import Graph, registry, testing
from test_codegen import _cache, _compiled  # noqa: F401  (the kernel cache fixture, autouse)

ROW_LENGTHS = [*range(1, 41), 100, 1000]


def _nan(dtype, sign: int, payload: int):
    bits = {4: (0x7FC00000, 31, np.uint32), 8: (0x7FF8000000000000, 63, np.uint64)}[np.dtype(dtype).itemsize]
    return np.array([bits[0] | payload | (sign << bits[1])], dtype=bits[2]).view(dtype)[0]


def _with_nans(x: np.ndarray, flat: np.ndarray, rng) -> np.ndarray:
    """x with NaNs of random signs and distinct payloads at flat positions `flat`."""
    y = x.copy().ravel()
    for k, p in enumerate(flat):
        y[p] = _nan(x.dtype, int(rng.integers(2)), k + 1)
    return y.reshape(x.shape)


def _graph(name: str, x: np.ndarray, axis, negate: bool) -> Graph:
    g = Graph()
    v = g.add_input("x", testing.type_of(x))
    if negate:   # a computed operand: the pass folds a register, and generates a kernel in sync mode
        v = g.create_node("np.negative", [v]).output
    g.set_outputs([g.create_node(name, [v], attrs={"axis": axis}).output])
    return g


def _check(name: str, x: np.ndarray, axis, what: str, modes=("off",), nan_bits: bool = True) -> None:
    """name(x, axis) bit for bit against NumPy, read in place and as the negation of -x; a NaN's sign
    and payload only where `nan_bits`."""
    ref = registry.get(name).reference
    bits = f"u{x.dtype.itemsize}"
    old = numtrace_cpu.get_num_threads()
    try:
        for negate in (False, True):
            want = np.asarray(ref(-x if negate else x, axis=axis))
            for mode in modes:
                exe = _compiled(_graph(name, x, axis, negate), [testing.type_of(x)], mode)
                for threads in (1, 2):
                    numtrace_cpu.set_num_threads(threads)
                    (got,) = exe(x)
                    same = np.asarray(want).view(bits) == np.asarray(got).view(bits)
                    if not nan_bits:
                        same |= np.isnan(want) & np.isnan(got)
                    w, o = np.asarray(want).view(bits)[~same][:4], np.asarray(got).view(bits)[~same][:4]
                    where = f"{name} {what} axis={axis} negate={negate} {mode} {threads} threads"
                    assert same.all(), f"{where}: {w} != {o}"
    finally:
        numtrace_cpu.set_num_threads(old)


def _positions(n: int, rng) -> list[np.ndarray]:
    """NaN position sets in a row of n: each single position (every one for short rows), and a few
    random sets of two to four."""
    ends = {0, 1, n // 2, n - 9, n - 5, n - 2, n - 1}
    single = range(n) if n <= 40 else sorted(ends | set(rng.integers(n, size=6)))
    many = [rng.choice(n, min(n, int(rng.integers(2, 5))), replace=False) for _ in range(4)] if n > 1 else []
    return [np.array([p]) for p in single] + many


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["np.max", "np.min"])
def test_row_nans_are_numpys(name, dtype):
    """axis=-1 of (rows, n): every row with its own NaN positions, so blocks of rows mix NaN rows
    and clean ones; and the same rows one at a time as a whole 1-d reduction."""
    rng = np.random.default_rng(0)
    for n in ROW_LENGTHS:
        sets = _positions(n, rng)
        x = rng.standard_normal((len(sets) + 3, n)).astype(dtype)
        for i, pos in enumerate(sets):
            x[i] = _with_nans(x[i], pos, rng)
        _check(name, x, -1, f"{np.dtype(dtype)} n={n}", ("off", "sync") if n in (3, 17, 1000) else ("off",))
        for i in (0, len(sets) - 1):
            _check(name, x[i].copy(), None, f"{np.dtype(dtype)} 1-d n={n} row {i}")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["np.max", "np.min"])
def test_column_and_whole_nans_are_numpys(name, dtype):
    rng = np.random.default_rng(1)
    for shape in [(2, 5), (7, 3), (40, 16), (100, 10), (1000, 7), (3, 33, 5), (4, 50, 9)]:
        for trial in range(4):
            x = rng.standard_normal(shape).astype(dtype)
            flat = rng.choice(x.size, int(rng.integers(1, 6)), replace=False)
            x = _with_nans(x, flat, rng)
            for axis in [0, None, 1, 2, (0, 1), (1, 2)][:len(shape) + 1 + 2 * (len(shape) == 3)]:
                _check(name, x, axis, f"{np.dtype(dtype)} {shape} trial {trial}")
            if len(shape) == 3:   # rows of several runs: NumPy's NaN there is not followed (see _store)
                _check(name, x, (0, 2), f"{np.dtype(dtype)} {shape} trial {trial}", nan_bits=False)


@pytest.mark.parametrize("n", [10**6 + 3, 70001])
def test_long_row_nan_in_tail_and_body(n):
    """A long 1-d max folded block by block: a NaN in NumPy's scalar tail keeps its bits, one before
    it gives the default NaN whatever comes after."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal(n)
    for pos in ([n - 1], [n - 2, n - 1], [n // 2, n - 1], [5000, 9000], [0]):
        _check("np.max", _with_nans(x, np.array(pos), rng), None, f"n={n} nans at {pos}")


@pytest.mark.parametrize("name", ["np.nanmax", "np.nanmin"])
def test_nanmax_still_skips_nans(name):
    rng = np.random.default_rng(3)
    x = _with_nans(rng.standard_normal((50, 17)), rng.choice(850, 30, replace=False), rng)
    for axis in (0, 1, None):
        _check(name, x, axis, "float64")
