"""``np.piecewise`` traced like NumPy's own code, each function recorded on its piece (``x[cond]``, a
data-dependent size), but without NumPy's ``if vals.size > 0`` where running the function on an empty
piece is harmless: that test is a guard on data, and a call where a piece turns empty (or stops being
empty) would re-trace. Harmless means the function recorded only elementwise, movement and creation
ops and, called on an empty array of the piece's dtype, returns without raising or warning a value an
empty piece takes (static positions, fixed shapes and constants of other sizes fail there); a function
that reduces, indexes, branches, calls out or fails on an empty piece keeps NumPy's test, and so its
guard. Deciding so calls the function once more while tracing, where NumPy would not; a function that
writes into a traced array is called once (the writes are recorded), with NumPy's test after it. A
piece empty while tracing is skipped as NumPy skips it, with its test."""

from __future__ import annotations

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


def _fits_empty(func: Any, vals: Any, args: tuple, kw: dict) -> bool:
    """Whether ``func`` on an empty piece returns, without raising or warning, a value that an empty
    piece takes (``y[cond] = value`` with no element selected)."""
    concrete = vals._concrete if is_traced_array(vals) else np.asarray(vals)
    empty = np.array(concrete[:0])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = func(empty, *args, **kw)
            shape = np.shape(out._concrete if is_traced_array(out) else out)
            return np.broadcast_shapes(shape, empty.shape) == empty.shape
    except Exception:
        return False


def piecewise(x: Any, condlist: Any, funclist: Any, *args: Any, **kw: Any) -> Any:
    """NumPy's ``piecewise`` (same argument handling and errors), recorded; see the module docstring."""
    tracer = active_tracer("np.piecewise")
    x = np.asanyarray(x)
    n2 = len(funclist)
    if np.isscalar(condlist):
        listed = False
    elif is_traced_array(condlist):  # NumPy's test reads condlist[0]: an array only past one dim
        listed = condlist.ndim > 1
    else:
        listed = isinstance(condlist[0], (list, np.ndarray)) or is_traced_array(condlist[0])
    if np.isscalar(condlist) or (not listed and x.ndim != 0):
        condlist = [condlist]
    # Each condition as a bool array (NumPy stacks them into one array; kept apart, no shape is read).
    conds = [np.astype(c, bool) if is_traced_array(c) else np.asarray(c, dtype=bool) for c in condlist]
    n = len(conds)
    if n == n2 - 1:
        otherwise = conds[0]
        for c in conds[1:]:
            otherwise = otherwise | c
        conds.append(~otherwise)
        n += 1
    elif n != n2:
        raise ValueError(f"with {n} condition(s), either {n} or {n + 1} functions are expected")
    y = np.zeros_like(x)
    for cond, func in zip(conds, funclist):
        if not callable(func):
            y[cond] = func
            continue
        vals = x[cond]
        if (vals._concrete if is_traced_array(vals) else vals).size == 0:
            bool(vals.size > 0)  # NumPy's test, a guard: NumPy does not call the function here
            continue
        mark, writes = len(tracer.graph.nodes), tracer.writes
        result = func(vals, *args, **kw)
        if tracer.writes != writes:  # it wrote in place: called once, as NumPy does, and NumPy's test kept
            bool(vals.size > 0)
            y[cond] = result
        elif _harmless_when_empty(tracer.graph.nodes[mark:]) and _fits_empty(func, vals, args, kw):
            y[cond] = result
        else:  # NumPy's test, a guard: the first call's nodes are dead code, recorded again
            tracer.discard(mark)
            if vals.size > 0:
                y[cond] = func(vals, *args, **kw)
    return y
