"""Signal processing and calculus on arrays: `convolve`, `correlate`, `interp`, `ediff1d`,
`cumulative_sum`/`cumulative_prod`, `trapezoid`, `gradient`.

Each is NumPy's own call (the reference), with a shape rule in terms of the input dims so one trace
serves every size; dtypes are probed from NumPy on one-element stand-ins. `cumulative_sum` and
`cumulative_prod` without `include_initial` decompose into the scans, which backends fuse.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.elementwise import _create
from numtrace_ir.ops.nanfunctions import defaults_or_host
from numtrace_ir.registry import Attr, Input, OpDef, Sample, Unsupported, register
from numtrace_ir.types import TensorType

_MODES = ("full", "same", "valid")


def _length(t, zero_d: bool) -> object:
    """The length NumPy's 1-d functions see: a 0-d input is one element where `zero_d`."""
    if t.ndim > 1 or (t.ndim == 0 and not zero_d):
        raise ShapeError(f"object too deep for desired array: expected 1-d input, got {t}")
    return t.shape[0] if t.ndim else 1


def _convolve_rule(name: str, fn):
    def rule(types, attrs):
        a, v = (rules.first_tensor(name, (t,)) for t in types)
        n, m = _length(a, fn is np.convolve), _length(v, fn is np.convolve)
        if n == 0 or m == 0:
            raise ShapeError(f"{name}: {'a' if n == 0 else 'v'} cannot be empty")
        mode = attrs["mode"]
        if mode == "full":
            size = dims.sub(dims.add(n, m), 1)
        elif mode == "same":
            size = dims.maximum(n, m)
        else:
            size = dims.add(dims.sub(dims.maximum(n, m), dims.minimum(n, m)), 1)
        dt = rules.probe_dtype(name, fn, np.ones((1,), a.dtype), np.ones((1,), v.dtype))
        return TensorType(dt, (size,))

    return rule


def _convolve_samples(zero_d: bool):
    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample((sampling.array(rng, (7,), dt), sampling.array(rng, (3,), dt)), {"mode": "full"})
        for mode in _MODES:
            yield Sample((sampling.array(rng, (6,), "f8"), sampling.array(rng, (4,), "f8")), {"mode": mode})
            yield Sample((sampling.array(rng, (3,), "f4"), sampling.array(rng, (5,), "f4")), {"mode": mode},
                         note="v longer")
            yield Sample((sampling.array(rng, (5,), "i4"), sampling.array(rng, (5,), "f8")), {"mode": mode},
                         note="mixed, equal length")
        if zero_d:
            yield Sample((sampling.array(rng, (), "f8"), sampling.array(rng, (4,), "f8")), {"mode": "same"},
                         note="0-d")
        yield Sample((sampling.array(rng, (4,), "c16"), sampling.array(rng, (2,), "c16")), {"mode": "valid"},
                     note="complex")


    return samples

_fn: Any   # NumPy's functions, of unlike signatures
for _fn, _default in ((np.convolve, "full"), (np.correlate, "valid")):
    register(OpDef(
        f"np.{_fn.__name__}", "other",
        [Input("a"), Input("v"), Attr("mode", _default, rules.one_of(*_MODES))],
        _convolve_rule(f"np.{_fn.__name__}", _fn),
        (lambda f: lambda a, v, mode: f(a, v, mode))(_fn),
        numpy_targets=[_fn], samples=_convolve_samples(_fn is np.convolve),
        doc="1-d inputs (0-d as one element); length n+m-1, max(n, m) or |n-m|+1 by mode",
    ))


# -- interp ----------------------------------------------------------------------------------------

def _interp_rule(types, attrs):
    name = "np.interp"
    x, xp, fp = (rules.first_tensor(name, (t,)) for t in types)
    if xp.ndim != 1 or fp.ndim != 1:
        raise ShapeError(f"{name}: xp and fp must be 1-d, got {xp} and {fp}")
    if type(xp.shape[0]) is int and type(fp.shape[0]) is int and xp.shape[0] != fp.shape[0]:
        raise ShapeError(f"{name}: fp and xp are not of the same length")
    if xp.shape[0] == 0:
        raise ShapeError(f"{name}: array of sample points is empty")
    dt = rules.probe_dtype(name, np.interp, np.ones((1,), x.dtype), np.ones((1,), xp.dtype),
                           np.ones((1,), fp.dtype))
    return TensorType(dt, x.shape)


def _interp_impl(x, xp, fp, left, right, period):
    return np.asarray(np.interp(x, xp, fp, left, right, period))


def _interp_samples(rng):
    xp = np.sort(sampling.array(rng, (6,), "f8"))
    for dt in sampling.NUMERIC:
        yield Sample((sampling.array(rng, (3, 4), dt, (-4.0, 4.0)), xp, sampling.array(rng, (6,), "f8")))
    yield Sample((sampling.array(rng, (9,), "f8", (-4.0, 4.0)), xp, sampling.array(rng, (6,), "f4")),
                 {"left": -1.0, "right": 2.5})
    yield Sample((sampling.array(rng, (), "f8"), xp, sampling.array(rng, (6,), "f8")), note="0-d x")
    yield Sample((sampling.array(rng, (7,), "f8", (-10.0, 10.0)), sampling.array(rng, (5,), "f8"),
                  sampling.array(rng, (5,), "f8")), {"period": 2.0}, note="periodic")
    yield Sample((sampling.array(rng, (5,), "f8"), xp, sampling.array(rng, (6,), "c16")), note="complex fp")


def _interp_binder(args, kwargs):
    """A number for x (``np.interp(0.5, xp, fp)``, NumPy's scalar result) is not modelled: a host call."""
    x = args[0] if args else kwargs.get("x")
    if x is None or not hasattr(x, "shape"):
        raise NotImplementedError("np.interp: a Python number for x is not modelled")
    return defaults_or_host("np.interp")(args, kwargs)


register(OpDef(
    "np.interp", "other",
    [Input("x"), Input("xp"), Input("fp"), Attr("left", None, rules.to_float_or_none),
     Attr("right", None, rules.to_float_or_none), Attr("period", None, rules.to_float_or_none)],
    _interp_rule, _interp_impl, numpy_targets=[np.interp], samples=_interp_samples,
    binder=_interp_binder,
    doc="x any shape, xp and fp 1-d; a 0-d x gives a 0-d array where NumPy gives a scalar",
))


# -- ediff1d ---------------------------------------------------------------------------------------

def _ediff1d_rule(types, attrs):
    name = "np.ediff1d"
    a = rules.first_tensor(name, types)
    size = dims.maximum(dims.sub(dims.prod(a.shape), 1), 0)
    for t in types[1:]:
        if not np.can_cast(rules.strong(t), a.dtype, casting="same_kind"):
            raise TypeError(f"{name}: dtype of to_end/to_begin must be compatible with {a.dtype}")
        size = dims.add(size, dims.prod(rules.shape_of(t)))
    if a.dtype == np.dtype(bool):
        raise TypeError(f"{name}: boolean subtract is not supported")
    return TensorType(a.dtype, (size,))


def _ediff1d_samples(rng):
    for dt in sampling.NUMERIC:
        yield Sample((sampling.array(rng, (3, 4), dt),), {"omitted": ("to_end", "to_begin")})
    yield Sample((sampling.array(rng, (5,), "f8"), sampling.array(rng, (2,), "f8"), 0.5),
                 note="to_end array, to_begin scalar")
    yield Sample((sampling.array(rng, (4,), "i8"), 7), {"omitted": ("to_begin",)}, note="to_end only")
    yield Sample((sampling.array(rng, (0,), "f4"), sampling.array(rng, (2, 2), "f4")),
                 {"omitted": ("to_end",)}, note="empty, 2-d to_begin")


register(OpDef(
    "np.ediff1d", "other",
    [Input("ary"), Input("to_end", "any", optional=True), Input("to_begin", "any", optional=True)],
    _ediff1d_rule, lambda ary, to_end, to_begin: np.ediff1d(ary, to_end, to_begin),
    numpy_targets=[np.ediff1d], samples=_ediff1d_samples,
    doc="differences of the flattened array, with to_begin and to_end (flattened) around them",
))


# -- cumulative_sum / cumulative_prod --------------------------------------------------------------

def _cumulative_rule(name: str, fn):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        if t.ndim == 0:
            raise ShapeError(f"{name}: input must be at least 1-d (0-d arrays have no axis)")
        if attrs["axis"] is None and t.ndim > 1:
            raise ShapeError(f"{name}: axis must be given for an input of more than one dimension")
        ax = rules.axis(name, 0 if attrs["axis"] is None else attrs["axis"], t.ndim)
        shape = list(t.shape)
        if attrs["include_initial"]:
            shape[ax] = dims.add(shape[ax], 1)
        return TensorType(rules.probe_dtype(name, fn, np.ones((1,), t.dtype), dtype=attrs["dtype"]),
                          tuple(shape))

    return rule


def _cumulative_decompose(scan: str):
    def decompose(g, node):
        if node.attrs["include_initial"]:
            return None
        axis = node.attrs["axis"]
        return [_create(g, node, scan, node.inputs, axis=0 if axis is None else axis,
                        dtype=node.attrs["dtype"])]

    return decompose


def _cumulative_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), dt, (0.5, 2.0)),), {"axis": 1})
    for attrs, shape in (({}, (5,)), ({"include_initial": True}, (4,)), ({"axis": 0, "include_initial": True},
                                                                          (3, 2)),
                         ({"axis": -1, "dtype": np.dtype("f4")}, (2, 3, 2)), ({"axis": 0}, (0, 3))):
        yield Sample((sampling.array(rng, shape, "f8", (0.5, 2.0)),), attrs)


for _fn, _scan in ((np.cumulative_sum, "np.cumsum"), (np.cumulative_prod, "np.cumprod")):
    register(OpDef(
        f"np.{_fn.__name__}", "other",
        [Input("x"), Attr("axis", None, rules.to_int_or_none), Attr("dtype", None, rules.to_dtype_or_none),
         Unsupported("out"), Attr("include_initial", False, rules.to_bool)],
        _cumulative_rule(f"np.{_fn.__name__}", _fn),
        (lambda f: lambda x, axis, dtype, include_initial: f(x, axis=axis, dtype=dtype,
                                                             include_initial=include_initial))(_fn),
        numpy_targets=[_fn], samples=_cumulative_samples, decompose=_cumulative_decompose(_scan),
        doc=f"`{_scan}` along the axis, with the identity first when `include_initial`",
    ))


# -- trapezoid -------------------------------------------------------------------------------------

def _trapezoid_rule(types, attrs):
    name = "np.trapezoid"
    y = rules.first_tensor(name, types)
    ax = rules.axis(name, attrs["axis"], max(y.ndim, 1)) if y.ndim else None
    if ax is None:
        raise ShapeError(f"{name}: y must be at least 1-d")
    args = [np.ones((2,), y.dtype)]
    if len(types) > 1:
        x = rules.first_tensor(name, types[1:])
        if x.ndim != 1 and x.ndim != y.ndim:
            raise ShapeError(f"{name}: x must be 1-d or of y's rank, got {x} for {y}")
        args.append(np.ones((2,), x.dtype))
    dt = rules.probe_dtype(name, np.trapezoid, *args, dx=attrs["dx"])
    return TensorType(dt, y.shape[:ax] + y.shape[ax + 1:])


def _trapezoid_samples(rng):
    for dt in sampling.NUMERIC:
        yield Sample((sampling.array(rng, (3, 5), dt),), {"omitted": ("x",)})
    yield Sample((sampling.array(rng, (4, 3), "f8"),), {"axis": 0, "dx": 0.25, "omitted": ("x",)})
    yield Sample((sampling.array(rng, (2, 6), "f4"), np.sort(sampling.array(rng, (6,), "f4"))),
                 note="1-d x")
    yield Sample((sampling.array(rng, (3, 4), "f8"), sampling.array(rng, (3, 4), "f8")), {"axis": 0},
                 note="x of y's shape")
    yield Sample((sampling.array(rng, (1,), "f8"),), {"omitted": ("x",)}, note="one point")
    yield Sample((sampling.array(rng, (3, 0), "f8"),), {"omitted": ("x",)}, note="empty axis")


register(OpDef(
    "np.trapezoid", "other",
    [Input("y"), Input("x", optional=True), Attr("dx", 1.0, rules.to_float), Attr("axis", -1, rules.to_int)],
    _trapezoid_rule, lambda y, x, dx, axis: np.asarray(np.trapezoid(y, x, dx, axis)),
    numpy_targets=[np.trapezoid], samples=_trapezoid_samples,
    doc="the composite trapezoidal rule along one axis, with sample points x or spacing dx",
))


# -- gradient --------------------------------------------------------------------------------------

def _gradient_binder(args, kwargs):
    """``gradient(f, *spacings, axis=, edge_order=)``: scalar spacings become the `spacing` attr; array
    coordinates are a host call."""
    if not args:
        raise TypeError("np.gradient: missing required argument 'f'")
    spacing = args[1:]
    if any(isinstance(s, np.ndarray) and s.ndim > 0 or hasattr(s, "shape") and s.shape != ()
           for s in spacing):
        raise NotImplementedError("np.gradient: coordinate arrays are not modelled")
    unknown = set(kwargs) - {"axis", "edge_order"}
    if unknown:
        raise TypeError(f"np.gradient: unexpected keyword argument(s) {sorted(unknown)}")
    return [args[0]], {"spacing": tuple(spacing), "axis": kwargs.get("axis"),
                       "edge_order": kwargs.get("edge_order", 1)}


def _to_spacing(v):
    return tuple(rules.to_float(s) for s in v)


def _gradient_rule(types, attrs):
    name = "np.gradient"
    f = rules.first_tensor(name, types)
    axes = tuple(rules.axis(name, a, f.ndim) for a in (
        range(f.ndim) if attrs["axis"] is None
        else attrs["axis"] if isinstance(attrs["axis"], tuple) else (attrs["axis"],)))
    if len(set(axes)) != len(axes):
        raise ShapeError(f"{name}: repeated axis")
    if len(attrs["spacing"]) not in (0, 1, len(axes)):
        raise TypeError(f"{name}: invalid number of spacing arguments")
    if attrs["edge_order"] not in (1, 2):
        raise ValueError(f"{name}: 'edge_order' greater than 2 not supported")
    for a in axes:
        if type(f.shape[a]) is int and f.shape[a] < attrs["edge_order"] + 1:
            raise ShapeError(f"{name}: shape of the array too small to calculate a numerical gradient")
    dt = f.dtype if f.dtype.kind in "fc" else np.dtype(np.float64)
    if f.dtype.kind == "b":
        raise TypeError(f"{name}: boolean subtract is not supported")
    out = TensorType(dt, f.shape)
    return out if len(axes) == 1 else (out,) * len(axes)


def _gradient_impl(f, spacing, axis, edge_order):
    return np.gradient(f, *spacing, axis=axis, edge_order=edge_order)


def _gradient_samples(rng):
    for dt in sampling.NUMERIC:
        yield Sample((sampling.array(rng, (4, 5), dt),), {"spacing": (), "axis": None, "edge_order": 1})
    for attrs, shape in (({"spacing": (0.5,)}, (6,)), ({"axis": 1, "edge_order": 2}, (3, 5)),
                         ({"spacing": (2.0, 0.25), "axis": (1, 0)}, (3, 4)),
                         ({"edge_order": 2}, (3, 3, 4))):
        yield Sample((sampling.array(rng, shape, "f8"),), attrs)


register(OpDef(
    "np.gradient", "other",
    [Input("f"), Attr("spacing", (), _to_spacing), Attr("axis", None, rules.to_axis),
     Attr("edge_order", 1, rules.to_int)],
    _gradient_rule, _gradient_impl, numpy_targets=[np.gradient], samples=_gradient_samples,
    binder=_gradient_binder,
    doc="one output per axis (one array for one axis); scalar spacings; coordinate arrays are host calls",
))
