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

from . import dispatch
from .traced_int import TracedScalar
from .tracer import Tracer

_BASIC = (int, slice, type(None), type(Ellipsis))


def _normalize(key: Any) -> Any:
    """Lists in a key become arrays (NumPy reads them as index arrays); traced numbers (``x[n - 1]``,
    ``x[:n // 2]``) are guarded; the rest is kept."""
    from .proxy import TracedArray

    def one(entry):
        if isinstance(entry, (TracedScalar, slice)):
            return dispatch.guarded(entry)
        if isinstance(entry, list):
            return np.asarray(dispatch.unwrap(entry)) if not any(isinstance(e, TracedArray) for e in entry) \
                else np.stack(entry)
        return entry

    return tuple(one(e) for e in key) if isinstance(key, tuple) else one(key)


def _is_basic(key: Any) -> bool:
    entries = key if isinstance(key, tuple) else (key,)
    return all(isinstance(e, _BASIC) and not isinstance(e, bool) for e in entries)


def _op_for(tracer: Tracer, key: Any) -> tuple[str, dict]:
    entries = key if isinstance(key, tuple) else (key,)
    if any(getattr(getattr(e, "dtype", None), "kind", None) == "b" for e in entries):
        tracer.mask_count += 1
        return "np.getitem_mask", {"size": f"nnz{tracer.mask_count}"}
    return "np.getitem", {}


def record_get(tracer: Tracer, parent: Any, key: Any, concrete: np.ndarray) -> Any:
    """Record ``parent[key]`` whose NumPy result is ``concrete``; returns the traced result."""
    name, extra = _op_for(tracer, key)
    inputs, attrs = registry.get(name).bind((parent, key), extra)
    return tracer.record(name, inputs, attrs, concrete)


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
    tracer = dispatch.active_tracer("x[...]")
    key = _normalize(key)
    concrete = x._value[dispatch.unwrap(key)]
    result = record_get(tracer, x, key, concrete)
    # A basic key always gives NumPy's view (even an empty one, which shares no memory to test for).
    if _is_basic(key) and isinstance(concrete, np.ndarray):
        result._parent = x
        result._view = BasicIndex(key)
        result._seen = x._version
    return result


def record_set(tracer: Tracer, target: Any, key: Any, value: Any) -> Any:
    """Record ``target[key] = value`` functionally; returns the graph value of the updated array."""
    inputs, attrs = registry.get("np.setitem").bind((target, key, value), {})
    return tracer.record_node("np.setitem", inputs, attrs, target._value).output


def setitem(x: Any, key: Any, value: Any) -> None:
    tracer = dispatch.active_tracer("x[...] = value")
    key = _normalize(key)
    x._value[dispatch.unwrap(key)] = dispatch.unwrap(value)  # NumPy's semantics, casts and errors
    x._rebind(tracer, record_set(tracer, x, key, value), "x[...] = value")
