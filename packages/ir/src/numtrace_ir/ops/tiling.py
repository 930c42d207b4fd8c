"""Movement ops that tile, repeat or pad an array, or keep or build its triangles and diagonals
(triu, tril, diagonal, diag). Values are moved, never computed; dtypes follow their inputs. `repeat`
with counts computed at run time has a data-dependent length (`np.repeat_counts`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.indexing import DATA_SIZE
from numtrace_ir.ops.movement import movement
from numtrace_ir.registry import Attr, Input, OpDef, Sample, register
from numtrace_ir.types import TensorType


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


# `np.repeat` with an array of counts the trace computes or takes as an input (the tracer records such a
# call as this op; counts known while tracing stay the attr of `np.repeat`).
REPEAT_COUNTS = "np.repeat_counts"


def _repeat_counts_rule(types, attrs):
    name = REPEAT_COUNTS
    t, counts = (rules.first_tensor(name, (x,)) for x in types)
    if not np.can_cast(counts.dtype, np.intp, "safe"):
        raise TypeError(f"{name}: cannot cast repeats of {counts.dtype} to {np.dtype(np.intp)} according to "
                        "the rule 'safe'")
    if counts.ndim > 1:
        raise ShapeError(f"{name}: repeats must be 0-d or 1-d, got {counts}")
    ax = attrs["axis"]
    base = (dims.prod(t.shape),) if ax is None else t.shape
    i = 0 if ax is None else rules.axis(name, ax, t.ndim)
    k = counts.shape[0] if counts.ndim else 1
    if type(k) is int and type(base[i]) is int and k not in (1, base[i]):
        raise ShapeError(f"{name}: operands could not be broadcast together with shape ({base[i]},) ({k},)")
    return TensorType(t.dtype, base[:i] + (attrs["size"],) + base[i + 1:])


def _repeat_counts_samples(rng):
    for dt in sampling.DTYPES:
        counts = sampling.array(rng, (3,), "i8", (0.0, 4.0))
        yield Sample((sampling.array(rng, (3, 2), dt), counts), {"axis": 0})
    a = sampling.array(rng, (2, 3), "f8")
    yield Sample((a, np.array([2, 0, 1], np.int32)), {"axis": -1})
    yield Sample((a, sampling.array(rng, (6,), "i8", (0.0, 3.0))), {}, note="flattened")
    yield Sample((a, np.array([3])), {"axis": 0}, note="one count for every element")
    yield Sample((a, np.array(2)), {"axis": 1}, note="0-d count")
    yield Sample((a, np.array([True, False])), {"axis": 0}, note="bool counts")
    yield Sample((np.zeros((0, 3)), np.zeros((0,), np.intp)), {"axis": 0}, note="empty")
    yield Sample((a, np.zeros((3,), np.intp)), {"axis": 1}, note="no copies")


register(OpDef(
    REPEAT_COUNTS, "movement",
    [Input("a"), Input("repeats"), Attr("axis", None, rules.to_int_or_none), DATA_SIZE],
    _repeat_counts_rule, lambda a, repeats, axis, size: np.repeat(a, repeats, axis),
    samples=_repeat_counts_samples, data_dependent_shape=True,
    doc="``np.repeat(a, repeats, axis)`` with an array of counts known only at run time: the result's "
    "length along the axis, their sum, is the data-dependent `size` (negative counts raise, as in NumPy)",
))


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
    if attrs.get("mode", "constant") not in ("constant", "empty") and 0 in t.shape:
        # NumPy's other modes read the array's elements: none to extend an empty axis with
        for ax, (d, p) in enumerate(zip(t.shape, pairs)):
            if d == 0 and any(p):
                raise ShapeError(f"{name}: can't extend empty axis {ax} using modes other than 'constant' "
                                 "or 'empty'")
    return tuple(dims.add(d, b + a) for d, (b, a) in zip(t.shape, pairs))


_PAD_MODES = ("constant", "edge", "linear_ramp", "maximum", "mean", "median", "minimum", "reflect",
              "symmetric", "wrap", "empty")
# The keyword arguments NumPy takes with each mode (a call giving others raised when NumPy ran).
_PAD_OPTIONS = {"constant": ("constant_values",), "linear_ramp": ("end_values",), "maximum": ("stat_length",),
                "mean": ("stat_length",), "median": ("stat_length",), "minimum": ("stat_length",),
                "reflect": ("reflect_type",), "symmetric": ("reflect_type",)}


def _pad_mode(v):
    if not isinstance(v, str):
        raise NotImplementedError("np.pad with a function as mode is a host call")
    if v not in _PAD_MODES:
        raise ValueError(f"mode {v!r} is not supported")
    return v


def _nested(convert):
    """A per-axis pad option (a value, a pair, or a pair per axis) with each number converted; a form
    the op does not take (an array, a traced value) is a host call."""

    def to(v):
        if isinstance(v, np.ndarray) and type(v) is np.ndarray:
            v = v.tolist()
        if isinstance(v, (list, tuple)):
            return tuple(to(x) for x in v)
        try:
            return convert(v)
        except (TypeError, ValueError):
            raise NotImplementedError(f"np.pad option {v!r} is not modelled") from None

    return to


def _stat_length(v):
    return v if v is None else _nested(rules.to_int)(v)


def _pad_impl(a, pad_width, mode, stat_length, constant_values, end_values, reflect_type):
    if mode == "empty":  # unspecified contents: zeros are one valid answer, the same on every backend
        return np.pad(a, pad_width)
    given = {"stat_length": stat_length, "constant_values": constant_values, "end_values": end_values,
             "reflect_type": reflect_type}
    return np.pad(a, pad_width, mode, **{k: given[k] for k in _PAD_OPTIONS.get(mode, ())})


movement(
    "np.pad",
    [
        Attr("pad_width", convert=_to_pad_width),
        Attr("mode", "constant", _pad_mode),
        Attr("stat_length", None, _stat_length),
        Attr("constant_values", 0, _nested(rules.to_scalar)),
        Attr("end_values", 0, _nested(rules.to_scalar)),
        Attr("reflect_type", "even", rules.one_of("even", "odd")),
    ],
    _pad,
    _pad_impl,
    [np.pad],
    [
        (((3, 4),), {"pad_width": 1}),
        (((3, 4),), {"pad_width": ((1, 2), (0, 3)), "constant_values": 1}),
        (((3, 4),), {"pad_width": ((1, 2), (0, 3)), "constant_values": ((1, 2), (3, 4))}),
        (((2, 3, 4),), {"pad_width": (2, 1)}),
        (((),), {"pad_width": 2}),
        (((0, 2),), {"pad_width": ((1,), (2,))}),
        (((3, 4),), {"pad_width": ((1, 2), (0, 3)), "mode": "edge"}),
        (((3, 4),), {"pad_width": ((4, 2), (0, 5)), "mode": "reflect"}),
        (((3, 4),), {"pad_width": ((4, 2), (0, 5)), "mode": "reflect", "reflect_type": "odd"}),
        (((3, 4),), {"pad_width": ((4, 2), (0, 5)), "mode": "symmetric"}),
        (((5,),), {"pad_width": (7, 3), "mode": "symmetric", "reflect_type": "odd"}),
        (((1, 3),), {"pad_width": 2, "mode": "reflect"}),
        (((3, 4),), {"pad_width": ((4, 2), (1, 5)), "mode": "wrap"}),
        (((3, 4),), {"pad_width": 2, "mode": "linear_ramp"}),
        (((3, 4),), {"pad_width": ((1, 2), (3, 0)), "mode": "linear_ramp", "end_values": ((1, -1), (2, 5))}),
        (((3, 4),), {"pad_width": 2, "mode": "maximum"}),
        (((3, 4),), {"pad_width": 2, "mode": "minimum", "stat_length": 2}),
        (((3, 4),), {"pad_width": (1, 2), "mode": "mean", "stat_length": ((1, 2), (3, 1))}),
        (((5, 4),), {"pad_width": 1, "mode": "median"}),
        (((0, 2),), {"pad_width": ((0, 0), (1, 1)), "mode": "edge"}),
    ],
    doc="every mode NumPy has (``mode='empty'`` fills zeros, one of its valid results); a function as "
    "mode, or array or traced option values, are host calls",
)


def _tri(name, t, attrs):
    if t.ndim < 2:
        raise ShapeError(f"{name}: needs at least 2 dims, got {t}")
    return t.shape


_fn: Callable  # the NumPy function of each op the loop below registers
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
