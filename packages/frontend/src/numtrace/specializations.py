"""The compiled forms of a traced function, per input signature: validating a new signature, picking
the first graph whose guards hold for its shapes (the traced one, then re-traces), tracing the
function again for shapes that break every graph's guards, and a guard decided only while running
(a data-dependent size) failing. Guards are evaluated once per signature, in the backend's
``specialize``, never per call."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numtrace_ir import CallSpec, Graph, GuardError, ShapeError, specialize
from numtrace_ir.backend import plain_array
from numtrace_ir.dims import IndexShapeError
from numtrace_ir.guards import guard_text

from .call_arguments import CallArguments, signature
from .errors import TracerWarning
from .source import warn_at_user_line

if TYPE_CHECKING:
    from .containers import Spec
    from .traced import TracedFunction

__all__ = ["RECOMPILE_LIMIT", "Specializations", "guard_failure", "retyped"]

# Specializations (re-traces for shapes that break a guard) one traced function may hold.
RECOMPILE_LIMIT = 8


class Specializations(CallArguments):
    """The compile-cache part of `numtrace.TracedFunction` (a mixin; a new signature's arguments are
    validated by `CallArguments`)."""

    __name__: str
    graph: Graph
    in_spec: Spec
    call_spec: CallSpec
    retraces: int
    _warned_eager: bool
    _backend: Any
    _lock: threading.Lock
    _cache: dict[tuple, Any]
    _variants: list[TracedFunction]
    _alternatives: dict[tuple, list]
    _broken_guards: dict[tuple, GuardError]
    _retrace: Callable[[tuple], TracedFunction] | None

    if TYPE_CHECKING:
        def _use_fast(self, entry: tuple) -> None: ...

    def _compile(self, leaves: Sequence[np.ndarray], key: tuple) -> tuple:
        """Signature miss: validate the call, pick the first graph whose guards hold for its shapes (or
        re-trace), compile it and cache ``(graph's function, executable)``. Guards are evaluated here,
        once per signature (by the backend's ``specialize``), never per call."""
        self._converted(leaves)  # only arrays and NumPy scalars reach a backend
        for i, a in enumerate(leaves):   # (a later call with a subclass is refused by the executable)
            plain_array(a, f"{self.__name__}(): argument {self._leaf_name(i)}")
        types = self._leaf_types(leaves)
        with self._lock:
            entry = None
            broken = None
            for variant in self._variants:
                try:
                    entry = self._entry(variant, types, key)
                    break
                except GuardError as exc:
                    if variant is self:
                        self._broken_guards[key] = exc
                    broken = exc
            if entry is None:
                assert broken is not None  # there is always one variant, and each one raised
                entry = self._entry(self._specialization(leaves, broken), types, key)
            self._cache[key] = entry
        return entry

    def _leaf_types(self, leaves: Sequence[Any]) -> list:
        return [self._check_leaf(i, a, declared.type) for i, (a, declared) in
                enumerate(zip(leaves, self.graph.inputs))]

    @staticmethod
    def _entry(variant: TracedFunction, leaf_types: list, key: tuple) -> tuple:
        """``(variant, its executable for the call's argument types)``; `GuardError` if one of its
        guards does not hold for them."""
        executable = variant._executable(leaf_types)
        if any(not d[1] for d in key):
            # A 0-d argument may arrive as a NumPy scalar, whose signature key equals the 0-d array's.
            executable = _ScalarArguments(executable)
        return variant, executable

    def _executable(self, leaf_types: list) -> Any:
        """This graph compiled by the backend, with its call convention, for the call's argument types
        (the state's are the traced ones); `GuardError` if a guard does not hold."""
        types = [*leaf_types, *(v.type for v in self.graph.inputs[len(leaf_types):])]
        try:
            return self._backend.compile(self.graph, types, self.call_spec)
        except GuardError:
            raise
        except (ShapeError, TypeError, ValueError) as exc:
            if all(t == v.type for t, v in zip(types, self.graph.inputs)):
                raise
            stale = _data_guard(self.graph)
            if stale is not None:
                raise stale_data(stale, exc) from None
            raise unfit(self.__name__, exc) from None

    def broken_guard(self, leaves: Sequence[Any]) -> GuardError | None:
        """The guard of the traced graph that a compiled signature (of the flat arguments ``leaves``)
        broke, so that it runs another trace; None if it broke none (or was not compiled)."""
        try:
            return self._broken_guards.get(tuple(map(signature, leaves)))
        except AttributeError:
            return None

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
        # NumPy's floating-point warnings come from running the new graph right after: the tracing run
        # would say each a second time. Only the warnings are silenced: "raise" and "call" still act
        # while tracing, as the user's code may branch on them, and the error state stays the caller's,
        # which the trace compares the function's own np.errstate blocks against (Node.errstate).
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=RuntimeWarning)
            # Said when the function was first traced: not again for each specialization.
            warnings.filterwarnings("ignore", "(Converting a traced array|.* runs as a host call)",
                                    TracerWarning)
            variant = self._retrace(args)
        self._variants.append(variant)
        self.retraces += 1
        return variant

    def _eagerly(self, eager: Callable[[tuple], Any], leaves: Sequence[Any], broken: GuardError) -> Any:
        """Past the re-trace limit, a call that breaks a guard on data runs the Python function itself
        (correct, not compiled); said once."""
        if not self._warned_eager:
            self._warned_eager = True
            warn_at_user_line(f"numtrace: {self.__name__}() was traced {RECOMPILE_LIMIT} times for values "
                              f"that left the graph, and this call breaks a guard again ({broken}); it runs "
                              "the Python function eagerly from now on where a guard breaks. Keep that value "
                              "an array (np.where instead of a branch on data) to stay in one trace.",
                              TracerWarning)
        return eager(self.in_spec.build(list(leaves)))

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
                if guard_failure(exc) is None:
                    raise
                continue
            self._cache[key] = entry
            self._use_fast(entry)
            return result
        eager = getattr(self._retrace, "eager", None)
        if eager is not None and len(self._variants) > RECOMPILE_LIMIT:
            return self._eagerly(eager, leaves, broken)
        types = self._leaf_types(leaves)
        with self._lock:
            entry = self._entry(self._specialization(leaves, broken), types, key)
            alternatives.append(entry)
            self._cache[key] = entry
        self._use_fast(entry)
        return entry[0]._run(entry[1], leaves)


def retyped(graph: Graph, types: Sequence[Any], name: str) -> Graph:
    """A copy of ``graph`` for inputs of ``types`` (same ranks and dtypes, other sizes): every node's
    type is recomputed by its op's rule, so a size the program cannot take fails here, naming the node.
    """
    try:
        return specialize(graph, types, check_shapes=False)
    except GuardError:
        raise
    except (ShapeError, TypeError, ValueError) as exc:
        raise unfit(name, exc) from None


def _data_guard(graph: Graph) -> Any:
    """The first guard of `graph` on a value computed from array data (checked only while running), or
    None."""
    return next((n for n in graph if n.op == "prim.guard" and n.attrs.get("what")), None)


def stale_data(guard: Any, exc: Exception) -> GuardError:
    """A call whose shapes the program refuses, where a value it computed from data (an index) is a
    constant of the trace that the guard checks only while running: NumPy, at these shapes, may
    compute another value. As a broken guard, the function is traced again (NumPy then decides)."""
    broken = GuardError(guard_text(guard), guard.loc, guard.attrs["expected"], None, "shapes")
    broken.args = (f"a value computed from array data ({guard_text(guard)}, recorded at {guard.loc}) is a "
                   f"constant of the trace, and these shapes refuse it: {exc}",)
    return broken


def unfit(name: str, exc: Exception) -> ValueError:
    """The error for a call whose shapes the traced program cannot take (`exc` says which node refused
    them): a ValueError, and an IndexError too where NumPy's would be one (an index out of range)."""
    kind = IndexShapeError if isinstance(exc, IndexError) else ValueError
    return kind(f"{name}(): the arguments' shapes do not fit the traced program: {exc}")


def guard_failure(exc: BaseException) -> GuardError | None:
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

