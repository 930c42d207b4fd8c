"""Movement ops as views: for each op the backend lowers, the NumPy call that returns its view.

The registry's references may copy (graph values never alias), so the planner
cannot ask them whether an op is a view; it applies these rules to a
stand-in array laid out like the input buffer and reads the view's offset and
strides off NumPy's answer (a copy there means the op is not a view for that
layout). ``out`` is the node's output shape when concrete; ``prim.*`` ops
take their target shape from the traced dims (``extra``, folded values).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["SAME_VALUE", "VIEW_RULES"]

ViewRule = Callable[[np.ndarray, tuple, dict, list], "np.ndarray | tuple[np.ndarray, ...]"]


def _dims(shape: tuple, values: list) -> tuple[int, ...]:
    """A ``prim.*`` shape attr with its symbolic entries replaced, in order, by the traced dim values."""
    it = iter(values)
    return tuple(int(next(it)) if isinstance(d, str) else d for d in shape)


def _getitem(a: np.ndarray, out: tuple, attrs: dict, extra: list) -> np.ndarray:
    index = attrs["index"]
    if "input" in index:
        raise NotImplementedError("indexing with arrays (a gather) is not lowered by the Triton backend")
    # With an Ellipsis, NumPy returns a 0-d view instead of a scalar for a full integer index.
    return a[index] if Ellipsis in index else a[(*index, Ellipsis)]


VIEW_RULES: dict[str, ViewRule] = {
    "np.reshape": lambda a, out, at, ex: np.reshape(a, out, order=at.get("order") or "C"),
    "prim.reshape": lambda a, out, at, ex: np.reshape(a, _dims(at["shape"], ex)),
    "np.ravel": lambda a, out, at, ex: np.ravel(a, order=at.get("order") or "C"),
    "np.transpose": lambda a, out, at, ex: np.transpose(a, at.get("axes")),
    "np.swapaxes": lambda a, out, at, ex: np.swapaxes(a, at["axis1"], at["axis2"]),
    "np.moveaxis": lambda a, out, at, ex: np.moveaxis(a, at["source"], at["destination"]),
    "np.expand_dims": lambda a, out, at, ex: np.expand_dims(a, at["axis"]),
    "np.squeeze": lambda a, out, at, ex: np.squeeze(a, at.get("axis")),
    "np.broadcast_to": lambda a, out, at, ex: np.broadcast_to(a, out),
    "prim.broadcast_to": lambda a, out, at, ex: np.broadcast_to(a, _dims(at["shape"], ex)),
    "np.flip": lambda a, out, at, ex: np.flip(a, at.get("axis")),
    "np.diagonal": lambda a, out, at, ex: np.diagonal(a, at["offset"], at["axis1"], at["axis2"]),
    "np.getitem": _getitem,
    "np.split": lambda a, out, at, ex: tuple(np.split(a, at["indices_or_sections"], at["axis"])),
    "np.array_split": lambda a, out, at, ex: tuple(np.array_split(a, at["indices_or_sections"], at["axis"])),
}

# Copies of an immutable value are the value itself (when the dtype is kept).
SAME_VALUE = frozenset({"np.copy", "np.ascontiguousarray"})
