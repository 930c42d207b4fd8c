"""``np.piecewise`` traced like NumPy's own code, each function recorded on its piece (``x[cond]``, a
data-dependent size), but without NumPy's ``if vals.size > 0`` where running the function on an empty
piece is harmless: that test is a guard on data, and a call where a piece turns empty (or stops being
empty) would re-trace. Harmless means the function recorded only elementwise, movement and creation
ops (an empty piece gives an empty result, with no warning); a function that reduces, indexes,
branches or calls out keeps NumPy's test, and so its guard."""

from __future__ import annotations

import collections.abc
import warnings
from typing import Any

import numpy as np
from numtrace_ir import registry

from .traced_value import is_traced_array
from .tracer import active_tracer

__all__ = ["piecewise"]

# Op kinds whose result on an empty input is empty, computed without raising or warning.
_EMPTY_SAFE = frozenset({"elementwise", "movement", "creation"})


def _harmless_when_empty(nodes: list) -> bool:
    return all(n.op == "prim.Constant" or registry.get(n.op).kind in _EMPTY_SAFE for n in nodes)


def piecewise(x: Any, condlist: Any, funclist: Any, *args: Any, **kw: Any) -> Any:
    """NumPy's ``piecewise`` (same argument handling and errors), recorded; see the module docstring."""
    tracer = active_tracer("np.piecewise")
    x = np.asanyarray(x)
    n2 = len(funclist)
    listed = isinstance(condlist[0], (list, np.ndarray)) or is_traced_array(condlist[0]) \
        if not np.isscalar(condlist) else False
    if np.isscalar(condlist) or (not listed and x.ndim != 0):
        condlist = [condlist]
    condlist = np.asarray(condlist, dtype=bool)
    n = len(condlist)
    if n == n2 - 1:
        condelse = ~np.any(condlist, axis=0, keepdims=True)
        condlist = np.concatenate([condlist, condelse], axis=0)
        n += 1
    elif n != n2:
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y = np.zeros_like(x)
    for i, func in enumerate(funclist):
        cond = condlist[i]
        if not isinstance(func, collections.abc.Callable):
            y[cond] = func
            continue
        vals = x[cond]
        mark = len(tracer.graph.nodes)
        if vals._concrete.size == 0 if is_traced_array(vals) else vals.size == 0:
            try:  # NumPy does not call it on an empty piece: what it raises or warns is not seen
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = func(vals, *args, **kw)
            except Exception:
                result = None
            if result is not None and _harmless_when_empty(tracer.graph.nodes[mark:]):
                y[cond] = result
            else:
                _ = vals.size > 0  # NumPy's test (False here): the guard a non-empty piece breaks
            continue
        result = func(vals, *args, **kw)
        if _harmless_when_empty(tracer.graph.nodes[mark:]) or vals.size > 0:
            y[cond] = result
    return y
