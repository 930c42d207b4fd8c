"""``TracedFunction``: a traced graph plus what it takes to call it like the original function.

The call path is kept lean: gather the argument arrays (a plain tuple when the
traced function took only arrays), build the signature key (dtype, shape per
array), look up the executable compiled for that signature, run it, and rebuild the
output structure. Validation that explains a bad call happens only on a signature
miss, where the backend compiles anyway.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numtrace_ir import FormatError, Graph, GuardError, ShapeError, TensorType, registry, specialize
from numtrace_ir.backend import plain_array

from . import saving, trace_format
from . import tracer as _tracing
from .backends import get_backend
from .containers import Leaf, SequenceSpec, Spec
from .errors import TracerWarning
from .source import warn_at_user_line
from .traced_int import plain
from .views import layout_of, layout_text

# Specializations (re-traces for shapes that break a guard) one traced function may hold.
RECOMPILE_LIMIT = 8

# An argument's part of the signature key, (dtype, shape): a C-level getter, the key being per call.
_signature = operator.attrgetter("dtype", "shape")


# NumPy's bounds check without its ``__array_function__`` dispatch (NEP 18's ``_implementation``):
# arguments are plain ndarrays here, and the dispatch is most of the check's cost on small calls.
_MAY_SHARE_MEMORY = getattr(np.may_share_memory, "_implementation", np.may_share_memory)


class TracedFunction:
    """A function traced into ``graph``; calling it runs the graph on ``backend``.

    ``graph`` inputs are the argument arrays in flattening order, followed by module
    state (``state_names``) for a method of a traced module. Its outputs are the function's
    outputs, followed by the new contents of the inputs it wrote into (``mutated``: graph input
    indices), which are copied back into the caller's arrays after each call, as NumPy would have
    written them.

    ``retrace(args) -> TracedFunction``, when the Python function is at hand, traces it again for a
    call whose shapes break one of the graph's guards (``guards``); without it such a call raises
    ``GuardError``.

    Made by ``numtrace.trace`` and ``numtrace.load``, not constructed directly. Calling it takes the
    arguments the traced function took (positionally or by keyword) and returns its outputs; the
    first call with a new signature (dtypes and shapes) validates it and compiles, later ones only
    run.

    Attributes:
        graph (numtrace_ir.Graph): the recorded graph; ``print`` it to read it.
        backend (str): the name of the backend it runs on.
        arg_names (tuple[str, ...]): the traced function's parameter names.
        retraces (int): how many times the function was traced again for shapes that broke a guard.

    Examples:
        ```python
        import numpy as np
        import numtrace as nt

        def normalize(x):
            return (x - x.mean(axis=-1, keepdims=True)) / x.std(axis=-1, keepdims=True)

        traced = nt.trace(normalize, (np.random.rand(4, 8),))
        assert traced.arg_names == ("x",) and traced.backend == "cpu"
        assert np.allclose(traced(x=np.arange(16.0).reshape(2, 8)), normalize(np.arange(16.0).reshape(2, 8)))
        print(traced.graph)
        ```
    """

    def __init__(self, graph: Graph, *, name: str, arg_names: Sequence[str], in_spec: Spec, out_spec: Spec,
                 backend: str, state: Sequence[np.ndarray] = (), state_names: Sequence[str] = (),
                 mutated: Sequence[int] = (), returned: Sequence[tuple[int, int]] = (),
                 retrace: Callable[[tuple], TracedFunction] | None = None,
                 layouts: Sequence[Any] | None = None):
        self.graph = graph
        # The arguments' layouts when the trace wrote through a reshape (`views.layout_of`): a call
        # must match them (NumPy's reshape is a view or a copy by layout), checked per call.
        self.layouts = None if layouts is None else tuple(layouts)
        self.__name__ = name
        self.arg_names = tuple(arg_names)
        self.in_spec = in_spec
        self.out_spec = out_spec
        self.state_names = tuple(state_names)
        # Plain-ndarray views of the state (Parameter is a subclass): same memory, so in-place
        # load_state_dict is seen by every later call.
        self._state = tuple(np.asarray(a) for a in state)
        self._num_leaves = len(graph.inputs) - len(self._state)
        self.mutated = tuple(mutated)
        # (written input, other input): the pairs the aliasing check looks at per call, each once. The
        # inputs are the arguments, then the module state (a written counter, an argument that is
        # the module's own weight array).
        written = list(self.mutated)
        self._alias_pairs = tuple((i, j) for i in written for j in range(len(graph.inputs))
                                  if j != i and not (j in written and j < i))
        self._num_outputs = len(graph.outputs) - len(self.mutated)
        # (output position, graph input index), ascending: written arguments returned as the caller's arrays.
        self.returned = tuple(sorted((int(p), int(i)) for p, i in returned))
        self._retrace = retrace
        # The graphs this function runs: this one first, then re-traces for shapes that broke a guard.
        self._variants: list[TracedFunction] = [self]
        # Per signature, the (graph, executable) pairs tried for guards decided only at run time.
        self._alternatives: dict[tuple, list] = {}
        self.retraces = 0
        # Fast paths: arguments that are exactly the flat arrays; one array returned.
        self._flat_args = isinstance(in_spec, SequenceSpec) and all(isinstance(c, Leaf)
                                                                 for c in in_spec.children)
        self._single_output = isinstance(out_spec, Leaf) and not returned
        self._tuple_output = (isinstance(out_spec, SequenceSpec) and out_spec.container is tuple
                              and [getattr(c, "index", None) for c in out_spec.children]
                              == list(range(len(out_spec.children))))
        self._lock = threading.Lock()
        self._backend = get_backend(backend)
        self.backend = backend
        self._cache: dict[tuple, Any] = {}
        # The fast path: the exact caller of the entry the last general call ran (None: none yet, or
        # the backend has none); the general path takes over whenever it declines a call.
        self._fast: Callable[[tuple], Any] | None = None
        self._fast_callers: dict[tuple, Any] = {}

    # -- calling --------------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast
        if fast is not None and not kwargs and not _tracing.active_count:
            try:
                result = fast(args)
            except Exception as exc:
                return self._fast_failed(args, exc, fast)
            if result is not NotImplemented:
                return result
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """The general call: any argument structure, conversions, explained errors, compiles."""
        leaves: Sequence[Any]
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
            key = tuple(map(_signature, leaves))
        except AttributeError:
            leaves = self._converted(leaves)
            key = tuple(map(_signature, leaves))
        entry = self._cache.get(key)
        if entry is None:
            entry = self._compile(leaves, key)
        variant, executable = entry
        self._use_fast(entry)
        if variant.layouts is not None:
            variant._check_layouts(leaves)
        if variant.mutated:
            variant._check_aliasing(leaves)
        try:
            outs = executable(*leaves, *variant._state)
        except Exception as exc:
            broken = _guard_failure(exc)
            if broken is None:
                raise
            return self._guard_failed_at_run_time(leaves, key, broken, entry)
        if variant.mutated:
            return variant._finish(leaves, outs)
        if variant._single_output:
            return outs[0]
        return variant._build(outs)

    def _use_fast(self, entry: tuple) -> None:
        """Make the entry a general call runs the fast path's (see `_exact_caller`)."""
        if self._flat_args:
            fast = self._fast_callers.get(entry, False)
            if fast is False:
                fast = self._fast_callers[entry] = _exact_caller(entry)
            self._fast = fast

    def _fast_failed(self, args: tuple, exc: Exception, fast: Any) -> Any:
        """The fast path's executable (`fast`) raised: a guard decided at run time failing is handled
        as on the general path; any other error is the call's."""
        broken = _guard_failure(exc)
        if broken is None:
            raise exc
        failed = next(entry for entry, f in list(self._fast_callers.items()) if f is fast)
        return self._guard_failed_at_run_time(args, tuple(map(_signature, args)), broken, failed)

    def _build(self, outs: Sequence[Any]) -> Any:
        """The function's outputs from the flat ones (`outs` is a tuple: the executable's, or made here)."""
        if self._single_output:
            return outs[0]
        return outs if self._tuple_output and type(outs) is tuple else self.out_spec.build(outs)

    def _finish(self, leaves: Sequence[Any], outs: Sequence[np.ndarray]) -> Any:
        """After a call that wrote into its arguments: copy their new contents back, and return the
        function's outputs, a returned argument being the caller's own array (as in NumPy)."""
        arrays = [*leaves, *self._state] if self._state else leaves
        self._write_back(arrays, outs)
        if self.returned:
            outs = list(outs[: self._num_outputs])
            for pos, i in self.returned:
                outs.insert(pos, arrays[i])
            outs = tuple(outs)
        else:
            outs = outs[: self._num_outputs]   # the written contents follow the function's outputs
        return self._build(outs)

    def _guard_failed_at_run_time(self, leaves: Sequence[Any], key: tuple, broken: GuardError,
                                  failed: tuple) -> Any:
        """A guard that the shapes alone do not decide (it reads a data-dependent size, such as a mask's
        count) failed while running; nothing was written back yet. Another graph for this signature whose
        guards hold is used, or the function is traced again for this call."""
        alternatives = self._alternatives.setdefault(key, [failed])
        for entry in alternatives:
            if entry is failed:
                continue
            try:
                result = entry[0]._run(entry[1], leaves)
            except Exception as exc:
                if _guard_failure(exc) is None:
                    raise
                continue
            self._cache[key] = entry
            self._use_fast(entry)
            return result
        types = [self._check_leaf(i, a, declared.type) for i, (a, declared) in
                 enumerate(zip(leaves, self.graph.inputs))]
        with self._lock:
            variant = self._specialization(leaves, broken)
            entry = (variant, variant._executable(types))
            if any(not d[1] for d in key):
                entry = (entry[0], _ScalarArguments(entry[1]))
            alternatives.append(entry)
            self._cache[key] = entry
        self._use_fast(entry)
        return variant._run(entry[1], leaves)

    def _check_aliasing(self, leaves: Sequence[Any]) -> None:
        """The trace reads its arguments as separate arrays: one it writes into must not share memory
        with another (NumPy would see the write through the other), so such a call is refused. The
        per-call test is NumPy's bounds check, once per pair; only overlapping bounds pay for the
        exact one."""
        share = _MAY_SHARE_MEMORY
        if self._state:
            leaves = [*leaves, *self._state]
        for i, j in self._alias_pairs:
            other = leaves[j]
            if share(leaves[i], other):
                try:
                    # NumPy's stub admits only -1/0 for max_work; the function takes any bound.
                    overlap = np.shares_memory(leaves[i], other, max_work=10_000)  # type: ignore[arg-type]
                except np.exceptions.TooHardError:
                    overlap = True
                if overlap:
                    raise ValueError(
                        f"{self.__name__}(): {self._input_name(i)} is written into by the traced "
                        f"function and shares memory with {self._input_name(j)}; a trace treats "
                        "its arguments and module state as separate arrays, so pass a copy")

    def _check_layouts(self, leaves: Sequence[Any]) -> None:
        """Refuse a call whose arguments are laid out otherwise than the traced ones (see `layouts`)."""
        for i, (a, want) in enumerate(zip(leaves, self.layouts or ())):
            got = layout_of(np.asarray(a))
            if got != want:
                raise ValueError(
                    f"{self.__name__}(): argument {self._leaf_name(i)} is {layout_text(got)}, but the "
                    f"function was traced with it {layout_text(want)}; the function writes through a reshape "
                    "(or ravel), which NumPy makes a view or a copy depending on the layout, so the trace "
                    "holds for the traced layouts only: pass an array laid out as traced, or trace again")

    def _run(self, executable: Any, leaves: Sequence[Any]) -> Any:
        if self.layouts is not None:
            self._check_layouts(leaves)
        if self.mutated:
            self._check_aliasing(leaves)
        outs = executable(*leaves, *self._state)
        if self.mutated:
            return self._finish(leaves, outs)
        return self._build(outs)

    def _write_back(self, arrays: Sequence[Any], outs: Sequence[np.ndarray]) -> None:
        """Copy the new contents of the inputs the function wrote into (`arrays`: the arguments, then
        the state) back into the caller's arrays, unless the backend computed them there."""
        n = self._num_outputs
        for k, i in enumerate(self.mutated):
            target, new = arrays[i], outs[n + k]
            if new is target:
                continue
            if not isinstance(target, np.ndarray):
                raise TypeError(f"{self.__name__}(): argument {self._leaf_name(i)} is written into by the "
                                f"traced function, so it must be a NumPy array, got {type(target).__name__}")
            np.copyto(target, new, casting="no")

    @property
    def guards(self) -> list[str]:
        """The guards of the graph: what the trace was specialized on, one line each
        (``x.shape[0] == 5  # model.py:12``).

        A guard is recorded where a size left the graph as a plain Python value (``range(n)``,
        ``len(x)``, a branch on a shape). Empty when the graph follows every size.

        Examples:
            ```python
            import math

            import numpy as np
            import numtrace as nt

            def scaled(x):
                return x.sum(axis=0) / math.sqrt(x.shape[0])    # math.sqrt takes a plain float

            traced = nt.trace(scaled, (np.ones((5, 3)),))
            assert traced.guards[0].startswith("x.shape[0] == 5")
            ```
        """
        from numtrace_ir.guards import guard_text

        return [f"{guard_text(n)} == {n.attrs['expected']!r}" + (f"  # {n.loc}" if n.loc else "")
                for n in self.graph.nodes if n.op == "prim.guard"]

    def _inline(self, leaves: Sequence[Any]) -> Any:
        """Called while another function is traced: record this graph's nodes into that trace."""
        tracer = _tracing.current_tracer()
        assert tracer is not None  # __call__ inlines only while a trace is being recorded
        if self.mutated:
            raise NotImplementedError(f"{self.__name__} writes into its arguments; calling it from a "
                                      "function being traced is not supported")
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
        assert isinstance(self.in_spec, SequenceSpec)  # the arguments' structure is always their tuple
        for name, spec, value in zip(names, self.in_spec.children, bound):
            spec.extract(value, leaves, f"argument {name!r}")
        return leaves

    def _input_name(self, i: int) -> str:
        kind = "argument" if i < self._num_leaves else "module state"
        return f"{kind} {self._leaf_name(i)}"

    def _leaf_name(self, i: int) -> str:
        name = self.graph.inputs[i].name
        return repr(name) if name else f"#{i}"

    def _compile(self, leaves: Sequence[np.ndarray], key: tuple) -> tuple:
        """Signature miss: validate the call, pick the first graph whose guards hold for its shapes (or
        re-trace), compile it and cache ``(graph's function, executable)``. Guards are evaluated here,
        once per signature, never per call."""
        self._converted(leaves)  # only arrays and NumPy scalars reach a backend
        for i, a in enumerate(leaves):   # (a later call with a subclass is refused by the executable)
            plain_array(a, f"{self.__name__}(): argument {self._leaf_name(i)}")
        types = [self._check_leaf(i, a, declared.type)
                 for i, (a, declared) in enumerate(zip(leaves, self.graph.inputs))]
        with self._lock:
            entry = None
            broken = None
            for variant in self._variants:
                try:
                    entry = (variant, variant._executable(types))
                    break
                except GuardError as exc:
                    broken = exc
            if entry is None:
                assert broken is not None  # there is always one variant, and each one raised
                variant = self._specialization(leaves, broken)
                entry = (variant, variant._executable(types))
            if any(not d[1] for d in key):
                # A 0-d argument may arrive as a NumPy scalar, whose signature key equals the 0-d array's.
                entry = (entry[0], _ScalarArguments(entry[1]))
            self._cache[key] = entry
        return entry

    def _executable(self, leaf_types: list) -> Any:
        """This graph compiled for the call's argument types; `GuardError` if a guard does not hold."""
        types = [*leaf_types, *(v.type for v in self.graph.inputs[len(leaf_types):])]
        graph = self.graph
        if any(t != v.type for t, v in zip(types, graph.inputs)):
            graph = retyped(graph, types, self.__name__)
        if self.mutated and getattr(self._backend, "writes_updates_in_place", False):
            # The written-back arguments and module state may be computed straight into their arrays
            # (an output that is then the array itself needs no copy back): the aliasing check makes
            # sure no other input shares their memory.
            updates = {self._num_outputs + k: i for k, i in enumerate(self.mutated)}
            return self._backend.compile(graph, types, updates=updates)
        return self._backend.compile(graph, types)

    def _specialization(self, leaves: Sequence[np.ndarray], broken: GuardError) -> TracedFunction:
        """A new trace for shapes that break a guard of every graph so far (or the clear refusal)."""
        if self._retrace is None:
            refusal = GuardError(broken.guard, broken.loc, broken.traced, broken.now)
            refusal.args = (f"{self.__name__}(): {broken}. This trace has no Python function to trace again "
                            "(it was loaded from a file): trace the function with inputs of these shapes",)
            raise refusal
        if len(self._variants) > RECOMPILE_LIMIT:
            raise RuntimeError(f"{self.__name__}(): traced again {RECOMPILE_LIMIT} times for new input "
                               "shapes "
                               f"and the shapes of this call still break a guard ({broken}); the function "
                               "branches on its input shapes too often to be traced once per shape")
        warn_at_user_line(f"numtrace: re-tracing {self.__name__}() for input shapes "
                          f"{[tuple(a.shape) for a in leaves]}: {broken}", TracerWarning)
        # Copies (tracing runs the code eagerly) in the arguments' memory order: a trace may depend on it.
        args = self.in_spec.build([np.array(a, copy=True, order="K") for a in leaves])
        variant = self._retrace(args)
        self._variants.append(variant)
        self.retraces += 1
        return variant

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
        It shows what was recorded in the language it was written in, with the source line of every
        statement.

        Examples:
            ```python
            import numpy as np
            import numtrace as nt
            from numtrace import codegen

            def f(x):
                return np.exp(x) / np.exp(x).sum()

            traced = nt.trace(f, (np.ones(4),))
            print(traced.code)
            namespace = {"np": np, "op": codegen.op, "CONSTANTS": traced.constants}
            exec(traced.code, namespace)
            assert np.allclose(namespace["f"](np.ones(4)), 0.25)
            ```
        """
        from .codegen import graph_to_python

        return graph_to_python(self.graph, self.__name__, self.arg_names_flat(), self.state_names)

    @property
    def constants(self) -> dict[str, np.ndarray]:
        """The array constants too large to inline in ``.code``, by the name the code uses.

        These are the arrays ``str(graph)`` abbreviates (more than 16 elements).
        """
        from .codegen import graph_to_python

        constants: dict[str, np.ndarray] = {}
        graph_to_python(self.graph, self.__name__, self.arg_names_flat(), self.state_names, constants)
        return constants

    def arg_names_flat(self) -> list[str]:
        """The graph's input names of the argument arrays, in flattening order (``.code``'s parameters)."""
        return [v.name or f"arg{i}" for i, v in enumerate(self.graph.inputs[: self._num_leaves])]

    def to(self, backend: str) -> TracedFunction:
        """The same graph on another backend (a new object; executables are compiled on first call).

        Args:
            backend: an installed backend's name (``numtrace.available_backends()``).

        Examples:
            ```python
            import numpy as np
            import numtrace as nt

            traced = nt.trace(np.tanh, (np.ones(3),))
            assert traced.to("reference").backend == "reference"
            ```
        """
        return TracedFunction(self.graph, name=self.__name__, arg_names=self.arg_names, in_spec=self.in_spec,
                              out_spec=self.out_spec, backend=backend, state=self._state,
                              state_names=self.state_names, mutated=self.mutated, returned=self.returned,
                              retrace=self._retrace, layouts=self.layouts)

    def save(self, path: Any) -> None:
        """Write the trace (graph, call structure, state, backend name) to ``path`` or a binary file
        object; see ``numtrace.load``.

        Args:
            path: a file path or a binary file object open for writing.

        Examples:
            ```python
            import io

            import numpy as np
            import numtrace as nt

            def f(x):
                return x * 2

            buffer = io.BytesIO()
            nt.trace(f, (np.ones(3),)).save(buffer)
            assert np.allclose(nt.load(io.BytesIO(buffer.getvalue()))(np.ones(3)), 2.0)
            ```
        """
        saving.write_bytes(path, self.to_bytes())

    def to_bytes(self) -> bytes:
        """The saved form of this trace (what ``save`` writes; also how it pickles). A traced module's
        method carries the state it reads; saved with it, it loads on its own."""
        arrays = {name: np.asarray(a) for name, a in zip(self.state_names, self._state)}
        return trace_format.dumps({"forward": self}, arrays, name=self.__name__, backend=self.backend,
                                  module=None)

    @classmethod
    def from_bytes(cls, data: bytes, backend: str | None = None, where: str = "<bytes>") -> TracedFunction:
        """The traced function saved as ``data`` (``to_bytes``); ``backend`` defaults to the saved one."""
        return cls._from_saved(trace_format.loads(data, backend, where), where)

    @classmethod
    def _from_saved(cls, saved: trace_format.Saved, where: str) -> TracedFunction:
        if saved.meta.get("module") is not None:
            raise FormatError(f"{where} holds a traced module, not a function; load it with numtrace.load")
        with trace_format.malformed_as_format_error(where):
            methods = {name: cls._saved_method(name, saved.meta["name"], info, saved, saved.arrays)
                       for name, info in saved.meta["methods"].items()}
            return methods["forward"]

    @classmethod
    def _saved_method(cls, method: str, name: str, info: dict, saved: trace_format.Saved,
                      state: Any) -> TracedFunction:
        """Saved method ``method`` named ``name``, its state arrays looked up by name in ``state``."""
        graph = saved.graphs[method]
        fields = trace_format.method_fields(method, info, graph)
        return cls(graph, name=name, backend=saved.backend,
                   state=[state[n] for n in fields["state_names"]], **fields)

    def __reduce__(self) -> tuple:
        # Pickled (and deep-copied) as the saved form: no lock or compiled code is pickled.
        return (type(self).from_bytes, (self.to_bytes(), self.backend))

    def explain(self, *args: Any, **kwargs: Any) -> str:
        """What the backend's executable does, as text: for the signature of ``args`` when given (it is
        compiled if needed, nothing runs), else for every signature called so far (the traced one
        when none was). The CPU backend lists its steps (fused passes and their nodes, BLAS calls,
        fallbacks and why, buffers), Triton its kernels with their source, the reference its nodes.

        Args:
            *args: arguments of a call, as for calling the trace (only their dtypes and shapes matter).
            **kwargs: arguments by name.

        Returns:
            The description, one section per signature.

        Examples:
            ```python
            import numpy as np
            import numtrace as nt

            def f(x, w):
                return np.maximum(x @ w, 0.0).sum(axis=1)

            traced = nt.trace(f, (np.ones((4, 64)), np.ones((64, 32))))
            report = traced.explain(np.ones((1000, 64)), np.ones((64, 32)))
            assert "BLAS matmul" in report and "fused pass" in report
            print(report)
            ```
        """
        if args or kwargs:
            leaves = self._gather(args, kwargs) if kwargs or not self._flat_args else list(args)
            if len(leaves) != self._num_leaves:
                raise TypeError(f"{self.__name__}() takes {self._num_leaves} array argument(s) "
                                f"({', '.join(self.arg_names)}) as traced, got {len(leaves)}")
            leaves = self._converted(leaves)
            key = tuple(map(_signature, leaves))
            entries = [self._cache.get(key) or self._compile(leaves, key)]
        elif self._cache:
            entries = list(dict.fromkeys(self._cache.values()))
        else:
            types = [v.type for v in self.graph.inputs[: self._num_leaves]]
            entries = [(self, self._executable(types))]
        parts = [f"# {self.__name__} on backend {self.backend!r}"]
        for _, executable in entries:
            describe = getattr(executable, "explain", None)
            if describe is None:
                text = (f"backend {self.backend!r} does not describe its executables; its stats: "
                        f"{executable.stats()}\n")
            else:
                text = describe()
            parts.append(text.rstrip("\n"))
        return "\n".join(parts) + "\n"

    def stats(self) -> dict:
        """``retraces``: how many times the function was traced again for shapes that broke a guard;
        ``signatures``: per compiled input signature, the backend's statistics.

        Examples:
            ```python
            import numpy as np
            import numtrace as nt

            traced = nt.trace(np.cumsum, (np.ones(4),))
            traced(np.ones(9))
            assert traced.stats()["retraces"] == 0 and len(traced.stats()["signatures"]) == 2
            ```
        """
        return {"retraces": self.retraces,
                "signatures": {repr(k): exe.stats() for k, (_, exe) in list(self._cache.items())}}

    def __repr__(self) -> str:
        return f"<numtrace.TracedFunction {self.__name__}({', '.join(self.arg_names)}) on {self.backend!r}>"


def retyped(graph: Graph, types: Sequence[Any], name: str) -> Graph:
    """A copy of ``graph`` for inputs of ``types`` (same ranks and dtypes, other sizes): every node's
    type is recomputed by its op's rule, so a size the program cannot take fails here, naming the node.
    """
    try:
        return specialize(graph, types, check_shapes=False)
    except GuardError:
        raise
    except (ShapeError, TypeError, ValueError) as exc:
        raise ValueError(f"{name}(): the arguments' shapes do not fit the traced program: {exc}") from None


def _exact_caller(entry: tuple) -> Callable[[tuple], Any] | None:
    """The fast call of a cache entry, from its executable's optional ``exact_caller`` (the CPU
    backend's): it takes the flat argument tuple, runs only when every argument is exactly an
    ndarray of the compiled dtype and shape whose written arguments' memory bounds do not overlap
    another's, writes mutated arguments back and returns the function's result (a returned written
    argument being the caller's array, as in `_finish`); else it returns NotImplemented having run
    nothing. None where the backend has none."""
    variant, executable = entry
    make = getattr(executable, "exact_caller", None)
    if make is None or not variant._flat_args or variant.layouts is not None:
        return None
    n = variant._num_outputs
    results = list(range(n))
    for pos, i in variant.returned:
        results.insert(pos, -1 - i)
    build = None if variant._single_output or variant._tuple_output else variant.out_spec.build
    writes = [(n + k, i) for k, i in enumerate(variant.mutated)]
    return make(variant._num_leaves, variant._state, list(variant._alias_pairs), writes, results,
                variant._single_output, build).run


def _guard_failure(exc: BaseException) -> GuardError | None:
    """The GuardError behind an executable's error (backends wrap it naming the node), if any."""
    cause: BaseException | None = exc
    seen = 0
    while cause is not None and seen < 8:
        if isinstance(cause, GuardError):
            return cause
        cause, seen = cause.__cause__, seen + 1
    return None


class _ScalarArguments:
    """Wraps an executable that has 0-d inputs: NumPy scalars are passed on as 0-d arrays."""

    __slots__ = ("executable",)

    def __init__(self, executable: Any):
        self.executable = executable

    def __call__(self, *inputs: Any, out: Any = None) -> tuple:
        return self.executable(*[np.asarray(a) for a in inputs], out=out)

    def stats(self) -> dict:
        return self.executable.stats()

    @property
    def exact_caller(self) -> Any:
        # The exact check accepts 0-d arrays only; a NumPy scalar makes the fast path decline.
        return getattr(self.executable, "exact_caller", None)

    @property
    def explain(self) -> Any:
        return getattr(self.executable, "explain", None)


def _concrete(value: Any) -> Any:
    """The NumPy value behind a traced value (or the value itself), for running a reference."""
    concrete = getattr(value, "_concrete", None)
    if isinstance(concrete, np.ndarray):
        return concrete
    return plain(value)
