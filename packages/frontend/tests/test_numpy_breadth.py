"""NumPy forms ordinary programs write that the tracer used to refuse: ``np.repeat`` with an array of
counts, ``np.concatenate(..., dtype=, casting=)``, reductions with ``where=``, einsum's sublist form,
``np.mgrid``/``np.ogrid`` sized by traced shapes, and the number methods of a traced size. Each is traced
at one size and called at others: NumPy's values (bit for bit), dtypes, shapes, warnings and errors."""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest


def _same(got, want, exact: bool = True) -> bool:
    """Same dtype, shape and bits (item by item in tuples); not `exact`: values within a few ulps."""
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and \
            all(_same(g, w, exact) for g, w in zip(got, want))
    got, want = np.asarray(got), np.asarray(want)
    return got.dtype == want.dtype and got.shape == want.shape and \
        (got.tobytes() == want.tobytes() if exact else np.allclose(got, want, rtol=1e-12, atol=1e-12))


def _quiet(fn, *args):
    """fn(*args), with numtrace's re-tracing notes ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        return fn(*args)


def _check_sizes(fn, make, backend, sizes=(5, 1, 8, 0), retraces=0, exact=True):
    """`fn` traced at the first size, then called at each: NumPy's answer (or NumPy's error) every time,
    re-tracing `retraces` times."""
    rng = np.random.default_rng(0)
    traced = nt.trace(fn, make(rng, sizes[0]), backend=backend)
    for n in sizes:
        args = make(rng, n)
        try:
            want = fn(*args)
        except Exception as exc:   # NumPy's error, raised by the traced call too
            with pytest.raises(type(exc)):
                _quiet(traced, *args)
            continue
        got = _quiet(traced, *args)
        assert _same(got, want, exact), (n, got, want)
    assert traced.stats()["retraces"] == retraces
    return traced


# -- np.repeat with an array of counts ---------------------------------------------------------------

_REPEATS = {
    "counts": lambda x, r: np.repeat(x, r, axis=0),
    "computed_counts": lambda x, r: np.repeat(x, (x[:, 0] > 0).astype(np.int64) + r, axis=0).sum(0),
    "method_flat": lambda x, r: (x.T * 2.0).repeat(np.tile(r, 3)),
    "one_count": lambda x, r: np.repeat(x, r[:1], axis=0),
    "negative_counts": lambda x, r: np.repeat(x, r - 1, axis=0),   # NumPy raises where a count is -1
}


@pytest.mark.triton
@pytest.mark.parametrize("name", sorted(_REPEATS))
def test_repeat_with_traced_counts_follows_their_sum(name, backend):
    """The result's length is the counts' sum: a data-dependent dim, never the traced one, never a
    guard on the counts."""
    def make(rng, n):
        return rng.standard_normal((n, 3)), rng.integers(1, 4, n) if name == "negative_counts" and n == 5 \
            else rng.integers(0, 4, n)

    traced = _check_sizes(_REPEATS[name], make, backend)
    assert "np.repeat_counts" in str(traced.graph) and not traced.guards


def test_repeat_with_counts_known_while_tracing_keeps_them():
    traced = nt.trace(lambda x: np.repeat(x, np.array([2, 0, 1]), axis=1), (np.ones((2, 3)),),
                      backend="reference")
    assert "np.repeat[repeats=(2, 0, 1)" in str(traced.graph)


def test_repeat_counts_refused_as_numpy_refuses_them():
    x, r = np.ones((3, 2)), np.array([1.0, 2.0, 0.0])
    with pytest.raises(TypeError, match="safe"):
        np.repeat(x, r, axis=0)
    with pytest.raises(TypeError, match="safe"):
        nt.trace(lambda x, r: np.repeat(x, r, axis=0), (x, r), backend="reference")
    traced = nt.trace(lambda x, r: np.repeat(x, r, axis=0), (x, np.array([1, 2, 0])), backend="reference")
    with pytest.raises(ValueError, match="broadcast"):
        np.repeat(x, np.array([1, 2]), axis=0)
    with pytest.raises(ValueError, match="broadcast"):
        _quiet(traced, x, np.array([1, 2]))


# -- np.concatenate with dtype= and casting= ---------------------------------------------------------

@pytest.mark.parametrize("casting", ["unsafe", "same_kind"])
def test_concatenate_casts_as_numpy(casting, backend):
    def fn(x, i):
        dtype = np.int16 if casting == "unsafe" else None
        return (np.concatenate([x * 100, i], casting=casting, dtype=dtype),
                np.concatenate([x, i], axis=None, dtype=np.float32, casting=casting),
                np.stack([i, i], casting="no"))

    _check_sizes(fn, lambda rng, n: (rng.standard_normal((n, 2)), rng.integers(-9, 9, (n, 2))), backend)


def test_concatenate_refuses_a_cast_as_numpy():
    x, i = np.ones((2, 2)), np.ones((2, 2), np.int64)
    for kwargs in ({"casting": "no"}, {"casting": "equiv", "dtype": np.float64},
                   {"dtype": np.int64}):
        with pytest.raises(TypeError, match="[Cc]annot cast"):
            np.concatenate([x, i], **kwargs)
        with pytest.raises(TypeError, match="[Cc]annot cast"):
            nt.trace(lambda x, i, kwargs=kwargs: np.concatenate([x, i], **kwargs), (x, i))


# -- reductions with where= --------------------------------------------------------------------------

_MASKED = {
    "sum": lambda x, m: np.sum(x, where=m),
    "sum_rows_f32": lambda x, m: np.sum(x.astype(np.float32), axis=1, where=m, keepdims=True),
    "add_reduce": lambda x, m: np.add.reduce(x, where=m),
    "max_initial": lambda x, m: x.max(axis=0, where=m, initial=-np.inf),
    "min_initial": lambda x, m: np.min(x, where=m, initial=5.0),
    "mean_rows": lambda x, m: np.mean(x, axis=1, where=m | (np.arange(x.shape[1]) == 0)),
    "var_ddof": lambda x, m: np.var(x, axis=1, where=m | (np.arange(x.shape[1]) < 2), ddof=1),
    "std": lambda x, m: x.std(axis=1, where=m | (np.arange(x.shape[1]) < 2)),
    "prod": lambda x, m: np.prod(x, axis=-1, where=m),
    "all_any": lambda x, m: (np.all(x > -1.0, axis=0, where=m), (x > 1.0).any(where=m)),
    "ints": lambda x, m: np.sum((x * 10).astype(np.int32), axis=0, where=m),
}


@pytest.mark.triton
@pytest.mark.parametrize("name", sorted(_MASKED))
def test_reduction_with_where_is_numpys_masked_reduction(name, backend):
    """NumPy's masked reduction, its summation order included: the same bits at every size."""
    make = lambda rng, n: (rng.standard_normal((n, 7)), rng.random((n, 7)) < 0.5)
    traced = _check_sizes(_MASKED[name], make, backend)
    assert "_where" in str(traced.graph)


def test_where_true_is_the_plain_reduction():
    traced = nt.trace(lambda x: np.sum(x, axis=0, where=True), (np.ones((3, 2)),), backend="reference")
    assert "np.sum[" in str(traced.graph) and "_where" not in str(traced.graph)


def test_reduction_with_where_into_out_is_checked_as_without(backend):
    """out= of a wider dtype sums in it, as NumPy does; a float sum into an int out= is refused (NumPy
    casts each buffer's partial sum: 20000 x 0.6 is 11999), with where= as without."""
    def into(x, m, o):
        np.sum(x, axis=0, where=m, out=o)
        return o

    x = np.random.default_rng(1).standard_normal((50, 3)).astype(np.float32)
    m = x > -0.5
    traced = nt.trace(into, (x, m, np.zeros(3)), backend=backend)
    assert _same(traced(x, m, np.zeros(3)), into(x, m, np.zeros(3)))
    with pytest.raises(TypeError, match="partial result"):
        nt.trace(into, (np.full((20000, 1), 0.6), np.ones((20000, 1), bool), np.zeros(1, np.int64)))


def test_max_with_where_needs_initial_as_in_numpy():
    x, m = np.ones((3, 2)), np.ones((3, 2), bool)
    with pytest.raises(ValueError, match="initial"):
        np.max(x, where=m)
    with pytest.raises(ValueError, match="initial"):
        nt.trace(lambda x, m: np.max(x, where=m), (x, m))


def test_mean_of_a_slice_with_nothing_kept_warns_as_numpy(backend):
    fn = lambda x, m: np.mean(x, axis=1, where=m)
    traced = nt.trace(fn, (np.ones((2, 3)), np.ones((2, 3), bool)), backend=backend)
    x, m = np.ones((3, 3)), np.array([[True, False, True], [False] * 3, [True] * 3])
    with pytest.warns(RuntimeWarning) as numpy_warnings:
        want = fn(x, m)
    with pytest.warns(RuntimeWarning) as traced_warnings:
        got = traced(x, m)
    assert _same(got, want)
    assert [str(w.message) for w in traced_warnings] == [str(w.message) for w in numpy_warnings]


# -- einsum's sublist form ---------------------------------------------------------------------------

@pytest.mark.triton
def test_einsum_sublist_form_is_the_subscripts_numpy_reads(backend):
    def fn(a, b):
        return (np.einsum(a, [0, 1], b, [1, 2], [0, 2]), np.einsum(a, [0, 1], b, [1, 30]),
                np.einsum(a, [Ellipsis, 1], a, [Ellipsis, 1], [Ellipsis]), np.einsum(a, [0, 1], [1, 0]))

    # A contraction's sums need not be in NumPy's order (a matmul kernel's): equal within a few ulps.
    traced = _check_sizes(fn, lambda rng, n: (rng.standard_normal((n, 3)), rng.standard_normal((3, 4))),
                          backend, exact=backend == "reference")
    assert "subscripts='AB,BC->AC'" in str(traced.graph)


# -- np.mgrid / np.ogrid -----------------------------------------------------------------------------

def _grids(x):
    rows, cols = np.ogrid[:x.shape[0], :x.shape[1]]
    return (np.mgrid[0:x.shape[0], 0:x.shape[1]], x * rows + cols, np.mgrid[1:x.shape[0]:2],
            np.mgrid[0:x.shape[0]:0.5, -1:1:3j], np.ogrid[x.shape[1]:-1:-1])


@pytest.mark.triton
def test_grids_follow_the_traced_shape(backend):
    """Sizes from ``x.shape`` stay graph values: no guard, no re-trace, NumPy's grids at every size."""
    traced = _check_sizes(_grids, lambda rng, n: (rng.standard_normal((n, 3)),), backend, sizes=(5, 1, 8, 2))
    assert not traced.guards


def test_a_grid_counted_by_a_complex_step_from_a_shape_is_guarded(backend):
    """``np.mgrid[0:1:n * 1j]`` (n points): complex numbers are not graph values, so ``n * 1j`` is computed
    on n guarded: each size traces again, none is served a stale grid."""
    fn = lambda x: (np.mgrid[0:1:x.shape[0] * 1j], x.shape[1] * 1j + 1, 2j ** x.shape[0])
    _check_sizes(fn, lambda rng, n: (rng.standard_normal((n, 2)),), backend, sizes=(5, 1, 8, 5), retraces=2)


def test_a_grid_bound_computed_past_int64_is_guarded():
    """NumPy types a grid by its bounds, and an int past int64's range changes that type: a bound
    computed from shapes (not a dim itself) keeps the trace to ints within it."""
    traced = nt.trace(lambda x: np.mgrid[x.shape[0] - 1:x.shape[0] * 2, 0:2], (np.ones(3),),
                      backend="reference")
    assert traced.guards and all("9223372036854775807" in g or "-9223372036854775808" in g
                                 for g in traced.guards)


# -- number methods of a traced size -----------------------------------------------------------------

def _parts(x):
    n = x.shape[0]
    ratio = n.as_integer_ratio()
    return x * (n.real + n.numerator * n.denominator + n.conjugate() + ratio[0] / ratio[1]) + n.imag


def test_traced_int_parts_are_recorded(backend):
    """``n.real``, ``n.numerator``, ``n.conjugate()``, ``n.as_integer_ratio()`` are ``n`` itself (and 1):
    recorded, no guard."""
    traced = _check_sizes(_parts, lambda rng, n: (rng.standard_normal((n, 2)),), backend)
    assert not traced.guards


def test_bit_length_guards_the_range_that_keeps_it(backend):
    """``n.bit_length()`` is a plain int guarded on ``2**(k-1) <= n < 2**k``: sizes with the same bit
    length share the trace (5, 6, 7), the others trace again (1; 8)."""
    fn = lambda x: x * x.shape[0].bit_length()
    _check_sizes(fn, lambda rng, n: (rng.standard_normal(n),), backend, sizes=(5, 6, 7, 1, 8, 4), retraces=2)


def test_other_int_methods_are_guarded_values():
    def fn(x):
        n = x.shape[0]
        again = int.from_bytes(n.to_bytes(2, "little"), "little")
        return x * n.bit_count() + again + n.from_bytes(b"\x01", "big")

    traced = nt.trace(fn, (np.ones(5),), backend="reference")
    assert traced.guards
    assert _same(_quiet(traced, np.ones(6)), fn(np.ones(6)))
