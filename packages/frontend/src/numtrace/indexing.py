"""``x[key]`` and ``x[key] = value`` on traced arrays.

Reads record ``np.getitem`` (``np.getitem_mask`` for boolean masks, whose result
size is data-dependent: each mask node gets its own size symbol). A read by a basic
key (ints, slices, None, Ellipsis) that NumPy answers with a view makes the result a
tracked view of its parent (see ``proxy.TracedArray``). Writes record the functional
``np.setitem`` and rebind the written array.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numtrace_ir import registry

from .traced_int import TracedInt, TracedScalar
from .traced_value import is_traced_array, unwrap
from .tracer import Tracer, active_tracer

_BASIC = (int, slice, type(None), type(Ellipsis))


def _normalize(key: Any) -> Any:
    """Lists in a key become arrays (NumPy reads them as index arrays); the rest is kept (traced numbers
    are recorded, see `_traced_numbers`)."""
    def one(entry):
        if isinstance(entry, list):
            return np.asarray(unwrap(entry)) if not any(is_traced_array(e) for e in entry) \
                else np.stack(entry)
        return entry

    return tuple(one(e) for e in key) if isinstance(key, tuple) else one(key)


def _is_basic(key: Any) -> bool:
    entries = key if isinstance(key, tuple) else (key,)
    return all(isinstance(e, (*_BASIC, TracedInt)) and not isinstance(e, bool) for e in entries)


def _traced_numbers(key: Any) -> tuple[Any, Any, list]:
    """``key`` with its traced numbers (``x[n - 1]``, ``x[: n // 2]``) read: (the plain key, the key with
    ``"$k"`` for the k-th traced number, the traced numbers)."""
    numbers: list = []

    def mark(v):
        if isinstance(v, TracedScalar):
            numbers.append(v)
            return f"${len(numbers) - 1}"
        if type(v) is slice:
            return slice(mark(v.start), mark(v.stop), mark(v.step))
        return v

    def read(v):  # only the numbers: traced index arrays stay traced
        if isinstance(v, TracedScalar):
            return v._concrete
        if type(v) is slice:
            return slice(read(v.start), read(v.stop), read(v.step))
        return v

    entries = key if isinstance(key, tuple) else (key,)
    marked = tuple(mark(e) for e in entries)
    plain = tuple(read(e) for e in entries) if isinstance(key, tuple) else read(key)
    return plain, marked, numbers


def _holds_traced(entry: Any) -> bool:
    if type(entry) is slice:
        return any(isinstance(b, TracedScalar) for b in (entry.start, entry.stop, entry.step))
    return isinstance(entry, TracedScalar)


def _record_indexing(tracer: Tracer, name: str, args: tuple, key: Any, extra: dict, result: Any,
                     node_only: bool = False) -> Any:
    """Record an indexing op; with traced numbers in the key, as ``prim.dynamic`` (see record_dynamic)."""
    plain, marked, numbers = _traced_numbers(key)
    args = tuple(plain if a is key else a for a in args)
    inputs, attrs = registry.get(name).bind(args, extra)
    if numbers:
        index = tuple(m if _holds_traced(e) else i for m, e, i in
                      zip(marked, key if isinstance(key, tuple) else (key,), attrs["index"]))
        recorded = tracer.record_dynamic(name, inputs, {**attrs, "index": index}, numbers, result)
        return recorded._graph_value(tracer) if node_only else recorded
    if node_only:
        return tracer.record_node(name, inputs, attrs, result).output
    return tracer.record(name, inputs, attrs, result)


def _op_for(tracer: Tracer, key: Any) -> tuple[str, dict]:
    entries = key if isinstance(key, tuple) else (key,)
    if any(getattr(getattr(e, "dtype", None), "kind", None) == "b" for e in entries):
        return "np.getitem_mask", {"size": tracer.data_size()}
    return "np.getitem", {}


def record_get(tracer: Tracer, parent: Any, key: Any, concrete: np.ndarray) -> Any:
    """Record ``parent[key]`` whose NumPy result is ``concrete``; returns the traced result."""
    name, extra = _op_for(tracer, key)
    return _record_indexing(tracer, name, (parent, key), key, extra, concrete)


class BasicIndex:
    """How a view made by basic indexing relates to its base (see views.py for the other kinds)."""

    __slots__ = ("key",)

    def __init__(self, key: Any):
        self.key = key

    def read(self, tracer: Tracer, base: Any, concrete: np.ndarray) -> Any:
        return record_get(tracer, base, self.key, concrete)._ir

    def write(self, tracer: Tracer, base: Any, view: Any) -> Any:
        return record_set(tracer, base, self.key, view)


def getitem(x: Any, key: Any) -> Any:
    tracer = active_tracer("x[...]")
    key = _normalize(key)
    concrete = x._concrete[unwrap(key)]
    if x._scalar and issubclass(type(concrete), np.ndarray):
        concrete = concrete.copy()  # indexing a NumPy scalar makes a new array
    result = record_get(tracer, x, key, concrete)
    # A basic key always gives NumPy's view (even an empty one, which shares no memory to test for).
    if _is_basic(key) and issubclass(type(concrete), np.ndarray) and not x._scalar:
        result._parent = x
        result._view = BasicIndex(key)
        result._seen = x._version
    return result


def record_set(tracer: Tracer, target: Any, key: Any, value: Any) -> Any:
    """Record ``target[key] = value`` functionally; returns the graph value of the updated array."""
    return _record_indexing(tracer, "np.setitem", (target, key, value), key, {}, target._concrete,
                            node_only=True)


def setitem(x: Any, key: Any, value: Any) -> None:
    tracer = active_tracer("x[...] = value")
    if x._scalar:
        raise TypeError(f"'numpy.{x._concrete.dtype.type.__name__}' object does not support item assignment "
                        "(NumPy gives this value as a scalar, which is immutable)")
    key = _normalize(key)
    plain = unwrap(value)
    if is_traced_array(value) and value._scalar:
        plain = plain[()]   # a NumPy scalar, which NumPy stores otherwise than a 0-d array
    x._concrete[unwrap(key)] = plain  # NumPy's semantics, casts and errors
    if _is_basic(key):
        _guard_scalar_fits(tracer, x._concrete.dtype, value)
    x._rebind(tracer, record_set(tracer, x, key, value), "x[...] = value")


def _fit_bounds(source: np.dtype, target: np.dtype) -> tuple[Any, Any]:
    """The bounds ``(lo, hi)`` (None where every value passes) within which a `source` scalar fits a
    signed integer `target`: ``lo <= v`` and ``v < hi`` for a float (NumPy truncates it, so ``v`` may
    reach ``max + 1`` exclusive), ``lo <= v <= hi`` for an integer, each a `source` scalar."""
    info = np.iinfo(target)
    if source.kind in "iu":
        have = np.iinfo(source)
        return (source.type(info.min) if have.min < info.min else None,
                source.type(info.max) if have.max > info.max else None)
    with np.errstate(over="ignore"):
        lo = source.type(info.min - 1)   # the largest value that truncates below min, rounded
        if not np.isfinite(lo) or int(lo) <= info.min - 1:
            lo = np.nextafter(lo, source.type(np.inf))
        return lo, source.type(info.max + 1)   # a power of two: exact, or inf where every value fits


def _guard_scalar_fits(tracer: Tracer, target: np.dtype, value: Any) -> None:
    """NumPy stores a NumPy scalar into a signed integer array by a basic key through a Python int,
    and raises where it does not fit (OverflowError for inf or out of range, ValueError for NaN); an
    array value, or a key of index arrays, casts instead. A traced scalar fitted at trace time: guard
    that it still fits, so a call where it does not traces again, and NumPy raises."""
    if (target.kind != "i" or not is_traced_array(value) or not value._scalar
            or value._concrete.dtype.kind not in "iuf"):
        return
    lo, hi = _fit_bounds(value._concrete.dtype, target)
    if value._concrete.dtype.kind == "f":
        fits = (value >= lo) & (value < hi)
    elif lo is None and hi is None:
        return
    else:
        fits = value >= lo if hi is None else value <= hi if lo is None else (value >= lo) & (value <= hi)
    if not tracer.input_free(fits._graph_value(tracer)):
        tracer.guard_data(fits, f"x[...] = {value._concrete.dtype} scalar into {target} array (NumPy raises "
                                "where it does not fit)")
