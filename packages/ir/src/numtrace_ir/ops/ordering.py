"""Movement ops that reorder or gather along an axis: sort, argsort, take, take_along_axis. Values are
moved, never computed (argsort's indices are positions); dtypes follow their inputs."""

from __future__ import annotations

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.movement import movement
from numtrace_ir.registry import Attr, Input, OpDef, Sample, Unsupported, register
from numtrace_ir.types import TensorType


def _along(name, t, attrs):
    if attrs["axis"] is None:
        return (dims.prod(t.shape),)
    rules.axis(name, attrs["axis"], t.ndim)
    return t.shape


_SORT_CASES = [
    (((3, 4),), {}),
    (((3, 4),), {"axis": 0}),
    (((2, 3, 4),), {"axis": None}),
    (((0, 3),), {}),
    (((5,),), {"kind": "stable"}),
]
_KIND = rules.one_of(None, "quicksort", "mergesort", "heapsort", "stable")
movement(
    "np.sort",
    [Attr("axis", -1, rules.to_int_or_none), Attr("kind", None, _KIND), Unsupported("order")],
    _along,
    lambda a, axis, kind: np.sort(a, axis, kind),
    [np.sort],
    _SORT_CASES,
    doc="`ndarray.sort` sorts in place; the tracer functionalizes it to this op",
)


def _argsort_rule(types, attrs):
    t = rules.first_tensor("np.argsort", types)
    return TensorType(np.intp, _along("np.argsort", t, attrs))


def _argsort_impl(a, axis, kind):
    return np.argsort(a, axis, kind=kind)


register(
    OpDef(
        "np.argsort",
        "movement",
        [Input("a"), Attr("axis", -1, rules.to_int_or_none), Attr("kind", None, _KIND), Unsupported("order")],
        _argsort_rule,
        _argsort_impl,
        numpy_targets=[np.argsort, np.ndarray.argsort],
        samples=sampling.sweep(_SORT_CASES),
        doc="ties (equal values, NaNs) in the order NumPy's sort of that kind gives them",
    )
)


def _take_rule(types, attrs):
    name = "np.take"
    t = rules.first_tensor(name, types)
    idx = types[1]
    if type(idx) is TensorType and idx.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be integers, got {idx}")
    if type(idx) is not TensorType and idx.kind != "int":
        raise TypeError(f"{name}: indices must be integers, got {idx}")
    ishape = rules.shape_of(idx)
    if attrs["axis"] is None:
        return TensorType(t.dtype, ishape)
    ax = rules.axis(name, attrs["axis"], t.ndim)
    return TensorType(t.dtype, t.shape[:ax] + ishape + t.shape[ax + 1 :])


def _take_samples(rng):
    for dt in sampling.DTYPES:
        yield _gather_sample(rng, (3, 4), dt, (2, 2), 12, {})
    yield _gather_sample(rng, (3, 4), "f8", (5,), 4, {"axis": 1})
    yield _gather_sample(rng, (3, 4), "f8", (), 3, {"axis": 0})
    yield _gather_sample(rng, (3, 4), "f8", (0,), 3, {"axis": -2})
    yield _gather_sample(rng, (2, 3), "f4", (4,), 3, {"axis": 1, "mode": "wrap"})


def _gather_sample(rng, shape, dtype, ishape, bound, attrs):
    """A (data, integer indices in [-bound, bound)) sample for the gather ops."""
    return Sample((sampling.array(rng, shape, dtype), rng.integers(-bound, bound, ishape)), attrs)


register(
    OpDef(
        "np.take",
        "movement",
        [
            Input("a"),
            Input("indices", "any"),
            Attr("axis", None, rules.to_int_or_none),
            Unsupported("out"),
            Attr("mode", "raise", rules.one_of("raise", "wrap", "clip")),
        ],
        _take_rule,
        lambda a, indices, axis, mode: np.take(a, indices, axis, mode=mode),
        numpy_targets=[np.take, np.ndarray.take],
        samples=_take_samples,
    )
)


def _take_along_rule(types, attrs):
    name = "np.take_along_axis"
    t, idx = types
    if type(t) is not TensorType or type(idx) is not TensorType or idx.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an array and integer indices, got {t} and {idx}")
    if attrs["axis"] is None:
        if idx.ndim != 1:
            raise ShapeError(f"{name}: with axis=None indices must be 1-d, got {idx}")
        return TensorType(t.dtype, idx.shape)
    if idx.ndim != t.ndim:
        raise ShapeError(f"{name}: indices {idx} and array {t} must have the same number of dims")
    ax = rules.axis(name, attrs["axis"], t.ndim)
    other = rules.broadcast(name, t.shape[:ax] + t.shape[ax + 1 :], idx.shape[:ax] + idx.shape[ax + 1 :])
    return TensorType(t.dtype, other[:ax] + (idx.shape[ax],) + other[ax:])


def _take_along_samples(rng):
    for dt in sampling.DTYPES:
        yield _gather_sample(rng, (3, 4), dt, (3, 2), 4, {"axis": 1})
    yield _gather_sample(rng, (3, 4), "f8", (5, 4), 3, {"axis": 0})
    yield _gather_sample(rng, (3, 4), "f8", (1, 6), 4, {"axis": -1})
    yield _gather_sample(rng, (3, 4), "f8", (7,), 12, {"axis": None})
    yield _gather_sample(rng, (0, 4), "f8", (0, 2), 4, {"axis": 1})


register(
    OpDef(
        "np.take_along_axis",
        "movement",
        [Input("arr"), Input("indices"), Attr("axis", -1, rules.to_int_or_none)],
        _take_along_rule,
        lambda arr, indices, axis: np.take_along_axis(arr, indices, axis),
        numpy_targets=[np.take_along_axis],
        samples=_take_along_samples,
    )
)
