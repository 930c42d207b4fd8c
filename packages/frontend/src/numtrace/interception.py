"""NumPy entry points that take no array argument, and so never reach ``__array_function__``.

While any trace is active, these module attributes are replaced by wrappers:
``np.random.*`` draws (recorded as nondeterministic nodes), ``np.random.default_rng`` (a
`TracedGenerator` whose draws are recorded; closed-over generators are swapped for one while
their function is traced, see `generators_traced`), ``np.zeros/ones/full/empty``
with a shape computed from traced ints (recorded as ``prim.full``),
``np.ascontiguousarray`` (routed like any array function), and ``np.arange``,
``np.fft.fftfreq`` and other number-reading constructors: given a traced size they are recorded
through ``prim.dynamic`` (the size stays a graph value), and otherwise their results are constants;
``np.result_type`` of traced numbers is their plain values' (NumPy's ``np.mgrid``/``np.ogrid`` type
their grids so, then build them from the functions above).
A wrapper called on a thread that is not tracing, or with nothing traced in its arguments, calls the
original. Patching is reference-counted, so concurrent traces share one patch.

NumPy's compiled random modules call ``np.empty`` and friends themselves and cast the result
to an ndarray unchecked: a wrapper's traced array reaching them is read as raw memory (this
crashed the interpreter). They see `_UnpatchedNumpy` instead, which runs the originals on
plain values, so no traced value reaches NumPy's compiled code through these wrappers.
"""

from __future__ import annotations

import functools
import operator
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from numtrace_ir import ScalarType, registry
from numtrace_ir.ops import random as random_ops

from . import dispatch
from .errors import TracerWarning
from .proxy import TracedArray
from .source import numtrace_called, user_location, warn_at_user_line
from .traced_int import TracedInt, TracedScalar
from .traced_value import guarded, unwrap
from .tracer import attr_value, current_tracer, tensor_type_of
from .views import laid_out

_lock = threading.Lock()
_local = threading.local()  # recording_draw: > 0 while a recorded draw runs eagerly on this thread
_depth = 0
_saved: list[tuple[Any, str, Any]] = []


def _split_size(tracer: Any, value: Any, scalars: list) -> tuple[Any, Any]:
    """A ``size`` argument as (the attr: each traced int replaced by its dim symbol, appended to
    `scalars`; the plain size NumPy draws with)."""
    if isinstance(value, TracedScalar):
        if not isinstance(value, TracedInt):
            raise TypeError(f"a random draw's size must hold ints, got the traced float {value!r}")
        scalars.append(value)
        return tracer.symbol(value), unwrap(value)
    if isinstance(value, (tuple, list)):
        pairs = [_split_size(tracer, v, scalars) for v in value]
        return tuple(a for a, _ in pairs), tuple(p for _, p in pairs)
    return value, value


def _size_position(op: Any, args: tuple, kwargs: dict, skip: int) -> Any:
    """Where a draw's ``size`` is: ``"*"`` when every positional argument is a dim
    (``np.random.rand(*x.shape)``), ``"size"`` as a keyword, its position, or None when not given."""
    if op.name in ("np.random.rand", "np.random.randn"):
        return "*"
    if "size" in kwargs:
        return "size"
    names = [p.name for p in op.params if isinstance(p, registry.Attr)]
    position = skip + names.index("size")
    return position if position < len(args) else None


def record_draw(tracer: Any, op: Any, eager: Any, args: tuple, kwargs: dict, *, skip: int = 0,
                state: Any = None) -> Any:
    """Draw eagerly (with plain numbers) and record the draw: traced ints in ``size`` become dim inputs
    (the draw follows the input's shape at run time); with a traced generator ``state`` the node also
    returns the next state, and the result is ``(state', values)``. `skip`: leading arguments that are
    not NumPy's (the generator of a method)."""
    where = _size_position(op, args, kwargs, skip)
    scalars: list = []
    traced_args, kwargs = list(args), dict(kwargs)
    plain_args, plain_kwargs = list(args), dict(kwargs)
    if where == "*":
        pairs = [_split_size(tracer, a, scalars) for a in traced_args]
        traced_args, plain_args = [a for a, _ in pairs], [p for _, p in pairs]
    elif where == "size":
        kwargs["size"], plain_kwargs["size"] = _split_size(tracer, kwargs["size"], scalars)
    elif where is not None:
        traced_args[where], plain_args[where] = _split_size(tracer, traced_args[where], scalars)
    # A number read from a shape given as a distribution parameter is frozen into the node: guarded.
    args, kwargs = guarded(traced_args), guarded(kwargs)
    with _recorded_draw():
        values = eager(*unwrap(plain_args[skip:]), **unwrap(plain_kwargs))
    values = values if type(values) in (int, float) else np.asarray(values)  # a Python number is weak
    inputs, attrs = op.bind(tuple(args), kwargs)
    concrete: Any = values
    if state is not None:
        attrs = {**attrs, "omitted": ()}
        inputs = [state, *scalars]
        with _recorded_draw():
            concrete = (random_ops.pack_state(eager.__self__.bit_generator), values)
    else:
        inputs = scalars
    return _record_exact(tracer, op, inputs, attrs, concrete)


@contextmanager
def _recorded_draw() -> Iterator[None]:
    """NumPy random code run by numtrace itself (a recorded draw, reading a state): not a draw it missed."""
    _local.recording_draw = getattr(_local, "recording_draw", 0) + 1
    try:
        yield
    finally:
        _local.recording_draw -= 1


def _record_exact(tracer: Any, op: Any, inputs: list, attrs: dict, concrete: Any) -> Any:
    """Record a node whose output types are those of NumPy's eager results: a size naming traced dims
    has only symbols in the op's rule, and the traced shapes hold for the call being traced."""
    values = [tracer.value_of(x) for x in inputs]
    attrs = {k: attr_value(v, f"{op.name}: attribute {k}") for k, v in attrs.items()}
    op.infer(tuple(v.type for v in values), attrs)  # the rule still validates the call
    results = concrete if isinstance(concrete, tuple) else (concrete,)
    out_types = tuple(ScalarType(type(r).__name__) if type(r) in (int, float)
                      else tensor_type_of(np.asarray(r), op.name) for r in results)
    node = tracer.graph.create_node(op.name, values, attrs=attrs, loc=user_location(), out_types=out_types)
    node.errstate = tracer.errstate.since()
    wrapped = tuple(tracer.wrap(v, r) for v, r in zip(node.outputs, results))
    return wrapped if isinstance(concrete, tuple) else wrapped[0]


def _random_wrapper(original: Any) -> Any:
    @functools.wraps(original)
    def draw(*args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        if tracer is None:
            return original(*args, **kwargs)
        return record_draw(tracer, registry.for_numpy(original), original, args, kwargs)
    return draw


def _unrecorded_random(original: Any, recorded: list[str]) -> Any:
    """A ``np.random`` function of the global generator that no op records (``seed``, ``shuffle``,
    ``choice``...): refused while tracing. Run eagerly, its draws would be constants of the trace (the
    same on every call), a seed or state set inside the function would not be set again by a call,
    and a shuffle would replay one permutation."""
    @functools.wraps(original)
    def refused(*args: Any, **kwargs: Any) -> Any:
        if current_tracer() is None:
            return original(*args, **kwargs)
        raise NotImplementedError(
            f"np.random.{original.__name__} cannot be traced (at {user_location()}): numtrace records only "
            f"np.random.{', np.random.'.join(recorded)} and np.random.Generator draws; anything else "
            "would be frozen into the trace. Call it outside the traced function (seed there, or pass "
            "the drawn array in), or use np.random.default_rng(seed) inside it")
    return refused


class TracedGenerator(np.random.Generator):
    """A ``np.random.Generator`` whose draws are recorded while its trace runs.

    It shares the user's bit generator, so the traced run draws what the eager run draws. A generator
    the traced function made itself (``np.random.default_rng(seed)``) carries its state as a graph
    value, so every call of the traced function starts from that seed (or, unseeded, from fresh
    entropy) as the eager function would; one from outside the function (closed over) has no state in
    the graph and draws from a process-wide stream at run time.
    """

    def __init__(self, bit_generator: Any, state: Any = None) -> None:
        super().__init__(bit_generator)
        self._state = state

    def __reduce__(self):
        return (np.random.Generator, (self.bit_generator,))


def _generator_method(name: str, op: Any) -> Any:
    base = getattr(np.random.Generator, name)

    @functools.wraps(base)
    def method(self: TracedGenerator, *args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        eager = getattr(super(TracedGenerator, self), name)
        if tracer is None:
            return eager(*args, **kwargs)
        result = record_draw(tracer, op, eager, (self, *args), kwargs, skip=1, state=self._state)
        if self._state is None:
            return result
        self._state, values = result
        return values
    return method


def _unsupported_method(name: str) -> Any:
    base = getattr(np.random.Generator, name)

    @functools.wraps(base)
    def method(self: TracedGenerator, *args: Any, **kwargs: Any) -> Any:
        if current_tracer() is None:
            return getattr(super(TracedGenerator, self), name)(*args, **kwargs)
        raise NotImplementedError(
            f"Generator.{name} cannot be traced: numtrace records only the Generator methods "
            f"{', '.join(sorted(random_ops.GENERATOR_METHODS))} (a draw it cannot record would be frozen "
            "into the trace as constant numbers); draw outside the traced function and pass the array in")
    return method


for _name in dir(np.random.Generator):
    if _name.startswith("_") or _name in ("bit_generator",):
        continue
    if _name in random_ops.GENERATOR_METHODS:
        setattr(TracedGenerator, _name, _generator_method(_name, random_ops.GENERATOR_METHODS[_name]))
    elif callable(getattr(np.random.Generator, _name)):
        setattr(TracedGenerator, _name, _unsupported_method(_name))
del _name


_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def _bit_generator_refused(original: Any) -> Any:
    """``np.random.PCG64(seed)`` and the other bit generators, made inside a traced function: refused.
    A generator built on one draws from state the graph does not hold, so its draws would be frozen
    into the trace or come from a process-wide stream, where the eager function restarts from its
    seed on every call."""
    @functools.wraps(original)
    def refused(*args: Any, **kwargs: Any) -> Any:
        if current_tracer() is None:
            return original(*args, **kwargs)
        raise NotImplementedError(
            f"np.random.{original.__name__}(...) cannot be made inside a traced function (at "
            f"{user_location()}): numtrace records draws of np.random.default_rng(seed) made inside the "
            "function, and of generators made outside it; use np.random.default_rng(seed) here, or build "
            "the generator outside the function and pass or close over it")
    return refused


class _GeneratorClassMeta(type):
    """``isinstance(g, np.random.Generator)`` stays true for every real generator while the name is
    patched."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _REAL_GENERATOR)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, _REAL_GENERATOR)


_REAL_GENERATOR, _REAL_PCG64 = np.random.Generator, np.random.PCG64  # the names are patched while tracing


class _GeneratorWhileTracing(np.random.Generator, metaclass=_GeneratorClassMeta):
    """``np.random.Generator(bit_generator)`` called inside a traced function: a `TracedGenerator` on
    that bit generator, so its draws are recorded (from the bit generator's own stream at run time,
    as a closed-over generator's are) instead of frozen into the trace."""

    def __new__(cls, bit_generator: Any) -> Any:
        if current_tracer() is None:
            return _REAL_GENERATOR(bit_generator)
        return TracedGenerator(bit_generator)


def _default_rng_wrapper(original: Any) -> Any:
    """``np.random.default_rng(seed)`` inside a traced function: a `TracedGenerator` whose state starts
    the graph's chain of draws (a constant for a seed, a fresh-entropy node without one)."""
    @functools.wraps(original)
    def default_rng(seed: Any = None) -> Any:
        tracer = current_tracer()
        if tracer is None or isinstance(seed, np.random.Generator):
            return original(seed)
        seed = guarded(seed)  # a seed read from a shape is frozen into the state: guarded
        with _recorded_draw():
            real = original(seed)
            if isinstance(seed, np.random.BitGenerator) or type(real.bit_generator) is not _REAL_PCG64:
                return TracedGenerator(real.bit_generator)  # state outliving the call: drawn as closed over
            packed = random_ops.pack_state(real.bit_generator)
        if seed is None:
            state = _record_exact(tracer, registry.get("np.random.default_rng"), [], {}, packed)
        else:
            state = dispatch.freeze(tracer, packed)
        return TracedGenerator(real.bit_generator, state)
    return default_rng


@contextmanager
def generators_traced(func: Any) -> Iterator[None]:
    """While `func` is traced, the generators it reaches by name are `TracedGenerator` objects sharing
    their bit generators, so their draws are recorded: those it closes over (closure cells, globals its
    code names), attributes its code names of objects it reaches so (``self.rng``, ``helpers.rng``), the
    items of lists, dicts and tuples it reaches so (``RNGS[0]``, ``STATE["rngs"][0]``: a tuple is
    replaced where it is bound), and the same for the Python functions and methods it reaches so (a
    helper's global generator, ``self.get_rng()``)."""
    swapped: list[tuple[Any, Any, Any]] = []  # (cell or namespace dict, key, original)
    seen: set[int] = set()

    def bind(where: Any, key: Any, value: Any) -> None:
        if key is None:
            where.cell_contents = value
        else:
            where[key] = value

    def traced(value: Any, depth: int) -> Any:
        """`value` with the generators in it replaced: lists and dicts in place, tuples rebuilt (the
        same object where nothing in it changes)."""
        if type(value) is _REAL_GENERATOR:
            return TracedGenerator(value.bit_generator)
        if depth > 3 or type(value) not in (list, dict, tuple):
            return value
        if type(value) is tuple:
            items = tuple(traced(item, depth + 1) for item in value)
            return value if all(a is b for a, b in zip(items, value)) else items
        for key, item in list(value.items() if type(value) is dict else enumerate(value)):
            swap(value, key, item, depth + 1)
        return value

    def swap(where: Any, key: Any, value: Any, depth: int = 0) -> None:
        new = traced(value, depth)
        if new is not value:
            swapped.append((where, key, value))
            bind(where, key, new)

    def visit(fn: Any, owner: Any, depth: int) -> None:
        fn = getattr(fn, "__func__", fn)
        code, env = getattr(fn, "__code__", None), getattr(fn, "__globals__", None)
        if code is None or id(fn) in seen or depth > 3:
            return
        seen.add(id(fn))
        names = set(code.co_names)
        reached = [owner] if owner is not None else []
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            swap(cell, None, value)
            reached.append(cell.cell_contents)
        if env is not None:
            for name in names & env.keys():
                swap(env, name, env[name])
                reached.append(env[name])
        for value in reached:
            namespace = getattr(value, "__dict__", None)
            if isinstance(namespace, dict) and not isinstance(value, type) \
                    and getattr(value, "__name__", "").split(".")[0] != "numpy":
                for name in names & namespace.keys():
                    swap(namespace, name, namespace[name])
                    if isinstance(namespace[name], types.FunctionType):  # helpers.draw()
                        visit(namespace[name], None, depth + 1)
                for name in names - namespace.keys():  # self.get_rng(): a method of its class
                    method = getattr(type(value), name, None)
                    if isinstance(method, types.FunctionType):
                        visit(method, value, depth + 1)
            if isinstance(value, types.FunctionType):
                visit(value, None, depth + 1)

    visit(func, getattr(func, "__self__", None), 0)
    try:
        yield
    finally:
        for where, key, original in reversed(swapped):
            bind(where, key, original)


def _creation_wrapper(original: Any, fill: Any) -> Any:
    """``np.zeros(shape)`` etc. called by user code on the tracing thread: see `_created`."""
    @functools.wraps(original)
    def create(shape: Any, *args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        if tracer is None or kwargs.get("like") is not None or numtrace_called():
            return original(shape, *args, **kwargs)
        return _created(tracer, original, fill, shape, args, kwargs)
    return create


def _created(tracer: Any, original: Any, fill: Any, shape: Any, args: tuple, kwargs: dict) -> Any:
    """A numeric array recorded as ``prim.full`` (a shape holding traced ints follows them), so traced
    data written into it later is recorded as writes, where a plain array would take it in through
    ``__array__`` and guard its values. Other dtypes (object, str) stay plain."""
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    traced_dims = any(isinstance(d, TracedInt) for d in dims)
    value = fill(args, kwargs)
    plain_value = unwrap(value)
    result = original(tuple(unwrap(d) for d in dims) if traced_dims else shape,
                      *((plain_value, *args[1:]) if fill is _fill_value and args else args),
                      **{k: plain_value if k == "fill_value" else v for k, v in kwargs.items()})
    if type(result) is not np.ndarray or result.dtype.kind not in "biufc":
        guarded(dims)  # an array the trace cannot hold: its shape leaves the graph, guarded
        return result
    entries = tuple(tracer.symbol(d) if isinstance(d, TracedInt) else operator.index(d) for d in dims) \
        if traced_dims else result.shape  # a plain shape as NumPy read it (a tuple, an int, an array)
    if isinstance(value, TracedArray) or not isinstance(value, (bool, int, float, complex, np.generic)):
        # An array or traced fill value: broadcast to the shape and cast as NumPy's copyto does.
        fill_array = value if isinstance(value, TracedArray) else dispatch.freeze(tracer, np.asarray(value))
        target: tuple[Any, ...] = tuple(d if isinstance(d, TracedInt) else e for d, e in zip(dims, entries))
        return np.astype(np.broadcast_to(fill_array, target), result.dtype, copy=True)
    scalars = [d for d in dims if isinstance(d, TracedInt)]
    # A NumPy scalar is kept as a 0-d array, so prim.full casts it from its own type as NumPy does.
    attrs = {"shape": entries, "fill_value": np.array(value) if isinstance(value, np.generic) else value,
             "dtype": result.dtype}
    return tracer.record("prim.full", scalars, attrs, result, exact=True)


def _like_wrapper(original: Any, fill: Any) -> Any:
    """``np.zeros_like(a)`` etc. of a plain ndarray in user code: `_created`'s array, so traced data
    written into it is recorded (a traced ``a`` reaches ``__array_function__`` instead)."""
    @functools.wraps(original)
    def like(a: Any, *args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        if tracer is None or type(a) is not np.ndarray or kwargs.get("shape") is not None \
                or numtrace_called():
            return original(a, *args, **kwargs)
        return _created(tracer, lambda shape, *rest, **options: original(a, *rest, **options), fill,
                        a.shape, args, kwargs)
    return like


def _fill_value(args: tuple, kwargs: dict) -> Any:
    return args[0] if args else kwargs["fill_value"]


def _numbers_wrapper(original: Any, op_name: str, positional: list[str] | None = None,
                     renamed: dict[str, str] | None = None, plain: bool = False) -> Any:
    """A creation function of numbers (``np.arange(n)``, ``np.eye(n)``): given a number read from a traced
    shape, it is recorded as ``prim.dynamic`` of its registry op, with that number as a graph value, so
    the array follows the input's shapes. ``positional`` and ``renamed`` map the function's parameters
    onto the op's where they differ (``np.identity(n)`` is ``np.eye(N=n)``). With ``plain`` (arrays
    that programs fill, ``M = np.eye(4); M[:3, :3] = R``), plain numbers from user code record the op
    too, so traced data written into the result is recorded, not guarded. Anything else runs as it is:
    a constant of the trace."""
    op = registry.get(op_name)
    positional = positional or [p.name for p in op.params]
    renamed = renamed or {}

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        tracer = current_tracer()
        if tracer is None:
            return original(*args, **kwargs)
        if not any(isinstance(v, TracedScalar) for v in (*args, *kwargs.values())):
            if not plain or numtrace_called():
                return original(*args, **kwargs)
            result = original(*args, **kwargs)
            given = dict(zip(positional, args))
            given.update((renamed.get(key, key), value) for key, value in kwargs.items())
            try:
                bound = op.normalize_attrs(given)
            except (TypeError, ValueError):
                return result
            if type(result) is not np.ndarray or result.dtype.kind not in "biufc":
                return result
            return tracer.record(op_name, [], bound, result)
        result = original(*unwrap(args), **unwrap(kwargs))
        given = dict(zip(positional, args))
        given.update((renamed.get(key, key), value) for key, value in kwargs.items())
        numbers: list = []
        marked = {}
        for key, value in given.items():
            if isinstance(value, TracedScalar):
                numbers.append(value)
                marked[key] = f"${len(numbers) - 1}"
        try:  # validated with this call's numbers; the marked ones are filled in at each call
            bound = op.normalize_attrs({k: unwrap(v) for k, v in given.items()})
        except (TypeError, ValueError):
            return original(*guarded(args), **guarded(kwargs))
        return tracer.record_dynamic(op_name, [], {**bound, **marked}, numbers, result)
    return call


_INT64 = np.iinfo(np.int64)


def _result_type_wrapper(original: Any) -> Any:
    """``np.result_type`` given traced numbers: NumPy's nd_grid (``np.mgrid[0:x.shape[0]]``,
    ``np.ogrid``) types its grid by its bounds. Under NEP 50 a Python number's type is its kind alone,
    but for an int past int64 (uint64, then object), so the plain values give NumPy's answer while a
    traced int stays in int64's range. An array's dim or size always does; an int computed from them
    is guarded to, so a trace never serves an int past it."""
    @functools.wraps(original)
    def result_type(*args: Any) -> Any:
        if current_tracer() is None or not any(isinstance(a, TracedScalar) for a in args):
            return original(*args)
        for a in args:
            n: Any = a   # compared through TracedInt's recorded operators: each records its guard
            if isinstance(a, TracedInt) and not _read_off_an_array(a) and not (_INT64.min <= n <= _INT64.max):
                return original(*guarded(args))
        return original(*unwrap(args))
    return result_type


def _read_off_an_array(n: TracedInt) -> bool:
    node = n._ir.node
    return node is not None and node.op in ("prim.dim", "prim.size")


def _dispatching_wrapper(original: Any) -> Any:
    """A NumPy function that converts its argument with ``__array__``: route traced arguments to the op."""
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        if current_tracer() is None or not any(isinstance(a, TracedArray) for a in args):
            return original(*args, **kwargs)
        return dispatch.call(original, "__call__", args, kwargs)
    return call


def _conversion_wrapper(original: Any, copies: bool | None) -> Any:
    """``np.asarray(x)`` / ``np.array(x)`` of a traced array keep it traced (cast and copied as NumPy
    would): library code that starts with ``x = np.asarray(x)`` is recorded instead of frozen. A list of
    traced arrays is stacked. Options the tracer cannot follow (``ndmin``, ``subok``) convert as before,
    with the conversion's warning."""
    @functools.wraps(original)
    def convert(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if current_tracer() is None or len(args) > 1 or set(kwargs) - {"dtype", "copy", "order", "device"}:
            return original(obj, *args, **kwargs)
        if isinstance(obj, (list, tuple)) and obj and any(isinstance(e, TracedArray) for e in obj) \
                and all(isinstance(e, (TracedArray, np.ndarray, int, float, complex)) for e in obj):
            obj = np.stack([e if isinstance(e, TracedArray) else np.asarray(e) for e in obj])
            kwargs = {**kwargs, "copy": None}
        if not isinstance(obj, TracedArray):
            return original(obj, *args, **kwargs)
        dtype = args[0] if args else kwargs.get("dtype")
        copy = _copy_flag(kwargs.get("copy", copies))
        order: Any = kwargs.get("order") or "K"
        result: Any = obj
        if dtype is not None and np.dtype(dtype) != obj.dtype:
            if copy is False:
                raise ValueError("Unable to avoid copy while creating an array as requested.")
            result = np.astype(obj, dtype)  # type: ignore[call-overload]  # NEP 18: a TracedArray
            result._scalar = False   # a new array, of a NumPy scalar too
        elif copy or obj._scalar:   # a NumPy scalar becomes a new 0-d array
            return np.copy(obj, order=order)
        if order in ("C", "F") and obj.ndim > 1:
            # the argument itself where it is laid out so, else a copy: which one follows the layout
            result = laid_out(current_tracer(), result, order)
        return result
    return convert


def _fortran_wrapper(original: Any) -> Any:
    """``np.asfortranarray(x)`` of a traced array: ``np.asarray(x, order="F")`` (see `views.laid_out`)."""
    @functools.wraps(original)
    def asfortranarray(a: Any, dtype: Any = None, **kwargs: Any) -> Any:
        if current_tracer() is None or not isinstance(a, TracedArray) or kwargs:
            return original(a, dtype, **kwargs)
        return np.asarray(a, dtype=dtype, order="F")
    return asfortranarray


_REQUIREMENTS = {"C": "C", "C_CONTIGUOUS": "C", "CONTIGUOUS": "C", "F": "F", "F_CONTIGUOUS": "F",
                 "FORTRAN": "F", "A": "A", "ALIGNED": "A", "W": "W", "WRITEABLE": "W", "O": "O",
                 "OWNDATA": "O", "E": "E", "ENSUREARRAY": "E"}


def _require_wrapper(original: Any) -> Any:
    """``np.require(x, ...)`` of a traced array as NumPy's code, converting through the traced
    ``np.array`` (NumPy's binds its own, so the data would leave the graph): `x` itself where it meets
    the layout requirements, else a copy, following each call's layout (see `views.laid_out`). The
    memory requirements (aligned, writeable, owning its data) are facts of the memory a backend gives:
    refused."""
    @functools.wraps(original)
    def require(a: Any, dtype: Any = None, requirements: Any = None, **kwargs: Any) -> Any:
        if current_tracer() is None or not isinstance(a, TracedArray) or kwargs:
            return original(a, dtype, requirements, **kwargs)
        if not requirements:
            return np.asanyarray(a, dtype=dtype)
        wanted = {_REQUIREMENTS[x.upper()] for x in requirements} - {"E"}   # NumPy's KeyError; E: met
        if {"C", "F"} <= wanted:
            raise ValueError("Cannot specify both 'C' and 'F' order")
        if wanted - {"C", "F"}:
            raise NotImplementedError(
                f"np.require of a traced array with requirements {sorted(wanted - {'C', 'F'})}: whether "
                "the argument meets them is a fact of the memory of each call, which a trace does not "
                "follow; use np.asarray(x, order=...) or np.copy(x)")
        order = "C" if "C" in wanted else "F" if "F" in wanted else "A"
        return np.array(a, dtype=dtype, order=order, copy=None)  # type: ignore[call-overload]  # a TracedArray
    return require


def _copy_flag(copy: Any) -> bool | None:
    """``copy=`` as True, False or None (if needed); NumPy's ``np._CopyMode`` members name these."""
    mode = getattr(np, "_CopyMode", None)
    if mode is not None and isinstance(copy, mode):
        return {mode.ALWAYS: True, mode.IF_NEEDED: None, mode.NEVER: False}[copy]
    return None if copy is None else bool(copy)


def _prod_wrapper(original: Any) -> Any:
    """``np.prod(x.shape)``: a product of traced sizes is recorded (as NumPy types it, a 0-d int64);
    NumPy would read the sizes as plain numbers."""
    @functools.wraps(original)
    def prod(a: Any, *args: Any, **kwargs: Any) -> Any:
        if current_tracer() is None or args or kwargs or not isinstance(a, (tuple, list)) or not a \
                or not any(isinstance(d, TracedScalar) for d in a) \
                or not all(isinstance(d, (TracedScalar, int)) and not isinstance(d, bool) for d in a):
            return original(a, *args, **kwargs)
        return np.multiply(functools.reduce(operator.mul, a), 1)
    return prod


def _patches() -> tuple[list[tuple[Any, str, Any]], _UnpatchedNumpy]:
    """The wrappers to install and the ``np`` NumPy's random modules see meanwhile, made once and remade
    only when a patched function was replaced (another library patching ``np.zeros``...) or modules were
    imported since: building them is a large part of tracing a short function."""
    global _made_patches
    if _made_patches is not None:
        made, wrapped, shim, modules = _made_patches
        if modules == len(sys.modules) and all(getattr(module, name) is original
                                               for (module, name, _), original in zip(made, wrapped)):
            return made, shim
    made = _make_patches()
    made += _bound_elsewhere([(module, name, wrapper) for module, name, wrapper in made
                              if module is np or module.__name__ in _FOREIGN_OPS])
    wrapped = [getattr(module, name) for module, name, _ in made]
    shim = _UnpatchedNumpy({name: original for (module, name, _), original in zip(made, wrapped)
                            if module is np})
    _made_patches = (made, wrapped, shim, len(sys.modules))
    return made, shim


_made_patches: tuple[list, list, Any, int] | None = None


def _bound_elsewhere(patched: list[tuple[Any, str, Any]]) -> list[tuple[Any, str, Any]]:
    """Patches for the names other modules bound to the patched functions before tracing
    (``from numpy import array, zeros`` at a module's top, as NumPy's own modules and many libraries
    do): those names get the same wrappers, so a call through them is intercepted as ``np.array`` is."""
    originals = {id(getattr(module, name)): (module, name, wrapper) for module, name, wrapper in patched}
    patches = []
    for module_name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or module_name.startswith(_OWN):
            continue
        try:
            namespace = module.__dict__
        except AttributeError:
            continue
        for name, value in list(namespace.items()):
            hit = originals.get(id(value))
            if hit is not None and hit[0] is not module and value is getattr(hit[0], hit[1]):
                patches.append((module, name, hit[2]))
    return patches


# Modules whose names are never patched: numtrace's own, and NumPy's random modules (see _UnpatchedNumpy).
_OWN = ("numtrace", "numpy.random")


def _make_patches() -> list[tuple[Any, str, Any]]:
    patches = []
    for op in registry.all_ops():
        if op.kind != "random":
            continue
        for func, method in op.numpy_targets:
            name = getattr(func, "__name__", None)
            if method == "__call__" and name and getattr(np.random, name, None) is func:
                patches.append((np.random, name, _random_wrapper(func)))
    recorded = {name for _, name, _ in patches}
    legacy = np.random.mtrand._rand  # the global RandomState behind the np.random functions
    for name in dir(np.random):
        func = getattr(np.random, name)
        if name not in recorded and name != "get_state" and callable(func) \
                and (getattr(func, "__self__", None) is legacy or func is np.random.seed):
            patches.append((np.random, name, _unrecorded_random(func, sorted(recorded))))
    patches.append((np.random, "default_rng", _default_rng_wrapper(np.random.default_rng)))
    patches.append((np.random, "Generator", _GeneratorWhileTracing))
    for name in _BIT_GENERATORS:
        patches.append((np.random, name, _bit_generator_refused(getattr(np.random, name))))
    patches.append((np, "zeros", _creation_wrapper(np.zeros, lambda a, k: 0)))
    patches.append((np, "ones", _creation_wrapper(np.ones, lambda a, k: 1)))
    patches.append((np, "full", _creation_wrapper(np.full, _fill_value)))
    # np.empty's contents are unspecified, so zeros are one valid result that follows traced dims.
    patches.append((np, "empty", _creation_wrapper(np.empty, lambda a, k: 0)))
    for name in ("arange", "linspace", "eye", "tri"):
        patches.append((np, name, _numbers_wrapper(getattr(np, name), f"np.{name}", plain=name == "eye")))
    for name in ("fftfreq", "rfftfreq"):
        patches.append((np.fft, name, _numbers_wrapper(getattr(np.fft, name), f"np.fft.{name}")))
    patches.append((np, "identity", _numbers_wrapper(np.identity, "np.eye", ["N", "dtype"], {"n": "N"},
                                                     plain=True)))
    for name, fill in (("zeros_like", 0), ("ones_like", 1), ("empty_like", 0)):
        patches.append((np, name, _like_wrapper(getattr(np, name), lambda a, k, fill=fill: fill)))
    patches.append((np, "full_like", _like_wrapper(np.full_like, _fill_value)))
    patches.append((np, "prod", _prod_wrapper(np.prod)))
    patches.append((np, "result_type", _result_type_wrapper(np.result_type)))
    patches.append((np, "asarray", _conversion_wrapper(np.asarray, copies=None)))
    patches.append((np, "asanyarray", _conversion_wrapper(np.asanyarray, copies=None)))
    patches.append((np, "array", _conversion_wrapper(np.array, copies=True)))
    patches.append((np, "asfortranarray", _fortran_wrapper(np.asfortranarray)))
    patches.append((np, "require", _require_wrapper(np.require)))
    # NumPy's dispatcher for np.piecewise iterates the conditions: a guard on a traced condition's length.
    patches.append((np, "piecewise", _dispatching_wrapper(np.piecewise)))
    if registry.for_numpy(np.ascontiguousarray) is not None:
        patches.append((np, "ascontiguousarray", _dispatching_wrapper(np.ascontiguousarray)))
    for module_name, functions in _FOREIGN_OPS.items():
        module = sys.modules.get(module_name)
        if module is None:   # not imported: the program cannot call it
            continue
        for name, op_name in functions.items():
            original = getattr(module, name, None)
            if original is not None:
                registry.register_target(original, "__call__", registry.get(op_name))
                patches.append((module, name, _foreign_op_wrapper(original, op_name)))
    return patches


# Functions of other libraries that are registry ops (module -> name -> op).
_FOREIGN_OPS = {"scipy.special": {"logsumexp": "scipy.special.logsumexp"}}


def _foreign_op_wrapper(original: Any, op_name: str) -> Any:
    """A library function the registry has as an op: a call with traced arguments is recorded as the
    op, except for forms the op does not take, which run the library's own code on the traced arrays."""
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        if current_tracer() is None or not any(isinstance(a, TracedArray) for a in (*args, *kwargs.values())):
            return original(*args, **kwargs)
        try:
            registry.get(op_name).bind(args, kwargs)
        except NotImplementedError:
            return original(*args, **kwargs)
        return dispatch.call(original, "__call__", args, kwargs)
    return call


class _UnpatchedNumpy(types.ModuleType):
    """What NumPy's compiled random modules see as ``np`` during a trace: numpy, with the originals of
    the functions numtrace patched. Their Cython code calls ``np.empty(size)`` and casts the result to
    an ndarray without a check, so a wrapper's traced array (or any proxy) reaching it would be read as
    an ndarray's memory and crash the interpreter. Arguments are unwrapped to plain values as well."""

    def __init__(self, originals: dict[str, Any]) -> None:
        super().__init__("numpy")
        for name, original in originals.items():
            setattr(self, name, _plain_call(original, unseen_draw=name == "empty"))

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


def _plain_call(original: Any, unseen_draw: bool = False) -> Any:
    """`original` on plain values. With `unseen_draw` (``np.empty``, which NumPy's draws allocate their
    output with), a call while tracing that no recorded draw made is a draw the tracer cannot see."""
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        if unseen_draw and current_tracer() is not None and not getattr(_local, "recording_draw", 0):
            warn_at_user_line(
                "a random draw numtrace does not intercept ran while tracing (a np.random.Generator or "
                "RandomState reached through an attribute or a container, or a Generator method numtrace "
                "does not record): its values become constants of the trace, the same on every call. "
                "Create the generator inside the traced function, or close over it, to record its draws",
                TracerWarning)
        return original(*unwrap(args), **unwrap(kwargs))
    return call


def _compiled_numpy_users() -> list[Any]:
    """NumPy's compiled modules that call ``np.*`` functions: those of ``numpy.random`` (looked up again
    only when modules were imported since: scanning ``sys.modules`` per trace is not free)."""
    global _numpy_users
    import numpy.random  # noqa: F401  (numpy imports it lazily; its submodules load with it)

    if _numpy_users is None or _numpy_users[0] != len(sys.modules):
        _numpy_users = (len(sys.modules), [m for n, m in list(sys.modules.items())
                                           if n.startswith("numpy.random.") and vars(m).get("np") is np])
    return _numpy_users[1]


_numpy_users: tuple[int, list[Any]] | None = None


_installed: list[Any] = [0, []]  # len(sys.modules) when the wrappers were installed, and the patches


def _unbind_wrappers(originals: dict[int, Any]) -> None:
    """Modules imported while tracing (``np.fft`` on first use) may have bound a wrapper by name
    (``from numpy._core import asarray``): give them the original."""
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            original = originals.get(id(value))
            if original is not None and original is not value:
                namespace[name] = original


@contextmanager
def numpy_intercepted() -> Iterator[None]:
    """Install the wrappers for the duration of a trace (nested and concurrent traces share them)."""
    global _depth
    with _lock:
        if _depth == 0:
            patches, shim = _patches()
            _installed[:] = [len(sys.modules), patches]
            for module, name, wrapper in patches:
                _saved.append((module, name, getattr(module, name)))
                setattr(module, name, wrapper)
            for module in _compiled_numpy_users():
                _saved.append((module, "np", np))
                module.np = shim
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                wrapped = {id(wrapper): original for (_, _, wrapper), (_, _, original)
                           in zip(_installed[1], _saved) if original is not wrapper}
                for module, name, original in reversed(_saved):
                    setattr(module, name, original)
                _saved.clear()
                if len(sys.modules) != _installed[0]:
                    _unbind_wrappers(wrapped)
