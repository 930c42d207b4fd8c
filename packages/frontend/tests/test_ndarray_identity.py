"""A traced array is an ``np.ndarray`` to ``isinstance`` (``__class__``), as NumPy's arrays are, while
``type()`` still names the traced class: library code that checks its argument's type traces, NumPy's C
code reads data only through the guarded protocols, and numtrace's own checks are unchanged."""

from __future__ import annotations

import copy
import functools
import pickle
import warnings

import numpy as np
import numtrace as nt
import pytest
from numtrace.proxy import TracedArray


def _ahrs_style(q: np.ndarray) -> np.ndarray:
    """The check AHRS makes before it computes: a TypeError for anything but an ndarray."""
    if not isinstance(q, np.ndarray):
        raise TypeError(f"q must be an ndarray, got {type(q)}")
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _branchy(x: np.ndarray) -> np.ndarray:
    """A different result for an ndarray than for anything else: the branch NumPy takes is recorded."""
    return x * 2.0 if isinstance(x, np.ndarray) else x * 3.0


@functools.singledispatch
def _scale(x: object) -> object:
    return x * 3.0


@_scale.register
def _(x: np.ndarray) -> np.ndarray:
    return x * 2.0


@pytest.mark.parametrize("func", [_ahrs_style, _branchy, _scale],
                         ids=["type_check", "branch", "singledispatch"])
def test_isinstance_ndarray_branch_is_numpys(func, backend, rng):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no guard, no constant: the check is not data
        traced = nt.trace(func, (rng.normal(size=(5, 4)),), backend=backend)
    for n in (1, 7, 1000):
        x = rng.normal(size=(n, 4))
        np.testing.assert_array_equal(traced(x), func(x))


def test_class_is_ndarray_type_is_traced():
    seen = {}

    def f(x):
        s = x.sum()
        if not nt.is_tracing():  # the checker's eager run
            return x + s
        seen.update(
            isinstance_array=isinstance(x, np.ndarray), class_=x.__class__, type_=type(x),
            subclass=issubclass(type(x), np.ndarray), traced=isinstance(x, TracedArray),
            # A value NumPy gives as a scalar (np.float64) is no ndarray there either.
            isinstance_scalar=isinstance(s, np.ndarray),
            eager_scalar=isinstance(x._concrete.sum(), np.ndarray),
            ndim=np.ndim(x), shape=np.shape(x),
            asarray=type(np.asarray(x)), asanyarray=type(np.asanyarray(x)),
        )
        return x + s

    nt.trace(f, (np.ones((3, 2)),), backend="reference")
    assert seen["isinstance_array"] and seen["class_"] is np.ndarray and seen["traced"]
    assert seen["type_"] is TracedArray and not seen["subclass"]
    assert seen["isinstance_scalar"] is seen["eager_scalar"] is False
    assert seen["ndim"] == 2 and tuple(int(d) for d in seen["shape"]) == (3, 2)
    assert seen["asarray"] is TracedArray and seen["asanyarray"] is TracedArray  # kept traced, not frozen


def test_copies_are_recorded_and_pickle_refuses():
    def f(x):
        a, b = copy.copy(x), copy.deepcopy(x)
        a[0] = 0.0
        b[1] = 1.0
        if nt.is_tracing():
            with pytest.raises(TypeError, match="cannot be pickled"):
                pickle.dumps(x)
        return x + a + b

    x = np.arange(12.0).reshape(4, 3)
    traced = nt.trace(f, (x,), backend="reference")
    for n in (2, 9):
        y = np.random.default_rng(n).normal(size=(n, 3))
        a, b = y.copy(), y.copy()
        a[0], b[1] = 0.0, 1.0
        np.testing.assert_array_equal(traced(y), y + a + b)


def test_traced_array_is_still_no_attribute_value():
    """numtrace checks types with ``type()``: a traced array where a static value belongs is refused as
    before, not read as an ndarray constant."""

    def f(x):
        return np.sum(x, axis=x.astype(np.int64)[0])

    with pytest.raises(TypeError):
        nt.trace(f, (np.zeros((2, 2)),), backend="reference")


def test_flat_reads_like_numpy_and_refuses_writes(backend, rng):
    def f(m):
        xx, yx, zx, xy, yy, zy, xz, yz, zz = m.flat  # as transforms3d.mat2quat reads a 3x3 matrix
        head = m.flat[1:4]
        head[0] = 0.0  # a copy, as NumPy's: m is unchanged
        return np.stack([xx + yy * zz, zx - yz, xy * xz + zy]), head, m.flat[-1], m * len(m.flat)

    traced = nt.trace(f, (rng.normal(size=(3, 3)),), backend=backend)
    layouts = (np.asfortranarray(rng.normal(size=(3, 3))), rng.normal(size=(3, 6))[:, ::2])
    for m in (rng.normal(size=(3, 3)), *layouts):
        for got, expected in zip(traced(m.copy()), f(m.copy())):
            np.testing.assert_array_equal(got, expected)

    def g(m):
        m.flat[0] = 1.0
        return m

    with pytest.raises(NotImplementedError, match="ndarray.flat"):
        nt.trace(g, (np.zeros((2, 2)),), backend=backend)
