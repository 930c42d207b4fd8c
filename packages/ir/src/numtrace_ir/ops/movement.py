"""Movement ops that reshape, permute, broadcast, flip, roll or copy one array, and the `movement`
factory every movement family registers its single-input ops with. Values are moved, never computed;
dtypes follow their inputs. The other families: `tiling` (tile, repeat, pad, triangles, diagonals),
`ordering` (sort, argsort, take), `joining` (concatenate, stack, split, atleast_nd)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import (
    Attr,
    Input,
    Inputs,
    OpDef,
    Sample,
    Unsupported,
    get,
    register,
    register_target,
)
from numtrace_ir.types import TensorType

_ORDER = rules.one_of("C", "F", "A", "K")


def movement(
    name: str,
    params: list,
    shape_rule: Callable,
    impl: Callable,
    targets: list,
    cases: list,
    dtypes: tuple = sampling.DTYPES,
    doc: str = "",
    view: str | None = None,
    as_view: Callable | None = None,
) -> OpDef:
    """Register an op whose output has the input's dtype and the shape `shape_rule(name, t, attrs)`
    (`view`, `as_view`: see `OpDef`)."""

    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        return TensorType(t.dtype, shape_rule(name, t, attrs))

    return register(
        OpDef(
            name,
            "movement",
            [Input("a")] + params,
            rule,
            impl,
            numpy_targets=targets,
            samples=sampling.sweep(cases, dtypes),
            view=view,
            as_view=as_view,
            doc=doc,
        )
    )


def _reshape(name, t, attrs):
    return rules.reshape_dims(name, t.shape, attrs["shape"])


movement(
    "np.reshape",
    [
        Attr("shape", convert=rules.to_shape),
        Attr("order", "C", _ORDER),
        Unsupported("newshape"),
        Unsupported("copy"),
    ],
    _reshape,
    lambda a, shape, order: np.reshape(a, shape, order=order),
    [np.reshape],
    [
        (((3, 4),), {"shape": (2, 6)}),
        (((3, 4),), {"shape": (-1,)}),
        (((2, 3, 4),), {"shape": (4, -1)}),
        (((),), {"shape": (1, 1)}),
        (((0, 3),), {"shape": (3, -1, 2)}),
        (((6,),), {"shape": (3, 2), "order": "F"}),
    ],
    doc="`ndarray.reshape(*dims)` is normalised to a shape tuple by the tracer",
    view="reshape",
    as_view=lambda a, out, attrs, dims: np.reshape(a, out, order=attrs.get("order") or "C"),
)
movement(
    "np.ravel",
    [Attr("order", "C", _ORDER)],
    lambda n, t, a: (dims.prod(t.shape),),
    lambda a, order: np.ravel(a, order),
    [np.ravel, np.ndarray.ravel, np.ndarray.flatten],
    [(((3, 4),), {}), (((),), {}), (((0, 2),), {}), (((2, 3, 4),), {"order": "F"})],
    view="reshape",
    as_view=lambda a, out, attrs, dims: np.ravel(a, order=attrs.get("order") or "C"),
)


def _transpose(name, t, attrs):
    axes = attrs["axes"]
    if axes is None:
        return t.shape[::-1]
    if len(axes) != t.ndim:
        raise ShapeError(f"{name}: axes {axes} do not match an array of dimension {t.ndim}")
    norm = [rules.axis(name, a, t.ndim) for a in axes]
    if sorted(norm) != list(range(t.ndim)):
        raise ShapeError(f"{name}: axes {axes} are not a permutation of {t.ndim} dims")
    return tuple(t.shape[a] for a in norm)


movement(
    "np.transpose",
    [Attr("axes", None, lambda v: None if v is None else rules.to_ints(v))],
    _transpose,
    lambda a, axes: np.transpose(a, axes),
    [np.transpose, np.permute_dims],
    [
        (((3, 4),), {}),
        (((2, 3, 4),), {"axes": (1, 2, 0)}),
        (((2, 3, 4),), {"axes": (-1, 0, 1)}),
        (((),), {}),
        (((0, 2),), {}),
    ],
    view="permute",
    as_view=lambda a, out, attrs, dims: np.transpose(a, attrs.get("axes")),
)


def _swapaxes(name, t, attrs):
    i, j = rules.axis(name, attrs["axis1"], t.ndim), rules.axis(name, attrs["axis2"], t.ndim)
    shape = list(t.shape)
    shape[i], shape[j] = shape[j], shape[i]
    return tuple(shape)


movement(
    "np.swapaxes",
    [Attr("axis1", convert=rules.to_int), Attr("axis2", convert=rules.to_int)],
    _swapaxes,
    lambda a, axis1, axis2: np.swapaxes(a, axis1, axis2),
    [np.swapaxes, np.ndarray.swapaxes],
    [
        (((3, 4),), {"axis1": 0, "axis2": 1}),
        (((2, 3, 4),), {"axis1": -1, "axis2": 0}),
        (((0, 2, 1),), {"axis1": 1, "axis2": 1}),
    ],
    view="permute",
    as_view=lambda a, out, attrs, dims: np.swapaxes(a, attrs["axis1"], attrs["axis2"]),
)


def _moveaxis(name, t, attrs):
    src = [rules.axis(name, a, t.ndim) for a in attrs["source"]]
    dst = [rules.axis(name, a, t.ndim) for a in attrs["destination"]]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ShapeError(
            f"{name}: source {attrs['source']} and destination {attrs['destination']} must be "
            "distinct axes of equal count"
        )
    order = [i for i in range(t.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return tuple(t.shape[i] for i in order)


movement(
    "np.moveaxis",
    [Attr("source", convert=rules.to_ints), Attr("destination", convert=rules.to_ints)],
    _moveaxis,
    lambda a, source, destination: np.moveaxis(a, source, destination),
    [np.moveaxis],
    [
        (((2, 3, 4),), {"source": 0, "destination": -1}),
        (((2, 3, 4),), {"source": (0, 1), "destination": (2, 0)}),
        (((0, 3),), {"source": 1, "destination": 0}),
    ],
    view="permute",
    as_view=lambda a, out, attrs, dims: np.moveaxis(a, attrs["source"], attrs["destination"]),
)


def _expand_dims(name, t, attrs):
    ndim = t.ndim + len(attrs["axis"])
    new = rules.axes(name, attrs["axis"], ndim)
    rest = iter(t.shape)
    return tuple(1 if i in new else next(rest) for i in range(ndim))


movement(
    "np.expand_dims",
    [Attr("axis", convert=rules.to_ints)],
    _expand_dims,
    lambda a, axis: np.expand_dims(a, axis),
    [np.expand_dims],
    [(((3, 4),), {"axis": 0}), (((3, 4),), {"axis": (-1, 1)}), (((),), {"axis": 0}), (((0,),), {"axis": 1})],
    view="reshape",
    as_view=lambda a, out, attrs, dims: np.expand_dims(a, attrs["axis"]),
)


def _squeeze(name, t, attrs):
    if attrs["axis"] is None:
        if any(type(d) is not int for d in t.shape):
            raise ShapeError(f"{name}: cannot tell which symbolic dims of {t} are 1; pass axis=")
        return tuple(d for d in t.shape if d != 1)
    red = rules.axes(name, attrs["axis"], t.ndim)
    for a in red:
        if t.shape[a] != 1 and type(t.shape[a]) is int:
            raise ShapeError(f"{name}: cannot squeeze axis {a} of {t}: its size is not 1")
    return tuple(d for i, d in enumerate(t.shape) if i not in red)


movement(
    "np.squeeze",
    [Attr("axis", None, rules.to_axis)],
    _squeeze,
    lambda a, axis: np.squeeze(a, axis),
    [np.squeeze, np.ndarray.squeeze],
    [
        (((1, 3, 1),), {}),
        (((1, 3, 1),), {"axis": -1}),
        (((3, 1, 1),), {"axis": (1, 2)}),
        (((),), {}),
        (((0, 1),), {"axis": 1}),
    ],
    view="reshape",
    as_view=lambda a, out, attrs, dims: np.squeeze(a, attrs.get("axis")),
)


def _broadcast_to(name, t, attrs):
    shape = attrs["shape"]
    if len(shape) < t.ndim:
        raise ShapeError(f"{name}: cannot broadcast {t} to fewer dims {shape}")
    for d, s in zip(t.shape[::-1], shape[::-1]):
        if not (dims.equal(d, s) or d == 1 or type(d) is not int):
            raise ShapeError(f"{name}: cannot broadcast {t} to {shape}")
    return shape


movement(
    "np.broadcast_to",
    [Attr("shape", convert=rules.to_shape), Unsupported("subok", False, same=(True,))],
    _broadcast_to,
    lambda a, shape: np.broadcast_to(a, shape).copy(),
    [np.broadcast_to],
    [(((3, 1),), {"shape": (2, 3, 4)}), (((),), {"shape": (3,)}), (((4,),), {"shape": (0, 4)})],
    doc="the reference returns a copy: graph values never alias",
    as_view=lambda a, out, attrs, dims: np.broadcast_to(a, out),
)


def _flip(name, t, attrs):
    rules.axes(name, attrs["axis"], t.ndim)
    return t.shape


movement(
    "np.flip",
    [Attr("axis", None, rules.to_axis)],
    _flip,
    lambda a, axis: np.flip(a, axis).copy(),
    [np.flip],
    [(((3, 4),), {}), (((3, 4),), {"axis": 1}), (((2, 3, 4),), {"axis": (0, -1)}), (((0, 2),), {"axis": 0})],
    as_view=lambda a, out, attrs, dims: np.flip(a, attrs.get("axis")),
)


def _roll(name, t, attrs):
    shift, ax = attrs["shift"], attrs["axis"]
    if ax is not None:
        ax = ax if isinstance(ax, tuple) else (ax,)
        for a in ax:
            rules.axis(name, a, t.ndim)
        if len(shift) != 1 and len(shift) != len(ax):
            raise ShapeError(f"{name}: shift {shift} and axis {ax} differ in length")
    elif len(shift) != 1:
        raise ShapeError(f"{name}: several shifts need an axis")
    return t.shape


movement(
    "np.roll",
    [Attr("shift", convert=lambda v: rules.to_ints(v)), Attr("axis", None, rules.to_axis)],
    _roll,
    lambda a, shift, axis: np.roll(a, shift if len(shift) > 1 else shift[0], axis),
    [np.roll],
    [
        (((3, 4),), {"shift": 1}),
        (((3, 4),), {"shift": -2, "axis": 1}),
        (((2, 3, 4),), {"shift": (1, 2), "axis": (0, 2)}),
        (((0,),), {"shift": 1}),
        (((),), {"shift": 3}),
    ],
)


movement(
    "np.copy",
    [Attr("order", "K", _ORDER)],
    lambda n, t, a: t.shape,
    lambda a, order: np.copy(a, order),
    [np.copy, np.ndarray.copy],
    [(((3, 4),), {}), (((),), {}), (((0, 3),), {"order": "F"})],
)


def _ascontiguous_rule(types, attrs):
    t = rules.first_tensor("np.ascontiguousarray", types)
    return TensorType(attrs["dtype"] or t.dtype, t.shape if t.ndim else _ASCONTIGUOUS_0D)


# NumPy versions differ on whether a 0-d input comes back 0-d or 1-d: ask the installed one.
_ASCONTIGUOUS_0D = np.ascontiguousarray(np.zeros(())).shape


register(
    OpDef(
        "np.ascontiguousarray",
        "movement",
        [Input("a"), Attr("dtype", None, rules.to_dtype_or_none)],
        _ascontiguous_rule,
        lambda a, dtype: np.ascontiguousarray(a, dtype).copy(),
        numpy_targets=[np.ascontiguousarray],
        samples=sampling.sweep([(((3, 4),), {}), (((),), {}), (((2, 3),), {"dtype": np.dtype("f4")})]),
        doc="always a new array (graph values never alias)",
    )
)


# -- ndarray methods whose calling convention differs from the function's ---------------------------


def _method_varargs_binder(name: str, param: str, empty):
    """``a.method(*items, **kw)``, where `items` may also be one sequence (``x.reshape(2, 3)`` or
    ``x.reshape((2, 3))``), bound as the function's ``param``; no items gives `empty`."""

    def bind(args, kwargs):
        if not args:
            raise TypeError(f"{name}: missing the array")
        a, items = args[0], args[1:]
        if param in kwargs:
            if items:
                raise TypeError(f"{name}: got {param} both positionally and as a keyword")
            items = (kwargs.pop(param),)
        if len(items) == 1 and (items[0] is None or isinstance(items[0], (tuple, list))):
            value = items[0]
        else:
            value = tuple(items) if items else empty
        return get(name).bind([a], {param: value, **kwargs})

    return bind


for _method, _name, _param, _empty in (
    (np.ndarray.reshape, "np.reshape", "shape", None),
    (np.ndarray.transpose, "np.transpose", "axes", None),
):
    register_target(
        _method, "__call__", get(_name).variant(binder=_method_varargs_binder(_name, _param, _empty))
    )


def _broadcast_arrays_rule(types, attrs):
    name = "np.broadcast_arrays"
    shape = rules.broadcast(name, *(rules.shape_of(t) for t in types))
    return tuple(
        TensorType(t.dtype if type(t) is TensorType else np.asarray(rules.example(t)).dtype, shape)
        for t in types
    )


def _broadcast_arrays_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 1), dt), sampling.array(rng, (4,), dt)))
    for shapes in (((2, 1, 4), (3, 1)), ((3,),), ((), (2, 3), (3,)), ((0, 3), (1, 3)), ((), ())):
        yield Sample(tuple(sampling.array(rng, s, "f4") for s in shapes))
    yield Sample((sampling.array(rng, (2, 3), "i4"), sampling.array(rng, (3,), "f8")), note="dtypes kept")
    yield Sample((sampling.array(rng, (2, 3), "f4"), 1.5), note="a Python scalar becomes a float64 array")


def _broadcast_arrays_impl(args):
    return rules.results(np.array(a, copy=True) for a in np.broadcast_arrays(*args))


register(
    OpDef(
        "np.broadcast_arrays",
        "movement",
        [Inputs("args", "any", star=True), Unsupported("subok", False, same=(True,))],
        _broadcast_arrays_rule,
        _broadcast_arrays_impl,
        numpy_targets=[np.broadcast_arrays],
        samples=_broadcast_arrays_samples,
        doc="one output per input, each a copy (NumPy's are read-only views); dtypes are kept; "
        "NumPy's tuple of one array for one input is one output",
    )
)
