"""Scatters (``ufunc.at``, ``np.put``, ``np.put_along_axis``) are ops that write into the caller's array
as NumPy does: repeated indices accumulate in index order, negative indices wrap, an index out of range
raises when the trace is called, and a value read from the written array is read before the write."""

import numpy as np
import numtrace as nt
import pytest


def _ops(traced) -> list:
    return [n.op for n in traced.graph.nodes]


def _check_writes(f, make, backend, sizes=(6, 1, 9)):
    """Trace ``f`` (which writes into its first argument) and call it at `sizes`: the result and the
    caller's arrays after the call equal eager NumPy's, with no re-trace and no host call."""
    traced = nt.trace(f, make(sizes[0]), backend=backend)
    assert "prim.host_call" not in _ops(traced), traced.graph
    for n in sizes:
        args = make(n)
        mine = tuple(a.copy() for a in args)
        expected = f(*args)
        got = traced(*mine)
        for g, e in zip(got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple)
                        else (expected,)):
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-12)
        for m, a in zip(mine, args):
            np.testing.assert_array_equal(m, a)
    assert traced.retraces == 0


def _vals(n, dtype="f8", seed=0):
    r = np.random.default_rng(seed + n)
    return r.uniform(-3, 3, n).astype(dtype)


def _idx(n, bound, seed=1):
    return np.random.default_rng(seed + n).integers(-bound, bound, n)


@pytest.mark.triton
@pytest.mark.parametrize("ufunc", [np.add, np.subtract, np.multiply, np.maximum, np.minimum])
def test_ufunc_at_writes_into_the_argument(ufunc, backend):
    def f(a, i, v):
        ufunc.at(a, i, v)
        return a.sum()

    _check_writes(f, lambda n: (_vals(5), _idx(n, 5), _vals(n, seed=7)), backend)


@pytest.mark.triton
def test_repeated_float_indices_add_in_index_order(backend):
    """Sums whose result depends on the order (1e16 + 1 rounds away): cpu and the reference add in
    NumPy's order, bit for bit; Triton's atomics add in the order the lanes run, within the tolerance."""
    def f(a, i, v):
        np.add.at(a, i, v)
        return a

    a = np.array([1e16, 0.0])
    i = np.array([0, 0, 0, 1])
    v = np.array([1.0, 1.0, 3.0, 2.0])
    traced = nt.trace(f, (a.copy(), i, v), backend=backend)
    got, expected = a.copy(), a.copy()
    traced(got, i, v)
    f(expected, i, v)
    if backend == "triton":   # atomics add in another order: within the summation tolerance
        np.testing.assert_allclose(got, expected, rtol=1e-15)
    else:
        np.testing.assert_array_equal(got, expected)


def test_int8_add_at_wraps(backend):
    def f(a, i):
        np.add.at(a, i, np.int8(100))
        return a

    a = np.array([0, 1, 2], np.int8)
    i = np.array([0, 0, 0, 2, -1])
    traced = nt.trace(f, (a.copy(), i), backend=backend)
    got = a.copy()
    traced(got, i)
    np.testing.assert_array_equal(got, f(a.copy(), i))
    assert got.dtype == np.int8


@pytest.mark.triton
def test_a_value_read_from_the_written_array_is_its_old_contents(backend):
    def f(x, i):
        np.add.at(x, i, x[::-1])
        return x

    _check_writes(f, lambda n: (_vals(n), _idx(n, n)), backend)


def test_writes_through_a_view_reach_the_base(backend):
    def f(x, i):
        np.add.at(x[1:], i, 1.0)
        np.multiply.at(x[::2], i % 2, 3.0)
        return x * 1.0

    _check_writes(f, lambda n: (_vals(n + 4), _idx(n, 3)), backend)


def test_tuple_and_mixed_keys_and_masks(backend):
    def f(a, i, j):
        np.add.at(a, (i, j), 1.0)
        np.subtract.at(a, (slice(None), j), 0.5)
        np.maximum.at(a, a > 1.0, 2.0)
        np.negative.at(a, (i,))
        return a

    _check_writes(f, lambda n: (_vals(12).reshape(4, 3), _idx(n, 4) % 4, _idx(n, 3, seed=5)), backend)


def test_empty_index_changes_nothing(backend):
    def f(a, i):
        np.add.at(a, i, 1.0)
        return a

    _check_writes(f, lambda n: (_vals(4), np.zeros(n % 2 * 3, np.intp)), backend, sizes=(2, 1, 4))


@pytest.mark.parametrize("write", [lambda a, i: np.add.at(a, i, 1.0),
                                   lambda a, i: np.put(a, i, 1.0),
                                   lambda a, i: np.put_along_axis(a, i, 1.0, axis=0)])
def test_an_index_out_of_range_raises_when_called(write, backend):
    def f(a, i):
        write(a, i)
        return a

    traced = nt.trace(f, (np.zeros(4), np.array([0, 3])), backend=backend)
    with pytest.raises(IndexError, match="out of bounds"):
        traced(np.zeros(4), np.array([1, 4]))
    with pytest.raises(IndexError):
        f(np.zeros(4), np.array([1, 4]))


@pytest.mark.parametrize("mode", ["raise", "wrap", "clip"])
def test_put_modes_and_repeated_values(mode, backend):
    def f(a, i):
        np.put(a, i, [7.0, 8.0, 9.0], mode=mode)
        return a

    bound = 1 if mode == "raise" else 3
    _check_writes(f, lambda n: (_vals(n + 1), _idx(n, (n + 1) * bound)), backend)


def test_put_method_writes_into_the_argument(backend):
    def f(a, i):
        a.put(i, a[:2] * 2.0)
        return a

    _check_writes(f, lambda n: (_vals(n + 2), _idx(n, n + 2)), backend)


def test_put_along_axis_writes_into_the_argument(backend):
    def f(a, i):
        np.put_along_axis(a, i, -1.0, axis=1)
        return a.sum(axis=1)

    _check_writes(f, lambda n: (_vals(3 * n).reshape(n, 3), _idx(2 * n, 3).reshape(n, 2) % 3), backend)


def test_a_write_into_an_untraced_array_is_refused():
    counts = np.zeros(3)

    def f(i):
        np.add.at(counts, i, 1.0)
        return counts

    with pytest.raises(TypeError, match="not traced"):
        nt.trace(f, (np.array([0, 1]),), backend="reference")


def test_a_key_the_op_cannot_hold_is_a_host_call(backend):
    def f(a, i):
        np.add.at(a, [i, i], 1.0)   # a list holding traced arrays
        return a

    with pytest.warns(nt.TracerWarning, match="host call"):
        traced = nt.trace(f, (np.zeros((3, 3)), np.array([0, 2])), backend=backend)
    a = np.zeros((3, 3))
    traced(a, np.array([1, 1]))
    expected = np.zeros((3, 3))
    f(expected, np.array([1, 1]))
    np.testing.assert_array_equal(a, expected)
