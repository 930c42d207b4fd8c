"""max/min over short rows (blocks.pxi's _extreme_rows over blocks of rows, the generated kernels' folds
of computed rows, nt_simd.h's block extremes): each row's value NumPy's bit for bit, at lengths around
each build's vector widths, with a NaN, an infinity or a lone signed zero at every position of a row,
integer and bool rows at their limits, strided, reversed and Fortran-ordered operands; and no
floating-point flag from a NaN (NumPy's loops raise none)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from numtrace_ir import Graph, registry, testing
from test_codegen import _cache, _compiled  # noqa: F401  (the kernel cache fixture, autouse)

LENGTHS = [1, 2, 3, 4, 5, 7, 8, 9, 10, 15, 16, 17, 31, 32, 33, 64, 65]
# Kinds of one special element per row, cycled over the rows (each at every position of its row).
KINDS = ["nan", "-nan", "inf", "-inf", "zero", "-zero", "none"]


def _float_rows(dtype, n: int, mx: bool, rng) -> np.ndarray:
    """Rows of n elements, row i with a special of kind KINDS[(i // n) % 7] at position i % n. A zero
    row's other elements are all below (max) or above (min) it, so its zero's sign is the answer."""
    rows = n * len(KINDS)
    x = rng.standard_normal((rows, n)) * 4
    for i in range(rows):
        kind, p = KINDS[(i // n) % len(KINDS)], i % n
        if kind in ("zero", "-zero"):
            x[i] = -np.abs(x[i]) - 1 if mx else np.abs(x[i]) + 1
        x[i, p] = {"nan": np.nan, "-nan": -np.nan, "inf": np.inf, "-inf": -np.inf, "zero": 0.0,
                   "-zero": -0.0}.get(kind, x[i, p])
    return x.astype(dtype)


def _int_rows(dtype, n: int, mx: bool, rng) -> np.ndarray:
    """Rows of n integers, the first n with the type's limit on the answer's side at position i % n,
    the next n with the other limit there."""
    info = np.iinfo(dtype)
    x = rng.integers(-1000, 1000, size=(3 * n, n)).astype(dtype)
    for i in range(2 * n):
        x[i, i % n] = info.max if mx == (i < n) else info.min
    return x


def _layouts(x: np.ndarray) -> dict[str, np.ndarray]:
    wide = np.repeat(x, 2, axis=1)
    wide[:, 1::2] = x[:, ::-1]
    return {"contiguous": x, "strided": wide[:, ::2], "reversed": x[::-1, ::-1].copy()[::-1, ::-1],
            "fortran": np.asfortranarray(x)}


def _same(want, got, nan_bits: bool = True) -> np.ndarray:
    """Bit for bit, a NaN's sign and payload included where `nan_bits`. NumPy's NaN depends on its
    loop: a contiguous row's is fixed (blocks.pxi's _store_nan_result), a strided one's is its first NaN,
    which the cpu backend does not follow (it gives the contiguous row's)."""
    want, got = np.asarray(want), np.asarray(got)
    assert (want.dtype, want.shape) == (got.dtype, got.shape)
    if want.dtype.kind != "f":
        return want == got
    bits = f"u{want.dtype.itemsize}"
    if not nan_bits:
        return np.where(np.isnan(want), np.isnan(got), want.view(bits) == got.view(bits))
    return want.view(bits) == got.view(bits)


def _graph(name: str, x: np.ndarray, negate: bool) -> Graph:
    """``name(x, axis=-1, keepdims=True)``, of ``-x`` where `negate` (a computed operand: the pass has an
    instruction, so a generated kernel folds it in sync mode)."""
    g = Graph()
    v = g.add_input("x", testing.type_of(x))
    if negate:
        v = g.create_node("np.negative", [v]).output
    g.set_outputs([g.create_node(name, [v], attrs={"axis": -1, "keepdims": True}).output])
    return g


def _check(name: str, x: np.ndarray, what: str, mode: str = "off", nan_bits: bool = True) -> None:
    """name over x's rows, read directly and computed as the negation of -x (NumPy's rows either way)."""
    ref = registry.get(name).reference
    for negate in (False, True)[:1 + (x.dtype != bool)]:
        arg = -x if negate else x
        exe = _compiled(_graph(name, arg, negate), [testing.type_of(arg)], mode)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with np.errstate(all="raise"):
                want = ref(-arg if negate else arg, axis=-1, keepdims=True)
                (got,) = exe(arg)
        same = _same(want, got, nan_bits)
        assert same.all(), f"{name} {what} negate={negate}: rows {np.flatnonzero(~same.ravel())[:6]}"


@pytest.mark.parametrize("mode", ["off", "sync"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float_rows_are_numpys(dtype, mode):
    rng = np.random.default_rng(0)
    for n in LENGTHS if mode == "off" else [3, 10, 17]:   # each length a C compile in sync mode
        for name, mx in (("np.max", True), ("np.min", False)):
            x = _float_rows(dtype, n, mx, rng)
            for layout, y in _layouts(x).items():
                _check(name, y, f"{np.dtype(dtype)} n={n} {layout}", mode, layout == "contiguous")


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_integer_and_bool_rows_are_numpys(dtype):
    rng = np.random.default_rng(1)
    for n in LENGTHS:
        for name, mx in (("np.max", True), ("np.min", False)):
            if dtype is np.bool_:
                x = rng.integers(0, 2, size=(2 * n, n)).astype(bool)
            else:
                x = _int_rows(dtype, n, mx, rng)
            for layout, y in _layouts(x).items():
                _check(name, y, f"{np.dtype(dtype)} n={n} {layout}")


def test_short_rows_take_the_row_block_fold():
    """A max of rows of ten float64 elements folds whole blocks of rows in one C loop (stats'
    extreme_rows_runs), and gives NumPy's bits."""
    x = _float_rows(np.float64, 10, True, np.random.default_rng(2))
    exe = _compiled(_graph("np.max", x, False), [testing.type_of(x)])
    (got,) = exe(x)
    assert exe.stats()["extreme_rows_runs"] == 1
    assert _same(np.max(x, axis=-1, keepdims=True), got).all()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nan_rows_raise_no_flag(dtype):
    """A call that writes an argument is not rerun through NumPy, so it reports the flags its kernels
    raised: none for max/min over rows holding NaNs (np.errstate(all="raise") would raise them)."""
    for n in (1, 3, 10, 33):
        x = _float_rows(dtype, n, True, np.random.default_rng(3))
        t = testing.type_of(x)
        for name in ("np.max", "np.min"):
            g = Graph()
            v, z = g.add_input("x", t), g.add_input("z", t)
            g.set_outputs([g.create_node(name, [v], attrs={"axis": -1, "keepdims": True}).output,
                           g.create_node("np.negative", [z]).output])
            exe = _compiled(g, [t, t], updates={1: 1})
            with np.errstate(all="raise"):
                got, _ = exe(x, np.ones_like(x))
            assert _same(registry.get(name).reference(x, axis=-1, keepdims=True), got).all()
