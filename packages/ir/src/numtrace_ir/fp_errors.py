"""NumPy's floating-point error reports for a graph that a backend computes without NumPy.

NumPy checks the FPU status flags after each ufunc loop and reports each kind raised (divide, over,
under, invalid) as the caller's `np.geterr()` says: ignore, warn (``RuntimeWarning: divide by zero
encountered in log``), raise (``FloatingPointError``), call, print or log. Some references also warn
from their shapes alone (``np.mean`` over an empty axis: ``Mean of empty slice``). A traced function's
own ``np.errstate`` blocks are recorded on the nodes made inside them (`Node.errstate`).

A backend whose kernels set the same hardware flags gathers them over a call, as NumPy's bits
(`DIVIDE`, `OVER`, `UNDER`, `INVALID`), and hands them to its `Reporter`. Only when a flag is set
that the error state reports (or the graph's shapes warn), the graph runs again through its NumPy
references, whose reports are then NumPy's own: the same message, op name, category and count, and
the same ``FloatingPointError`` under ``np.errstate(all="raise")``. That run's results are dropped.
A flag set where NumPy sets none (a kernel computing a lane NumPy does not) costs that run and says
nothing. Nodes the backend itself ran through their NumPy reference have reported already: the
rerun runs them quietly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import numpy as np

from numtrace_ir import registry
from numtrace_ir.types import TensorType

__all__ = ["DIVIDE", "INVALID", "OVER", "UNDER", "ErrstateWatch", "Reporter", "node_errstate", "report_kinds",
           "reported", "rerunnable", "set_by_graph", "shape_warnings"]

# NumPy's bits for the kinds, as its error callback receives them.
DIVIDE, OVER, UNDER, INVALID = 1, 2, 4, 8
_KINDS = (("divide", DIVIDE), ("over", OVER), ("under", UNDER), ("invalid", INVALID))

# NumPy 2 keeps its error state in a context variable (private, so optional): its object stays the same
# while nothing sets a new state, which makes `ErrstateWatch.since` cheap.
_EXTOBJ: Any = getattr(getattr(getattr(np, "_core", None), "_ufunc_config", None), "_extobj_contextvar", None)
_QUIET = {"all": "ignore"}


def reported(flags: int) -> bool:
    """Whether the caller's current NumPy error state does anything for one of `flags`."""
    state: dict[str, Any] = dict(np.geterr())
    return any(flags & bit and state[kind] != "ignore" for kind, bit in _KINDS)


def node_errstate(node: Any) -> dict[str, Any] | None:
    """The ``np.errstate`` keywords the traced function set around `node` (`Node.errstate`), or None."""
    text = node.errstate
    if text is None:
        return None
    return dict(item.split("=") for item in text.split(","))


def set_by_graph(nodes: Iterable[Any]) -> int:
    """The kinds some of `nodes` reports whatever the caller's state (its own ``np.errstate``)."""
    bits = 0
    for node in nodes:
        for kind, mode in (node_errstate(node) or {}).items():
            if mode != "ignore":
                bits |= dict(_KINDS)[kind]
    return bits


def shape_warnings(nodes: Iterable[Any]) -> list[Any]:
    """Those of `nodes` (concrete types) whose reference warns at these shapes whatever the data."""
    found = []
    for node in nodes:
        op = registry.get(node.op)
        if op.shape_warning is not None and op.shape_warning([v.type for v in node.inputs], node.attrs):
            found.append(node)
    return found


def rerunnable(graph: Any) -> bool:
    """Whether running `graph` again does nothing but compute: no random draw (it would advance the
    caller's generator) and no host call (it runs any Python function)."""
    return not any(node.op == "prim.host_call" or registry.get(node.op).nondeterministic
                   for node in graph.nodes)


_MESSAGES = {"divide": "divide by zero", "over": "overflow", "under": "underflow", "invalid": "invalid value"}


def report_kinds(flags: int, where: str = "a traced call") -> None:
    """NumPy's report of `flags` under the caller's state, naming `where` for the op: for a graph
    that cannot run again (`rerunnable`)."""
    state: dict[str, Any] = dict(np.geterr())
    for kind, bit in _KINDS:
        mode = state[kind]
        if not flags & bit or mode == "ignore":
            continue
        message = f"{_MESSAGES[kind]} encountered in {where}"
        if mode == "warn":
            warnings.warn(message, RuntimeWarning, stacklevel=3)
        elif mode == "raise":
            raise FloatingPointError(message)
        elif mode == "call":
            handler: Any = np.geterrcall()
            handler(kind, bit)
        elif mode == "print":
            print(f"Warning: {message}")
        elif mode == "log":
            log: Any = np.geterrcall()
            log.write(f"Warning: {message}\n")


class ErrstateWatch:
    """What a traced function sets in its own ``np.errstate``: made when tracing starts, `since()` is
    the `Node.errstate` text for an op recorded now (the kinds whose mode differs from the start), or
    None. Cheap while nothing was set: NumPy's state object is then the same one."""

    __slots__ = ("_entry", "_entry_state")

    def __init__(self) -> None:
        self._entry = _EXTOBJ.get() if _EXTOBJ is not None else None
        self._entry_state: dict[str, Any] = dict(np.geterr())

    def since(self) -> str | None:
        if _EXTOBJ is not None and _EXTOBJ.get() is self._entry:
            return None
        now: dict[str, Any] = dict(np.geterr())
        changed = [f"{kind}={now[kind]}" for kind, _ in _KINDS if now[kind] != self._entry_state[kind]]
        return ",".join(changed) or None


class Reporter:
    """NumPy's reports for one executable's calls: ``reporter(inputs, flags)`` after a call.

    `make_interpreter()` gives the executable's graph as a `numtrace_ir.interpreter.Interpreter`, made
    on the first report; `quiet` holds the positions of its nodes (in graph order) that the backend ran
    through their reference, which reported then. `always`: the graph warns at its shapes
    (`shape_warnings`), so every call runs the references. `loud`: the kinds some op reports in its own
    state (`set_by_graph`). A graph that cannot run again (`rerunnable`) reports the kinds alone, in
    the caller's state; so does an executable that wrote into its inputs (`writes_inputs`), as a run
    on their new contents would not raise the flags the call raised (``x /= 0`` leaves ``inf``, and
    ``inf / 0`` raises none). Those still say the shape warnings, from the warning ops' references run
    on zeros of the call's shapes."""

    __slots__ = ("_make", "_quiet", "_interpreter", "_rerun", "_writes_inputs", "always", "loud")

    def __init__(self, make_interpreter: Callable[[], Any], always: bool = False, loud: int = 0,
                 quiet: Collection[int] = (), writes_inputs: bool = False):
        self._make = make_interpreter
        self._quiet = tuple(quiet)
        self._interpreter: Any = None
        self._rerun = False
        self._writes_inputs = writes_inputs
        self.always = always
        self.loud = loud

    def __call__(self, inputs: Sequence[Any], flags: int) -> None:
        if not self.always and not flags & self.loud and not reported(flags):
            return
        if self._interpreter is None:
            interpreter = self._make()
            for k in self._quiet:
                interpreter.steps[k].errstate = _QUIET
            self._rerun = rerunnable(interpreter.graph)
            self._interpreter = interpreter
        if self._rerun and not self._writes_inputs:
            self._interpreter.run(*inputs)
            return
        if self.always:
            self._say_shape_warnings()
        report_kinds(flags)

    def _say_shape_warnings(self) -> None:
        """The shape warnings of the nodes the kernels compute, without running the graph: each such
        node's reference on read-only zeros of its input types (the shapes alone decide them)."""
        quiet = set(self._quiet)
        steps = [step for k, step in enumerate(self._interpreter.steps) if k not in quiet]
        warning = {id(node) for node in shape_warnings([step.node for step in steps])}
        for step in steps:   # each step's call runs from the user's line: NumPy's warning names it
            node = step.node
            if id(node) not in warning or not all(isinstance(v.type, TensorType) for v in node.inputs):
                continue
            args = [np.broadcast_to(np.zeros((), v.type.dtype), v.type.shape) for v in node.inputs]
            with np.errstate(all="ignore"):
                step.fn(*args, **step.attrs)
