"""NumPy functions the registry has no op for: traced through NumPy's own code, or called at run time.

Many NumPy functions are Python code over other NumPy functions (``np.sinc``, ``np.cross``,
``np.gradient``, the ``nan*`` family): `unregistered_call` first runs that code
(``__array_function__``'s ``func._implementation``) on the traced arrays, so its parts are recorded
like the user's own code. Where it has none, or meets something the tracer cannot follow (a value
leaving the graph, an ndarray feature a traced array lacks), the call becomes a ``prim.host_call``
node: the real function called on the real arrays at run time, guarded on the input shapes it was
recorded at (see ``numtrace_ir.ops.host``). Arguments it writes into (``np.copyto``, ``np.add.at``)
are rebound to the written copies, as ``out=`` is.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from numtrace_ir import registry
from numtrace_ir.ops.host import HOST_MODULES, LIST, flat_results, host_name

from .errors import TracerWarning
from .piecewise import piecewise
from .source import run_at_user_line, user_location, warn_at_user_line
from .traced_value import TracedValue, guarded, is_traced_array, unwrap
from .tracer import Tracer

__all__ = ["Untraceable", "host_call", "inside_implementation", "unregistered_call"]

# Functions that write into their first argument (their results are None).
_WRITERS = frozenset({np.copyto, np.put, np.place, np.putmask, np.fill_diagonal})
# Python types that name dtypes when given as arguments (``dtype=float``).
_DTYPE_TYPES = (bool, int, float, complex)

_local = threading.local()


class Untraceable(Exception):
    """Raised inside NumPy's own implementation of a function where a value would leave the graph: the
    call is made a host call instead."""


def inside_implementation() -> bool:
    """Whether NumPy's implementation of an unregistered function is being traced on this thread."""
    return bool(getattr(_local, "tracing", None))


@contextmanager
def _implementation_traced(func: Any) -> Iterator[None]:
    if not hasattr(_local, "tracing"):
        _local.tracing = []
    _local.tracing.append(func)
    try:
        yield
    finally:
        _local.tracing.pop()


# Functions traced through numtrace's version of NumPy's code rather than NumPy's own.
_OWN_IMPLEMENTATIONS = {np.piecewise: piecewise}

_EMPTY_LIKE = np.empty_like  # NumPy's own: ``np.empty_like`` is a wrapper while tracing (interception.py)


def unregistered_call(tracer: Tracer, func: Any, method: str, args: tuple, kwargs: dict, what: str) -> Any:
    """``func.method(*args, **kwargs)`` for a function the registry lacks (``what`` names it)."""
    if func is _EMPTY_LIKE:  # contents unspecified: zeros are one valid result, and an op
        return np.zeros_like(*args, **kwargs)
    if func is np.copyto and args and is_traced_array(args[0]):
        return _copyto(*args, **kwargs)
    impl = None
    if method == "__call__":
        impl = _OWN_IMPLEMENTATIONS.get(func) or getattr(func, "_implementation", None)
    # Not again inside its own implementation (``np.nonzero`` calls ``x.nonzero()``, which calls it).
    if inspect.isfunction(impl) and func not in _WRITERS and func not in getattr(_local, "tracing", ()):
        mark = len(tracer.graph.nodes)
        try:
            with _implementation_traced(func):
                return impl(*args, **kwargs)
        except Exception:  # what it could not trace runs as the real function
            _forget_guards(tracer, mark)
            tracer.discard(mark)  # the other nodes recorded so far are unused: dead code
    return host_call(tracer, func, method, args, kwargs, what)


def _forget_guards(tracer: Tracer, mark: int) -> None:
    """Erase the guards recorded since node ``mark``: they guarded values of an attempt now discarded."""
    guards = [n for n in tracer.graph.nodes[mark:] if n.op == "prim.guard"]
    guarded = {n.inputs[0] for n in guards}
    for node in guards:
        tracer.graph.erase_node(node)
    tracer.forget_guards(guarded)


def _copyto(dst: Any, src: Any, casting: Any = "same_kind", where: Any = True) -> None:
    """``np.copyto`` into a traced array: ``dst`` rebound to ``np.where(where, src, dst)``."""
    np.copyto(np.empty_like(dst._concrete), unwrap(src), casting=casting)  # NumPy's casting errors
    new = src if where is True else np.where(where, src, dst)
    if is_traced_array(new) and new.dtype != dst.dtype:
        new = np.astype(new, dst.dtype)
    elif not is_traced_array(new):
        new = np.asarray(new).astype(dst.dtype)
    dst._assign(new, "np.copyto")


class _Encoder:
    """A call's arguments as a literal attribute: each array is a node input, written ``"$k"``."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.inputs: list = []
        self._position: dict[int, int] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, TracedValue) or issubclass(type(value), (np.ndarray, np.generic)):
            k = self._position.get(id(value))
            if k is None:
                k = self._position[id(value)] = len(self.inputs)
                self.inputs.append(value)
            return f"${k}"
        if value is None or value is Ellipsis or type(value) in (bool, int, float, complex):
            return value
        if isinstance(value, str):
            return "$" + value if value.startswith("$") else str(value)
        if isinstance(value, list):
            return (LIST, *(self(v) for v in value))
        if isinstance(value, tuple):
            return tuple(self(v) for v in value)
        if type(value) is slice:
            return slice(self(value.start), self(value.stop), self(value.step))
        if isinstance(value, np.dtype):
            return value
        if isinstance(value, type) and (issubclass(value, np.generic) or value in _DTYPE_TYPES):
            return np.dtype(value)
        raise NotImplementedError(
            f"{self.what} is not in numtrace's op registry, and its argument {type(value).__name__} "
            f"{value!r:.60} cannot be recorded for a call at run time (only arrays, numbers, strings, "
            "dtypes, None and tuples of them can); compute it outside the traced function")


def host_call(tracer: Tracer, func: Any, method: str, args: tuple, kwargs: dict, what: str) -> Any:
    """Record ``func.method(*args, **kwargs)`` as a ``prim.host_call`` and return its traced result."""
    name = host_name(func, method)
    if name is None:
        raise NotImplementedError(
            f"{what} is not in numtrace's op registry, and it is not a function of a module a trace may "
            f"call at run time ({', '.join(HOST_MODULES)}; numtrace_ir.ops.host.allow_host_module adds "
            "one); express it with NumPy functions, or compute it outside the traced function")
    args, kwargs = guarded(args), guarded(kwargs)  # numbers read from shapes are static: guarded
    encode = _Encoder(what)
    call = (tuple(encode(a) for a in args), tuple((k, encode(v)) for k, v in kwargs.items()))
    inputs = encode.inputs
    writes = [0] if (func in _WRITERS or method == "at") and inputs and call[0][:1] == ("$0",) else []
    before = [np.array(x._concrete, copy=True) if is_traced_array(x) else None for x in inputs]
    eager = func if method == "__call__" else getattr(func, method)
    concrete = run_at_user_line(getattr(func, "__name__", "call"), eager, *unwrap(args), **unwrap(kwargs))
    writes += [k for k, (x, old) in enumerate(zip(inputs, before)) if old is not None and k not in writes
               and not np.array_equal(x._concrete, old, equal_nan=old.dtype.kind in "fc")]
    for k in writes:
        if not is_traced_array(inputs[k]):
            raise TypeError(f"{what} writes into an array that is not traced (a global or a constant): the "
                            "trace cannot write into it at run time; pass the array to the traced function")
    results = flat_results(concrete)
    for r in results:
        if r.dtype.kind not in "biufc":
            raise NotImplementedError(f"{what} returned an array of dtype {r.dtype}, which a trace cannot "
                                      "hold")
    loc = user_location()
    for x in inputs:
        if is_traced_array(x):  # the recorded call holds for these shapes: other shapes trace again
            for axis, d in enumerate(x._concrete.shape):
                tracer.guard(tracer.record_node("prim.dim", [x], {"axis": axis}, d).output, d)
    attrs = {"func": name, "call": call, "outputs": tuple((r.dtype, r.shape) for r in results),
             "writes": tuple(writes), "shapes": tuple(np.shape(unwrap(x)) for x in inputs)}
    values = [tracer.value_of(x, loc) for x in inputs]
    types = registry.get("prim.host_call").infer(tuple(v.type for v in values), attrs)
    node = tracer.graph.create_node("prim.host_call", values, attrs=attrs, loc=loc, out_types=types)
    node.errstate = tracer.errstate.since()
    # Wrapped from what the function returned, not from `results` (its items as arrays), so that a NumPy
    # scalar (np.fmax.reduce's, np.trace's) stays one: the trace returns np.float64 where NumPy does.
    returned = list(concrete) if isinstance(concrete, (tuple, list)) else [concrete]
    wrapped = [tracer.wrap(v, r) for v, r in zip(node.outputs, returned[:len(results)])]
    for k, v in zip(writes, node.outputs[len(results):]):
        inputs[k]._rebind(tracer, v, what)
    warn_at_user_line(
        f"{what} is not in numtrace's op registry: it runs as a host call ({name} called on the arrays at "
        "run time, not fused), guarded on its input shapes; the trace stays correct (other shapes trace "
        "again)", TracerWarning)
    if concrete is None:
        return None
    if isinstance(concrete, tuple):
        wrapped = [_as_returned(w, c) for w, c in zip(wrapped, concrete)]
        return type(concrete)(*wrapped) if hasattr(concrete, "_fields") else tuple(wrapped)
    if isinstance(concrete, list):
        return [_as_returned(w, c) for w, c in zip(wrapped, concrete)]
    return _as_returned(wrapped[0], concrete)


def _as_returned(value: Any, concrete: Any) -> Any:
    """A host call's result as the function returned it: a Python number (``np.allclose``'s bool) leaves
    the graph as that number, guarded like ``bool(x)``, since NumPy promotes it as a weak scalar where a
    0-d array would not be (``x32 * (np.allclose(a, b) + 1)`` is float32)."""
    return type(concrete)(value) if type(concrete) in _DTYPE_TYPES else value
