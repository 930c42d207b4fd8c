"""The trace checker: re-trace with check inputs, compare graphs, constants and outputs.

Graphs are compared in a shape-free canonical text (value numbers, ops, attributes,
no types, no locations, array constants by dtype only), so check inputs of other
shapes compare equal exactly when the same program was recorded; array constants
are then compared by value, and outputs of the trace, the Python function and the
re-trace are compared in float64 (complex128) within ``check_tolerance``.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numtrace_ir import registry
from numtrace_ir.attrs import format_attr

from .errors import TracerWarning, TracingCheckError, indent
from .source import warn_at_user_line


def _attr_text(value: Any) -> str:
    if issubclass(type(value), np.ndarray):
        return f"array<{value.dtype}>"
    if isinstance(value, tuple):
        return "(" + ", ".join(_attr_text(v) for v in value) + (",)" if len(value) == 1 else ")")
    return format_attr(value)


def _graph_lines(graph: Any) -> tuple[list[str], list[Any]]:
    """One shape-free line per node (and the inputs/return lines), with the nodes in the same order."""
    number: dict[Any, int] = {}
    for v in graph.inputs:
        number[v] = len(number)
    lines = [f"graph({', '.join(f'%{number[v]}' for v in graph.inputs)}):\n"]
    nodes = list(graph.nodes)
    for node in nodes:
        for v in node.outputs:
            number[v] = len(number)
        outs = ", ".join(f"%{number[v]}" for v in node.outputs)
        attrs = node.attrs
        attr_text = "[" + ", ".join(f"{k}={_attr_text(a)}" for k, a in attrs.items()) + "]" if attrs else ""
        ins = ", ".join(f"%{number[v]}" for v in node.inputs)
        lines.append(f"  {outs} = {node.op}{attr_text}({ins})\n")
    lines.append(f"  return ({', '.join(f'%{number[v]}' for v in graph.outputs)})\n")
    return lines, nodes


def graph_diagnostics(traced: Any, checked: Any) -> tuple[str | None, str | None]:
    """The graph diff section and the constant diff section (None where they agree)."""
    mod_lines, mod_nodes = _graph_lines(traced)
    check_lines, check_nodes = _graph_lines(checked)
    graph_diff = None
    if mod_lines != check_lines:
        graph_diff = "Graph diff:\n" + indent("".join(difflib.ndiff(mod_lines, check_lines))) + "\n"
        for i in range(max(len(mod_nodes), len(check_nodes))):
            node_a = mod_nodes[i] if i < len(mod_nodes) else None
            node_b = check_nodes[i] if i < len(check_nodes) else None
            line_a = mod_lines[i + 1] if node_a is not None else ""
            line_b = check_lines[i + 1] if node_b is not None else ""
            if line_a == line_b:
                continue
            graph_diff += "First diverging operator:\n"
            node_diff = difflib.ndiff([line_a] if line_a else [], [line_b] if line_b else [])
            graph_diff += "Node diff:\n" + indent("".join(node_diff)) + "\n"
            if node_a is not None and node_a.loc:
                graph_diff += "Trace source location:\n" + indent(node_a.loc) + "\n"
            if node_b is not None and node_b.loc:
                graph_diff += "Check source location:\n" + indent(node_b.loc) + "\n"
            break
    constant_diff = None
    for line_a, node_a, node_b in zip(mod_lines[1:], mod_nodes, check_nodes):
        if node_a.op != node_b.op:
            break  # the graphs have diverged already
        if node_a.op != "prim.Constant":
            continue
        a, b = node_a.attrs.get("value"), node_b.attrs.get("value")
        if not issubclass(type(a), np.ndarray) or not issubclass(type(b), np.ndarray):
            continue
        if a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            continue
        constant_diff = "Node:\n" + indent(line_a)
        if node_a.loc:
            constant_diff += "Source location:\n" + indent(node_a.loc) + "\n"
        constant_diff += (f"Comparison: traced constant {a.dtype}{list(a.shape)} {_preview(a)} vs check "
                          f"constant {b.dtype}{list(b.shape)} {_preview(b)}\n")
        break
    return graph_diff, constant_diff


def _preview(a: np.ndarray) -> str:
    return np.array2string(a.ravel()[:6], precision=6, separator=", ") + ("..." if a.size > 6 else "")


def clone(obj: Any) -> Any:
    """A deep copy of check inputs, so that in-place writes of one run do not leak into the next."""
    return copy.deepcopy(obj)


def _arrays(outputs: Any) -> list[np.ndarray]:
    leaves: list = []

    def walk(x: Any) -> None:
        if issubclass(type(x), (np.ndarray, np.generic)):
            leaves.append(np.asarray(x))
        elif isinstance(x, (tuple, list)):
            for y in x:
                walk(y)
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)

    walk(outputs)
    return leaves


class Checker:
    """Checks one traced callable (a function or one method of a module) against its source."""

    def __init__(self, name: str, tolerance: float, graph: Any):
        self.name = name
        self.tolerance = tolerance
        self.graph = graph  # the trace under check: its nondeterministic nodes are listed on mismatch
        self.warned_nondeterministic = False
        self.sums = _sums_reassociated(graph)

    def run(self, fn: Callable[[], Any], what: str, traced_graph: Any, check_graph: Any) -> list[np.ndarray]:
        try:
            return _arrays(fn())
        except Exception as exc:
            graph_diff, constant_diff = graph_diagnostics(traced_graph, check_graph)
            raise TracingCheckError(
                graph_diff, constant_diff,
                extra=f"encountered an exception while running the {what} with test inputs.\nException:\n"
                      + indent(f"{type(exc).__name__}: {exc}"),
            ) from exc

    def compare(self, original: Sequence[np.ndarray], reference: Sequence[np.ndarray], what: str) -> bool:
        ok = True
        if len(original) != len(reference):
            self._warn_nondeterministic()
            warn_at_user_line(f"The traced {self.name} returned {len(original)} arrays, the {what} "
                              f"{len(reference)}.", TracerWarning)
            return False
        for i, (a, b) in enumerate(zip(original, reference)):
            error = compare_arrays(a, b, self.tolerance, sums=self.sums)
            if error is not None:
                self._warn_nondeterministic()
                warn_at_user_line(
                    f"Output nr {i + 1}. of the traced function does not match the corresponding output "
                    "of the "
                    f"{what}. Detailed error:\n{error}", TracerWarning)
                ok = False
        return ok

    def _warn_nondeterministic(self) -> None:
        if self.warned_nondeterministic:
            return
        self.warned_nondeterministic = True
        nodes = [n for n in self.graph.nodes if _is_nondeterministic(n.op)]
        if nodes:
            listing = "\n".join(indent(f"{n.op} at {n.loc or 'unknown location'}") for n in nodes[:20])
            warn_at_user_line(
                "Trace had nondeterministic nodes. Did you forget to call .eval() on your model? Nodes:\n"
                f"{listing}\nThis may cause errors in trace checking. To disable trace checking, pass "
                "check_trace=False to numtrace.trace()", TracerWarning)


def _sums_reassociated(graph: Any) -> bool:
    """Whether the graph holds an op whose backend may add in another order than NumPy (a reduction,
    a product, a scan, a transform): its float outputs then differ from NumPy's by rounding that
    grows with the magnitude of the summed terms, not of each output."""
    for node in graph.nodes:
        try:
            if registry.get(node.op).kind in _SUMMING_KINDS:
                return True
        except KeyError:
            continue
    return False


_SUMMING_KINDS = frozenset({"reduction", "contraction", "other"})


def _is_nondeterministic(op: str) -> bool:
    try:
        return bool(registry.get(op).nondeterministic)
    except KeyError:
        return False


# Absolute tolerance by dtype (the less precise of the two compared arrays wins); exact for ints.
_ATOL = {"e": 1e-3, "f": 1e-5, "F": 1e-5, "d": 1e-7, "D": 1e-7}
# Where sums are reassociated, an output near zero after cancellation carries the rounding of its
# largest terms: the absolute tolerance grows to this many machine epsilons of the array's largest
# finite magnitude (a divergent trace differs by far more than that).
_SUM_EPSILONS = 64


def compare_arrays(a: np.ndarray, b: np.ndarray, rtol: float, *, sums: bool = False) -> str | None:
    """None when ``a`` and ``b`` agree in float64 (complex128) within ``rtol``; otherwise the reason.
    ``sums``: the arrays come from reassociated sums (see `_sums_reassociated`)."""
    if a.shape != b.shape:
        return f"shapes differ: {a.shape} vs {b.shape}"
    wide = np.complex128 if (a.dtype.kind == "c" or b.dtype.kind == "c") else np.float64
    x, y = a.astype(wide), b.astype(wide)
    atol = max(_ATOL.get(np.dtype(a.dtype).char, 0.0), _ATOL.get(np.dtype(b.dtype).char, 0.0))
    if sums and atol and y.size:
        finite = np.abs(y[np.isfinite(y)])
        if finite.size:
            eps = max(float(np.finfo(t).eps) for t in (a.dtype, b.dtype) if t.kind in "fc")
            atol = max(atol, _SUM_EPSILONS * eps * float(finite.max()))
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
    if close.all():
        return None
    bad = np.argwhere(~close) if a.ndim else np.zeros((1, 0), dtype=np.intp)
    first = tuple(int(i) for i in bad[0])
    count = int((~close).sum())
    return (f"Not within tolerance rtol={rtol} atol={atol} at input{list(first)} "
            f"({x[first]} vs. {y[first]}) and {count - 1} other locations "
            f"({100.0 * count / close.size:.2f}%)")
