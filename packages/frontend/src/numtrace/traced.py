"""``TracedFunction``: a traced graph plus what it takes to call it like the original function.

The call path is kept lean: gather the argument arrays (a plain tuple when the traced function took
only arrays), build the signature key (dtype, shape per array), look up the executable compiled for
that signature, run it, and rebuild the output structure. Validation that explains a bad call happens
only on a signature miss, where the backend compiles anyway.

This module holds the call paths; the class's other parts live beside it, one idea each:
argument binding (call_arguments), the compile cache and re-tracing (specializations), inspection
(traced_inspection), persistence (traced_saving) and inlining into another trace (inlining). The call
convention itself (aliasing, write-back, returned arguments) is `numtrace_ir.CallSpec`'s, run by
`numtrace_ir.run_call` or by the backend's exact caller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numtrace_ir import CallSpec, Graph, GuardError, TensorType, run_call

from . import tracer as _tracing
from .backends import get_backend
from .call_arguments import signature
from .containers import Leaf, SequenceSpec, Spec, scalar_leaves
from .inlining import inline
from .output_views import apply_views, view_steps
from .specializations import guard_failure
from .traced_inspection import Inspection
from .traced_saving import Persistence

__all__ = ["TracedFunction"]


class TracedFunction(Inspection, Persistence):
    """A function traced into ``graph``; calling it runs the graph on ``backend``.

    ``graph`` inputs are the argument arrays in flattening order, followed by module
    state (``state_names``) for a method of a traced module. Its outputs are the function's
    outputs, followed by the new contents of the inputs it wrote into (``mutated``: graph input
    indices), which are copied back into the caller's arrays after each call, as NumPy would have
    written them. ``call_spec`` (a `numtrace_ir.CallSpec`) says all that to the backend.

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
        call_spec (numtrace_ir.CallSpec): how a call maps onto the graph's inputs and outputs.

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
                 layouts: Sequence[Any] | None = None, cse_merged: int = 0,
                 views: Sequence[int] = ()):
        self.graph = graph
        # The result positions NumPy returns as views of arguments or of other results (see
        # output_views): rebuilt per call by their replays, made per signature in `_view_steps`.
        self.views = tuple(int(v) for v in views)
        self._view_steps: dict[tuple, Any] = {}
        # Nodes `numtrace_ir.passes.cse` merged when the graph was recorded (shown by `stats()`).
        self.cse_merged = cse_merged
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
        # How a call maps onto the graph's executable: the backends' part of the contract.
        self.call_spec = CallSpec(num_args=self._num_leaves, num_results=len(graph.outputs) - len(mutated),
                                  num_state=len(self._state), written=tuple(mutated),
                                  returned=tuple(returned), single=type(out_spec) is Leaf, name=name,
                                  input_names=tuple(v.name for v in graph.inputs))
        self._retrace = retrace
        # The graphs this function runs: this one first, then re-traces for shapes that broke a guard.
        self._variants: list[TracedFunction] = [self]
        # Per signature, the (graph, executable) pairs tried for guards decided only at run time.
        self._alternatives: dict[tuple, list] = {}
        # Per signature, the guard of this graph it broke (so another graph runs it).
        self._broken_guards: dict[tuple, GuardError] = {}
        self.retraces = 0
        self._warned_eager = False  # past the re-trace limit (see Specializations._eagerly)
        # Fast paths: arguments that are exactly the flat arrays; the flat results are the output tuple.
        self._flat_args = isinstance(in_spec, SequenceSpec) and all(isinstance(c, Leaf)
                                                                 for c in in_spec.children)
        # Per argument leaf, whether it was traced as a NumPy scalar: a call passes the same kinds (see
        # `_check_scalars`); a NumPy scalar never takes the fast path, whose check accepts ndarrays only.
        self._scalar_args = scalar_leaves(in_spec)
        self._tuple_output = (isinstance(out_spec, SequenceSpec) and out_spec.container is tuple
                              and [c.index if type(c) is Leaf else None for c in out_spec.children]
                              == list(range(len(out_spec.children))))
        self._lock = threading.Lock()
        self._backend = get_backend(backend)
        self.backend = backend
        self._cache: dict[tuple, Any] = {}
        # The fast path: the exact caller of the entry the last general call ran (None: none yet, or
        # the backend has none); the general path takes over whenever it declines a call.
        self._fast: Callable[[tuple], Any] | None = None
        self._fast_callers: dict[tuple, Any] = {}

    @property
    def mutated(self) -> tuple[int, ...]:
        """Graph input indices the function writes into (``call_spec.written``)."""
        return self.call_spec.written

    @property
    def returned(self) -> tuple[tuple[int, int], ...]:
        """(output position, graph input index): written arguments returned as themselves."""
        return self.call_spec.returned

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
        if tuple(map(_is_numpy_scalar, leaves)) != self._scalar_args:
            self._check_scalars(leaves)
        if _tracing.active_count and _tracing.current_tracer() is not None:
            return inline(self, leaves)
        try:
            key = tuple(map(signature, leaves))
        except AttributeError:
            leaves = self._converted(leaves)
            key = tuple(map(signature, leaves))
        entry = self._cache.get(key)
        if entry is None:
            entry = self._compile(leaves, key)
        variant, executable = entry
        self._use_fast(entry)
        spec = variant.call_spec
        if variant.layouts is not None:
            variant._check_layouts(leaves)
        try:
            if spec.written or spec.returned:
                outs = run_call(executable, spec, leaves, variant._state)
            else:
                outs = executable(*leaves, *variant._state)
        except Exception as exc:
            broken = guard_failure(exc)
            if broken is None:
                raise
            return self._guard_failed_at_run_time(leaves, key, broken, entry)
        if variant.views:
            outs = variant._with_views(outs, leaves)
        if spec.single:
            return outs[0]
        return variant._build(outs)

    def _run(self, executable: Any, leaves: Sequence[Any]) -> Any:
        """A call of this graph's `executable` on the flat arguments, outside the cache."""
        if self.layouts is not None:
            self._check_layouts(leaves)
        outs = run_call(executable, self.call_spec, leaves, self._state)
        if self.views:
            outs = self._with_views(outs, leaves)
        return outs[0] if self.call_spec.single else self._build(outs)

    def _with_views(self, outs: tuple, leaves: Sequence[Any]) -> tuple:
        """The flat results with those NumPy returns as views rebuilt as views (see output_views)."""
        key = tuple(map(signature, leaves))
        steps = self._view_steps.get(key)
        if steps is None:
            types = [TensorType(a.dtype, a.shape) for a in leaves] + [v.type for v in
                                                                      self.graph.inputs[len(leaves):]]
            steps = self._view_steps[key] = view_steps(self.graph, self.call_spec, self.views, types)
        return apply_views(steps, outs, [*leaves, *self._state])

    def _build(self, outs: tuple) -> Any:
        """The function's outputs from its flat results."""
        return outs if self._tuple_output and type(outs) is tuple else self.out_spec.build(outs)

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
        broken = guard_failure(exc)
        if broken is None:
            raise exc
        failed = next(entry for entry, f in list(self._fast_callers.items()) if f is fast)
        return self._guard_failed_at_run_time(args, tuple(map(signature, args)), broken, failed)

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
                              retrace=self._retrace, layouts=self.layouts, views=self.views)

    def __repr__(self) -> str:
        return f"<numtrace.TracedFunction {self.__name__}({', '.join(self.arg_names)}) on {self.backend!r}>"



# isinstance(a, np.generic) as a C function for map (a traced NumPy scalar's __class__ is its scalar type).
_is_numpy_scalar = np.generic.__instancecheck__


def _exact_caller(entry: tuple) -> Callable[[tuple], Any] | None:
    """The fast call of a cache entry, from its executable's optional ``exact_caller`` (the CPU
    backend's): given the flat argument tuple, it runs the whole call as the variant's `CallSpec` says
    when every argument is exactly an ndarray of the compiled dtype and shape and no alias pair's
    memory bounds overlap, and returns the function's result; else it returns NotImplemented having
    run nothing. None where the backend has none."""
    variant, executable = entry
    make = getattr(executable, "exact_caller", None)
    if make is None or not variant._flat_args or variant.layouts is not None or variant.views \
            or any(variant._scalar_args):
        return None   # (the layout and scalar checks and views are the general path's)
    build = None if variant.call_spec.single or variant._tuple_output else variant.out_spec.build
    return make(variant.call_spec, variant._state, build).run
