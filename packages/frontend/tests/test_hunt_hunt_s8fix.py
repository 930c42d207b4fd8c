"""Differential checks of reductions and argmin/argmax writing into out=, against eager NumPy: the loop
NumPy picks from the out array's dtype (np.sum(x32, out=x64) sums in float64), NumPy's errors and
casts, the returned object, and calls at other sizes."""

from __future__ import annotations

import numpy as np
import numtrace as nt
import pytest


def _check(fn, make, sizes, backend, exact=True):
    """Trace `fn` on make(sizes[0]) and compare each call's result and written arguments with NumPy's."""
    traced = nt.trace(fn, make(sizes[0]), backend=backend)
    for n in sizes:
        args = make(n)
        mine = tuple(a.copy() for a in args)
        assert fn(*args) is args[-1]
        assert traced(*mine) is mine[-1]   # as NumPy, out itself
        for e, g in zip(args, mine):
            assert e.dtype == g.dtype and e.shape == g.shape
            if exact:
                np.testing.assert_array_equal(g, e, strict=True)
            else:
                np.testing.assert_allclose(g, e, rtol=1e-6, strict=True)


def _rows32(rng, n, m=4):
    return rng.random((m, n), dtype=np.float32)


# Reductions NumPy computes in the dtype of out= promoted with the input's.
WIDENING = {
    "sum": lambda x, o: np.sum(x, axis=1, out=o),
    "method_sum": lambda x, o: x.sum(axis=1, out=o),
    "add_reduce": lambda x, o: np.add.reduce(x, axis=1, out=o),
    "mean": lambda x, o: np.mean(x, axis=1, out=o),
    "mean_keepdims": lambda x, o: np.mean(x, axis=1, keepdims=True, out=o),
    "prod": lambda x, o: np.prod(1 + x / 512, axis=1, out=o),
    "multiply_reduce": lambda x, o: np.multiply.reduce(1 + x / 512, axis=1, out=o),
    "sum_initial": lambda x, o: np.sum(x, axis=1, initial=0.1, out=o),
}


@pytest.mark.parametrize("name", sorted(WIDENING))
def test_float32_reduction_into_float64_out_sums_in_float64(name, backend, rng):
    fn = WIDENING[name]
    keep = name.endswith("keepdims")

    def make(n):
        return _rows32(rng, n), np.zeros((4, 1) if keep else 4)
    _check(fn, make, (300, 300, 1, 4097), backend)


@pytest.mark.parametrize("name", ["cumsum", "accumulate"])
def test_float32_scan_into_float64_out_accumulates_in_float64(name, backend, rng):
    def fn(x, o):
        return np.cumsum(x, axis=1, out=o) if name == "cumsum" else np.add.accumulate(x, axis=1, out=o)
    _check(fn, lambda n: (_rows32(rng, n), np.zeros((4, n))), (200, 1, 1000), backend)


def test_int64_sum_into_float64_out_sums_in_float64(backend, rng):
    def fn(x, o):
        return np.sum(x, axis=1, out=o)
    _check(fn, lambda n: (rng.integers(2**52, 2**53, (3, n)), np.zeros(3)), (10, 3, 17), backend)


def test_float16_sum_into_float32_out(backend, rng):
    def fn(x, o):
        return np.sum(x, axis=0, out=o)
    _check(fn, lambda n: (rng.random((n, 3)).astype(np.float16), np.zeros(3, np.float32)), (500, 2), backend)


def test_float64_sum_into_complex_out(backend, rng):
    def fn(x, o):
        return np.sum(x, axis=1, out=o)
    _check(fn, lambda n: (rng.standard_normal((5, n)), np.zeros(5, complex)), (7, 9, 30), backend)


def test_float64_sum_into_float32_out_of_a_strided_view(backend, rng):
    def fn(x, o):
        np.sum(x, axis=1, out=o[::2])
        return o
    _check(fn, lambda n: (rng.standard_normal((n, 6)), np.zeros(2 * n, np.float32)), (5, 9, 1), backend,
           exact=False)


def test_sum_into_a_column_of_its_input(backend, rng):
    def fn(x):
        np.sum(x, axis=1, out=x[:, 0])
        return x
    _check(fn, lambda n: (rng.standard_normal((n, 5)),), (4, 7, 1), backend)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8])
def test_argmax_into_a_narrow_int_out_casts_unsafely(dtype, backend, rng):
    def fn(x, o):
        return np.argmax(x, axis=1, out=o)
    _check(fn, lambda n: (rng.standard_normal((3, n)), np.zeros(3, dtype)), (300, 5, 300), backend)


@pytest.mark.parametrize("name", ["std", "var", "nanstd", "nanvar"])
def test_float32_var_into_float64_out_is_refused(name, rng):
    """NumPy sums the float32 squared deviations in float64 (the out dtype): no dtype= of the op gives
    that, so the trace refuses the call rather than cast a float32 variance."""
    def fn(x, o):
        return getattr(np, name)(x, axis=1, out=o)
    with pytest.raises(TypeError, match="squared float32 deviations in float64"):
        nt.trace(fn, (_rows32(rng, 30), np.zeros(4)), backend="reference")


@pytest.mark.parametrize("name", ["std", "var"])
def test_var_into_an_out_of_its_own_dtype_or_of_an_int_input(name, backend, rng):
    def fn(x, y, o, p):
        getattr(np, name)(x, axis=1, out=o)
        getattr(np, name)(y, axis=1, out=p)
        return o, p

    def make(n):
        return _rows32(rng, n), rng.integers(0, 100, (4, n)), np.zeros(4, np.float32), np.zeros(4, np.float32)
    traced = nt.trace(fn, make(30), backend=backend)
    for n in (30, 7):
        args = make(n)
        mine = tuple(a.copy() for a in args)
        fn(*args)
        traced(*mine)
        np.testing.assert_allclose(mine[2], args[2], rtol=1e-5, strict=True)
        np.testing.assert_allclose(mine[3], args[3], rtol=1e-5, strict=True)


def test_float32_sum_with_a_positional_none_dtype_into_float64_out(backend, rng):
    def fn(x, o):
        return np.sum(x, 1, None, out=o)
    _check(fn, lambda n: (_rows32(rng, n), np.zeros(4)), (300, 5), backend)


POSITIONAL = {
    "sum": lambda x, o: np.sum(x, 1, None, o),
    "method_sum": lambda x, o: x.sum(1, None, o),
    "add_reduce": lambda x, o: np.add.reduce(x, 1, None, o),
    "max": lambda x, o: np.max(x, 1, o),
    "argmin": lambda x, o: np.argmin(x, 1, o),
    "method_argmax": lambda x, o: x.argmax(1, o),
}


@pytest.mark.parametrize("name", sorted(POSITIONAL))
def test_out_passed_by_position(name, backend, rng):
    fn = POSITIONAL[name]
    index = "arg" in name

    def make(n):
        return rng.standard_normal((n, 6)), np.zeros(n, np.int32 if index else np.float64)
    _check(fn, make, (5, 9, 1), backend)


def test_bool_sum_into_bool_out_is_an_any(backend, rng):
    def fn(x, o):
        return np.sum(x > 1, axis=1, out=o)
    _check(fn, lambda n: (rng.standard_normal((n, 6)), np.zeros(n, bool)), (5, 9, 1), backend)


@pytest.mark.parametrize("name", ["nansum", "nanmean"])
def test_float32_nan_reduction_into_float64_out(name, backend, rng):
    def fn(x, o):
        return getattr(np, name)(x, axis=1, out=o)

    def make(n):
        x = _rows32(rng, n)
        x[0, 0] = np.nan
        return x, np.zeros(4)
    _check(fn, make, (300, 5), backend)


@pytest.mark.parametrize("name", ["sum", "max", "mean", "prod"])
def test_float_reduction_into_an_int_out_is_refused_clearly(name, rng):
    """NumPy takes it (unsafe casting, buffer by buffer: np.sum of 20000 x 0.6 into int64 is 11999); the
    trace says so instead of raising a casting error NumPy does not raise."""
    def fn(x, o):
        return getattr(np, name)(x, axis=1, out=o)
    x, o = rng.standard_normal((3, 5)) * 10, np.zeros(3, np.int64)
    fn(x, o.copy())
    with pytest.raises(TypeError, match="buffer's partial result"):
        nt.trace(fn, (x, o), backend="reference")
