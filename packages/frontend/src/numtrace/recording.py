"""Running a function on traced arrays: inputs in, graph out.

``record_function`` is the one place that turns example inputs into graph inputs,
runs the user's code under an active tracer, and turns what it returns into graph
outputs (applying the container rules: tuples always, lists with a warning under
``strict``, dicts only without ``strict``).
"""

from __future__ import annotations

import inspect
import types
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numtrace_ir import CallSpec, Graph, passes
from numtrace_ir.backend import plain_array

from .containers import (
    Const,
    DictSpec,
    Leaf,
    ScalarLeaf,
    SequenceSpec,
    Spec,
    build_tracked,
    changed_item,
    flatten,
    frozen_list_warning,
    frozen_lists,
    is_array,
    release,
    snapshot,
)
from .dispatch import freeze
from .errors import TracerWarning
from .interception import numpy_intercepted
from .output_views import find_views
from .proxy import TracedArray
from .scipy_fft import scipy_fft_traced
from .source import warn_at_user_line
from .traced_int import plain
from .tracer import Tracer
from .views import itself, layout_of


class Recording:
    """What one trace run produced: the graph and the structures needed to call it."""

    def __init__(self, graph: Graph, arg_names: list[str], in_spec: Spec, out_spec: Spec,
                 state_names: list[str], state_arrays: list[np.ndarray], mutated: list[int],
                 returned: list[tuple[int, int]], layouts: list | None = None, cse_merged: int = 0,
                 views: list[int] | None = None):
        self.graph = graph
        self.arg_names = arg_names
        self.in_spec = in_spec
        self.out_spec = out_spec
        self.state_names = state_names
        self.state_arrays = state_arrays
        # Graph input indices the function wrote into; their new values follow the outputs.
        self.mutated = mutated
        # (output position, graph input index): a written argument the function returns (``return w``
        # after ``w -= ...``), which a call returns as the caller's own array, as NumPy does.
        self.returned = returned
        # The arguments' layouts (`views.layout_of`) when a write went through a reshape, else None.
        self.layouts = layouts
        # Nodes the common-subexpression pass merged into equal earlier ones.
        self.cse_merged = cse_merged
        # Results NumPy returns as views of an argument or another result (`output_views.find_views`).
        self.views = views or []


def _parameters(func: Callable) -> list[inspect.Parameter]:
    """``inspect.signature(func)``'s parameters (none where it has no signature). A plain function's
    are remembered by its code object: computing a signature costs more than tracing a short function."""
    plain = type(func) is types.FunctionType and not hasattr(func, "__wrapped__") \
        and not hasattr(func, "__signature__")
    if plain:
        params = _PARAMETERS.get(func.__code__)
        if params is not None:
            return params
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        params = []
    if plain:
        _PARAMETERS[func.__code__] = params
    return params


_PARAMETERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def parameter_names(func: Callable, count: int, keywords: Mapping[str, Any] | None) -> list[str]:
    """Names for the traced arguments: the function's own parameter names where it has them."""
    params = _parameters(func)
    if keywords is not None:
        known = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in params)
        unknown = [k for k in keywords if k not in known]
        if unknown and not accepts_any and params:
            raise TypeError(f"example_kwarg_inputs names {unknown} that are not parameters of "
                            f"{getattr(func, '__name__', func)!r} (parameters: {[p.name for p in params]})")
        order = [p.name for p in params if p.name in keywords]
        return order + [k for k in keywords if k not in order]
    names: list[str] = []
    for p in params:
        if len(names) == count:
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names.extend(f"{p.name}_{i}" for i in range(count - len(names)))
    if len(names) < count and params and not any(p.kind is p.VAR_POSITIONAL for p in params):
        raise TypeError(f"{getattr(func, '__name__', func)!r} takes {len(names)} positional argument(s), "
                        f"but {count} example inputs were given")
    names.extend(f"arg{i}" for i in range(len(names), count))
    return names


def record_function(func: Callable, args: tuple, kwargs: Mapping[str, Any] | None, *, strict: bool,
                    state_names: Mapping[int, str] | None = None) -> Recording:
    """Trace ``func(*args)`` (or ``func(**kwargs)`` when given) into a new graph.

    ``state_names`` maps ``id(array)`` of module parameters/buffers to their dotted
    names: those arrays become graph inputs (after the arguments) when first read.
    """
    names = parameter_names(func, len(args), kwargs)
    values = [kwargs[n] for n in names] if kwargs is not None else list(args)
    leaves: list = []
    leaf_names: list = []
    specs = [flatten(v, is_array, name, leaves, leaf_names) for name, v in zip(names, values)]
    in_spec = SequenceSpec(tuple, specs)
    for name, spec in zip(names, specs):
        for where, frozen in frozen_lists(spec, name):
            warn_at_user_line(frozen_list_warning(f"Argument {where!r}", frozen), TracerWarning)
    tracer = Tracer(state_names or {})
    with tracer.active(), numpy_intercepted(), scipy_fft_traced():
        proxies = [tracer.add_input(n, np.asarray(plain_array(a, f"argument {n!r}")))
                   for n, a in zip(leaf_names, leaves)]
        for proxy, a in zip(proxies, leaves):   # a NumPy scalar argument is traced as one (its `**`...)
            proxy._scalar = isinstance(a, np.generic)
        rebuilt = [build_tracked(spec, proxies) for spec in specs]
        before = [snapshot(spec, arg) for spec, arg in zip(specs, rebuilt)]
        if kwargs is not None:
            result = func(**dict(zip(names, rebuilt)))
        else:
            result = func(*rebuilt)
        for snap in before:
            release(snap)
        if tracer.errstate.unrestored():
            raise NotImplementedError(
                "the traced function changed NumPy's error state with np.seterr and did not restore it; a "
                "call of the trace cannot change the caller's state as NumPy's would. Restore it before "
                "returning (old = np.seterr(...); ...; np.seterr(**old)), or use np.errstate")
        _refuse_changed_containers(names, specs, before)
        # Inputs (arguments, then module state) whose graph value is no longer the input's: written into.
        inputs = [*proxies, *(tracer.state_proxy(a) for a in tracer.state_arrays)]
        mutated = [i for i, p in enumerate(inputs) if p._graph_value(tracer) is not tracer.graph.inputs[i]]
        out_leaves: list = []
        out_spec = _output_spec(tracer, result, strict, out_leaves, bool(mutated))
        # A result that is an argument itself is the caller's array, as NumPy returns it.
        returned = [(pos, i) for pos, leaf in enumerate(out_leaves) for i in range(len(proxies))
                    if leaf is proxies[i]]
        skip = {pos for pos, _ in returned}
        memo: dict[int, Any] = {}
        values = [_view_of_base(tracer, p, memo) for pos, p in enumerate(out_leaves) if pos not in skip]
        tracer.graph.set_outputs(values + [inputs[i]._graph_value(tracer) for i in mutated])
        results, input_arrays = [p._concrete for p in out_leaves], [p._concrete for p in inputs]
    call_spec = CallSpec(num_args=len(proxies), num_results=len(values),
                         num_state=len(inputs) - len(proxies), written=tuple(mutated),
                         returned=tuple(returned))
    passes.dce(tracer.graph, keep_checks=True, unchecked=tracer.discarded)   # NumPy's shape checks stay
    merged = passes.cse(tracer.graph)   # a subexpression the code computes twice runs once, on every backend
    # (after CSE: a result read again from its base is one value with the reads of it other results make)
    views = find_views(tracer.graph, call_spec, results, input_arrays,
                       lambda pos: _result_name(out_spec, pos) or "output")
    layouts = [layout_of(np.asarray(a)) for a in leaves] if tracer.layout_dependent else None
    return Recording(tracer.graph, names, in_spec, out_spec, list(tracer.state_order),
                     list(tracer.state_arrays), mutated, returned, layouts, merged, views)


def _view_of_base(tracer: Tracer, array: Any, memo: dict[int, Any]) -> Any:
    """The graph value of result `array`; for a view NumPy made of a traced array (and that shares its
    memory), read again from its base's latest value, so that the graph relates the two as NumPy's
    arrays are related even after a write through the view (see output_views). `memo`: the value read
    per array, so that a view of another result reads that result's value (``r.T`` of a result ``r``)."""
    value = memo.get(id(array))
    if value is not None:
        return value
    parent, view = array._parent, array._view
    if parent is None or not hasattr(view, "read") or \
            not np.may_share_memory(array._concrete, parent._concrete):
        value = array._graph_value(tracer)
    else:
        base = tracer.wrap(_view_of_base(tracer, parent, memo), parent._concrete)   # (a view of a view)
        value = view.read(tracer, base, array._concrete)
    memo[id(array)] = value
    return value


def _refuse_changed_containers(names: list[str], specs: list[Spec], before: list[tuple]) -> None:
    """NumPy code that assigns into a list or dict argument changes the caller's container; a trace
    cannot replay that (its outputs are arrays), so such a function is refused rather than traced
    into calls that silently leave the caller's container as it was."""
    for name, spec, snap in zip(names, specs, before):
        where = changed_item(spec, snap, name)
        if where is not None:
            raise NotImplementedError(
                f"the traced function changed its argument {name!r} in place ({where} was assigned, added "
                "or removed); a trace cannot make that change in the caller's list or dict. Return the new "
                "values instead, or write into the argument's arrays (x[...] = value)")


def _output_spec(tracer: Tracer, result: Any, strict: bool, leaves: list, mutates: bool) -> Spec:
    if result is None:
        if mutates:  # a function that updates its arguments in place
            return Const(None)
        raise RuntimeError("the traced function returned nothing (None) and wrote into none of its "
                           "arguments; it must return an array or a tuple of arrays computed from its "
                           "inputs, or update its argument arrays in place")
    if not _holds(result, _is_array) and not (_holds(result, _is_number) and _guarded(tracer)) \
            and not _empty(result):
        raise RuntimeError(f"the traced function returned only Python values ({result!r:.100}); it must "
                           "return at least one array, or a Python number computed from the inputs' data")
    return _flatten_output(tracer, result, "output", strict, leaves, {})


def _empty(obj: Any) -> bool:
    """Whether `obj` is containers holding nothing (``()``: ``np.unstack`` of an empty axis, NumPy's
    own result, which a trace returns as it is)."""
    if isinstance(obj, (tuple, list)):
        return all(_empty(x) for x in obj)
    if isinstance(obj, dict):
        return all(_empty(x) for x in obj.values())
    return False


def _holds(obj: Any, is_leaf: Callable[[Any], bool]) -> bool:
    if isinstance(obj, (tuple, list)):
        return any(_holds(x, is_leaf) for x in obj)
    if isinstance(obj, dict):
        return any(_holds(x, is_leaf) for x in obj.values())
    return is_leaf(obj)


def _is_array(obj: Any) -> bool:
    return isinstance(obj, (TracedArray, np.ndarray, np.generic))


def _is_number(obj: Any) -> bool:
    return type(obj) in (bool, int, float, complex)


def _guarded(tracer: Tracer) -> bool:
    """Whether the trace holds only while guarded values stay as they were. Every conversion of traced
    data or sizes into a Python value is guarded, so a Python number the function returns is then fixed
    by those guards: returned as a constant, it is right for every call the guards let through (a call
    with other values traces again, or runs eagerly past the re-trace limit)."""
    return any(n.op == "prim.guard" for n in tracer.graph.nodes)


def _tuple_type(obj: tuple) -> type:
    """The container a returned tuple is rebuilt as: NumPy's namedtuples (``np.linalg.svd``'s
    ``SVDResult``) keep their type, other tuples are plain tuples."""
    kind = type(obj)
    numpy_result = hasattr(kind, "_fields") and kind.__module__.split(".")[0] == "numpy"
    return kind if numpy_result else tuple


def _result_name(spec: Spec, pos: int, where: str = "output") -> str | None:
    """How errors name flat result `pos` of output structure `spec` (``output[1]['a']``)."""
    if isinstance(spec, Leaf):
        return where if spec.index == pos else None
    children = list(zip(spec.keys, spec.children)) if isinstance(spec, DictSpec) else \
        list(enumerate(getattr(spec, "children", ())))
    for key, child in children:
        name = _result_name(child, pos, f"{where}[{key!r}]")
        if name is not None:
            return name
    return None


def _flatten_output(tracer: Tracer, obj: Any, where: str, strict: bool, leaves: list,
                    seen: dict) -> Spec:
    """`obj`'s structure, its arrays appended to `leaves`; an array returned twice (``return m, m``) is
    one leaf, so that a call returns one object twice, as NumPy does (`seen`: leaf index by id)."""
    if isinstance(obj, TracedArray) or issubclass(type(obj), (np.ndarray, np.generic)):
        scalar = obj._scalar if isinstance(obj, TracedArray) else isinstance(obj, np.generic)
        if isinstance(obj, TracedArray):
            obj = itself(obj)
        index = seen.get(id(obj))
        if index is None:
            # An array that never touched the inputs: the trace returns it as a constant.
            leaves.append(obj if isinstance(obj, TracedArray) else freeze(tracer, obj))
            index = seen[id(obj)] = len(leaves) - 1
        return ScalarLeaf(index) if scalar else Leaf(index)
    if isinstance(obj, tuple):
        return SequenceSpec(_tuple_type(obj), [
            _flatten_output(tracer, x, f"{where}[{i}]", strict, leaves, seen) for i, x in enumerate(obj)])
    if isinstance(obj, list):
        if strict:
            warn_at_user_line(
                f"The traced function returns a list ({where}). A list is mutable and its length may depend "
                "on the inputs; the trace records it as a fixed-length list. Return a tuple, or pass "
                "strict=False if the list's structure is constant.", TracerWarning)
        return SequenceSpec(list, [_flatten_output(tracer, x, f"{where}[{i}]", strict, leaves, seen)
                                for i, x in enumerate(obj)])
    if isinstance(obj, dict):
        if strict:
            raise RuntimeError(
                f"The traced function returns a dict ({where}). Dicts are only allowed as outputs with "
                "strict=False, when their keys do not depend on the inputs; or return a tuple.")
        for key in obj:
            if not isinstance(key, str):
                raise TypeError(f"{where}: output dict keys must be strings, got {key!r}")
        return DictSpec(list(obj), [_flatten_output(tracer, v, f"{where}[{k!r}]", strict, leaves, seen)
                                 for k, v in obj.items()])
    if _is_number(obj) and _guarded(tracer):
        return Const(obj)  # computed from guarded values (``float(x.sum())``, ``.item()``): see _guarded
    # A shape read (TracedInt, TracedFloat) is named as the Python number it is.
    number = plain(obj)
    kind = "int" if isinstance(number, int) else "float" if isinstance(number, float) else type(obj).__name__
    raise TypeError(f"{where} of the traced function is a {kind} ({obj!r:.60}); traced "
                    "functions may only return arrays and (nested) tuples of arrays (lists and dicts "
                    "with strict=False)")
