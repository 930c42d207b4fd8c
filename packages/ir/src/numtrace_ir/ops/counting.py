"""Finding and counting values: `argwhere`, `unique`, `bincount`, `histogram`.

`argwhere`, `unique` and `bincount` have result lengths that depend on the data: their `size` attr
names that dim (the tracer gives each node its own symbol, as for a boolean mask), and backends
allocate those results when the run has computed them. `histogram` with a count of bins or an array
of edges has a static result length (the edges from the data's range are computed at run time);
bins given as a method name (``"auto"``) are a data-dependent count the op does not model: the
tracer makes that call a host call. NumPy's call is each op's reference, so its checks (negative
counts, non-monotonic edges, a non-finite range) run with every call.
"""

from __future__ import annotations

import operator
import warnings

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.indexing import DATA_SIZE
from numtrace_ir.ops.nanfunctions import defaults_or_host
from numtrace_ir.registry import Attr, Input, OpDef, Sample, register
from numtrace_ir.types import TensorType

_INTP = np.dtype(np.intp)


# -- argwhere ----------------------------------------------------------------------------------------

def _argwhere_rule(types, attrs):
    t = rules.first_tensor("np.argwhere", types)
    return TensorType(_INTP, (attrs["size"], t.ndim))


def _argwhere_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), dt, (-1.0, 2.0)),))
    yield Sample((sampling.array(rng, (2, 3, 2), "f8", (-1.0, 2.0)) > 0,), note="3-d bool")
    yield Sample((sampling.array(rng, (), "f8"),), note="0-d")
    yield Sample((np.zeros((0, 3)),), note="empty")
    yield Sample((np.zeros((4,)),), note="no nonzero")


register(OpDef(
    "np.argwhere", "index", [Input("a"), DATA_SIZE], _argwhere_rule,
    lambda a, size: np.argwhere(a),
    numpy_targets=[np.argwhere], samples=_argwhere_samples, data_dependent_shape=True,
    doc="(number of nonzero elements, ndim) indices (intp); the count is the data-dependent `size`",
))


# -- unique ------------------------------------------------------------------------------------------

def _unique_rule(types, attrs):
    name = "np.unique"
    t = rules.first_tensor(name, types)
    u = attrs["size"]
    if attrs["axis"] is None:
        values = (u,)
        inverse = t.shape
    else:
        ax = rules.axis(name, attrs["axis"], t.ndim)
        values = (*t.shape[:ax], u, *t.shape[ax + 1:])
        inverse = (t.shape[ax],)
    outs = [TensorType(t.dtype, values)]
    for flag, shape in (("return_index", (u,)), ("return_inverse", inverse), ("return_counts", (u,))):
        if attrs[flag]:
            outs.append(TensorType(_INTP, shape))
    return tuple(outs)


def _unique_impl(ar, return_index, return_inverse, return_counts, axis, equal_nan, sorted, size):
    return np.unique(ar, return_index, return_inverse, return_counts, axis, equal_nan=equal_nan,
                     sorted=sorted)


def _unique_samples(rng):
    every = {"return_index": True, "return_inverse": True, "return_counts": True}
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), dt),))
    x = np.round(sampling.array(rng, (3, 5), "f8"))
    x[0, :2] = np.nan
    for equal_nan in (True, False):
        yield Sample((x,), {**every, "equal_nan": equal_nan}, note="NaNs")
    yield Sample((x,), {"return_counts": True, "sorted": False}, note="unsorted")
    rows = np.repeat(sampling.array(rng, (3, 2), "i4"), 2, axis=0)
    yield Sample((rows,), {**every, "axis": 0}, note="rows")
    yield Sample((rows.T.copy(),), {"return_inverse": True, "axis": -1}, note="columns")
    yield Sample((sampling.array(rng, (2, 3, 2), "f4"),), {"return_index": True, "axis": 1}, note="3-d")
    yield Sample((sampling.array(rng, (), "f8"),), every, note="0-d")
    yield Sample((np.zeros((0,)),), every, note="empty")
    yield Sample((np.zeros((0, 3), np.int64),), {"return_counts": True, "axis": 0}, note="empty rows")


register(OpDef(
    "np.unique", "other",
    [Input("ar"), Attr("return_index", False, rules.to_bool), Attr("return_inverse", False, rules.to_bool),
     Attr("return_counts", False, rules.to_bool), Attr("axis", None, rules.to_int_or_none),
     Attr("equal_nan", True, rules.to_bool), Attr("sorted", True, rules.to_bool), DATA_SIZE],
    _unique_rule, _unique_impl,
    numpy_targets=[np.unique], samples=_unique_samples, binder=defaults_or_host("np.unique"),
    data_dependent_shape=True,
    doc="the unique values (along `axis`), then first indices, inverse and counts as asked; the "
    "number of unique values is the data-dependent `size`",
))


# -- bincount ----------------------------------------------------------------------------------------

def _bincount_rule(types, attrs):
    name = "np.bincount"
    x = rules.first_tensor(name, types)
    if x.ndim != 1:
        raise ShapeError(f"{name}: x must be a 1-d array, got {x}")
    if x.dtype.kind not in "biu":
        raise TypeError(f"{name}: cannot cast {x.dtype} to {_INTP} according to the rule 'safe'")
    if attrs["minlength"] < 0:
        raise ValueError(f"{name}: 'minlength' must not be negative")
    dtype = _INTP
    if len(types) > 1:
        w = rules.first_tensor(name, types[1:])
        if w.ndim != 1 or (dims.is_static(w.shape[0]) and dims.is_static(x.shape[0])
                           and w.shape[0] != x.shape[0]):
            raise ShapeError(f"{name}: the weights and list don't have the same length ({w} for {x})")
        if x.shape[0] != 0:   # NumPy returns minlength intp zeros for an empty x, weights or not
            dtype = rules.probe_dtype(name, np.bincount, np.zeros((1,), _INTP), np.ones((1,), w.dtype))
    return TensorType(dtype, (attrs["size"],))


def _bincount_samples(rng):
    for dt in ("bool", "int32", "int64", "uint8", "uint64"):
        yield Sample((sampling.array(rng, (9,), dt, (0.0, 6.0)),), {"omitted": ("weights",)})
    x = sampling.array(rng, (7,), "i8", (0.0, 4.0))
    for dt in ("float32", "float64", "int32", "bool"):
        yield Sample((x, sampling.array(rng, (7,), dt)), {"minlength": 2}, note="weights")
    yield Sample((x,), {"minlength": 10, "omitted": ("weights",)}, note="minlength past the data")
    yield Sample((np.zeros((0,), np.intp),), {"minlength": 3, "omitted": ("weights",)}, note="empty")
    yield Sample((np.zeros((0,), np.intp), np.zeros((0,))), note="empty, weights")


register(OpDef(
    "np.bincount", "other",
    [Input("x"), Input("weights", optional=True), Attr("minlength", 0, rules.to_int), DATA_SIZE],
    _bincount_rule, lambda x, weights, minlength, size: np.bincount(x, weights, minlength),
    numpy_targets=[np.bincount], samples=_bincount_samples, binder=defaults_or_host("np.bincount"),
    data_dependent_shape=True,
    doc="counts (intp; float64 with weights) of max(x.max() + 1, minlength), the data-dependent `size`",
))


# -- histogram ---------------------------------------------------------------------------------------

_HISTOGRAM_PARAMS = ("a", "bins", "range", "density", "weights")


def _is_count(bins) -> bool:
    """A count of bins: an int, a NumPy integer, or a traced size (an int-like object with no shape)."""
    if isinstance(bins, (bool, np.bool_)):
        return False
    return isinstance(bins, (int, np.integer)) or (hasattr(type(bins), "__index__")
                                                    and not hasattr(bins, "shape"))


def _histogram_binder(args, kwargs):
    """NumPy's ``histogram(a, bins, range, density, weights)`` -> the op: a count of bins is the attr
    `bins`, an array of edges the input `edges`. A method name for bins, a range or density NumPy reads
    through other types (NumPy scalars, which change the edges' dtype) are not modelled: host calls."""
    if len(args) > len(_HISTOGRAM_PARAMS) or set(kwargs) - set(_HISTOGRAM_PARAMS[len(args):]):
        raise NotImplementedError("np.histogram: a call the op does not bind")
    call = {**dict(zip(_HISTOGRAM_PARAMS, args)), **kwargs}
    bins, range_, density = call.get("bins", 10), call.get("range"), call.get("density")
    if "a" not in call:
        raise NotImplementedError("np.histogram: missing a")
    if not (range_ is None or (isinstance(range_, (tuple, list)) and len(range_) == 2
                               and all(type(v) in (int, float) for v in range_))):
        raise NotImplementedError("np.histogram: a range other than two Python numbers is not modelled")
    if density is not None and type(density) is not bool:
        raise NotImplementedError("np.histogram: a density other than None or a bool is not modelled")
    if isinstance(bins, str):
        raise NotImplementedError(f"np.histogram: bins={bins!r} gives a data-dependent count of bins")
    inputs, omitted = [call["a"]], []
    if _is_count(bins):
        count, omitted = operator.index(bins), ["edges"]
    elif hasattr(bins, "shape") and len(bins.shape) == 1 or isinstance(bins, (list, tuple)) and all(
            type(v) in (int, float) for v in bins):
        count = None
        inputs.append(bins)
    else:
        raise NotImplementedError(f"np.histogram: bins of type {type(bins).__name__} are not modelled")
    weights = call.get("weights")
    if weights is None:
        omitted.append("weights")
    else:
        inputs.append(weights)
    return inputs, {"bins": count, "range": range_, "density": density, "omitted": tuple(omitted)}


def _to_range(v):
    if v is None:
        return None
    lo, hi = v
    return (rules.to_scalar(lo), rules.to_scalar(hi))


def _histogram_rule(types, attrs):
    name = "np.histogram"
    present = iter(types)
    a = rules.first_tensor(name, (next(present),))
    edges = None if "edges" in attrs["omitted"] else next(present)
    weights = None if "weights" in attrs["omitted"] else next(present)
    if weights is not None:
        w = rules.first_tensor(name, (weights,))
        if w.ndim != a.ndim or not all(dims.equal(p, q) or not (dims.is_static(p) and dims.is_static(q))
                                       for p, q in zip(w.shape, a.shape)):
            raise ShapeError(f"{name}: weights should have the same shape as a ({w} for {a})")
    if edges is None:
        n = attrs["bins"]
        if n is None or n < 1:
            raise ValueError(f"{name}: `bins` must be positive, when an integer")
        stand_in = 1
        hist_len, edges_len = n, n + 1
    else:
        e = rules.first_tensor(name, (edges,))
        if e.ndim != 1:
            raise ShapeError(f"{name}: `bins` must be 1d, when an array (got {e})")
        stand_in = np.array([0, 1], e.dtype)
        hist_len, edges_len = dims.maximum(dims.sub(e.shape[0], 1), 0), e.shape[0]   # no edges: no bins
    w_stand_in = None if weights is None else np.ones((1,), rules.strong(weights))
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hist, bin_edges = np.histogram(np.zeros((1,), a.dtype), stand_in, attrs["range"],
                                           attrs["density"], w_stand_in)
    except (TypeError, np.exceptions.DTypePromotionError) as exc:
        raise TypeError(f"{name}: unsupported dtypes ({exc})") from None
    return TensorType(hist.dtype, (hist_len,)), TensorType(bin_edges.dtype, (edges_len,))


def _histogram_impl(a, edges, weights, bins, range, density):
    hist, bin_edges = np.histogram(a, bins if edges is None else edges, range, density, weights)
    return hist, bin_edges if edges is None else bin_edges.copy()   # NumPy returns `edges` itself


def _histogram_samples(rng):
    count = {"omitted": ("edges", "weights")}
    for dt in sampling.DTYPES[1:]:
        yield Sample((sampling.array(rng, (3, 4), dt),), {**count, "bins": 4, "range": (-2, 2)})
    x = sampling.array(rng, (20,), "f8", (-4.0, 4.0))   # values outside the range are not counted
    yield Sample((x,), {**count, "bins": 5, "range": (-3.0, 3.0), "density": True})
    yield Sample((x,), {**count, "bins": 3}, note="range from the data")
    yield Sample((sampling.array(rng, (6,), "i4"),), {**count, "bins": 3}, note="int data, range from it")
    yield Sample((np.full((4,), 2.0),), {**count, "bins": 2}, note="one value")
    yield Sample((np.zeros((0,)),), {**count, "bins": 3}, note="empty")
    yield Sample((x, sampling.array(rng, (20,), "f4")), {"bins": 4, "range": (-1.0, 1.0),
                                                         "omitted": ("edges",)}, note="weights")
    yield Sample((x, sampling.array(rng, (20,), "f8", (0.5, 2.0))), {"bins": 4, "density": True,
                                                                     "omitted": ("edges",)},
                 note="weights, density")
    edges = np.array([-3.0, -1.0, 0.0, 0.5, 3.0])
    yield Sample((x, edges), {"bins": None, "omitted": ("weights",)}, note="edges")
    yield Sample((x, np.zeros((0,))), {"bins": None, "omitted": ("weights",)}, note="no edges")
    yield Sample((sampling.array(rng, (3, 3), "f4", (-2.0, 2.0)), np.array([-2, 0, 2]),
                  sampling.array(rng, (3, 3), "i8", (1.0, 4.0))), {"bins": None, "density": True},
                 note="int edges, weights, density")


register(OpDef(
    "np.histogram", "other",
    [Input("a"), Input("edges", optional=True), Input("weights", optional=True),
     Attr("bins", 10, rules.to_int_or_none), Attr("range", None, _to_range),
     Attr("density", None, lambda v: None if v is None else rules.to_bool(v))],
    _histogram_rule, _histogram_impl,
    numpy_targets=[np.histogram], samples=_histogram_samples, binder=_histogram_binder,
    doc="(hist, bin_edges) for `bins` equal bins over `range` (the data's when None) or for the "
    "1-d `edges`; bins named by a method are host calls",
))
