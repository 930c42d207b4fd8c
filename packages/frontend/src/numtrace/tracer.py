"""The recording state: which trace is active, how values enter the graph, how nodes are recorded.

One ``Tracer`` exists per trace run and is active on the thread that runs the user's
code. Everything that becomes a node goes through ``Tracer.record``: it runs nothing
itself (the caller already computed the eager NumPy result), binds the call to the
op's schema, turns inputs into graph values (traced arrays, traced ints, or new
constants), and checks that the op's type rule agrees with what NumPy produced, so a
graph can never silently disagree with the run it was recorded from.

The tracer knows traced values only as ``TracedValue``; the kinds of them (traced numbers, the proxy
array) and the NumPy interception are layers above it (``recording`` switches tracing and
interception on together).
"""

from __future__ import annotations

import struct
import threading
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np
from numtrace_ir import Graph, ScalarType, TensorType, Type, registry

from .errstate_blocks import ErrstateWatch, install
from .source import user_location
from .traced_value import TracedValue, is_traced_array

_local = threading.local()
# Traces active on any thread: a cheap test that lets traced callables skip the thread-local lookup.
active_count = 0
_count_lock = threading.Lock()

_PY_SCALARS = (bool, int, float, complex)
_SCALAR_KIND = {bool: "bool", int: "int", float: "float", complex: "complex"}


def is_tracing() -> bool:
    """Whether numtrace is recording a trace on this thread right now.

    For code that should run only eagerly (logging, value assertions): a traced function skips it
    while being traced, and the trace does not contain it.

    Examples:
        ```python
        import numpy as np
        import numtrace as nt

        seen = []

        def f(x):
            seen.append(nt.is_tracing())
            return x + 1

        nt.trace(f, (np.ones(2),), check_trace=False)
        assert seen == [True] and not nt.is_tracing()
        ```
    """
    return getattr(_local, "tracer", None) is not None


def current_tracer() -> Tracer | None:
    return getattr(_local, "tracer", None)


# np.errstate tells the current tracer which kinds each of its blocks sets.
install(lambda: getattr(_local, "tracer", None) if active_count else None)


def active_tracer(where: str) -> Tracer:
    tracer = current_tracer()
    if tracer is None:
        raise RuntimeError(f"{where}: a traced array was used after its trace ended; traced arrays exist "
                           "only while numtrace.trace runs the function")
    return tracer


class Tracer:
    """Builds one graph while the user's function runs on traced arrays."""

    def __init__(self, state_names: Mapping[int, str] | None = None) -> None:
        self.graph = Graph()
        # Module state that becomes graph inputs when first read: id(array) -> dotted name.
        self.state_names = state_names or {}
        self.state_order: list[str] = []
        self.state_arrays: list[np.ndarray] = []
        self._state_proxies: dict[int, Any] = {}
        self._symbols: dict[Any, str] = {}
        # Nodes with a data-dependent dim (boolean-mask reads, np.unique, ...): each gets its own symbol.
        self._data_sizes = 0
        self.layout_dependent = False   # a write went through a reshape (see views.note_layout_write)
        self.writes = 0   # in-place writes into traced arrays so far (np.piecewise calls a function once)
        # Nodes of attempts the program does not keep (see `discard`): dead, they leave no shape check.
        self.discarded: set = set()
        self.input_proxies: list = []   # the traced arrays of the graph inputs, in order
        self.unit_dims_guarded = False
        # id -> (traced array, message): arrays whose memory a write changed behind the graph's back
        # (see views.mark_untracked_aliases); using one is refused.
        self.stale: dict[int, tuple[Any, str]] = {}
        # Weak references to every traced array made, for the aliasing check of in-place writes.
        self.live: list[weakref.ref] = []
        # (graph value, expected) of the guards recorded so far: each is recorded once.
        self._guarded: set = set()
        self._dynamic_count = 0  # prim.dynamic nodes so far: each names its output dims afresh
        # Python scalar constants recorded so far, by exact value: ``x * 1.5`` in a loop reuses one node.
        self._scalar_constants: dict[tuple, Any] = {}
        self._input_free: dict[Any, bool] = {}  # see `input_free`
        # The function's own np.errstate blocks: recorded on the nodes made inside them.
        self.errstate = ErrstateWatch()

    def live_arrays(self) -> list:
        arrays = [a for a in (ref() for ref in self.live) if a is not None]
        if len(arrays) < len(self.live) // 2:
            self.live = [weakref.ref(a) for a in arrays]
        return arrays

    @contextmanager
    def active(self) -> Iterator[Tracer]:
        if getattr(_local, "tracer", None) is not None:
            raise RuntimeError("numtrace.trace was called while a trace is being recorded; "
                               "tracing inside a traced function is not supported")
        global active_count
        _local.tracer = self
        with _count_lock:
            active_count += 1
        try:
            yield self
        finally:
            _local.tracer = None
            with _count_lock:
                active_count -= 1

    # -- values entering the graph ----------------------------------------------------------
    def add_input(self, name: str, array: np.ndarray) -> Any:
        if not array.dtype.isnative:  # as a call would be: backends take native byte order only
            raise TypeError(f"input {name!r} has non-native byte order ({array.dtype.str}); convert it with "
                            "a.astype(a.dtype.newbyteorder('='))")
        value = self.graph.add_input(name, tensor_type_of(array, f"input {name!r}"))
        proxy = self.wrap(value, array)
        self.input_proxies.append(proxy)
        return proxy

    def state(self, array: Any) -> Any:
        """The traced input for a module parameter/buffer; arrays that are not traced state pass through."""
        key = id(array)
        proxy = self._state_proxies.get(key)
        if proxy is None:
            name = self.state_names.get(key)
            if name is None:
                return array
            # A copy: tracing runs the code eagerly, and must not write into the module's own state.
            proxy = self.add_input(name, np.array(array, copy=True))
            self._state_proxies[key] = proxy
            self.state_order.append(name)
            self.state_arrays.append(array)
        return proxy

    def state_proxies(self) -> list:
        """The traced inputs made for module state so far."""
        return list(self._state_proxies.values())

    def state_proxy(self, array: Any) -> Any:
        """The traced input already made for module state ``array`` in this trace, or None."""
        return self._state_proxies.get(id(array))

    def constant(self, value: Any, loc: str | None = None) -> Any:
        """A ``prim.Constant`` node for an array or Python scalar; arrays are copied (frozen now).
        ``loc``: the user's line when the caller has it already (else the stack is walked for it)."""
        if issubclass(type(value), (np.ndarray, np.generic)):
            value = np.array(value, copy=True, dtype=value.dtype.newbyteorder("="))  # backends: native only
            out_type: Type = tensor_type_of(value, "constant")
        else:
            # Exact Python types (an IntEnum is an int constant): attrs hold only those.
            kind = type(value) if type(value) in _SCALAR_KIND else next(k for k in _PY_SCALARS
                                                                         if isinstance(value, k))
            value = kind(value)
            out_type = ScalarType(_SCALAR_KIND[kind])
        node = self.graph.create_node("prim.Constant", [], attrs={"value": value},
                                      loc=loc if loc is not None else user_location(), out_types=(out_type,))
        return node.output

    def value_of(self, obj: Any, loc: str | None = None) -> Any:
        """The graph value for an op input: traced values as is, anything else as a new constant
        (at ``loc``, the op's line, when given)."""
        if isinstance(obj, TracedValue):
            return obj._graph_value(self)
        if issubclass(type(obj), (np.ndarray, np.generic)):
            return self.constant(obj, loc)
        if isinstance(obj, _PY_SCALARS):
            key = _scalar_key(obj)
            value = self._scalar_constants.get(key)
            if value is None:
                value = self._scalar_constants[key] = self.constant(obj, loc)
            return value
        if isinstance(obj, (list, tuple)) and not _holds_traced(obj):
            return self.constant(np.asarray(obj), loc)  # NumPy reads a nested list of numbers as an array
        raise TypeError(f"cannot use {type(obj).__name__} {obj!r:.80} as an array operand in a trace")

    def guard(self, value: Any, expected: Any) -> None:
        """Record that the trace holds only while scalar graph value ``value`` equals ``expected``
        (a number computed from input shapes that left the graph as a plain Python value)."""
        key = (value, type(expected), expected)
        if key in self._guarded:
            return
        self._guarded.add(key)
        self.graph.create_node("prim.guard", [value], attrs={"expected": expected}, loc=user_location())

    def discard(self, mark: int) -> None:
        """The nodes recorded since node ``mark`` are an attempt that NumPy's code does not make (a
        function called to see whether it can be recorded): where unused they are dead code that no
        NumPy call raised for, so they leave no ``prim.check`` (`passes.dce`)."""
        self.discarded.update(self.graph.nodes[mark:])

    def forget_guards(self, values: set) -> None:
        """The guards on ``values`` were erased from the graph: record them again when made again."""
        self._guarded = {key for key in self._guarded if key[0] not in values}

    def input_free(self, value: Any) -> bool:
        """Whether graph value ``value`` is the same at every call: computed from constants alone (a
        ``np.zeros((3, 3))`` written with numbers), with no graph input, dim of one, draw or host call
        among its sources. Its data may leave the graph without a guard."""
        known = self._input_free
        pending = [value]
        while pending:
            v = pending[-1]
            if v in known:
                pending.pop()
                continue
            node = v.node
            if node is None or node.op == "prim.host_call" or registry.get(node.op).nondeterministic:
                known[v] = False
                pending.pop()
                continue
            unknown = [u for u in node.inputs if u not in known]
            if unknown:
                pending.extend(unknown)
                continue
            known[v] = all(known[u] for u in node.inputs)
            pending.pop()
        return known[value]

    def guard_data(self, array: Any, what: str) -> None:
        """Record that the trace holds only while traced array ``array`` has the data it has now: its
        data left the graph as a Python value (``what``: ``bool()``, ``.tolist()``), so every run checks
        it, and a run where it differs is discarded and traced again."""
        loc = user_location()
        key = (array._graph_value(self), what, loc)
        if key in self._guarded:
            return
        self._guarded.add(key)
        expected = np.array(array._concrete, copy=True)
        attrs = {"expected": expected, "what": f"{what} at {loc}"}
        self.graph.create_node("prim.guard", [key[0]], attrs=attrs, loc=loc)

    def record_dynamic(self, op_name: str, inputs: list, attrs: dict, numbers: list, result: Any) -> Any:
        """Record ``op_name`` whose attrs hold ``"$k"`` where the k-th of ``numbers`` (traced numbers) goes,
        as a ``prim.dynamic`` node: the numbers stay graph values, so the op follows the input's shapes."""
        array = np.asarray(result)
        self._dynamic_count += 1
        shape = tuple(f"v{self._dynamic_count}_{i}" for i in range(array.ndim))
        attrs = {"op": op_name, "attrs": tuple(attrs.items()), "scalars": len(numbers), "shape": shape,
                 "dtype": array.dtype}
        return self.record("prim.dynamic", [*inputs, *numbers], attrs, result, exact=True)

    # -- recording --------------------------------------------------------------------------
    def data_size(self) -> str:
        """A new symbol for the data-dependent dim of the node about to be recorded (its ``size`` attr)."""
        self._data_sizes += 1
        return f"nnz{self._data_sizes}"

    def symbol(self, traced_int: Any) -> str:
        """The dim symbol standing for a traced int in a dynamic shape attr: one per graph value, so two
        shapes built from the same ``x.shape[0]`` agree."""
        value = traced_int._graph_value(self)
        name = self._symbols.get(value)
        if name is None:
            name = self._symbols[value] = f"n{len(self._symbols)}"
        return name

    def record(self, op_name: str, inputs: list, attrs: dict, result: Any, *, exact: bool = False) -> Any:
        """Record ``op_name`` applied to ``inputs`` and return ``result`` wrapped as traced values.

        ``result`` is what NumPy computed eagerly: an array, a scalar, or a tuple of them
        for a multi-output op.
        """
        node = self.record_node(op_name, inputs, attrs, result, exact=exact)
        if len(node.outputs) == 1 and not isinstance(result, (tuple, list)):
            return self.wrap(node.outputs[0], result)
        wrapped = [self.wrap(v, r) for v, r in zip(node.outputs, result)]
        if isinstance(result, list):   # np.split gives a list
            return wrapped
        return type(result)(*wrapped) if hasattr(result, "_fields") else tuple(wrapped)  # NumPy's namedtuples

    def record_node(self, op_name: str, inputs: list, attrs: dict, result: Any, *,
                    exact: bool = False) -> Any:
        """Create the node and check its inferred output types against NumPy's eager ``result``.

        ``exact``: for ops whose output shape comes from traced ints (``prim.reshape``...), the rule
        can only give symbols; the node gets the shape NumPy produced, which holds for every call
        at the traced input shapes (calls at other shapes re-derive the types).
        """
        loc = user_location()
        values = [self.value_of(x, loc) for x in inputs]
        attrs = {k: attr_value(v, f"{op_name}: attribute {k}") for k, v in attrs.items()}
        out_types = None
        if exact:
            registry.get(op_name).infer(tuple(v.type for v in values), attrs)  # the rule still validates
            out_types = (tensor_type_of(np.asarray(result), op_name),)
        node = self.graph.create_node(op_name, values, attrs=attrs, loc=loc, out_types=out_types)
        node.errstate = self.errstate.since()
        results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
        if len(results) != len(node.outputs):
            raise AssertionError(f"numtrace internal error: {op_name} recorded {len(node.outputs)} outputs, "
                                 f"NumPy returned {type(result).__name__}")
        for value, concrete in zip(node.outputs, results):
            vtype = value.type
            if isinstance(vtype, TensorType):
                array = _as_array(concrete)
                if array.dtype != vtype.dtype or (vtype.is_concrete and array.shape != vtype.shape):
                    raise AssertionError(
                        f"numtrace internal error: the type rule of {op_name} gives {vtype}, but NumPy "
                        f"returned {array.dtype}{list(array.shape)} (at {node.loc})")
        return node

    def wrap(self, value: Any, concrete: Any) -> Any:
        """A traced value for graph value ``value`` whose eager result is ``concrete``."""
        vtype = value.type
        of_kind = TracedValue._of_kind
        if isinstance(vtype, TensorType):
            array: Any = of_kind["tensor"](self, value, _as_array(concrete))
            array._scalar = isinstance(concrete, np.generic)
            return array
        if isinstance(vtype, ScalarType) and vtype.kind == "int":
            return of_kind["int"](self, value, int(concrete))
        if isinstance(vtype, ScalarType) and vtype.kind == "float":
            return of_kind["float"](self, value, float(concrete))
        if isinstance(vtype, ScalarType) and vtype.kind == "bool":
            return bool(concrete)
        return concrete


def _scalar_key(value: Any) -> tuple:
    """Equal keys for Python scalars that make the same constant: the exact type and bits (0.0 and -0.0,
    1 and 1.0 and True, NaNs of either sign differ)."""
    if type(value) is float:
        return (float, struct.pack("<d", value))
    if type(value) is complex:
        return (complex, struct.pack("<dd", value.real, value.imag))
    return (type(value), value)


def _as_array(concrete: Any) -> np.ndarray:
    """An eager result as an array; most already are (``np.asarray`` is patched while tracing)."""
    return concrete if type(concrete) is np.ndarray else np.asarray(concrete)


def _holds_traced(obj: Any) -> bool:
    if isinstance(obj, (list, tuple)):
        return any(_holds_traced(x) for x in obj)
    return is_traced_array(obj)


def tensor_type_of(array: np.ndarray, what: str) -> TensorType:
    """The IR type of a concrete array; a clear error for dtypes the IR does not have."""
    try:
        return TensorType(array.dtype, array.shape)
    except TypeError as exc:
        raise TypeError(f"{what}: arrays of dtype {array.dtype} cannot be traced ({exc})") from None


def attr_value(value: Any, where: str) -> Any:
    """``value`` as a static attribute: NumPy scalars and traced ints become Python values, lists tuples."""
    if isinstance(value, TracedValue):
        return value._static(where)  # a traced number is guarded: the trace holds only for this value
    if value is None or type(value) in (bool, int, float, complex, str, slice) or value is Ellipsis:
        if type(value) is slice:
            return slice(*(attr_value(v, where) for v in (value.start, value.stop, value.step)))
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (complex, np.complexfloating)):
        return complex(value)
    if isinstance(value, (tuple, list)):
        return tuple(attr_value(v, where) for v in value)
    if issubclass(type(value), np.ndarray):
        return np.array(value, copy=True)
    if isinstance(value, (type, np.dtype)):
        return np.dtype(value)
    if isinstance(value, str):
        return str(value)
    return value

