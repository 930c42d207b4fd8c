"""Programs that once returned silently wrong answers on a backend's fast paths, each against eager
NumPy at the traced shape and at another one (traced without the checker, as a user may).

Joins whose parts a pass writes straight into the joined array, then written in place; joins of 0-d
reductions; small products and clip on signed zeros; constant exponents over the whole float range;
writes through reshapes of arguments of every layout; ndarray subclasses and dtype aliases as
arguments; an argument that is the module's own state.
"""

from __future__ import annotations

import warnings

import numpy as np
import numtrace as nt
import pytest
from layouts import layout_copies, layout_copy


def _same(got, want) -> None:
    """Equal values, zeros of the same sign; floats within rounding (vector math, summation order)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6 if want.dtype.itemsize < 8 else 1e-12, atol=0)
        number = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))   # -0.0 is not +0.0
    else:
        np.testing.assert_array_equal(got, want)


def _check(f, backend, *calls):
    """Trace `f` on the first argument tuple, then call it (twice: the second reuses the buffers)
    with each tuple; outputs and the arguments afterwards must equal NumPy's."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        traced = nt.trace(f, tuple(layout_copies(calls[0])), check_trace=False, backend=backend)
        for args in calls:
            want_args = layout_copies(args)
            want = f(*want_args)
            for _ in range(2):
                got_args = layout_copies(args)
                got = traced(*got_args)
            if isinstance(want, tuple):
                for g, w in zip(got, want):
                    _same(g, w)
            elif want is not None:
                _same(got, want)
            for g, w in zip(got_args, want_args):
                _same(g, w)
    return traced


# -- joins written in place ------------------------------------------------------------------------

def _stack_then_row(x, y):
    a, b = x * 2.0, y + 1.0
    s = np.stack([a, b])
    s[0] = 0.0
    return s, a - 1.0


def _concatenate_then_indices(x, y):
    a, b = np.exp(x), np.sin(y)
    s = np.concatenate([a, b])
    s[np.array([0, 1])] = 7.0
    return s, a * 3.0


def _column_stack_then_column(x, y):
    a, b = np.exp(x), np.sin(y)
    s = np.column_stack([a, b])
    s[:, 0] = 3.0
    return s, a * 3.0


def _hstack_then_all(x, y):
    a, b = x * x, y - x
    s = np.hstack([a, b])
    s *= 0.5
    return s, a.sum()


@pytest.mark.parametrize("f", [_stack_then_row, _concatenate_then_indices, _column_stack_then_column,
                               _hstack_then_all])
def test_a_part_written_into_a_join_is_read_after_the_join_is_written(backend, f, rng):
    x, y = rng.standard_normal(5), rng.standard_normal(5)
    _check(f, backend, (x, y), (y, x), (rng.standard_normal(9), rng.standard_normal(9)))


def _stats(x):
    return np.stack([x.sum(), x.max()])


def _moments(x):
    return np.array([x.mean(), x.std()])


@pytest.mark.parametrize("f", [_stats, _moments])
def test_a_join_of_0d_reductions(backend, f, rng):
    x = rng.standard_normal((4, 3))
    traced = _check(f, backend, (x,), (x * 2.0,), (rng.standard_normal((7, 2)),))
    other = nt.trace(lambda x: np.stack([x.min(), x.mean()]), (x,), check_trace=False, backend=backend)
    first = traced(x)
    other(x * 5.0)   # another trace's call must not change an earlier result
    _same(first, f(x))


# -- signed zeros ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("a_shape,b_shape", [((3, 2), (2, 2)), ((5, 3), (3,)), ((2, 4, 3), (3, 1)),
                                             ((6, 1), (1, 8))])
def test_a_product_of_negative_zeros_is_positive_zero(backend, a_shape, b_shape, dtype):
    a = -np.zeros(a_shape, dtype)
    b = np.ones(b_shape, dtype)
    _check(lambda a, b: a @ b, backend, (a, b), (a[:1], b))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (-0.0, 1.0), (-1.0, 0.0), (-1.0, -0.0), (0.0, 0.0)])
def test_clip_keeps_x_where_it_equals_a_bound(backend, lo, hi, dtype):
    x = np.array([-0.0, 0.0, 2.0, -1.0, np.nan, 0.5, -2.0], dtype)
    _check(lambda x: np.clip(x, lo, hi), backend, (x,), (x[::-1].copy(),), (np.tile(x, 3),))


# -- constant exponents ----------------------------------------------------------------------------

def _extremes(dtype) -> np.ndarray:
    info = np.finfo(dtype)
    r = np.random.default_rng(0)
    least, most = float(info.smallest_subnormal), float(info.max)
    edges = [0.0, least, float(info.tiny), most, np.inf, np.nan, 1.0]
    if dtype == np.float64:
        edges += [1.3e154, 1e160, 3e161]   # x * x overflows, x ** -2 does not
    mags = np.concatenate([10.0 ** r.uniform(np.log10(least), np.log10(most), 2000), edges])
    return np.concatenate([mags, -mags]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("exponent", [-2, -1, -0.5, 0, 0.5, 1, 2, 3, 4, 1.5, -3])
def test_constant_exponents_over_the_whole_range(backend, exponent, dtype):
    x = _extremes(dtype)
    with np.errstate(all="ignore"):
        traced = nt.trace(lambda x: x ** exponent, (x,), check_trace=False, backend=backend)
        got, want = traced(x), x ** exponent
    assert got.dtype == want.dtype
    special = ~np.isfinite(want) | (want == 0)
    np.testing.assert_array_equal(got[special], want[special])   # inf, nan, zeros and their signs
    number = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))
    np.testing.assert_array_max_ulp(got[~special], want[~special], maxulp=2)


# -- writes through reshapes of arguments ----------------------------------------------------------

def _write_through_reshape(x):
    v = x.reshape(-1)
    v[0] = 99.0
    return x.sum()


def _write_through_ravel(x):
    v = np.ravel(x)
    v[1:3] = -1.0
    return v * 2.0


def _write_through_transposed_reshape(x):
    v = x.T.reshape(-1)
    v[0] = 5.0
    return x + 0.0


def _layouts(rng):
    m = rng.standard_normal((3, 4))
    return {"C": m.copy(), "F": np.asfortranarray(m), "strided": rng.standard_normal((3, 8))[:, ::2]}


@pytest.mark.parametrize("f", [_write_through_reshape, _write_through_ravel,
                               _write_through_transposed_reshape])
@pytest.mark.parametrize("traced_as", ["C", "F", "strided"])
def test_a_write_through_a_reshape_follows_the_layout_or_is_refused(backend, f, traced_as, rng):
    arrays = _layouts(rng)
    x = arrays[traced_as]
    traced = _check(f, backend, (x,))
    for layout, other in arrays.items():
        if layout == traced_as:
            _check(f, backend, (x,), (other,))
            continue
        with pytest.raises(ValueError, match="laid out"):
            traced(layout_copy(other))


def test_a_write_through_a_reshape_at_another_shape_is_traced_again(backend, rng):
    """x.T of a (1, n) array is C-contiguous, so its reshape is a view where at (3, n) it is a copy."""
    f = _write_through_transposed_reshape
    traced = _check(f, backend, (rng.standard_normal((3, 4)),))
    x = rng.standard_normal((1, 4))
    want_x = x.copy()
    want = f(want_x)
    with pytest.warns(nt.TracerWarning, match="re-tracing"):
        got = traced(x)
    _same(got, want)
    _same(x, want_x)


def test_a_loaded_trace_keeps_its_layouts(backend, rng, tmp_path):
    arrays = _layouts(rng)
    traced = _check(_write_through_reshape, backend, (arrays["C"],))
    traced.save(tmp_path / "t.nt")
    loaded = nt.load(tmp_path / "t.nt", backend=backend)
    assert loaded.layouts == traced.layouts == ("C",)
    _check_loaded = layout_copy(arrays["C"])
    _same(loaded(_check_loaded), _write_through_reshape(arrays["C"].copy()))
    with pytest.raises(ValueError, match="laid out"):
        loaded(layout_copy(arrays["F"]))


def test_a_reshape_only_read_takes_any_layout(backend, rng):
    arrays = _layouts(rng)
    _check(lambda x: x.reshape(-1) * 2.0, backend, *[(a,) for a in arrays.values()])


# -- argument kinds --------------------------------------------------------------------------------

def test_ndarray_subclasses_are_refused_at_call_and_trace_time(backend):
    x = np.array([[1.0, 2.0, 3.0]])
    traced = nt.trace(lambda a: a * 2.0, (x,), check_trace=False, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        matrix = np.asmatrix(x)
    for sub in (np.ma.masked_array(x, mask=[[0, 1, 0]]), matrix):
        with pytest.raises(TypeError, match="subclass"):
            traced(sub)
        with pytest.raises(TypeError, match="subclass"):
            nt.trace(lambda a: a * 2.0, (sub,), check_trace=False, backend=backend)


def test_a_memmap_is_taken_as_its_array(backend, tmp_path):
    m = np.memmap(tmp_path / "x.bin", dtype=np.float64, mode="w+", shape=(4,))
    m[:] = [1.0, -2.0, 3.0, 0.5]
    traced = nt.trace(lambda a: a * 2.0, (np.ones(4),), check_trace=False, backend=backend)
    _same(traced(m), np.asarray(m) * 2.0)

    def scale(a):
        a *= 3.0

    nt.trace(scale, (np.ones(4),), check_trace=False, backend=backend)(m)
    _same(np.asarray(m), np.array([3.0, -6.0, 9.0, 1.5]))


@pytest.mark.parametrize("alias,canonical", [(np.longlong, np.int64), (np.intc, np.int32),
                                             (np.int_, np.int64), (np.uintc, np.uint32),
                                             (np.ulonglong, np.uint64), (np.double, np.float64)])
def test_dtype_aliases_are_their_dtype(backend, alias, canonical):
    a = np.arange(6, dtype=alias).reshape(2, 3)
    c = a.astype(canonical)

    def f(x):
        y = x * 2 + 1
        x += 1
        return y, np.cumsum(y, axis=1)

    _check(f, backend, (a,), (c,))
    _check(f, backend, (c,), (a,))


def test_longdouble_is_refused_by_a_float64_trace(backend):
    if np.dtype(np.longdouble) == np.dtype(np.float64):
        pytest.skip("longdouble is float64 on this platform")
    traced = nt.trace(lambda x: x * 2.0, (np.ones(3),), check_trace=False, backend=backend)
    with pytest.raises(TypeError, match="dtype"):
        traced(np.ones(3, np.longdouble))


class _Counter(nt.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", np.ones(4))

    def forward(self, x):
        self.w += x
        return self.w * 2.0


def test_an_argument_that_is_written_module_state_is_refused(backend):
    m = _Counter()
    traced = nt.trace(m, (np.ones(4),), check_trace=False, backend=backend)
    state = traced.state_dict()["w"]
    with pytest.raises(ValueError, match="shares memory"):
        traced(state)
    with pytest.raises(ValueError, match="shares memory"):
        traced(state[::-1])
    before = state.copy()
    np.testing.assert_array_equal(traced(np.ones(4)), (before + 1.0) * 2.0)
