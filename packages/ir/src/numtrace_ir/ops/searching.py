"""Searching a sorted array and testing membership: `searchsorted`, `digitize`, `isin`.

Each result has the shape of the values searched for (an index per value, or a bool), so one trace
serves every size. NumPy's call is the reference, so `digitize` checks at every run that its bins
are monotonic (bins computed in the trace may not be), and an unsorted `a` gives what NumPy gives.
"""

from __future__ import annotations

import numpy as np

from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.nanfunctions import defaults_or_host
from numtrace_ir.registry import Attr, Input, OpDef, Sample, register
from numtrace_ir.types import TensorType

_INTP = np.dtype(np.intp)


def _sorted_1d(name: str, what: str, t) -> None:
    if type(t) is not TensorType or t.ndim != 1:
        raise ShapeError(f"{name}: {what} must be a 1-d array, got {t}")


def _comparable(name: str, a, v) -> None:
    """NumPy compares `v` with `a` in their common dtype: a pair without one is a `TypeError`."""
    rules.probe_dtype(name, np.searchsorted, np.zeros((1,), a.dtype), rules.example(v))


# -- searchsorted ------------------------------------------------------------------------------------

def _searchsorted_rule(types, attrs):
    name = "np.searchsorted"
    a, v = types[0], types[1]
    _sorted_1d(name, "a", a)
    _comparable(name, a, v)
    if len(types) > 2:
        sorter = types[2]
        if type(sorter) is not TensorType or sorter.ndim != 1 or sorter.dtype.kind not in "iu":
            raise TypeError(f"{name}: sorter must be a 1-d integer array, got {sorter}")
        if type(sorter.shape[0]) is int and type(a.shape[0]) is int and sorter.shape[0] != a.shape[0]:
            raise ShapeError(f"{name}: sorter.size must equal a.size ({sorter} for {a})")
    return TensorType(_INTP, rules.shape_of(v))


def _searchsorted_samples(rng):
    for dt in sampling.DTYPES:
        a = np.sort(sampling.array(rng, (6,), dt))
        yield Sample((a, sampling.array(rng, (3, 4), dt)), {"omitted": ("sorter",)})
    a = np.sort(sampling.array(rng, (7,), "f8"))
    a[2] = a[3]   # a tie: left and right differ
    for side in ("left", "right"):
        yield Sample((a, np.concatenate([a, [np.nan, -np.inf]])), {"side": side, "omitted": ("sorter",)},
                     note="ties, NaN")
    unsorted = sampling.array(rng, (5,), "f8")
    yield Sample((unsorted, sampling.array(rng, (4,), "f8"), np.argsort(unsorted)), {"side": "right"},
                 note="sorter")
    yield Sample((a, 0.5), {"omitted": ("sorter",)}, note="Python scalar v")
    yield Sample((np.sort(sampling.array(rng, (5,), "i4")), sampling.array(rng, (), "f8")),
                 {"omitted": ("sorter",)}, note="0-d v, mixed dtypes")
    yield Sample((np.zeros((0,)), sampling.array(rng, (3,), "f8")), {"omitted": ("sorter",)}, note="empty a")
    yield Sample((a, np.zeros((0, 2))), {"omitted": ("sorter",)}, note="empty v")


register(OpDef(
    "np.searchsorted", "other",
    [Input("a"), Input("v", "any"), Attr("side", "left", rules.one_of("left", "right")),
     Input("sorter", optional=True)],
    _searchsorted_rule,
    lambda a, v, side, sorter: np.asarray(np.searchsorted(a, v, side, sorter)),
    numpy_targets=[np.searchsorted, np.ndarray.searchsorted], samples=_searchsorted_samples,
    binder=defaults_or_host("np.searchsorted"),
    doc="indices (intp) of v's shape into the 1-d sorted a (or a[sorter])",
))


# -- digitize ----------------------------------------------------------------------------------------

def _digitize_rule(types, attrs):
    name = "np.digitize"
    x, bins = types
    _sorted_1d(name, "bins", bins)
    if rules.strong(x).kind == "c":
        raise TypeError(f"{name}: x may not be complex")
    _comparable(name, bins, x)
    return TensorType(_INTP, rules.shape_of(x))


def _digitize_samples(rng):
    bins = np.linspace(-2.0, 2.0, 5)
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), dt), bins.astype(dt) if dt.kind != "b" else bins))
    for right in (False, True):
        x = np.concatenate([bins, [-5.0, 5.0, np.nan]])
        yield Sample((x, bins), {"right": right}, note="on edges, outside, NaN")
        yield Sample((x, bins[::-1].copy()), {"right": right}, note="decreasing bins")
    yield Sample((sampling.array(rng, (4,), "f4"), np.array([0.0, 0.0, 1.0])), note="repeated edge")
    yield Sample((0.5, bins), note="Python scalar x")
    yield Sample((sampling.array(rng, (0,), "f8"), bins), note="empty x")
    yield Sample((sampling.array(rng, (3,), "f8"), np.zeros((0,))), note="no bins")


register(OpDef(
    "np.digitize", "other",
    [Input("x", "any"), Input("bins"), Attr("right", False, rules.to_bool)],
    _digitize_rule,
    lambda x, bins, right: np.asarray(np.digitize(x, bins, right)),
    numpy_targets=[np.digitize], samples=_digitize_samples, binder=defaults_or_host("np.digitize"),
    doc="bin indices (intp) of x's shape; NumPy's check that bins are monotonic runs with every call",
))


# -- isin --------------------------------------------------------------------------------------------

def _isin_rule(types, attrs):
    name = "np.isin"
    element, test = types
    if attrs["kind"] == "table" and any(rules.strong(t).kind not in "biu" for t in types):
        raise TypeError(f"{name}: kind='table' is only supported for boolean or integer arrays")
    rules.probe_dtype(name, np.equal, rules.example(element), rules.example(test))
    return TensorType(np.dtype(bool), rules.shape_of(element))


def _isin_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), dt), sampling.array(rng, (5,), dt)))
    x = np.round(sampling.array(rng, (4, 3), "f8"))
    x[0, 0] = np.nan
    test = np.array([0.0, 1.0, -2.0, np.nan, 1.0])
    yield Sample((x, test), {"invert": True}, note="NaN never matches")
    yield Sample((x, np.unique(test)), {"assume_unique": True})
    yield Sample((x, test), {"kind": "sort"})
    ints = sampling.array(rng, (6,), "i8")
    yield Sample((ints, sampling.array(rng, (2, 3), "i4")), {"kind": "table"}, note="table, 2-d test")
    yield Sample((ints, sampling.array(rng, (3,), "i4")), {"kind": "table", "invert": True})
    yield Sample((2, ints), note="Python scalar element")
    yield Sample((sampling.array(rng, (), "f8"), 1.0), note="0-d element, scalar test")
    yield Sample((sampling.array(rng, (0, 2), "f8"), test), note="empty element")
    yield Sample((ints, np.zeros((0,), np.int64)), note="empty test")


register(OpDef(
    "np.isin", "other",
    [Input("element", "any"), Input("test_elements", "any"), Attr("assume_unique", False, rules.to_bool),
     Attr("invert", False, rules.to_bool), Attr("kind", None, rules.one_of(None, "sort", "table"))],
    _isin_rule,
    lambda element, test_elements, assume_unique, invert, kind: np.isin(
        element, test_elements, assume_unique=assume_unique, invert=invert, kind=kind),
    numpy_targets=[np.isin], samples=_isin_samples, binder=defaults_or_host("np.isin"),
    doc="bool of element's shape: whether each element is in test_elements (NaN never is)",
))
