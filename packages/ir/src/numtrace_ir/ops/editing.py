"""Inserting and deleting along an axis (`np.insert`, `np.delete`) at static positions: an int, a slice
or a sequence of ints. The result's length along the axis follows the input's (``N + k`` or ``N - k``,
``k`` from the positions, or a slice's length over ``N``), so one trace serves every size; positions out
of range at a call's size raise NumPy's IndexError then. Positions given as an array of bools or a traced
array, and the forms whose count depends on ``N`` in ways a dim cannot say (mixed-sign position lists
for `delete`, a slice with more than one value per position for `insert`) are host calls."""

from __future__ import annotations

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import IndexShapeError, ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.nanfunctions import defaults_or_host
from numtrace_ir.registry import Attr, Input, OpDef, Sample, register
from numtrace_ir.types import TensorType


def _to_obj(v):
    """Positions: an int, a slice of ints, or a tuple of ints (a sequence, even of one)."""
    if type(v) is slice:
        return slice(*(None if b is None else rules.to_int(b) for b in (v.start, v.stop, v.step)))
    if isinstance(v, (bool, np.bool_)):
        raise NotImplementedError("a bool position is a mask: a host call")
    if isinstance(v, (int, np.integer)):
        return int(v)
    if type(v) is np.ndarray:
        if v.dtype.kind not in "iu" or v.ndim > 1:
            raise NotImplementedError("positions given as a mask or an n-d array: a host call")
        return int(v) if v.ndim == 0 else tuple(int(x) for x in v)
    if isinstance(v, (list, tuple)) and all(
            isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in v):
        return tuple(int(x) for x in v)
    raise NotImplementedError(f"positions {type(v).__name__} are not static ints: a host call")


def _axis_and_base(name, t, axis):
    """(the axis, the shape it is taken in): ``axis=None`` works on the flattened input."""
    if axis is None:
        return 0, (dims.prod(t.shape),)
    return rules.axis(name, axis, t.ndim), t.shape


def _check_positions(name: str, obj, n, ax: int, end: bool) -> None:
    """NumPy's IndexError for an int position outside ``[-n, n)`` (`end`: ``[-n, n]``, where an insert
    may go) of an axis of known length `n`."""
    if type(n) is not int or type(obj) is slice:
        return
    for i in (obj,) if type(obj) is int else obj:
        if not -n <= i < n + end:
            raise IndexShapeError(f"{name}: index {i} is out of bounds for axis {ax} with size {n}")


def _delete_rule(types, attrs):
    t = rules.first_tensor("np.delete", types)
    ax, shape = _axis_and_base("np.delete", t, attrs["axis"])
    n, obj = shape[ax], attrs["obj"]
    _check_positions("np.delete", obj, n, ax, False)
    if type(obj) is slice:
        removed = rules.slice_len("np.delete", n, obj)
    elif type(obj) is int:
        removed = 1
    elif type(n) is int:
        removed = len({i + n if i < 0 else i for i in obj if -n <= i < n}) if len(obj) > 1 else len(obj)
    elif len(obj) > 1 and min(obj) < 0 <= max(obj):
        raise ShapeError("np.delete: positions of both signs on an axis of unknown length")
    else:
        removed = len(set(obj))
    return TensorType(t.dtype, shape[:ax] + (dims.sub(n, removed),) + shape[ax + 1:])


def _delete_binder(args, kwargs):
    inputs, attrs = defaults_or_host("np.delete")(args, kwargs)
    obj = attrs["obj"]
    if type(obj) is tuple and len(obj) > 1 and min(obj) < 0 <= max(obj):
        raise NotImplementedError("np.delete: positions of both signs count differently at each size")
    return inputs, attrs


def _edit_samples(kind):
    def samples(rng):
        def x(shape, dt="f8"):
            return sampling.array(rng, shape, dt)

        if kind == "delete":
            for dt in sampling.DTYPES:
                yield Sample((x((3, 4), dt),), {"obj": 1, "axis": 1})
            for shape, attrs in (((5,), {"obj": -1}), ((3, 4), {"obj": (0, 2, 2)}),
                                 ((3, 4), {"obj": (-1, -4)}), ((3, 4), {"obj": slice(1, None, 2), "axis": 0}),
                                 ((2, 3), {"obj": ()}), ((6,), {"obj": slice(None, None, -2)}),
                                 ((0, 3), {"obj": slice(1, 3), "axis": 0}),
                                 ((2, 5), {"obj": (3,), "axis": -1})):
                yield Sample((x(shape),), attrs)
            return
        for dt in sampling.DTYPES:
            yield Sample((x((3, 4), dt), 2.5), {"obj": 1, "axis": 1})
        for shapes, attrs in ((((3, 2), (2,)), {"obj": 1, "axis": 0}),
                              (((3, 2), (3, 1)), {"obj": 1, "axis": 1}),
                              (((3, 2), (3,)), {"obj": -1, "axis": 1}),
                              (((3, 2), (2,)), {"obj": (0, 2), "axis": 0}),
                              (((3, 2), (1, 2)), {"obj": (3,), "axis": 0}),
                              (((5,), ()), {"obj": slice(None, None, 2)}),
                              (((2, 3), (2,)), {"obj": (1, -1)}),
                              (((2, 3), ()), {"obj": ()}),
                              (((0, 3), (3,)), {"obj": 0, "axis": 0})):
            yield Sample(tuple(x(s) for s in shapes), attrs)
        yield Sample((x((3, 2), "i4"), 7.9), {"obj": 0, "axis": 0}, note="values cast to the input's dtype")

    return samples


register(OpDef(
    "np.delete", "movement",
    [Input("arr"), Attr("obj", convert=_to_obj), Attr("axis", None, rules.to_int_or_none)],
    _delete_rule,
    lambda arr, obj, axis: np.delete(arr, list(obj) if type(obj) is tuple else obj, axis),
    numpy_targets=[np.delete], samples=_edit_samples("delete"), binder=_delete_binder,
    doc="static positions (int, slice, ints); a mask, an array of positions or ints of both signs is a "
    "host call",
))


def _values_shape(name, v, ndim, ax, scalar):
    """The values' shape as NumPy inserts them: at least `ndim` dims, and for a scalar position the
    first axis moved to `ax`."""
    shape = rules.shape_of(v)
    if len(shape) > ndim:
        raise ShapeError(f"{name}: values of {len(shape)} dims for an array of {ndim}")
    shape = (1,) * (ndim - len(shape)) + tuple(shape)
    if scalar:
        shape = shape[1:ax + 1] + shape[:1] + shape[ax + 1:]
    return shape


def _insert_rule(types, attrs):
    t = rules.first_tensor("np.insert", types)
    ax, shape = _axis_and_base("np.insert", t, attrs["axis"])
    n, obj = shape[ax], attrs["obj"]
    _check_positions("np.insert", obj, n, ax, True)
    single = type(obj) is int or (type(obj) is tuple and len(obj) == 1)
    values = _values_shape("np.insert", types[1], len(shape), ax, type(obj) is int)
    if single:
        added = values[ax]
    elif type(obj) is slice:
        added = rules.slice_len("np.insert", n, obj)
    else:
        added = len(obj)
    return TensorType(t.dtype, shape[:ax] + (dims.add(n, added),) + shape[ax + 1:])


def _plain(v) -> bool:
    return isinstance(v, (bool, int, float, complex, np.generic, np.ndarray)) or (
        isinstance(v, (list, tuple)) and all(map(_plain, v)))


def _insert_binder(args, kwargs):
    inputs, attrs = defaults_or_host("np.insert")(args, kwargs)
    obj = attrs["obj"]
    if isinstance(inputs[1], (list, tuple)) and not _plain(inputs[1]):
        raise NotImplementedError("np.insert: values in a list holding traced arrays")
    if type(obj) is slice:
        # A slice gives one position at some sizes (all values go there) and several at others (one value
        # broadcast to each): alike only for values with one entry along the axis, read off plain values.
        arr, values = inputs
        if not _plain(values):
            raise NotImplementedError("np.insert: a slice of positions with traced values")
        ndim = 1 if attrs["axis"] is None else arr.ndim
        ax = 0 if attrs["axis"] is None else attrs["axis"] % max(ndim, 1)
        vshape = np.shape(values)
        vshape = (1,) * (ndim - len(vshape)) + vshape
        if len(vshape) != ndim or vshape[ax] != 1:
            raise NotImplementedError("np.insert: a slice of positions with several values along the axis")
    return inputs, attrs


register(OpDef(
    "np.insert", "movement",
    [Input("arr"), Attr("obj", convert=_to_obj), Input("values", "any"),
     Attr("axis", None, rules.to_int_or_none)],
    _insert_rule,
    lambda arr, obj, values, axis: np.insert(arr, list(obj) if type(obj) is tuple else obj, values, axis),
    numpy_targets=[np.insert], samples=_edit_samples("insert"), binder=_insert_binder,
    doc="static positions (int, slice, ints); values are cast to the input's dtype as NumPy does; a mask "
    "or an array of positions is a host call",
))
