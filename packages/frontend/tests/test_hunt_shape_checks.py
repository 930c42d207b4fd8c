"""Differential checks, against eager NumPy at random shapes (empty and size-1 dims included), of the
places where a trace answered where NumPy raises or gave another answer: a split into one section,
NumPy's shape errors in dead code, ``np.require``'s layout, a quantile's NumPy-scalar q."""

import warnings

import numpy as np
import numtrace as nt
import pytest


def _shapes(rng, ndim, count):
    """Random shapes of `ndim` dims, each dim 0, 1 or up to 5."""
    return [tuple(int(rng.choice([0, 1, rng.integers(2, 6)])) for _ in range(ndim)) for _ in range(count)]


def _outcome(fn, *args):
    """NumPy's answer or the class of its error, with warnings off (empty reductions warn)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args), None
        except (IndexError, ValueError) as exc:
            return None, type(exc)


def _assert_same(traced, fn, *args):
    want, error = _outcome(fn, *(np.copy(a) for a in args))
    if error is not None:
        with pytest.raises(error), warnings.catch_warnings():
            warnings.simplefilter("ignore", nt.TracerWarning)   # a re-trace that NumPy then refuses
            traced(*(np.copy(a) for a in args))
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nt.TracerWarning)
        got = traced(*(np.copy(a) for a in args))
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


# -- a split into one section is that section, not a 1-tuple read as an array with one more axis ------

_SPLITS = {
    "array_split": lambda x: tuple(np.array_split(x * 2.0, 1, axis=1)),
    "array_split_empty_indices": lambda x: tuple(np.array_split(x, [], axis=0)),
    "split": lambda x: tuple(np.split(x + 1.0, 1)),
    "hsplit": lambda x: tuple(np.hsplit(x, 1)),
    "vsplit": lambda x: tuple(np.vsplit(x, 1)),
    "dsplit": lambda x: tuple(np.dsplit(x[..., None], 1)),
    "unstack_of_one": lambda x: tuple(np.unstack(x[..., :1], axis=-1)),
    "broadcast_arrays_of_one": lambda x: tuple(np.broadcast_arrays(x)),
    "split_then_computed": lambda x: np.split(x, 1, axis=1)[0] * 3.0 + 1.0,
}


@pytest.mark.triton
@pytest.mark.parametrize("name", sorted(_SPLITS))
def test_a_split_into_one_section_matches_numpy(backend, name):
    fn = _SPLITS[name]
    rng = np.random.default_rng(7)
    traced = nt.trace(fn, (rng.standard_normal((3, 4)),), backend=backend, check_trace=False)
    for shape in [(3, 4), *_shapes(rng, 2, 4), (1, 1), (0, 4)]:
        _assert_same(traced, fn, rng.standard_normal(shape))


# -- NumPy's errors from shapes in code whose value is unused -------------------------------------------

_DEAD = {
    "index": lambda x, y: (x[0], x + 0)[1],
    "last_index": lambda x, y: (x[:, -1], x * 2.0)[1],
    "max": lambda x, y: (x.max(), x - 1.0)[1],
    "argmin_axis": lambda x, y: (np.argmin(x, axis=1), x + y)[1],
    "broadcast": lambda x, y: (x + np.arange(4.0), x)[1],
    "reshape": lambda x, y: (x.reshape(3, -1), y * 1.0)[1],
    "split": lambda x, y: (np.split(x, 2), y - x)[1],
    "index_of_a_product": lambda x, y: ((x * y)[1, 1], x + y)[1],
}


@pytest.mark.triton
@pytest.mark.parametrize("name", sorted(_DEAD))
def test_dead_code_raises_where_numpy_raises(backend, name):
    fn = _DEAD[name]
    rng = np.random.default_rng(11)
    traced = nt.trace(fn, (rng.standard_normal((6, 4)), rng.standard_normal((6, 4))), backend=backend,
                      check_trace=False)
    for shape in [*_shapes(rng, 2, 6), (0, 4), (6, 0), (1, 4), (2, 1)]:
        _assert_same(traced, fn, rng.standard_normal(shape), rng.standard_normal(shape))


# -- np.require returns its argument where it meets the requirements, else a copy --------------------

@pytest.mark.parametrize("requirements", ["F", "C", "FE", None])
def test_a_write_through_require_matches_numpy(backend, requirements):
    def fn(a):
        v = np.require(a, requirements=requirements)
        v[..., :1] = 7.0
        return a + 0.0, v * 1.0

    rng = np.random.default_rng(5)
    for traced_layout in ("C", "F"):
        x = rng.standard_normal((3, 4))
        traced = nt.trace(fn, (np.asarray(x, order=traced_layout),), backend=backend, check_trace=False)
        for shape in [(3, 4), *_shapes(rng, 2, 4), (1, 5), (4, 1)]:
            for layout in ("C", "F"):
                data = np.asarray(rng.standard_normal(shape), order=layout)
                eager_x, traced_x = data.copy(order="K"), data.copy(order="K")
                want = fn(eager_x)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", nt.TracerWarning)
                        got = traced(traced_x)
                except ValueError as exc:   # a layout other than the traced one: refused
                    assert "traced with it" in str(exc)
                    continue
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)
                np.testing.assert_array_equal(traced_x, eager_x)


def test_require_of_a_memory_requirement_is_refused():
    with pytest.raises(NotImplementedError, match="memory of each call"):
        nt.trace(lambda a: np.require(a, requirements="W") + 1, (np.ones(3),), backend="reference")


# -- a quantile's q given as a NumPy scalar or array promotes (not weak) ----------------------------

_QS = {"float": 0.3, "f8": np.float64(0.3), "f4": np.float32(0.3), "f2": np.float16(0.3),
       "0d": np.array(0.3), "0d-f4": np.array(0.3, "f4"), "list": [0.2, 0.7],
       "f4-array": np.array([0.2, 0.7], "f4")}


@pytest.mark.parametrize("func", [np.quantile, np.nanquantile, np.percentile])
@pytest.mark.parametrize("q", sorted(_QS))
def test_quantile_dtype_follows_numpys_promotion(backend, func, q):
    rng = np.random.default_rng(3)
    qv = _QS[q]
    if func is np.percentile:   # the same kind of q, scaled to [0, 100]
        qv = [v * 100 for v in qv] if isinstance(qv, list) else qv * (100 if isinstance(qv, float) else
                                                                        np.asarray(100, np.asarray(qv).dtype))
    for dtype in ("f2", "f4", "f8"):
        def fn(x, dtype=dtype):
            return func(x, qv, axis=1)

        traced = nt.trace(fn, (rng.standard_normal((3, 4)).astype(dtype),), backend=backend,
                          check_trace=False)
        for shape in [(3, 4), *_shapes(rng, 2, 3), (0, 3), (2, 1)]:
            x = rng.standard_normal(shape).astype(dtype)
            if shape[1] == 0:
                continue   # a quantile of an empty slice: NumPy warns and answers nan (not this check)
            if x.size == 0 and func is np.nanquantile and np.ndim(qv):
                with pytest.raises(ValueError, match="not modelled"):   # NumPy answers nanmean's shape
                    traced(x)
                continue
            _assert_same(traced, fn, x)
