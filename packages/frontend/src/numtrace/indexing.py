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
    x._concrete[unwrap(key)] = unwrap(value)  # NumPy's semantics, casts and errors
    x._rebind(tracer, record_set(tracer, x, key, value), "x[...] = value")
