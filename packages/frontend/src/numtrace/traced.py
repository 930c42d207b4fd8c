"""``TracedFunction``: a traced graph plus what it takes to call it like the original function.

The call path is kept lean: gather the argument arrays (a plain tuple when the
traced function took only arrays), build the signature key (dtype, shape per
array), look up the executable compiled for that signature, run it, and rebuild the
output structure. Validation that explains a bad call happens only on a signature
miss, where the backend compiles anyway.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numtrace_ir import Graph, ShapeError, TensorType, registry, specialize

from . import tracer as _tracing
from .backends import get_backend
from .containers import Leaf, Sequence_, Spec


class TracedFunction:
    """A function traced into ``graph``; calling it runs the graph on ``backend``.

    ``graph`` inputs are the argument arrays in flattening order, followed by module
    state (``state_names``) for a method of a traced module.
    """

    def __init__(self, graph: Graph, *, name: str, arg_names: Sequence[str], in_spec: Spec, out_spec: Spec,
                 backend: str, state: Sequence[np.ndarray] = (), state_names: Sequence[str] = ()):
        self.graph = graph
        self.__name__ = name
        self.arg_names = tuple(arg_names)
        self.in_spec = in_spec
        self.out_spec = out_spec
        self.state_names = tuple(state_names)
        # Plain-ndarray views of the state (Parameter is a subclass): same memory, so in-place
        # load_state_dict is seen by every later call.
        self._state = tuple(np.asarray(a) for a in state)
        self._num_leaves = len(graph.inputs) - len(self._state)
        # Fast paths: arguments that are exactly the flat arrays; one array returned.
        self._flat_args = isinstance(in_spec, Sequence_) and all(isinstance(c, Leaf)
                                                                 for c in in_spec.children)
        self._single_output = isinstance(out_spec, Leaf)
        self._lock = threading.Lock()
        self._backend = get_backend(backend)
        self.backend = backend
        self._cache: dict[tuple, Any] = {}

    # -- calling --------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs or not self._flat_args:
            leaves = self._gather(args, kwargs)
        elif len(args) == self._num_leaves:
            leaves = args
        else:
            raise TypeError(f"{self.__name__}() takes {self._num_leaves} array argument(s) "
                            f"({', '.join(self.arg_names)}) as traced, got {len(args)}")
        if _tracing.active_count and _tracing.current_tracer() is not None:
            return self._inline(leaves)
        try:
            key = tuple([(a.dtype, a.shape) for a in leaves])
        except AttributeError:
            leaves = self._converted(leaves)
            key = tuple([(a.dtype, a.shape) for a in leaves])
        executable = self._cache.get(key)
        if executable is None:
            executable = self._compile(leaves, key)
        outs = executable(*leaves, *self._state)
        return outs[0] if self._single_output else self.out_spec.build(outs)

    def _inline(self, leaves: Sequence[Any]) -> Any:
        """Called while another function is traced: record this graph's nodes into that trace."""
        tracer = _tracing.current_tracer()
        env: dict[Any, Any] = dict(zip(self.graph.inputs, [*leaves, *self._state]))
        for node in self.graph.nodes:
            inputs = [env[v] for v in node.inputs]
            attrs = dict(node.attrs)
            if node.op == "prim.Constant":
                concrete = attrs["value"]
            else:
                concrete = registry.get(node.op).reference(*[_concrete(x) for x in inputs], **attrs)
            result = tracer.record(node.op, inputs, attrs, concrete)
            env.update(zip(node.outputs, result if len(node.outputs) > 1 else (result,)))
        outs = [env[v] for v in self.graph.outputs]
        return outs[0] if self._single_output else self.out_spec.build(outs)

    def _converted(self, leaves: Sequence[Any]) -> list[np.ndarray]:
        """Arguments that are not arrays: NumPy scalars become 0-d arrays, anything else is an error."""
        converted = []
        for i, a in enumerate(leaves):
            if not isinstance(a, (np.ndarray, np.generic)):
                raise TypeError(f"{self.__name__}(): argument {self._leaf_name(i)} must be a NumPy array "
                                f"(as at trace time), got {type(a).__name__}")
            converted.append(np.asarray(a))
        return converted

    def _gather(self, args: tuple, kwargs: dict) -> list:
        """The flat argument arrays of a call with keywords or containers, read along ``in_spec``."""
        names = self.arg_names
        if len(args) > len(names):
            raise TypeError(f"{self.__name__}() takes {len(names)} argument(s) ({', '.join(names)}) "
                            "as traced, "
                            f"got {len(args)}")
        # Unexpected and repeated keywords first: they explain a "missing" argument (a misspelled name).
        extra = set(kwargs) - set(names[len(args):])
        if extra:
            raise TypeError(f"{self.__name__}() got unexpected or repeated keyword argument(s) "
                            f"{', '.join(sorted(map(repr, extra)))}; traced with {', '.join(names)}")
        bound = list(args)
        for name in names[len(args):]:
            if name not in kwargs:
                raise TypeError(f"{self.__name__}() missing argument {name!r} "
                                f"(traced with {', '.join(names)})")
            bound.append(kwargs[name])
        leaves: list = []
        for name, spec, value in zip(names, self.in_spec.children, bound):
            spec.extract(value, leaves, f"argument {name!r}")
        return leaves

    def _leaf_name(self, i: int) -> str:
        name = self.graph.inputs[i].name
        return repr(name) if name else f"#{i}"

    def _compile(self, leaves: Sequence[np.ndarray], key: tuple) -> Any:
        """Signature miss: validate the call against the graph inputs, then compile and cache."""
        self._converted(leaves)  # only arrays and NumPy scalars reach a backend
        types = []
        for i, (a, declared) in enumerate(zip(leaves, self.graph.inputs)):
            types.append(self._check_leaf(i, a, declared.type))
        types.extend(self.graph.inputs[len(leaves) + j].type for j in range(len(self._state)))
        graph = self.graph
        if any(t != v.type for t, v in zip(types, graph.inputs)):
            graph = retyped(graph, types, self.__name__)
        executable = self._backend.compile(graph, types)
        if any(not d[1] for d in key):
            # A 0-d argument may arrive as a NumPy scalar, whose signature key equals the 0-d array's.
            executable = _ScalarArguments(executable)
        with self._lock:
            self._cache[key] = executable
        return executable

    def _check_leaf(self, i: int, a: np.ndarray, declared: Any) -> TensorType:
        what = f"{self.__name__}(): argument {self._leaf_name(i)}"
        if not a.dtype.isnative:
            raise TypeError(f"{what} has non-native byte order ({a.dtype.str}); convert it with "
                            "a.astype(a.dtype.newbyteorder('='))")
        if a.dtype != declared.dtype:
            raise TypeError(f"{what} has dtype {a.dtype}, but the function was traced with {declared.dtype}; "
                            "trace again for another dtype")
        if a.ndim != declared.ndim:
            raise ValueError(f"{what} has {a.ndim} dimension(s) (shape {a.shape}), but the function was "
                             "traced "
                             f"with {declared.ndim} ({declared}); trace again for another rank")
        return TensorType(a.dtype, a.shape)

    # -- views and conversions -------------------------------------------------------------------
    @property
    def code(self) -> str:
        """Python source of the graph that computes the same (flat) outputs with NumPy.

        Run it with ``np``, ``op`` (``numtrace.codegen.op``) and ``CONSTANTS`` (``.constants``) in scope.
        """
        from .codegen import graph_to_python

        return graph_to_python(self.graph, self.__name__, self.arg_names_flat(), self.state_names)

    @property
    def constants(self) -> dict[str, np.ndarray]:
        """The array constants too large to inline in ``.code``, by the name the code uses."""
        from .codegen import graph_to_python

        constants: dict[str, np.ndarray] = {}
        graph_to_python(self.graph, self.__name__, self.arg_names_flat(), self.state_names, constants)
        return constants

    def arg_names_flat(self) -> list[str]:
        return [v.name or f"arg{i}" for i, v in enumerate(self.graph.inputs[: self._num_leaves])]

    def to(self, backend: str) -> TracedFunction:
        """The same graph on another backend (a new object; executables are compiled on first call)."""
        return TracedFunction(self.graph, name=self.__name__, arg_names=self.arg_names, in_spec=self.in_spec,
                              out_spec=self.out_spec, backend=backend, state=self._state,
                              state_names=self.state_names)

    def save(self, path: Any) -> None:
        """Write the trace (graph, call structure, state, backend name) to ``path`` or a binary file
        object; see ``numtrace.load``."""
        from .saving import save_traced

        save_traced(self, path)

    def __reduce__(self) -> tuple:
        from .saving import reduce_traced

        return reduce_traced(self)

    def stats(self) -> dict:
        """Per compiled signature, the backend's statistics."""
        return {repr(k): exe.stats() for k, exe in list(self._cache.items())}

    def __repr__(self) -> str:
        return f"<numtrace.TracedFunction {self.__name__}({', '.join(self.arg_names)}) on {self.backend!r}>"


def retyped(graph: Graph, types: Sequence[Any], name: str) -> Graph:
    """A copy of ``graph`` for inputs of ``types`` (same ranks and dtypes, other sizes): every node's
    type is recomputed by its op's rule, so a size the program cannot take fails here, naming the node.
    """
    try:
        return specialize(graph, types, check_shapes=False)
    except (ShapeError, TypeError, ValueError) as exc:
        raise ValueError(f"{name}(): the arguments' shapes do not fit the traced program: {exc}") from None


class _ScalarArguments:
    """Wraps an executable that has 0-d inputs: NumPy scalars are passed on as 0-d arrays."""

    __slots__ = ("executable",)

    def __init__(self, executable: Any):
        self.executable = executable

    def __call__(self, *inputs: Any, out: Any = None) -> tuple:
        return self.executable(*[np.asarray(a) for a in inputs], out=out)

    def stats(self) -> dict:
        return self.executable.stats()


def _concrete(value: Any) -> Any:
    """The NumPy value behind a traced value (or the value itself), for running a reference."""
    concrete = getattr(value, "_value", None)
    if isinstance(concrete, np.ndarray):
        return concrete
    return int(value) if isinstance(value, int) else value
