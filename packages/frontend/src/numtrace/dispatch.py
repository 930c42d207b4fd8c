"""Routing NumPy calls on traced arrays to the registry: record known ops; unknown ones are traced
through NumPy's own code or recorded as host calls (hostcall.py).

``call`` is the single path from a NumPy entry point (ufunc method, array function,
operator, ndarray method) to a node: it runs NumPy eagerly on the concrete values,
binds the call to the op's schema, and records it. ``out=`` is functionalized here:
the op is recorded out of place and the ``out`` arrays are rebound to the result.
"""

from __future__ import annotations

import operator
from typing import Any, Literal

import numpy as np
from numtrace_ir import registry
from numtrace_ir.ops.foreign import ufunc_name
from numtrace_ir.ops.reductions import MASKED
from numtrace_ir.ops.scatter import SCATTER_OPS
from numtrace_ir.ops.tiling import REPEAT_COUNTS

from .hostcall import unregistered_call
from .source import run_at_user_line
from .traced_value import TracedValue, is_traced_array, unwrap
from .tracer import Tracer, active_tracer, current_tracer
from .views import memory_order, op_view, returned_arguments, track_parts


def numpy_name(func: Any, method: str = "__call__") -> str:
    """How messages name ``func``: ``np.add``, ``scipy.special.expit``, ``mylib.func``."""
    name = getattr(func, "__name__", repr(func))
    if getattr(np, name, None) is func:
        base = f"np.{name}"
    elif isinstance(func, np.ufunc):
        base = ufunc_name(func) or name
    else:
        public = [p for p in str(getattr(func, "__module__", None) or "").split(".") if not p.startswith("_")]
        if public[:1] == ["numpy"]:
            public[0] = "np"
        base = ".".join([*public, name])
    return base if method == "__call__" else f"{base}.{method}"


def _short_name(func: Any, method: str) -> str:
    """The name NumPy's floating-point warnings use: ``log``, ``reduce``."""
    return getattr(func, "__name__", "ufunc") if method == "__call__" else method


def call(func: Any, method: str, args: tuple, kwargs: dict) -> Any:
    """Run ``func.method(*args, **kwargs)`` (``method`` is a ufunc method or ``"__call__"``) and record it."""
    tracer = current_tracer() or active_tracer(numpy_name(func, method))   # the name only for the error
    eager = func if method == "__call__" else getattr(func, method)
    op = registry.for_numpy(func, method)
    args, out, at = _positional_out(op, args, kwargs.pop("out", None))
    if out is not None and not isinstance(out, tuple):
        out = (out,)
    if out is not None and all(o is None for o in out):
        out = None
    if out is None and op is not None and op.name in _COPY_FALSE_WRITES:
        args, kwargs, out = _copy_false_as_out(op, args, kwargs)
        if out is not None and out[0].ndim == 0:   # NumPy returns a 0-d argument's value as a scalar
            return call(func, method, args, {**kwargs, "out": out})[()]
    given = (args, dict(kwargs), at) if out is not None else None   # the call as NumPy gets it
    # A ufunc call's where= is a select against out=; reductions' where= is left to the op's schema.
    where = kwargs.pop("where", True) if isinstance(func, np.ufunc) and method == "__call__" else True
    if where is not True and out is None:
        raise ValueError(f"{numpy_name(func, method)}: where= without out= leaves the masked-out elements "
                         "uninitialized, which a trace cannot reproduce; pass out= as well")
    if op is not None and op.name in SCATTER_OPS and out is None and where is True:
        return _write_first(tracer, op, func, method, args, kwargs)
    foreign = ufunc_name(func) if op is None and isinstance(func, np.ufunc) and method == "__call__" \
        and not kwargs else None
    if foreign is not None:  # a ufunc of another library (scipy.special.expit): recorded by name
        concrete = run_at_user_line(_short_name(func, method), eager, *unwrap(args))
        result = tracer.record("np.ufunc", list(args), {"ufunc": foreign}, concrete)
    elif op is None:
        result = unregistered_call(tracer, func, method, args, kwargs, numpy_name(func, method))
    else:
        if out is not None:
            args, kwargs = _out_loop_dtype(op, eager, args, kwargs, out)
            kwargs = _join_out_dtype(op, kwargs, out)
        concrete = run_at_user_line(_short_name(func, method), eager, *unwrap(args), **unwrap(kwargs))
        args, kwargs = memory_order(tracer, func, args, kwargs)
        result = _dynamic_shape(tracer, func, args, kwargs, concrete)
        if result is None:
            try:   # the op recorded: `op`, or its form for these arguments (out= below is `op`'s)
                recorded, inputs, attrs = _bind(op, args, kwargs)
            except NotImplementedError:  # a form of the function the op does not take (np.pad's modes)
                result = unregistered_call(tracer, func, method, args, kwargs, numpy_name(func, method))
            else:
                if recorded.result_attrs is not None:   # a result type NumPy decides from the values
                    attrs = recorded.normalize_attrs({**attrs, **recorded.result_attrs(concrete)})
                if recorded.data_dependent_shape and isinstance(attrs.get("size"), str):   # a symbol per node
                    attrs = {**attrs, "size": tracer.data_size()}
                result = tracer.record(recorded.name, inputs, attrs, concrete)
                result = returned_arguments(func, args, kwargs, result)
                _track_view(recorded, func, args, kwargs, inputs, attrs, result)
    if where is not True:
        result = _select(where, result, out)
    if out is None:
        return result
    _numpy_takes_out(eager, given, out, result)
    # argmin/argmax write their indices back into an out= NumPy accepted with an unsafe cast. (A join
    # into out= is already of out's dtype: _join_out_dtype.)
    index_out = any(func is f for f in _INDEX_OUT)
    if not index_out and op is not None and (op.reduction is not None or op.name in _OUT_LOOP):
        _reduction_casts_safely(numpy_name(func, method), out, result)
    return write_out(numpy_name(func, method), out, result, "unsafe" if index_out else "same_kind")


def _bind(op: Any, args: tuple, kwargs: dict) -> tuple[Any, list, dict]:
    """The op a call records, its inputs and attrs: `op.bind`'s; for a reduction given a ``where=`` mask
    (by keyword, or by position after the others), its masked op's, with the mask the last input; for
    ``np.repeat`` with traced counts, ``np.repeat_counts`` (the result's length is their sum)."""
    if op.name == "np.repeat" and is_traced_array(args[1] if len(args) > 1 else kwargs.get("repeats")):
        op = registry.get(REPEAT_COUNTS)
        return (op, *op.bind(args, kwargs))
    masked = MASKED.get(op.name)
    n = len(op.params)
    if masked is not None and (len(args) > n or "where" in kwargs):
        where = args[n] if len(args) > n else kwargs["where"]
        args, kwargs = args[:n], {k: v for k, v in kwargs.items() if k != "where"}
        inputs, attrs = op.bind(args, kwargs)
        if where is not True:
            return registry.get(masked), [*inputs, where], attrs
        return op, inputs, attrs
    return (op, *op.bind(args, kwargs))


# Ops that, given copy=False, write their result into their array argument and return it.
_COPY_FALSE_WRITES = {"np.nan_to_num"}


def _copy_false_as_out(op: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple | None]:
    """``np.nan_to_num(x, copy=False)`` on a traced array as ``out=x`` (and ``copy=True``): NumPy updates
    ``x`` in place and returns it, so the write must reach ``x`` (and the caller's array) like an out=."""
    names = [p.name for p in op.params]
    bound = {**dict(zip(names, args)), **kwargs}
    x = bound.pop(names[0], None)
    if bound.get("copy", True) or not is_traced_array(x) or x._scalar:
        return args, kwargs, None
    return (x,), {**bound, "copy": True}, (x,)


def _reduction_casts_safely(what: str, out: tuple, result: Any) -> None:
    """Refuse a reduction's out= that NumPy takes with an unsafe cast (a float sum into an int array):
    NumPy casts each buffer's partial result into it as it goes (a 20000-element sum of 0.6 into int64
    is 11999), which the trace's one cast at the end does not reproduce."""
    results = result if isinstance(result, tuple) else (result,)
    for target, value in zip(out, unwrap(results)):
        have, into = np.result_type(value), getattr(unwrap(target), "dtype", None)
        if into is not None and not np.can_cast(have, into, "same_kind"):
            raise TypeError(f"{what}: out= of dtype {into} for a {have} result: NumPy casts each buffer's "
                            "partial result into it as it reduces (unsafe casting), which the trace does not "
                            f"reproduce; assign the result cast with .astype({into}) instead")


_INDEX_OUT = (np.argmin, np.argmax, np.ndarray.argmin, np.ndarray.argmax)
_JOINS_INTO_OUT = frozenset({"np.concatenate", "np.stack"})


def _numpy_takes_out(eager: Any, given: Any, out: tuple, result: Any) -> None:
    """Raise NumPy's own error where NumPy refuses these out= arrays for the call (`given`: its
    args and kwargs, where= included, without out=): a reduction's out of another shape, a float out
    for argmin. The functionalized write would broadcast or cast into them. Checked by running the
    call into scratch arrays like them, only where an out differs from its result in shape or dtype."""
    results = result if isinstance(result, tuple) else (result,)
    if not all(is_traced_array(o) and not o._scalar for o in out) or len(out) != len(results):
        return   # write_out names the problem
    if all(np.shape(c) == o._concrete.shape and np.result_type(c) == o._concrete.dtype
           for c, o in zip(unwrap(results), out)):
        return
    scratch = tuple(np.empty_like(o._concrete) for o in out)
    into = scratch if isinstance(eager, np.ufunc) or len(scratch) > 1 else scratch[0]
    args, kwargs, at = given
    args, kwargs = unwrap(args), unwrap(kwargs)
    if at is None:
        kwargs = {**kwargs, "out": into}
    else:   # where the call passed it
        args = (*args[:at], into, *args[at + 1:])
    with np.errstate(all="ignore"):   # the eager run above already reported the values' warnings
        eager(*args, **kwargs)


def _positional_out(op: Any, args: tuple, out: Any) -> tuple[tuple, Any, int | None]:
    """`args` with None for an out array passed by position to a reduction (``np.sum(x, 1, None, o)``,
    ``x.argmax(1, o)``: its schema holds NumPy's parameters in order), the out array (else `out`), and
    its position."""
    reduction = op is not None and (op.reduction is not None or op.name in _OUT_LOOP)
    names = [p.name for p in op.params] if reduction else []
    i = names.index("out") if "out" in names else len(args)
    if out is not None or len(args) <= i or args[i] is None:
        return args, out, None
    return (*args[:i], None, *args[i + 1:]), args[i], i


# Reductions whose loop NumPy picks by promoting the out= array's dtype with the input's.
_OUT_LOOP = frozenset({"np.sum", "np.prod", "np.mean", "np.cumsum", "np.cumprod", "np.nansum", "np.nanprod",
                       "np.nanmean", "np.nancumsum", "np.nancumprod"})
# Those whose loop is float64 for integer and bool inputs whatever the out array.
_FLOAT_LOOP = frozenset({"np.mean", "np.nanmean"})
# Those that sum their squared deviations in that loop, from a mean and deviations in the input's dtype:
# no dtype= reproduces it, so such a call is refused where the loop is not the input's.
_OUT_LOOP_REFUSED = frozenset({"np.var", "np.std", "np.nanvar", "np.nanstd"})


def _join_out_dtype(op: Any, kwargs: dict, out: tuple) -> dict:
    """`kwargs` with dtype= out's for a join into out=: NumPy copies each input into out, one cast (by
    the call's casting), where the join at the inputs' promoted dtype and then its cast into out
    would round twice (int64 2**60 + 2**36 + 1 joined with float32 into a float32 out). NumPy refuses
    out= with dtype=, so no call gives both."""
    if op.name not in _JOINS_INTO_OUT or len(out) != 1 or "dtype" in kwargs:
        return kwargs
    return {**kwargs, "dtype": np.asarray(unwrap(out[0])).dtype}


def _out_loop_dtype(op: Any, eager: Any, args: tuple, kwargs: dict, out: tuple) -> tuple[tuple, dict]:
    """`args` and `kwargs` with the dtype set to the loop NumPy runs a sum, product, mean or scan in
    when it writes into `out` without a dtype: NumPy promotes the out array's dtype with the input's,
    so that ``np.sum(x32, out=x64)`` sums in float64 where the call without out= sums in float32, and
    ``np.sum(b, out=b2)`` of bools is an any. A mean of integers (and np.mean's of float16) keeps its
    own float64 (float32) loop. A variance whose sum that loop would change is refused (TypeError)."""
    positional = len(args) > 2   # (a, axis, dtype, ...) in every form: np.sum, ndarray.sum, ufunc.reduce
    given = args[2] if positional else kwargs.get("dtype")
    a = args[0] if args else kwargs.get("a", kwargs.get("array"))
    if op.name not in _OUT_LOOP | _OUT_LOOP_REFUSED or given is not None or a is None or len(out) != 1 \
            or not is_traced_array(out[0]):
        return args, kwargs
    a_dtype = np.asarray(unwrap(a)).dtype
    if op.name in _FLOAT_LOOP | _OUT_LOOP_REFUSED and a_dtype.kind not in "fc" \
            or op.name == "np.mean" and a_dtype == np.float16:
        return args, kwargs
    loop = np.result_type(a_dtype, out[0]._concrete.dtype)
    with np.errstate(all="ignore"):
        default = np.asarray(eager(np.ones((1,), a_dtype))).dtype
    if loop == default:
        return args, kwargs
    if op.name in _OUT_LOOP_REFUSED:
        raise TypeError(f"{op.name} with out= of dtype {out[0]._concrete.dtype} for a {a_dtype} input: "
                        f"NumPy sums the squared {a_dtype} deviations in {loop}, which the trace does not "
                        "reproduce; pass dtype= or an out= of the result's dtype")
    if positional:
        return (*args[:2], loop, *args[3:]), kwargs
    return args, {**kwargs, "dtype": loop}


def _write_first(tracer: Tracer, op: Any, func: Any, method: str, args: tuple, kwargs: dict) -> None:
    """``func.method(a, ...)`` writing into ``a``, recorded as ``op`` (the updated copy) with ``a`` rebound
    to it, so that the write reaches ``a``'s base and, through the graph, the caller's array."""
    what = numpy_name(func, method)
    if not args or not is_traced_array(args[0]):
        raise TypeError(f"{what} writes into an array that is not traced (a global or a constant): the trace "
                        "cannot write into it at run time; pass the array to the traced function, or make it "
                        "from one (np.zeros_like(x, shape=...))")
    target = args[0]
    if target._scalar:
        raise TypeError(f"{what}: cannot write into a NumPy scalar (immutable) from traced code")
    eager = func if method == "__call__" else getattr(func, method)
    try:
        inputs, attrs = op.bind(args, kwargs)
    except NotImplementedError:  # a form of the call the op does not take: a host call runs NumPy's
        return unregistered_call(tracer, func, method, args, kwargs, what)
    except (TypeError, ValueError):   # a bad call: NumPy's own error
        run_at_user_line(_short_name(func, method), eager, *unwrap(args), **unwrap(kwargs))
        raise
    run_at_user_line(_short_name(func, method), eager, *unwrap(args), **unwrap(kwargs))
    node = tracer.record_node(op.name, inputs, attrs, target._concrete)
    target._rebind(tracer, node.outputs[0], what)
    return None


# Functions whose shape argument may hold traced ints, and the prim op that keeps those dims dynamic.
_DYNAMIC_SHAPE_OPS = {np.reshape: "prim.reshape", np.broadcast_to: "prim.broadcast_to"}


def _dynamic_shape(tracer: Tracer, func: Any, args: tuple, kwargs: dict, concrete: Any) -> Any:
    """Record ``np.reshape(x, (x.shape[0], -1))`` and the like with the traced dims as graph inputs.

    Returns None when the call has no traced dim (the op's static-shape form is recorded then).
    """
    prim = _DYNAMIC_SHAPE_OPS.get(func)
    if prim is None or len(args) < 1 or kwargs.get("order", "C") != "C":
        return None
    shape = args[1] if len(args) > 1 else kwargs.get("shape", kwargs.get("newshape"))
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not any(_is_traced_int(d) for d in dims):
        return None
    entries = tuple(tracer.symbol(d) if _is_traced_int(d) else operator.index(d) for d in dims)
    scalars = [d for d in dims if _is_traced_int(d)]
    inputs, attrs = [args[0], *scalars], {"shape": entries}
    result = tracer.record(prim, inputs, attrs, concrete, exact=True)
    op = registry.get(prim)
    if op.view is not None:
        _track_view(op, func, args, kwargs, inputs, attrs, result)
    return result


def _is_traced_int(x: Any) -> bool:
    return isinstance(x, TracedValue) and x._kind == "int"


def _track_view(op: Any, func: Any, args: tuple, kwargs: dict, inputs: list, attrs: dict,
                result: Any) -> None:
    """Make ``result`` a tracked view of its base where NumPy returned a view, so writes reach the base."""
    if isinstance(result, (tuple, list)):
        track_parts(func, inputs, attrs, result)
        return
    recipe = op_view(op, func, args, kwargs, inputs, attrs, result)
    if recipe is not None:
        base = inputs[0]
        result._parent, result._view, result._seen = base, recipe, base._version


def _select(where: Any, result: Any, out: tuple) -> Any:
    """``np.where(where, result, out)`` per output: what a ufunc with ``where=`` leaves in ``out``."""
    results = result if isinstance(result, tuple) else (result,)
    selected = tuple(call(np.where, "__call__", (where, r, o), {}) for r, o in zip(results, out))
    return selected if isinstance(result, tuple) else selected[0]


def write_out(what: str, out: tuple, result: Any,
              casting: Literal["same_kind", "unsafe"] = "same_kind") -> Any:
    """Functionalized ``out=``: each out array is rebound to its result (cast as NumPy would, under
    `casting`)."""
    results = result if isinstance(result, tuple) else (result,)
    if len(out) != len(results):
        raise ValueError(f"{what}: out= has {len(out)} arrays for {len(results)} results")
    for target, value in zip(out, results):
        if not is_traced_array(target):
            raise TypeError(f"{what}: out= must be a traced array (an input or a result of traced code), "
                            f"got {type(target).__name__}; writing into it would escape the trace")
        if target._scalar:
            raise TypeError(f"{what}: out= must be an array, got a NumPy scalar (immutable) from traced code")
        target._assign(value, f"{what} with out=", casting)
    return out if isinstance(result, tuple) else out[0]


def freeze(tracer: Tracer, result: Any) -> Any:
    """Freeze array results: each becomes a constant node of the trace (frozen: recorded as the value it
    has now); other values are returned as they are."""
    if issubclass(type(result), (np.ndarray, np.generic)) and result.dtype.kind in "biufc":
        array = np.array(result, copy=True)
        return tracer.wrap(tracer.constant(array), array)
    if isinstance(result, tuple):
        return tuple(freeze(tracer, r) for r in result)
    if isinstance(result, list):
        return [freeze(tracer, r) for r in result]
    return result
