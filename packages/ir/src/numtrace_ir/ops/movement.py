"""Movement ops: reshaping, permuting, joining, splitting, padding, reordering and gathering data.
Values are moved, never computed (sort/argsort/take included); dtypes follow their inputs."""

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
    Param,
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
    [Attr("shape", convert=rules.to_shape), Unsupported("subok", False)],
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


def _tile(name, t, attrs):
    reps = attrs["reps"]
    n = max(len(reps), t.ndim)
    shape = (1,) * (n - t.ndim) + t.shape
    reps = (1,) * (n - len(reps)) + reps
    if any(r < 0 for r in reps):
        raise ShapeError(f"{name}: negative reps {attrs['reps']}")
    return tuple(dims.mul(d, r) for d, r in zip(shape, reps))


movement(
    "np.tile",
    [Attr("reps", convert=rules.to_ints)],
    _tile,
    lambda a, reps: np.tile(a, reps),
    [np.tile],
    [
        (((3, 4),), {"reps": 2}),
        (((3,),), {"reps": (2, 2)}),
        (((2, 3, 4),), {"reps": (2, 1)}),
        (((),), {"reps": 3}),
        (((0, 2),), {"reps": (2, 2)}),
    ],
)


def _repeat(name, t, attrs):
    reps, ax = attrs["repeats"], attrs["axis"]
    if any(r < 0 for r in reps):
        raise ShapeError(f"{name}: negative repeats {reps}")
    base = (dims.prod(t.shape),) if ax is None else t.shape
    i = 0 if ax is None else rules.axis(name, ax, t.ndim)
    n = base[i]
    if len(reps) == 1:
        size = dims.mul(n, reps[0])
    elif type(n) is int and len(reps) == n:
        size = sum(reps)
    else:
        raise ShapeError(f"{name}: {len(reps)} repeats for an axis of size {n}")
    return base[:i] + (size,) + base[i + 1 :]


movement(
    "np.repeat",
    [Attr("repeats", convert=rules.to_ints), Attr("axis", None, rules.to_int_or_none)],
    _repeat,
    lambda a, repeats, axis: np.repeat(a, repeats if len(repeats) > 1 else repeats[0], axis),
    [np.repeat, np.ndarray.repeat],
    [
        (((3, 4),), {"repeats": 2}),
        (((3, 4),), {"repeats": (1, 0, 2), "axis": 0}),
        (((2, 3),), {"repeats": 3, "axis": -1}),
        (((),), {"repeats": 2}),
        (((0, 2),), {"repeats": 2, "axis": 1}),
    ],
)


def _to_pad_width(v):
    """``pad_width`` in any NumPy form -> an int, a pair, or a tuple of pairs."""
    if isinstance(v, (int, np.integer)):
        return rules.to_int(v)
    v = tuple(v)
    if all(isinstance(x, (int, np.integer)) for x in v):
        return rules.to_ints(v)
    return tuple(rules.to_ints(x) for x in v)


def _pad(name, t, attrs):
    pw = attrs["pad_width"]
    if isinstance(pw, int):
        pairs = [(pw, pw)] * t.ndim
    elif pw and isinstance(pw[0], int):
        if len(pw) not in (1, 2):
            raise ShapeError(f"{name}: pad_width {pw} is not (before, after)")
        pairs = [(pw[0], pw[-1])] * t.ndim
    elif len(pw) == 1:
        pairs = [tuple(pw[0]) * (2 // len(pw[0]))] * t.ndim
    elif len(pw) == t.ndim:
        pairs = [p * (2 // len(p)) if len(p) in (1, 2) else p for p in pw]
    else:
        raise ShapeError(f"{name}: pad_width {pw} does not match an array of dimension {t.ndim}")
    if any(len(p) != 2 or min(p) < 0 for p in pairs):
        raise ShapeError(f"{name}: pad_width {pw} needs non-negative (before, after) pairs")
    return tuple(dims.add(d, b + a) for d, (b, a) in zip(t.shape, pairs))


def _constant_mode(v):
    if v != "constant":
        raise NotImplementedError(f"np.pad mode {v!r}: only mode='constant' is an op")
    return v


movement(
    "np.pad",
    [
        Attr("pad_width", convert=_to_pad_width),
        Attr("mode", "constant", _constant_mode),
        Attr("constant_values", 0, rules.to_scalar),
    ],
    _pad,
    lambda a, pad_width, mode, constant_values: np.pad(a, pad_width, mode, constant_values=constant_values),
    [np.pad],
    [
        (((3, 4),), {"pad_width": 1}),
        (((3, 4),), {"pad_width": ((1, 2), (0, 3)), "constant_values": 1}),
        (((2, 3, 4),), {"pad_width": (2, 1)}),
        (((),), {"pad_width": 2}),
        (((0, 2),), {"pad_width": ((1,), (2,))}),
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


def _tri(name, t, attrs):
    if t.ndim < 2:
        raise ShapeError(f"{name}: needs at least 2 dims, got {t}")
    return t.shape


# The registration loops below share these names; each holds a NumPy function or a shape helper.
_fn: Callable
_to_nd: Callable[[tuple], tuple]
_axis_of: Callable[[int], int]
for _name, _fn in (("np.triu", np.triu), ("np.tril", np.tril)):
    movement(
        _name,
        [Attr("k", 0, rules.to_int)],
        _tri,
        (lambda fn: lambda a, k: fn(a, k))(_fn),
        [_fn],
        [(((3, 4),), {}), (((4, 3),), {"k": 1}), (((2, 3, 3),), {"k": -1}), (((0, 2),), {})],
    )


def _diagonal(name, t, attrs):
    if t.ndim < 2:
        raise ShapeError(f"{name}: needs at least 2 dims, got {t}")
    i, j = rules.axis(name, attrs["axis1"], t.ndim), rules.axis(name, attrs["axis2"], t.ndim)
    if i == j:
        raise ShapeError(f"{name}: axis1 and axis2 are the same axis {i}")
    k = attrs["offset"]
    n1, n2 = t.shape[i], t.shape[j]
    n = dims.minimum(n1, dims.sub(n2, k)) if k >= 0 else dims.minimum(dims.add(n1, k), n2)
    return tuple(d for a, d in enumerate(t.shape) if a not in (i, j)) + (dims.maximum(n, 0),)


movement(
    "np.diagonal",
    [Attr("offset", 0, rules.to_int), Attr("axis1", 0, rules.to_int), Attr("axis2", 1, rules.to_int)],
    _diagonal,
    lambda a, offset, axis1, axis2: np.diagonal(a, offset, axis1, axis2).copy(),
    [np.diagonal, np.ndarray.diagonal],
    [
        (((3, 4),), {}),
        (((3, 4),), {"offset": 2}),
        (((4, 3),), {"offset": -5}),
        (((2, 3, 4),), {"axis1": 2, "axis2": 0, "offset": -1}),
        (((0, 2),), {}),
    ],
    as_view=lambda a, out, attrs, dims: np.diagonal(a, attrs["offset"], attrs["axis1"], attrs["axis2"]),
)


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
    return np.argsort(a, axis, kind="stable" if kind is None else kind)


register(
    OpDef(
        "np.argsort",
        "movement",
        [Input("a"), Attr("axis", -1, rules.to_int_or_none), Attr("kind", None, _KIND), Unsupported("order")],
        _argsort_rule,
        _argsort_impl,
        numpy_targets=[np.argsort, np.ndarray.argsort],
        samples=sampling.sweep(_SORT_CASES),
        doc="ties are ordered stably (NumPy's default kind does not promise an order for ties)",
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


# -- joining and splitting --------------------------------------------------------------------------


def _join_rule(name, stack):
    def rule(types, attrs):
        for t in types:
            if type(t) is not TensorType:
                raise TypeError(f"{name}: expected arrays, got {t}")
        dt = attrs["dtype"] or rules.result_dtype(name, types)
        first = types[0]
        if stack:
            for t in types[1:]:
                if len(t.shape) != first.ndim or not all(map(_same_or_symbolic, t.shape, first.shape)):
                    raise ShapeError(
                        f"{name}: all input arrays must have the same shape, got {first} and {t}"
                    )
            ax = rules.axis(name, attrs["axis"], first.ndim + 1)
            return TensorType(dt, first.shape[:ax] + (len(types),) + first.shape[ax:])
        if attrs["axis"] is None:
            return TensorType(dt, (_sum(dims.prod(t.shape) for t in types),))
        if first.ndim == 0:
            raise ShapeError(f"{name}: zero-dimensional arrays cannot be concatenated")
        ax = rules.axis(name, attrs["axis"], first.ndim)
        for t in types[1:]:
            if t.ndim != first.ndim or not all(
                _same_or_symbolic(a, b) for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != ax
            ):
                raise ShapeError(f"{name}: shapes {first} and {t} differ off axis {ax}")
        size = _sum(t.shape[ax] for t in types)
        return TensorType(dt, first.shape[:ax] + (size,) + first.shape[ax + 1 :])

    return rule


def _same_or_symbolic(a, b) -> bool:
    return dims.equal(a, b) or type(a) is not int or type(b) is not int


def _sum(ds):
    total = 0
    for d in ds:
        total = dims.add(total, d)
    return total


def _join_samples(stack):
    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample((sampling.array(rng, (2, 3), dt), sampling.array(rng, (2, 3), dt)), {})
        shapes = [((2, 3), (2, 3), (2, 3))] if stack else [((2, 3), (4, 3)), ((2, 3), (2, 1), (2, 0))]
        axes = [(1, -1)] if stack else [(0,), (1,)]
        for ss, ax in zip(shapes, axes):
            for a in ax:
                yield Sample(tuple(sampling.array(rng, s, "f8") for s in ss), {"axis": a})
        yield Sample((sampling.array(rng, (2, 3), "i4"), sampling.array(rng, (2, 3), "f4")), {},
                     note="mixed dtypes")
        yield Sample((sampling.array(rng, (2, 3), "f8"), sampling.array(rng, (2, 3), "f8")),
                     {"dtype": np.dtype("f4")})
        if stack:
            yield Sample((sampling.array(rng, (), "f8"), sampling.array(rng, (), "f8")), {})
        else:
            yield Sample((sampling.array(rng, (2, 3), "f8"), sampling.array(rng, (4,), "f8")), {"axis": None})

    return samples


def _join_impl(fn):
    def impl(arrays, axis, dtype):
        return fn(arrays, axis=axis, dtype=dtype, casting="same_kind" if dtype is None else "unsafe")

    return impl


for _name, _fn, _stack, _targets in (
    ("np.concatenate", np.concatenate, False, [np.concatenate, np.concat]),
    ("np.stack", np.stack, True, [np.stack]),
):
    register(
        OpDef(
            _name,
            "movement",
            [
                Inputs("arrays"),
                Attr("axis", 0, rules.to_int_or_none),
                Unsupported("out"),
                Attr("dtype", None, rules.to_dtype_or_none),
            ],
            _join_rule(_name, _stack),
            _join_impl(_fn),
            numpy_targets=_targets,
            samples=_join_samples(_stack),
        )
    )


def _split_rule(name, even):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        ax = rules.axis(name, attrs["axis"], t.ndim)
        n = t.shape[ax]
        ios = attrs["indices_or_sections"]
        if isinstance(ios, int):
            if ios <= 0:
                raise ShapeError(f"{name}: number of sections must be > 0, got {ios}")
            if even and type(n) is int and n % ios:
                raise ShapeError(f"{name}: axis {ax} of size {n} does not split into {ios} equal sections")
            # Section i of array_split has (n + k - 1 - i) // k elements; split's are all n // k.
            sizes = [
                dims.floordiv(dims.add(n, ios - 1 - i), ios) if not even else dims.floordiv(n, ios)
                for i in range(ios)
            ]
        else:
            sizes = [rules.slice_len(name, n, slice(a, b)) for a, b in zip((0, *ios), (*ios, None))]
        return tuple(TensorType(t.dtype, t.shape[:ax] + (s,) + t.shape[ax + 1 :]) for s in sizes)

    return rule


def _to_ios(v):
    return rules.to_int(v) if isinstance(v, (int, np.integer)) else rules.to_ints(v)


def _split_view(fn: Callable) -> Callable:
    return lambda a, out, attrs, dims: tuple(fn(a, attrs["indices_or_sections"], attrs["axis"]))


for _name, _fn, _even in (("np.split", np.split, True), ("np.array_split", np.array_split, False)):
    _cases = [
        (((6, 4),), {"indices_or_sections": 3}),
        (((6, 4),), {"indices_or_sections": (1, 4), "axis": 0}),
        (((2, 6),), {"indices_or_sections": (2, -1, 9), "axis": -1}),
        (((0, 3),), {"indices_or_sections": 2}),
        (((4, 6),), {"indices_or_sections": 2, "axis": 1}),
    ]
    if not _even:
        _cases.append((((7, 2),), {"indices_or_sections": 3}))
    register(
        OpDef(
            _name,
            "movement",
            [Input("ary"), Attr("indices_or_sections", convert=_to_ios), Attr("axis", 0, rules.to_int)],
            _split_rule(_name, _even),
            (
                lambda fn: (
                    lambda ary, indices_or_sections, axis: tuple(
                        x.copy() for x in fn(ary, indices_or_sections, axis)
                    )
                )
            )(_fn),
            numpy_targets=[_fn],
            samples=sampling.sweep(_cases),
            as_view=_split_view(_fn),
            doc="one output per section",
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


# -- stacking helpers, atleast_nd, diag, broadcast_arrays -------------------------------------------

_CASTING = rules.one_of("no", "equiv", "safe", "same_kind", "unsafe")


def _atleast(shape: tuple, ndim: int) -> tuple:
    """The shape of ``np.atleast_{ndim}d`` of an array of `shape`."""
    if len(shape) >= ndim:
        return shape
    if ndim == 3 and len(shape) == 2:
        return shape + (1,)
    if ndim == 3 and len(shape) == 1:
        return (1,) + shape + (1,)
    return (1,) * (ndim - len(shape)) + shape


def _stack_rule(name: str, reshape, axis_of):
    """hstack/vstack/column_stack: each input reshaped by `reshape`, then concatenated along
    `axis_of(first reshaped ndim)`, with concatenate's dtype rule and NumPy's casting check."""
    concat = _join_rule(name, False)

    def rule(types, attrs):
        for t in types:
            if type(t) is not TensorType:
                raise TypeError(f"{name}: expected arrays, got {t}")
        shaped = tuple(TensorType(t.dtype, reshape(t.shape)) for t in types)
        dtype, casting = attrs.get("dtype"), attrs.get("casting", "same_kind")
        out = concat(shaped, {"axis": axis_of(shaped[0].ndim), "dtype": dtype})
        for t in types:
            if not np.can_cast(t.dtype, out.dtype, casting):
                raise TypeError(f"{name}: cannot cast {t.dtype} to {out.dtype} with casting={casting!r}")
        return out

    return rule


def _stack_samples(shapes_list, kw: bool):
    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample((sampling.array(rng, shapes_list[0][0], dt),
                          sampling.array(rng, shapes_list[0][1], dt)))
        for shapes in shapes_list[1:]:
            yield Sample(tuple(sampling.array(rng, s, "f8") for s in shapes))
        yield Sample((sampling.array(rng, shapes_list[0][0], "i4"),
                      sampling.array(rng, shapes_list[0][1], "f4")),
                     note="mixed dtypes")
        if kw:
            yield Sample((sampling.array(rng, shapes_list[0][0], "f8"),) * 2, {"dtype": np.dtype("f4")})
            yield Sample((sampling.array(rng, shapes_list[0][0], "i8"),) * 2,
                         {"dtype": np.dtype("f4"), "casting": "same_kind"})
            yield Sample((sampling.array(rng, shapes_list[0][0], "f4"),) * 2, {"casting": "no"})

    return samples


for _name, _fn, _to_nd, _axis_of, _kw, _shapes in (
    (
        "np.hstack",
        np.hstack,
        lambda s: _atleast(s, 1),
        lambda nd: 0 if nd == 1 else 1,
        True,
        [((2, 3), (2, 4)), ((3,), (2,)), ((), (2,), ()), ((2, 0), (2, 1)), ((2, 1, 3), (2, 2, 3)),
         ((0,), (0,))],
    ),
    (
        "np.vstack",
        np.vstack,
        lambda s: _atleast(s, 2),
        lambda nd: 0,
        True,
        [((2, 3), (4, 3)), ((3,), (3,)), ((3,), (2, 3)), ((), ()), ((0, 3), (1, 3)),
         ((2, 3, 4), (1, 3, 4))],
    ),
    (
        "np.column_stack",
        np.column_stack,
        lambda s: (s + (1,) if len(s) == 1 else (1, 1)) if len(s) < 2 else s,
        lambda nd: 1,
        False,
        [((3, 2), (3, 4)), ((3,), (3,)), ((3,), (3, 2)), ((), (1, 2)), ((0,), (0, 2)),
         ((2, 3, 4), (2, 1, 4))],
    ),
):
    _params: list[Param] = [Inputs("tup")]
    if _kw:
        _params += [Attr("dtype", None, rules.to_dtype_or_none), Attr("casting", "same_kind", _CASTING)]
    register(
        OpDef(
            _name,
            "movement",
            _params,
            _stack_rule(_name, _to_nd, _axis_of),
            (lambda fn, kw: (lambda tup, **attrs: fn(tup, **attrs)))(_fn, _kw),
            numpy_targets=[_fn],
            samples=_stack_samples(_shapes, _kw),
            doc="the inputs are made at least 1-d (hstack), 2-d (vstack) or columns (column_stack), "
            "then concatenated",
        )
    )


def _atleast_op(ndim: int) -> OpDef:
    name = f"np.atleast_{ndim}d"
    fn = getattr(np, f"atleast_{ndim}d")

    def rule(types, attrs):
        for t in types:
            if type(t) is not TensorType:
                raise TypeError(f"{name}: expected arrays, got {t}")
        return tuple(TensorType(t.dtype, _atleast(t.shape, ndim)) for t in types)

    def impl(arys):
        out = fn(*arys)
        return tuple(np.array(a, copy=True) for a in out) if len(arys) > 1 else np.array(out, copy=True)

    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample((sampling.array(rng, (3,), dt),))
        several = (((), (3,), (2, 3), (2, 3, 4)), ((0, 2), (1,)))
        for shapes in (((),), ((2, 3),), ((2, 3, 4, 1),), ((0,),)) + several:
            yield Sample(tuple(sampling.array(rng, s, "f8") for s in shapes))

    return register(
        OpDef(
            name,
            "movement",
            [Inputs("arys", star=True)],
            rule,
            impl,
            numpy_targets=[fn],
            samples=samples,
            doc="one output per input (NumPy returns one array for one input, a tuple for several)",
        )
    )


for _ndim in (1, 2, 3):
    _atleast_op(_ndim)


def _diag(name, t, attrs):
    k = attrs["k"]
    if t.ndim == 1:
        n = dims.add(t.shape[0], abs(k))
        return (n, n)
    if t.ndim == 2:
        return _diagonal(name, t, {"offset": k, "axis1": 0, "axis2": 1})[-1:]
    raise ShapeError(f"{name}: input must be 1- or 2-d, got {t}")


movement(
    "np.diag",
    [Attr("k", 0, rules.to_int)],
    _diag,
    lambda a, k: np.array(np.diag(a, k), copy=True),
    [np.diag],
    [
        (((3,),), {}),
        (((3,),), {"k": 2}),
        (((4,),), {"k": -1}),
        (((3, 4),), {}),
        (((3, 4),), {"k": 1}),
        (((4, 3),), {"k": -2}),
        (((3, 4),), {"k": 7}),
        (((0,),), {"k": 1}),
        (((0, 3),), {}),
    ],
    doc="a 1-d input gives the square matrix with it on diagonal k; a 2-d input gives diagonal k",
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
    out = tuple(np.array(a, copy=True) for a in np.broadcast_arrays(*args))
    return out if len(out) > 1 else out[0]  # a single-output op returns its array, not a 1-tuple


register(
    OpDef(
        "np.broadcast_arrays",
        "movement",
        [Inputs("args", "any", star=True), Unsupported("subok", False)],
        _broadcast_arrays_rule,
        _broadcast_arrays_impl,
        numpy_targets=[np.broadcast_arrays],
        samples=_broadcast_arrays_samples,
        doc="one output per input, each a copy (NumPy's are read-only views); dtypes are kept; "
        "NumPy's tuple of one array for one input is one output",
    )
)
