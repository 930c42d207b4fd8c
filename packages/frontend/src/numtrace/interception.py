"""NumPy entry points that take no array argument, and so never reach ``__array_function__``.

While any trace is active, these module attributes are replaced by wrappers:
``np.random.*`` draws (recorded as nondeterministic nodes), ``np.zeros/ones/full/empty``
with a shape computed from traced ints (recorded as ``prim.full``),
``np.ascontiguousarray`` (routed like any array function), and ``np.arange`` and other
number-reading constructors, whose results are constants: a traced size given to them is
guarded, so the constant is never used at shapes that would change it. A wrapper called on
a thread that is not tracing, or with nothing traced in its arguments, calls the original.
Patching is reference-counted, so concurrent traces share one patch.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from numtrace_ir import registry

from . import dispatch
from .traced_int import TracedInt
from .tracer import current_tracer

_lock = threading.Lock()
_depth = 0
_saved: list[tuple[Any, str, Any]] = []


def _random_wrapper(original: Any) -> Any:
    @functools.wraps(original)
    def draw(*args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        if tracer is None:
            return original(*args, **kwargs)
        op = registry.for_numpy(original)
        result = original(*dispatch.unwrap(args), **dispatch.unwrap(kwargs))
        inputs, attrs = op.bind(args, kwargs)
        return tracer.record(op.name, inputs, attrs, np.asarray(result))
    return draw


def _creation_wrapper(original: Any, fill: Any) -> Any:
    """``np.zeros(shape)`` etc.: a shape holding traced ints is recorded as ``prim.full``."""
    @functools.wraps(original)
    def create(shape: Any, *args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        dims = shape if isinstance(shape, (tuple, list)) else (shape,)
        if tracer is None or not any(isinstance(d, TracedInt) for d in dims):
            return original(shape, *args, **kwargs)
        result = original(tuple(dispatch.unwrap(d) for d in dims), *args, **kwargs)
        if not isinstance(result, np.ndarray) or result.dtype.kind not in "biufc":
            return result
        value = fill(args, kwargs)
        entries = tuple(tracer.symbol(d) if isinstance(d, TracedInt) else operator.index(d) for d in dims)
        scalars = [d for d in dims if isinstance(d, TracedInt)]
        attrs = {"shape": entries, "fill_value": value.item() if isinstance(value, np.generic) else value,
                 "dtype": result.dtype}
        return tracer.record("prim.full", scalars, attrs, result, exact=True)
    return create


def _fill_value(args: tuple, kwargs: dict) -> Any:
    value = args[0] if args else kwargs["fill_value"]
    if not isinstance(value, (bool, int, float, complex, np.generic)):
        raise TypeError("np.full with a traced shape needs a scalar fill_value; "
                        "use np.broadcast_to for arrays")
    return value


def _baking_wrapper(original: Any) -> Any:
    """A function the registry lacks that reads numbers (``np.arange(n)``): a size read from a traced
    shape is used with a guard, so the constant result is never used at shapes that change it."""
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        if current_tracer() is None:
            return original(*args, **kwargs)
        return original(*dispatch.guarded(args), **dispatch.guarded(kwargs))
    return call


def _dispatching_wrapper(original: Any) -> Any:
    """A NumPy function that converts its argument with ``__array__``: route traced arguments to the op."""
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        from .proxy import TracedArray

        if current_tracer() is None or not any(isinstance(a, TracedArray) for a in args):
            return original(*args, **kwargs)
        return dispatch.call(original, "__call__", args, kwargs)
    return call


def _patches() -> list[tuple[Any, str, Any]]:
    patches = []
    for op in registry.all_ops():
        if op.kind != "random":
            continue
        for func, method in op.numpy_targets:
            name = getattr(func, "__name__", None)
            if method == "__call__" and name and getattr(np.random, name, None) is func:
                patches.append((np.random, name, _random_wrapper(func)))
    patches.append((np, "zeros", _creation_wrapper(np.zeros, lambda a, k: 0)))
    patches.append((np, "ones", _creation_wrapper(np.ones, lambda a, k: 1)))
    patches.append((np, "full", _creation_wrapper(np.full, _fill_value)))
    # np.empty's contents are unspecified, so zeros are one valid result that follows traced dims.
    patches.append((np, "empty", _creation_wrapper(np.empty, lambda a, k: 0)))
    for name in ("arange", "linspace", "eye", "identity", "tri"):
        patches.append((np, name, _baking_wrapper(getattr(np, name))))
    if registry.for_numpy(np.ascontiguousarray) is not None:
        patches.append((np, "ascontiguousarray", _dispatching_wrapper(np.ascontiguousarray)))
    return patches


@contextmanager
def numpy_intercepted() -> Iterator[None]:
    """Install the wrappers for the duration of a trace (nested and concurrent traces share them)."""
    global _depth
    with _lock:
        if _depth == 0:
            for module, name, wrapper in _patches():
                _saved.append((module, name, getattr(module, name)))
                setattr(module, name, wrapper)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                for module, name, original in reversed(_saved):
                    setattr(module, name, original)
                _saved.clear()
