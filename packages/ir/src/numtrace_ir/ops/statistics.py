"""Order statistics: `percentile`, `quantile`, `median` and their NaN-ignoring forms (`nanpercentile`,
`nanquantile`, `nanmedian`). The reference is NumPy's (a partition and an interpolation; the NaN forms
warn "All-NaN slice encountered" and give NaN for such slices, as NumPy does); every `method` NumPy has
is an attr value, and the result dtype depends on it (``'lower'`` of ints stays int, ``'linear'`` of
ints is float64), so the rule probes NumPy with it. ``q`` is static: a number or a 1-d sequence, whose
length leads the result's shape. A call with ``weights=`` (or ``keepdims``/``axis`` the schema rejects)
is a host call."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from numtrace_ir.dims import IndexShapeError, NotModelledError, ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.nanfunctions import defaults_or_host, with_nans
from numtrace_ir.ops.reductions import _reduced_shape
from numtrace_ir.registry import Attr, Input, OpDef, Param, Sample, Unsupported, register
from numtrace_ir.types import TensorType

METHODS = (
    "inverted_cdf",
    "averaged_inverted_cdf",
    "closest_observation",
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "linear",
    "median_unbiased",
    "normal_unbiased",
    "lower",
    "higher",
    "midpoint",
    "nearest",
)


def _to_q(high: float):
    """``q`` -> a number or a tuple of numbers in [0, high] (NumPy's range check, done at trace time):
    floats, but Python ints as they are."""

    def convert(v):
        if issubclass(type(v), np.ndarray):
            if v.ndim > 1:
                raise ValueError(f"q must be a number or 1-d, got an array of shape {v.shape}")
            v = v.tolist()
        items = tuple(v) if isinstance(v, (list, tuple)) else None
        # A Python int stays one: NumPy's quantile at an integer q picks an element, of the input's dtype
        values = tuple(x if type(x) is int else float(rules.to_scalar(x))
                       for x in (items if items is not None else (v,)))
        for x in values:
            if not 0 <= x <= high:
                raise ValueError(f"q must be in the range [0, {high:g}], got {x!r}")
        return values if items is not None else values[0]

    return convert


def _refused_when_empty(name: str, shape: tuple, axis, picks: bool) -> None:
    """NumPy's errors for empty arrays that its quantile (`picks`: an element, at index -1 of nothing)
    and median raise (the nan-functions answer nanmean's result instead): several axes whose kept dims
    hold no element cannot be reshaped, and an empty reduced axis has no element to pick."""
    if not all(type(d) is int for d in shape):
        return
    red = rules.axes(name, axis, len(shape))
    if 1 < len(red) < len(shape) and math.prod(d for i, d in enumerate(shape) if i not in red) == 0:
        raise ShapeError(f"{name}: cannot reshape array of size 0 into shape (0,newaxis)")
    if picks and math.prod(shape[a] for a in red) == 0:
        raise IndexShapeError(f"{name}: index -1 is out of bounds for axis 0 with size 0")


def _quantile_rule(name: str, fn, q_example, nan: bool = False):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        shape = _reduced_shape(name, t.shape, attrs["axis"], attrs["keepdims"], False)
        if not nan:
            _refused_when_empty(name, t.shape, attrs["axis"], q_example is not None)
        method = attrs.get("method", "linear")
        q = attrs.get("q")
        # A sequence q is a float64 array to NumPy (it promotes narrower floats); a Python float is weak;
        # a NumPy scalar or array q (`q_dtype`) is not weak (NEP 50): its dtype promotes.
        example = q_example
        if example is not None and all(type(x) is int for x in (q if isinstance(q, tuple) else (q,))):
            example = 0   # NumPy's integer q
        q_probe = np.array([example]) if isinstance(q, tuple) and example is not None else example
        empty = any(d == 0 for d in t.shape)   # NumPy's nan-functions then answer nanmean's dtype
        if attrs.get("q_dtype") is not None and q_example is not None and not (nan and empty):
            q_probe = np.asarray(q_probe).astype(attrs["q_dtype"])
        dt = rules.probe_dtype(name, fn, np.ones((1,), t.dtype), q_probe, method=method)
        if nan and isinstance(q, tuple) and empty:
            # NumPy answers an empty array with nanmean's result, which has no axis for q's entries
            raise NotModelledError(f"{name}: an empty array with a sequence q gives NumPy's nanmean "
                                   "shape, not the quantiles' (not modelled)")
        return TensorType(dt, ((len(q),) if isinstance(q, tuple) else ()) + shape)

    return rule


def _q_nan_samples(samples, q):
    """`samples` of a NaN-ignoring op (`q`: its ``q`` attr for the added sample, None for nanmedian):
    float inputs hold NaNs (every slice keeps a number). All-NaN slices warn, so the registry's
    warning-free sample tests leave them to the frontend's tests."""

    def nan_samples(rng):
        for s in samples(rng):
            if isinstance(s.attrs.get("q"), tuple) and s.inputs[0].size == 0:
                continue   # refused by the rule (NumPy gives nanmean's shape)
            yield Sample(tuple(with_nans(rng, a) for a in s.inputs), s.attrs, s.note)
        attrs = {"axis": 1} if q is None else {"q": q, "axis": 1}
        yield Sample((np.array([[np.nan, 2.0, 5.0], [1.0, np.nan, 3.0]]),), attrs, note="NaN in every row")

    return nan_samples


def _q_samples(high: float):
    scale = high / 100.0

    def samples(rng):
        q50 = 50 * scale
        for dt in sampling.NUMERIC:
            yield Sample((sampling.array(rng, (3, 4), dt),), {"q": q50, "axis": 1})
        for q_dtype in ("f8", "f4"):
            yield Sample((sampling.array(rng, (3, 4), "f2"),), {"q": 30 * scale, "axis": 1,
                                                                "q_dtype": np.dtype(q_dtype)},
                         note=f"a NumPy {q_dtype} q")
        yield Sample((sampling.array(rng, (5,), "bool"),), {"q": q50, "method": "lower"}, note="bool, lower")
        for method in METHODS:
            yield Sample((sampling.array(rng, (2, 5), "f8"),), {"q": (10 * scale, 75 * scale), "axis": 1,
                                                          "method": method}, note=method)
            yield Sample((sampling.array(rng, (7,), "i4"),), {"q": 30 * scale, "method": method},
                         note=f"int {method}")
        for shape, attrs in (
            ((3, 4), {"q": 25 * scale}),
            ((3, 4), {"q": (0.0, 100 * scale), "axis": 0, "keepdims": True}),
            ((2, 3, 4), {"q": q50, "axis": (0, 2)}),
            ((2, 3, 4), {"q": (20 * scale, 40 * scale, 60 * scale), "axis": -1, "keepdims": True}),
            ((), {"q": q50}),
            ((0, 3), {"q": q50, "axis": 1}),
            ((0, 3), {"q": (10 * scale,), "axis": 1, "keepdims": True}),
        ):
            yield Sample((sampling.array(rng, shape, "f8"),), attrs)
        yield Sample((sampling.array(rng, (4, 3), "f4"),), {"q": q50, "axis": 0, "overwrite_input": True})

    return samples


def _strong_q(bind: Callable) -> Callable:
    """`bind`, with `q_dtype` set to the dtype of a q given as a NumPy scalar or array (not weak in NumPy's
    promotion: a float64 or float32 q makes a float16 input's quantile float64 or float32)."""

    def strong(args, kwargs):
        inputs, attrs = bind(args, kwargs)
        q = args[1] if len(args) > 1 else kwargs.get("q")
        if isinstance(q, (np.generic, np.ndarray)):
            attrs["q_dtype"] = q.dtype
        return inputs, attrs

    return strong


def _quantile_op(name: str, fn, high: float, nan: bool = False) -> OpDef:
    params: list[Param] = [
        Input("a"),
        Attr("q", convert=_to_q(high)),
        Attr("axis", None, rules.to_axis),
        Unsupported("out"),
        Attr("overwrite_input", False, rules.to_bool),
        Attr("method", "linear", rules.one_of(*METHODS)),
        Attr("keepdims", False, rules.to_bool),
        Unsupported("weights"),
        Unsupported("interpolation"),
        Attr("q_dtype", None, rules.to_dtype_or_none),
    ]

    def impl(a, q, axis, overwrite_input, method, keepdims, q_dtype):
        # overwrite_input only lets NumPy reorder its input; the graph's input is never written.
        if q_dtype is not None:
            q = np.asarray(q, dtype=q_dtype)
        return fn(a, q, axis, method=method, keepdims=keepdims)

    samples = _q_samples(high)
    if nan:
        samples = _q_nan_samples(samples, 0.5 * high)

    return register(
        OpDef(
            name,
            "reduction",
            params,
            _quantile_rule(name, fn, 0.5 * high, nan),
            impl,
            numpy_targets=[fn],
            samples=samples,
            binder=_strong_q(defaults_or_host(name)),
            doc="`overwrite_input` is accepted and ignored (NumPy may only scramble the input with it); "
            "a call with `weights` is a host call",
        )
    )


_quantile_op("np.percentile", np.percentile, 100.0)
_quantile_op("np.quantile", np.quantile, 1.0)
_quantile_op("np.nanpercentile", np.nanpercentile, 100.0, nan=True)
_quantile_op("np.nanquantile", np.nanquantile, 1.0, nan=True)


def _median_samples(rng):
    for dt in sampling.NUMERIC:
        yield Sample((sampling.array(rng, (3, 4), dt),), {"axis": 1})
    for shape, attrs in (
        ((3, 4), {}),
        ((4, 4), {"axis": 0, "keepdims": True}),
        ((2, 3, 4), {"axis": (0, 2)}),
        ((2, 3, 5), {"axis": -1, "keepdims": True}),
        ((), {}),
        ((0, 3), {"axis": 1}),
        ((0, 3), {"axis": 1, "keepdims": True}),
    ):
        yield Sample((sampling.array(rng, shape, "f8"),), attrs)
    yield Sample((sampling.array(rng, (4, 3), "f4"),), {"axis": 0, "overwrite_input": True})


def _median_op(name: str, fn) -> OpDef:
    return register(
        OpDef(
            name,
            "reduction",
            [
                Input("a"),
                Attr("axis", None, rules.to_axis),
                Unsupported("out"),
                Attr("overwrite_input", False, rules.to_bool),
                Attr("keepdims", False, rules.to_bool),
            ],
            _quantile_rule(name, lambda a, q, method: fn(a), None, nan=fn is np.nanmedian),
            rules.forwarding(fn, "a", drop=("overwrite_input",)),
            numpy_targets=[fn],
            samples=_q_nan_samples(_median_samples, None) if fn is np.nanmedian else _median_samples,
            binder=_strong_q(defaults_or_host(name)),
            doc="`overwrite_input` is accepted and ignored",
        )
    )


_median_op("np.median", np.median)
_median_op("np.nanmedian", np.nanmedian)
