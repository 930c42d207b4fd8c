"""NaN-aware reductions and scans (`nansum nanprod nanmean nanvar nanstd nanmax nanmin nanargmax nanargmin
nancumsum nancumprod`) and the summaries built like them (`ptp`, `count_nonzero`, `average`).

The reference is NumPy's own function, so all-NaN slices warn, return NaN or raise exactly as NumPy
does. Where NumPy's function is a plain reduction of a masked copy and never warns (`nansum`,
`nanprod`, `nancumsum`, `nancumprod`, `ptp`, `count_nonzero` with an axis), the op decomposes into
`isnan`/`where` and the plain reduction, which backends fuse; the others run NumPy's call.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.elementwise import _create
from numtrace_ir.ops.reductions import _reduced_shape
from numtrace_ir.registry import Attr, Input, OpDef, Param, Sample, Unsupported, get, register
from numtrace_ir.types import TensorType

__all__ = ["defaults_or_host", "with_nans"]

_NO = np._NoValue


def defaults_or_host(name: str) -> Callable:
    """A binder that takes the schema's call, but raises `NotImplementedError` (the tracer then records
    a host call) for a call the op does not model: a parameter it keeps at NumPy's default (``where=``,
    ``initial=``) given, or an argument its schema rejects (NumPy, which ran first, took it)."""

    def bind(args, kwargs):
        op = get(name)
        for i, p in enumerate(op.params):
            if isinstance(p, Unsupported) and p.name != "out":
                given = args[i] if i < len(args) else kwargs.get(p.name, p.default)
                if given is not p.default:
                    raise NotImplementedError(f"{name}: {p.name}= is not modelled")
        try:
            return op.bind_schema(args, kwargs)
        except (TypeError, ValueError) as e:
            raise NotImplementedError(str(e)) from None

    return bind


def with_nans(rng: np.random.Generator, a: np.ndarray, *, every_slice: bool = True) -> np.ndarray:
    """`a` with NaNs at random positions of a float or complex array. With `every_slice`, only where the
    index sum is odd: every slice along an axis of length >= 2 keeps a number (no all-NaN slice)."""
    if a.dtype.kind not in "fc" or a.size == 0:
        return a
    mask = rng.random(a.shape) < 0.5
    if every_slice:
        mask &= np.indices(a.shape).sum(axis=0) % 2 == 1
    a = a.copy()
    a[mask] = np.nan
    return a


def _const(g, node, value):
    return g.create_node("prim.Constant", [], {"value": value}, loc=node.loc).outputs[0]


def _masked(g, node, fill):
    """The node's first input with NaNs replaced by `fill` (NumPy's ``_replace_nan``); an input without
    NaNs (ints, bools) as it is."""
    a = node.inputs[0]
    if a.type.dtype.kind not in "fc":
        return a
    return _create(g, node, "np.where", [_create(g, node, "np.isnan", [a]), _const(g, node, fill), a])


def _masked_decompose(fill, plain: str, keys: tuple[str, ...]):
    def decompose(g, node):
        attrs = {k: node.attrs[k] for k in keys}
        return [_create(g, node, plain, [_masked(g, node, fill)], **attrs)]

    return decompose


def _reduce_rule(name: str, fn: Callable, probe_attrs: tuple[str, ...], nonempty: bool):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        shape = _reduced_shape(name, t.shape, attrs["axis"], attrs["keepdims"], nonempty)
        extra = {k: attrs[k] for k in probe_attrs if attrs.get(k) is not None}
        return TensorType(rules.probe_dtype(name, fn, np.ones((1,), t.dtype), **extra), shape)

    return rule


_AXES: tuple[tuple[dict, tuple[int, ...]], ...] = (
    ({}, (3, 4)),
    ({"axis": 0}, (3, 4)),
    ({"axis": -1, "keepdims": True}, (3, 4)),
    ({"axis": (0, 2)}, (2, 3, 4)),
    ({"axis": (-1, 0), "keepdims": True}, (2, 3, 4)),
    ({}, ()),
    ({"axis": 1}, (0, 3)),
)


def _reduce_samples(name: str, fn: Callable, *, single_axis: bool, warns: bool, nonempty: bool,
                    ddof: bool, dtype_attr: bool):
    def samples(rng):
        dts = sampling.supported(lambda dt: fn(sampling.ones(dt)), sampling.DTYPES)
        for dt in dts:
            yield Sample((with_nans(rng, sampling.array(rng, (3, 4), dt)),), {"axis": 1})
        for attrs, shape in _AXES:
            if single_axis and isinstance(attrs.get("axis"), tuple):
                continue
            if (warns or nonempty) and 0 in shape and attrs.get("axis") != 1:
                continue  # reducing an empty axis: NumPy warns or raises
            yield Sample((with_nans(rng, sampling.array(rng, shape, "f8")),), dict(attrs))
        yield Sample((with_nans(rng, sampling.array(rng, (2, 5), "f4")),), {"axis": 1}, note="float32")
        if not warns and not nonempty:
            yield Sample((np.full((2, 3), np.nan),), {"axis": 0}, note="all-NaN slices")
            yield Sample((sampling.array(rng, (0, 3), "f8"),), {"axis": 0}, note="empty slices")
        if dtype_attr:
            yield Sample((sampling.array(rng, (2, 3), "i4"),), {"axis": 0, "dtype": np.dtype("f4")})
        if ddof:
            yield Sample((with_nans(rng, sampling.array(rng, (5, 3), "f8")),), {"axis": 0, "ddof": 1})

    return samples


def nan_reduction(name: str, fn: Callable, *, dtype_attr: bool = True, ddof: bool = False,
                  nonempty: bool = False, single_axis: bool = False, warns: bool = True,
                  extra: tuple[str, ...] = (), decompose: Callable | None = None) -> OpDef:
    """A reduction over ``axis`` with ``keepdims`` and, where NumPy has them, ``dtype`` and ``ddof``;
    `extra` are NumPy's parameters after those that the op does not model (a call giving one is a host
    call). `warns`: NumPy warns for all-NaN (or empty) slices, so samples avoid them."""
    axis = Attr("axis", None, rules.to_int_or_none if single_axis else rules.to_axis)
    params: list[Param] = [Input("a"), axis]
    if dtype_attr:
        params.append(Attr("dtype", None, rules.to_dtype_or_none))
    params.append(Unsupported("out"))
    if ddof:
        params.append(Attr("ddof", 0, rules.to_int))
    params.append(Attr("keepdims", False, rules.to_bool))
    params.extend(Unsupported(e, _NO) for e in extra)

    return register(OpDef(
        name, "reduction", params, _reduce_rule(name, fn, ("dtype",), nonempty), rules.forwarding(fn, "a"),
        numpy_targets=[fn],
        samples=_reduce_samples(name, fn, single_axis=single_axis, warns=warns, nonempty=nonempty, ddof=ddof,
                                dtype_attr=dtype_attr),
        decompose=decompose,
        binder=defaults_or_host(name),
        doc="NumPy's NaN handling, warnings and errors for all-NaN slices included"
        + (f"; {', '.join(extra)} are host calls" if extra else ""),
    ))


_SUM_KEYS = ("axis", "dtype", "keepdims")
nan_reduction("np.nansum", np.nansum, warns=False, extra=("initial", "where"),
              decompose=_masked_decompose(0, "np.sum", _SUM_KEYS))
nan_reduction("np.nanprod", np.nanprod, warns=False, extra=("initial", "where"),
              decompose=_masked_decompose(1, "np.prod", _SUM_KEYS))
nan_reduction("np.nanmean", np.nanmean, extra=("where",))
nan_reduction("np.nanvar", np.nanvar, ddof=True, extra=("where", "mean", "correction"))
nan_reduction("np.nanstd", np.nanstd, ddof=True, extra=("where", "mean", "correction"))
nan_reduction("np.nanmax", np.nanmax, dtype_attr=False, nonempty=True, extra=("initial", "where"))
nan_reduction("np.nanmin", np.nanmin, dtype_attr=False, nonempty=True, extra=("initial", "where"))
nan_reduction("np.nanargmax", np.nanargmax, dtype_attr=False, nonempty=True, single_axis=True)
nan_reduction("np.nanargmin", np.nanargmin, dtype_attr=False, nonempty=True, single_axis=True)


def _ptp_decompose(g, node):
    """``max - min`` (NumPy's ``_ptp``: both reductions, then subtract), all exact."""
    a, attrs = node.inputs[0], {"axis": node.attrs["axis"], "keepdims": node.attrs["keepdims"]}
    hi, lo = _create(g, node, "np.max", [a], **attrs), _create(g, node, "np.min", [a], **attrs)
    return [_create(g, node, "np.subtract", [hi, lo])]


nan_reduction("np.ptp", np.ptp, dtype_attr=False, nonempty=True, warns=False, decompose=_ptp_decompose)


# -- scans -----------------------------------------------------------------------------------------

def _nan_scan(name: str, fn: Callable, fill: int, plain: str) -> OpDef:
    scan = get(plain)

    def samples(rng):
        for s in scan.samples(rng):
            yield Sample(tuple(with_nans(rng, a, every_slice=False) for a in s.inputs), s.attrs, s.note)
        yield Sample((np.full((2, 3), np.nan),), {"axis": 1}, note="all NaN")

    return register(OpDef(
        name, "reduction", scan.params, lambda types, attrs: scan.rule(types, attrs),
        lambda a, axis, dtype: fn(a, axis=axis, dtype=dtype),
        numpy_targets=[fn], samples=samples,
        decompose=_masked_decompose(fill, plain, ("axis", "dtype")),
        doc=f"`{plain}` of the input with NaNs as {fill}",
    ))


_nan_scan("np.nancumsum", np.nancumsum, 0, "np.cumsum")
_nan_scan("np.nancumprod", np.nancumprod, 1, "np.cumprod")


# -- count_nonzero ---------------------------------------------------------------------------------

def _count_rule(types, attrs):
    t = rules.first_tensor("np.count_nonzero", types)
    return TensorType(np.dtype(np.intp), _reduced_shape("np.count_nonzero", t.shape, attrs["axis"],
                                                        attrs["keepdims"], False))


def _count_decompose(g, node):
    """``a.astype(bool).sum(axis, dtype=intp)``: NumPy's own form with an axis, and the same count as
    the NumPy intp scalar it returns without one."""
    a = node.inputs[0]
    if a.type.dtype != np.dtype(bool):
        a = _create(g, node, "np.astype", [a], dtype=np.dtype(bool))
    return [_create(g, node, "np.sum", [a], axis=node.attrs["axis"], dtype=np.dtype(np.intp),
                    keepdims=node.attrs["keepdims"])]


def _count_samples(rng):
    for dt in sampling.DTYPES:
        a = sampling.array(rng, (3, 4), dt, (-1.0, 2.0))
        yield Sample((a,), {"axis": 1})
    for attrs, shape in _AXES:
        if attrs:
            yield Sample((sampling.array(rng, shape, "i4", (-1.0, 2.0)),), dict(attrs))
    yield Sample((sampling.array(rng, (3, 4), "f8", (-1.0, 2.0)),), {"keepdims": True})
    yield Sample((sampling.array(rng, (3, 4), "f4", (-1.0, 2.0)),), {}, note="a NumPy intp scalar")
    yield Sample((sampling.array(rng, (), "i4", (-1.0, 2.0)),), {"keepdims": True}, note="0-d")


register(OpDef(
    "np.count_nonzero", "reduction",
    [Input("a"), Attr("axis", None, rules.to_axis), Attr("keepdims", False, rules.to_bool)],
    _count_rule, lambda a, axis, keepdims: np.count_nonzero(a, axis, keepdims=keepdims),
    numpy_targets=[np.count_nonzero], samples=_count_samples, decompose=_count_decompose,
    doc="an intp count (a NumPy scalar without axis, as NumPy returns)",
))


# -- average ---------------------------------------------------------------------------------------

def _average_rule(types, attrs):
    name = "np.average"
    t = rules.first_tensor(name, types)
    axis = attrs["axis"]
    shape = _reduced_shape(name, t.shape, axis, attrs["keepdims"], False)
    if "weights" in attrs["omitted"]:
        dt = rules.probe_dtype(name, np.mean, np.ones((1,), t.dtype))
    else:
        w = rules.first_tensor(name, types[1:])
        inexact = t.dtype.kind in "fc"
        dt = rules.result_dtype(name, (t, w) if inexact else (t, w, TensorType(np.float64, ())))
        if len(w.shape) != t.ndim or not all(map(_maybe_equal, w.shape, t.shape)):
            if axis is None:
                raise TypeError(f"{name}: axis must be specified when shapes of a and weights differ")
            given = axis if isinstance(axis, tuple) else (axis,)
            order = tuple(rules.axis(name, ax, t.ndim) for ax in given)
            wanted = tuple(t.shape[ax] for ax in order)
            if len(w.shape) != len(order) or not all(map(_maybe_equal, w.shape, wanted)):
                raise ShapeError(f"{name}: shape of weights {w.shape} must match the axes {axis} of {t}")
    out = TensorType(dt, shape)
    return (out, out) if attrs["returned"] else out


def _maybe_equal(a, b) -> bool:
    return not (type(a) is int and type(b) is int) or a == b


def _average_impl(a, axis, weights, returned, keepdims):
    return np.average(a, axis, weights, returned, keepdims=keepdims)


def _average_samples(rng):
    for dt in sampling.NUMERIC:
        yield Sample((sampling.array(rng, (3, 4), dt),), {"axis": 1, "omitted": ("weights",)})
    for dt in ("f8", "i4"):
        yield Sample((sampling.array(rng, (3, 4), dt), sampling.array(rng, (3, 4), "f4", (0.5, 2.0))),
                     {"axis": 0}, note="same-shape weights")
    yield Sample((sampling.array(rng, (3, 4), "f4"), sampling.array(rng, (4,), "f4", (0.5, 2.0))),
                 {"axis": 1, "returned": True}, note="1-d weights")
    yield Sample((sampling.array(rng, (2, 3, 4), "f8"), sampling.array(rng, (2, 4), "f8", (0.5, 2.0))),
                 {"axis": (0, 2), "keepdims": True}, note="weights over two axes")
    yield Sample((sampling.array(rng, (5,), "f8"), sampling.array(rng, (5,), "i8", (1.0, 3.0))), {},
                 note="int weights")
    yield Sample((sampling.array(rng, (3, 4), "f8"),), {"axis": 0, "returned": True, "omitted": ("weights",)})
    yield Sample((sampling.array(rng, (3, 4), "i4"),), {"returned": True, "omitted": ("weights",)})
    yield Sample((sampling.array(rng, (), "f8"),), {"omitted": ("weights",)}, note="0-d")
    yield Sample((sampling.array(rng, (0, 3), "f8"), sampling.array(rng, (0, 3), "f8")), {"axis": 1},
                 note="empty")


register(OpDef(
    "np.average", "reduction",
    [Input("a"), Attr("axis", None, rules.to_axis), Input("weights", optional=True),
     Attr("returned", False, rules.to_bool), Attr("keepdims", False, rules.to_bool)],
    _average_rule, _average_impl, numpy_targets=[np.average], samples=_average_samples,
    doc="weights of a's shape or of the reduced axes' shape; `returned` adds the sum of weights "
    "(broadcast to the average's shape); weights summing to zero raise ZeroDivisionError, as in NumPy",
))
