"""The public entry points: ``trace`` and ``trace_module``."""

from __future__ import annotations

import inspect
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
from numtrace_ir import GuardError

from .checker import Checker, clone, graph_diagnostics
from .errors import TracerWarning, TracingCheckError
from .interception import generators_traced
from .module import Module, state_kept
from .recording import Recording, record_function
from .source import warn_at_user_line
from .traced import TracedFunction
from .traced_module import TracedModule, module_tree
from .tracer import is_tracing


def _as_args(example_inputs: Any) -> tuple:
    """Example inputs as the argument tuple: a single array or dict is one argument."""
    if issubclass(type(example_inputs), (np.ndarray, np.generic, dict)):
        return (example_inputs,)
    if isinstance(example_inputs, tuple):
        return example_inputs
    if isinstance(example_inputs, list):
        return tuple(example_inputs)
    raise TypeError(f"example inputs must be an array, a dict, or a tuple of arguments, "
                    f"got {type(example_inputs).__name__}")


def _function_name(func: Any) -> str:
    name = getattr(func, "__name__", None) or type(func).__name__
    return name if name.isidentifier() else "traced"


def trace(func: Callable | Module, example_inputs: Any = None, *, check_trace: bool = True,
          check_inputs: Sequence[Any] | None = None, check_tolerance: float = 1e-5, strict: bool = True,
          example_kwarg_inputs: Mapping[str, Any] | None = None, backend: str = "cpu"
          ) -> TracedFunction | TracedModule:
    """Run ``func`` once on ``example_inputs``, record its array operations, check and return the trace.

    The function runs eagerly on traced arrays, so the traced run returns what the function
    returns; every NumPy operation on them becomes a node of a typed graph, with the source line
    that made it. Sizes read from inputs are recorded, so the result serves other shapes of the same
    ranks and dtypes; values read out of arrays into Python are frozen, with a ``TracerWarning``.

    Args:
        func: a function taking arrays (or nested tuples, lists and dicts of arrays), a ``Module``
            (its ``forward`` is traced, as by ``trace_module(func, {"forward": example_inputs})``),
            or a module's bound ``forward``. Another bound method is an error pointing to
            ``trace_module``; an already traced callable is returned unchanged with a warning.
        example_inputs: the arguments to trace with: a tuple of arguments (a list is read the same
            way), or a single array or dict as the only argument. Their dtypes and ranks become part
            of the trace; their shapes are those of the printed graph. Python scalars among them are
            baked in as constants.
        check_trace: trace the function a second time and compare (see ``check_inputs``): the
            outputs of the trace, the function and the second trace must agree, and both graphs
            must be the same program. Turn it off for slow functions or ones with side effects.
        check_inputs: a list of argument tuples (dicts with ``example_kwarg_inputs``) to check
            with instead of the example; give inputs that differ from it as real inputs will (other
            batch sizes, other values) so data-dependent code is found.
        check_tolerance: relative tolerance of the checker's output comparison, made in float64.
            Where the graph sums in another order than NumPy (reductions, products), the absolute
            tolerance also allows 64 machine epsilons of the output's largest magnitude.
        strict: refuse outputs that are not arrays or tuples of arrays: lists give a
            ``TracerWarning``, dicts an error. With ``False`` lists and dicts are returned as such.
        example_kwarg_inputs: the arguments by parameter name, instead of ``example_inputs``; the
            traced function then takes them positionally or by keyword. Exactly one of the two is
            given.
        backend: where the graph runs: ``"cpu"`` (the default), ``"reference"``, ``"triton"`` or
            any backend installed under the ``numtrace.backends`` entry points. ``.to(name)``
            moves the result to another one.

    Returns:
        A ``TracedFunction``, called like ``func``, or for a ``Module`` a ``TracedModule``. It
            compiles one executable per input signature (dtypes and shapes) on first use.

    Raises:
        TracingCheckError: the checker recorded another program (``"Graphs differed across
            invocations!"``, with a diff and both source lines), or a check run raised.
        ValueError: both or neither of ``example_inputs`` and ``example_kwarg_inputs`` were given, or
            the backend is unknown or unavailable.
        TypeError: ``func`` is not callable, or the inputs or outputs are not arrays and containers
            of them.
        RuntimeError: called while another trace is being recorded.

    Examples:
        ```python
        import numpy as np
        import numtrace as nt

        def gelu(x, scale):
            return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x ** 3))) * scale

        x = np.random.default_rng(0).standard_normal((8, 4)).astype(np.float32)
        scale = np.float32(2.0)
        traced = nt.trace(gelu, (x, scale), check_inputs=[(x[:3], scale)])
        print(traced.graph)
        bigger = np.ones((100, 4), np.float32)
        assert np.allclose(traced(bigger, scale), gelu(bigger, scale), rtol=1e-5)
        assert np.allclose(traced.to("reference")(x, scale), gelu(x, scale), rtol=1e-5)
        ```
    """
    if is_tracing():
        raise RuntimeError("numtrace.trace was called while a trace is being recorded; tracing inside a "
                           "traced function is not supported")
    if isinstance(func, (TracedFunction, TracedModule)):
        warn_at_user_line("The callable passed to numtrace.trace is already traced; returning it unchanged.",
                          TracerWarning)
        return func
    if (example_inputs is None) == (example_kwarg_inputs is None):
        raise ValueError("pass exactly one of example_inputs and example_kwarg_inputs")
    if example_kwarg_inputs is not None and not isinstance(example_kwarg_inputs, Mapping):
        raise TypeError(f"example_kwarg_inputs must be a dict of argument name -> value, "
                        f"got {type(example_kwarg_inputs).__name__}")
    module_options: dict[str, Any] = {"check_trace": check_trace, "check_tolerance": check_tolerance,
                                      "strict": strict, "backend": backend}
    if isinstance(func, Module):
        inputs = example_inputs if example_kwarg_inputs is None else dict(example_kwarg_inputs)
        return trace_module(func, {"forward": inputs}, check_inputs=_forward_checks(check_inputs),
                            _kwargs=example_kwarg_inputs is not None, **module_options)
    owner = getattr(func, "__self__", None)
    if isinstance(owner, Module) and inspect.ismethod(func):
        if func.__name__ != "forward":
            raise ValueError(f"trace() got the method {type(owner).__name__}.{func.__name__}; trace methods "
                             f"other than forward with trace_module(module, {{{func.__name__!r}: inputs}})")
        return trace(owner, example_inputs, check_inputs=check_inputs,
                     example_kwarg_inputs=example_kwarg_inputs, **module_options)
    if not callable(func):
        raise TypeError(f"trace() expects a function or a numtrace.Module, got {type(func).__name__}")
    call = _Call(example_inputs, example_kwarg_inputs)
    traced = _trace_once(func, call, strict, backend)
    if check_trace:
        checks = [_Call(c, None) if example_kwarg_inputs is None else _Call(None, c)
                  for c in check_inputs] if check_inputs is not None else [call]
        for check in checks:
            def retrace(c: _Call = check) -> TracedFunction:
                return _trace_once(func, c.cloned(), strict, backend)

            _check_one(func, traced, retrace, check, check_tolerance, "function")
    return traced


class _Call:
    """Example or check inputs of one call: positional (a tuple) or by keyword (a dict)."""

    def __init__(self, args: Any, kwargs: Mapping[str, Any] | None):
        self.args = _as_args(args) if kwargs is None else ()
        self.kwargs = dict(kwargs) if kwargs is not None else None

    def cloned(self) -> _Call:
        return _Call(clone(self.args), None) if self.kwargs is None else _Call(None, clone(self.kwargs))

    def apply(self, fn: Callable) -> Any:
        c = self.cloned()
        return fn(**c.kwargs) if c.kwargs is not None else fn(*c.args)


def _trace_once(func: Callable, call: _Call, strict: bool, backend: str) -> TracedFunction:
    with generators_traced(func):  # closed-over np.random.Generators: their draws are recorded
        rec = record_function(func, call.args, call.kwargs, strict=strict)

    def retrace(args: tuple) -> TracedFunction:
        again = _Call(args, None) if call.kwargs is None else _Call(None, dict(zip(rec.arg_names, args)))
        return _trace_once(func, again, strict, backend)

    def eager(args: tuple) -> Any:
        return func(*args) if call.kwargs is None else func(**dict(zip(rec.arg_names, args)))

    retrace.eager = eager  # type: ignore[attr-defined]  # past the re-trace limit (see TracedFunction)
    return _traced_function(rec, _function_name(func), backend, retrace)


def _traced_function(rec: Recording, name: str, backend: str,
                     retrace: Callable[[tuple], TracedFunction]) -> TracedFunction:
    return TracedFunction(rec.graph, name=name, arg_names=rec.arg_names, in_spec=rec.in_spec,
                          out_spec=rec.out_spec, backend=backend, state=rec.state_arrays,
                          state_names=rec.state_names, mutated=rec.mutated, returned=rec.returned,
                          retrace=retrace, layouts=rec.layouts, cse_merged=rec.cse_merged,
                          views=rec.views)


def _check_one(func: Callable, traced: TracedFunction, retrace: Callable[[], TracedFunction], call: _Call,
               tolerance: float, kind: str,
               fresh: Callable[[], AbstractContextManager] = nullcontext) -> None:
    """One round of the checker (see checker.py) for one set of check inputs. Each run (the trace, the
    function, the second trace) is made inside ``fresh()``, which for a module's method starts it from
    the module's state as it was (a method that updates a buffer would otherwise see the update of the
    run before it)."""
    try:
        with warnings.catch_warnings():
            # The trace warned about its untraceable code already: say it once, not again per check.
            warnings.simplefilter("ignore", TracerWarning)
            checked = retrace()
    except TracingCheckError:
        raise
    except Exception as exc:
        raise TracingCheckError(None, None, extra="encountered an exception while re-tracing the "
                                f"{kind} with test inputs.\nException:\n\t{type(exc).__name__}: {exc}"
                                ) from exc
    checker = Checker(kind, tolerance, traced.graph)
    retraces = traced.retraces
    with warnings.catch_warnings():
        # The trace re-traces for check inputs whose shapes break a guard; that is said once, below.
        warnings.filterwarnings("ignore", "numtrace: re-tracing", TracerWarning)
        with fresh():
            traced_outs = checker.run(lambda: call.apply(traced), "trace", traced.graph, checked.graph)
    broken: Any = _broken_guard(traced, call)
    if broken is None and traced.retraces > retraces:  # a guard on data broke while running
        data = [n.attrs["what"] for n in traced.graph.nodes if n.op == "prim.guard" and n.attrs.get("what")]
        broken = "the check inputs break a guard on data (" + "; ".join(data) + ")"
    with fresh():
        fn_outs = checker.run(lambda: call.apply(func), "Python function", traced.graph, checked.graph)
    if checker.compare(traced_outs, fn_outs, "Python function"):
        with fresh():
            check_outs = checker.run(lambda: call.apply(checked), "repeated trace", traced.graph,
                                     checked.graph)
        checker.compare(traced_outs, check_outs, "repeated trace")
    if broken is not None:
        # Another program for other shapes is expected: calls at such shapes trace again.
        warn_at_user_line(f"The {kind} was specialized to the example inputs' shapes or values: {broken}. "
                          "Calls with such inputs trace the Python function again.", TracerWarning)
        return
    graph_diff, constant_diff = graph_diagnostics(traced.graph, checked.graph)
    if graph_diff is not None or constant_diff is not None:
        raise TracingCheckError(graph_diff, constant_diff)


def _broken_guard(traced: TracedFunction, call: _Call) -> GuardError | None:
    """The guard of ``traced`` that the shapes of the check inputs ``call`` broke when the trace ran on
    them (its compile decided it, so nothing is specialized again here), if any."""
    c = call.cloned()
    try:
        leaves = traced._gather(c.args, c.kwargs or {})
    except Exception:
        return None  # a bad call: running the trace reported it
    return traced.broken_guard(leaves)


def _forward_checks(check_inputs: Sequence[Any] | None) -> list[dict] | None:
    return None if check_inputs is None else [{"forward": c} for c in check_inputs]


def trace_module(mod: Module, inputs: Mapping[str, Any], *, check_trace: bool = True,
                 check_inputs: Sequence[Mapping[str, Any]] | None = None, check_tolerance: float = 1e-5,
                 strict: bool = True, backend: str = "cpu", _kwargs: bool = False) -> TracedModule:
    """Trace the methods named in ``inputs`` (method name -> example inputs) of ``mod``.

    Parameters and buffers become graph inputs (tied ones once), not constants: the result shares
    the module's arrays, so ``load_state_dict`` on either changes its outputs without tracing again.
    The result has every traced method as an attribute, the submodule tree and the state, with the
    training flag frozen.

    Args:
        mod: the ``numtrace.Module`` whose methods are traced (put it in ``eval()`` mode first for
            deterministic dropout).
        inputs: method name -> example inputs of that method, each as ``trace``'s
            ``example_inputs`` (a tuple of arguments, or a single array or dict).
        check_trace: check every method as ``trace`` does; the module's state is restored after
            each check, so checking leaves no trace in it.
        check_inputs: a list of dicts like ``inputs`` to check with instead of the examples.
        check_tolerance: relative tolerance of the checker's output comparison.
        strict: as in ``trace``: lists and dicts among the outputs need ``strict=False``.
        backend: the backend every method runs on (``"cpu"`` by default).

    Returns:
        A ``TracedModule``; calling it calls the traced ``forward``.

    Raises:
        TracingCheckError: the checker found a method whose second trace is another program.
        AttributeError: ``inputs`` names a method the module does not have.
        TypeError: ``mod`` is not a ``Module``, or ``inputs`` is not a non-empty dict.

    Examples:
        ```python
        import numpy as np
        import numtrace as nt
        from numtrace import nn

        class Scorer(nt.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 2, seed=0)

            def forward(self, x):
                return self.proj(x)

            def score(self, x, target):
                return ((self.proj(x) - target) ** 2).mean()

        model = Scorer().eval()
        x, target = np.ones((3, 4), np.float32), np.zeros((3, 2), np.float32)
        traced = nt.trace_module(model, {"forward": x, "score": (x, target)})
        assert np.allclose(traced(x), model(x), atol=1e-6)
        assert np.isclose(traced.score(x, target), model.score(x, target), rtol=1e-5)
        assert traced.proj.weight is model.proj.weight   # shared state
        ```
    """
    if is_tracing():
        raise RuntimeError("numtrace.trace_module was called while a trace is being recorded")
    if not isinstance(mod, Module):
        raise TypeError(f"trace_module() expects a numtrace.Module, got {type(mod).__name__}")
    if not isinstance(inputs, Mapping) or not inputs:
        raise TypeError("trace_module() expects a non-empty dict of method name -> example inputs, "
                        f"got {type(inputs).__name__}")
    for name in inputs:
        if not isinstance(name, str) or not callable(getattr(mod, name, None)):
            raise AttributeError(f"{type(mod).__name__} has no method {name!r} to trace")
    traced = _trace_module_once(mod, inputs, strict, backend, _kwargs)
    if check_trace:
        rounds = check_inputs if check_inputs is not None else [inputs]
        for check in rounds:
            if not isinstance(check, Mapping):
                raise TypeError("check_inputs of trace_module must be dicts of method name -> inputs")
            for name, example in check.items():
                call = _Call(None, example) if _kwargs else _Call(example, None)
                with state_kept(mod):  # checking runs the method and its trace: neither may leave state
                    def retrace(n: str = name, e: Any = example) -> TracedFunction:
                        return _trace_module_once(mod, {n: clone(e)}, strict, backend, _kwargs)._methods[n]

                    _check_one(getattr(mod, name), traced._methods[name], retrace, call, check_tolerance,
                               f"method {name}", lambda: state_kept(mod))
    return traced


def _trace_module_once(mod: Module, inputs: Mapping[str, Any], strict: bool, backend: str,
                       kwargs: bool) -> TracedModule:
    state = OrderedDict(mod.state_dict())
    first_name: dict[int, str] = {}
    for name, array in state.items():
        first_name.setdefault(id(array), name)
    methods = {}
    for name, example in inputs.items():
        method = getattr(mod, name)
        with generators_traced(method):  # self.rng and the like: their draws are recorded
            if kwargs:
                rec = record_function(method, (), dict(example), strict=strict, state_names=first_name)
            else:
                rec = record_function(method, _as_args(example), None, strict=strict, state_names=first_name)

        def retrace(args: tuple, name: str = name, rec: Recording = rec) -> TracedFunction:
            again = dict(zip(rec.arg_names, args)) if kwargs else args
            return _trace_module_once(mod, {name: again}, strict, backend, kwargs)._methods[name]

        methods[name] = _traced_function(rec, name, backend, retrace)
    return TracedModule(type(mod).__name__, methods, state, module_tree(mod), mod.training)
