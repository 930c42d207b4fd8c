"""The reference interpreter: runs a graph node by node with each op's NumPy reference.

It is the ``reference`` backend's executable, the test oracle (`numtrace_ir.testing.run_reference`),
and where the CPU backend takes the call of a node it has no kernel for (`reference_call`). Like an fx
Interpreter it keeps values in slots, frees each value after its last use, and on failure names the
node and where the user wrote it (`numtrace_ir.errors`).
"""

from __future__ import annotations

import builtins
import functools
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from numtrace_ir import registry
from numtrace_ir.backend import plain_array
from numtrace_ir.errors import execution_error
from numtrace_ir.exactness import data_guard_cone
from numtrace_ir.fp_errors import node_errstate
from numtrace_ir.ops import host
from numtrace_ir.ops.rules import numpy_value
from numtrace_ir.registry import Attr, Input, Inputs

__all__ = ["Interpreter", "at_location", "reference_call", "write_outputs"]


def _constant(value: Any) -> Any:
    """The reference of prim.Constant: the stored value itself (copied on output)."""
    return value


def reference_call(node: Any) -> tuple[Callable, dict]:
    """(fn, attrs) with ``fn(*inputs, **attrs)`` computing `node` as its op's NumPy reference does.

    When the op takes plain positional inputs its implementation is called directly, with the attrs
    normalized once here: `OpDef.reference` re-normalizes on every call, which costs more than a view.
    `UnknownOpError` for an op the registry does not know."""
    if node.op == "prim.Constant":
        return _constant, {"value": node.attrs["value"]}
    op = registry.get(node.op)
    if node.op == "prim.host_call":  # the function resolved once, not per run
        return host.prepared(op.normalize_attrs(dict(node.attrs))), {}
    on_scalars = getattr(op.impl, "on_scalars", None)   # NumPy's scalar math: `OnScalars`
    if on_scalars is not None:
        return OnScalars(on_scalars(op.normalize_attrs(dict(node.attrs)))), {}
    if node.op == "prim.check":   # a dead scalar operator's check warns at the user's line too
        target = registry.get(node.attrs["op"])
        on_scalars = getattr(target.impl, "on_scalars", None)
        if on_scalars is not None:
            return OnScalars(on_scalars(target.normalize_attrs(dict(node.attrs["attrs"]))), check=True), {}
    params = op.schema
    if any(isinstance(p, Inputs) or (isinstance(p, Input) and p.optional) for p in params):
        return op.reference, dict(node.attrs)
    direct = getattr(op.impl, "__wrapped__", None)   # `rules.positional`'s callable (a ufunc)
    forwards = getattr(op.impl, "forwards", None)   # `rules.forwarding`'s (drop, least rank)
    if direct is not None and forwards is not None:
        drop, min_rank = forwards
        rank = getattr(node.inputs[0].type, "shape", ())
        if len(node.inputs) == 1 and len(rank) >= min_rank:
            attrs = op.normalize_attrs(dict(node.attrs))
            return direct, {k: v for k, v in attrs.items() if k not in drop}
    elif direct is not None and not any(isinstance(p, Attr) for p in params):
        return direct, {}   # NumPy's warnings then come from the caller's frame (`_called_at`)
    names = [p.name for p in params if isinstance(p, Input)]
    impl = op.impl

    def call(*inputs: Any, **kw: Any) -> Any:
        return impl(**dict(zip(names, inputs)), **kw)

    return call, op.normalize_attrs(dict(node.attrs))


def _view_of(node: Any) -> Callable:
    """``x[key]`` of a static key as NumPy's view, not the reference's copy: where a guard on data reads
    what is computed from it, the layout matters (NumPy's loops for a strided and for a contiguous
    operand may differ in the last bit: `arctan2` of ``x[::-1]``), and the guard needs NumPy's bits."""
    as_view, attrs = registry.get(node.op).as_view, dict(node.attrs)
    assert as_view is not None   # np.getitem has one
    return lambda a: as_view(a, None, attrs, [])


@functools.lru_cache(maxsize=4096)
def _called_at(loc: str, template: Callable | None = None) -> Callable | None:
    """A function ``call(fn, *args, **kwargs)`` (or `template`, a one-line function) whose frame is at
    `loc` (``"file:line"``) in that file's module, or None for a `loc` that names no line. NumPy warns
    from the frame that calls it ("divide by zero encountered in log"): calling an op's NumPy function
    through it issues the warning at the user's line, in the module's once-per-location registry, as the
    untraced program would."""
    path, sep, line = loc.rpartition(":")
    if not sep or not line.isdigit() or not 0 < int(line) < 2**31:
        return None
    module = next((m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == path), None)
    # Its own builtins: C code importing a module lazily from this frame (NumPy raising an out-of-bounds
    # Python int's OverflowError) reads the frame's globals' __builtins__, a KeyError without them.
    namespace: dict[str, Any] = {"__name__": module.__name__ if module is not None else path,
                                 "__builtins__": builtins}
    namespace["__warningregistry__"] = vars(module).setdefault("__warningregistry__", {}) \
        if module is not None else {}
    code = (template or _call).__code__.replace(co_filename=path, co_firstlineno=int(line))
    return types.FunctionType(code, namespace, "call")


def _call(fn: Callable, *args: Any, **kwargs: Any) -> Any: return fn(*args, **kwargs)


def _call_on(convert: Callable, fn: Callable, *args: Any) -> Any: return fn(*map(convert, args))


def _check_on(convert: Callable, fn: Callable, *args: Any) -> bool: return (fn(*map(convert, args)), True)[1]


class OnScalars:
    """The reference of an op that is a Python operator of NumPy scalars (np.scalar_operator: its impl's
    ``on_scalars(attrs)`` gives the C operator, ``operator.add``): the operator on the inputs as NumPy
    scalars (0-d arrays stand for them). `at_location` calls the operator itself from the node's line, so
    NumPy's scalar math warns there ("overflow encountered in scalar add"), not in the op's module. With
    `check`, the ``prim.check`` of such an op's dead node: the operator runs (it warns, it raises under
    np.errstate) and the check gives True, as `prim.check`'s reference."""

    __slots__ = ("operator", "check")

    def __init__(self, operator: Callable, check: bool = False) -> None:
        self.operator = operator
        self.check = check

    def __call__(self, *args: Any) -> Any:
        result = self.operator(*map(numpy_value, args))
        return True if self.check else result


def at_location(fn: Callable, node: Any) -> Callable:
    """`fn` called from the node's source line (`_called_at`), where it has one."""
    if not isinstance(node.loc, str) or fn is _constant:
        return fn
    if type(fn) is OnScalars:
        call = _called_at(node.loc, _check_on if fn.check else _call_on)
        return fn if call is None else functools.partial(call, numpy_value, fn.operator)
    call = _called_at(node.loc)
    return fn if call is None else functools.partial(call, fn)


class _Step:
    """One node's work: its call, where its inputs live, where its outputs go, what dies after it."""

    __slots__ = ("node", "fn", "attrs", "inputs", "outputs", "free", "errstate")

    def __init__(self, node: Any, fn: Callable, attrs: dict, inputs: list, outputs: list) -> None:
        self.node = node
        self.fn = fn
        self.attrs = attrs
        self.inputs = inputs
        self.outputs = outputs
        self.free: list[int] = []
        self.errstate = node_errstate(node)   # the traced function's own np.errstate around the op


class Interpreter:
    """A graph as an executable (see `numtrace_ir.backend.Executable`): every output a fresh array."""

    def __init__(self, graph: Any):
        self.graph = graph
        slot: dict[Any, int] = {}
        for value in graph.inputs:
            slot[value] = len(slot)
        self.num_inputs = len(slot)
        self.steps: list[_Step] = []
        cone = data_guard_cone(graph)
        for node in graph.nodes:
            inputs = [slot[v] for v in node.inputs]
            for value in node.outputs:
                slot[value] = len(slot)
            fn, attrs = reference_call(node)
            if id(node) in cone and node.op == "np.getitem" and len(node.inputs) == 1:
                fn, attrs = _view_of(node), {}
            if fn is _constant:
                inputs = []
            self.steps.append(_Step(node, at_location(fn, node), attrs, inputs,
                                    [slot[v] for v in node.outputs]))
        self.output_slots = [slot[v] for v in graph.outputs]
        self.num_slots = len(slot)
        # A slot is freed after the last step that reads it, unless it is a graph output.
        last_use: dict[int, int] = {}
        for index, step in enumerate(self.steps):
            for s in step.inputs:
                last_use[s] = index
        keep = set(self.output_slots)
        for s, index in last_use.items():
            if s not in keep:
                self.steps[index].free.append(s)
        # Outputs that are not freshly computed (inputs, constants, repeats) are copied; computed ones
        # are copied when they share memory with an input, a constant or an earlier output (a reference
        # may return a view: np.reshape, np.transpose...), checked per call (see __call__).
        fresh: set[int] = set()
        self.copy_output: list[bool] = []
        computed = {s for step in self.steps if step.fn is not _constant for s in step.outputs}
        for s in self.output_slots:
            self.copy_output.append(s not in computed or s in fresh)
            fresh.add(s)
        self.constants = [np.asarray(step.attrs["value"]) for step in self.steps if step.fn is _constant
                          and isinstance(step.attrs["value"], (np.ndarray, np.generic))]
        # Constants are in every call's environment from the start (a copy of this template), not
        # steps: a constant reads nothing and is read where it lives.
        self._template: list[Any] = [None] * self.num_slots
        for step in self.steps:
            if step.fn is _constant:
                self._template[step.outputs[0]] = step.attrs["value"]
        self._computing = [step for step in self.steps if step.fn is not _constant]

    def run(self, *inputs: Any) -> list:
        """The graph's outputs as the references return them (possibly views of inputs or constants)."""
        env = self._template.copy()
        env[: self.num_inputs] = inputs
        for step in self._computing:
            try:
                if step.errstate is None:
                    result = step.fn(*[env[s] for s in step.inputs], **step.attrs)
                else:
                    with np.errstate(**step.errstate):
                        result = step.fn(*[env[s] for s in step.inputs], **step.attrs)
            except Exception as exc:
                raise execution_error(step.node, exc) from exc
            if len(step.outputs) == 1:
                env[step.outputs[0]] = result
            else:
                for s, r in zip(step.outputs, result):
                    env[s] = r
            for s in step.free:
                env[s] = None
        return [env[s] for s in self.output_slots]

    def __call__(self, *inputs: Any, out: Sequence[np.ndarray] | None = None) -> tuple:
        if any(type(a) is not np.ndarray and isinstance(a, np.ndarray) for a in inputs):
            inputs = tuple(plain_array(a, f"input {i}") for i, a in enumerate(inputs))
        # Contract: every output is a fresh array, sharing memory with no input and no other output.
        held = [a for a in inputs if isinstance(a, np.ndarray)] + self.constants
        results = []
        for value, copy in zip(self.run(*inputs), self.copy_output):
            value = np.asarray(value)
            if copy or any(np.may_share_memory(value, h) for h in held):
                value = np.array(value, copy=True)
            results.append(value)
            held.append(value)
        if out is not None:
            return write_outputs(results, out)
        return tuple(results)

    def stats(self) -> dict:
        return {"backend": "reference", "nodes": len(self.steps)}

    def explain(self) -> str:
        """The node list: each node runs as its op's NumPy reference, one after the other."""
        from numtrace_ir.printer import format_node, value_names

        names = value_names(self.graph)
        sig = ", ".join(f"%{names[v]} : {v.type}" for v in self.graph.inputs)
        lines = [f"reference executable for ({sig})",
                 f"  {len(self.steps)} nodes, each run as its op's NumPy reference (no fusion, no planning)"]
        for k, step in enumerate(self.steps, 1):
            lines.append(f"  {k}: {format_node(step.node, True)}")
        return "\n".join(lines) + "\n"


def write_outputs(results: Sequence[np.ndarray], out: Sequence[np.ndarray]) -> tuple:
    """Copy `results` into the caller's `out` arrays (same count, dtypes and shapes) and return them."""
    if len(out) != len(results):
        raise ValueError(f"out= needs {len(results)} arrays, got {len(out)}")
    for i, (r, o) in enumerate(zip(results, out)):
        if not isinstance(o, np.ndarray) or o.shape != r.shape or o.dtype != r.dtype:
            raise ValueError(f"out[{i}] must be an array of dtype {r.dtype} and shape {r.shape}")
        np.copyto(o, r)
    return tuple(out)
