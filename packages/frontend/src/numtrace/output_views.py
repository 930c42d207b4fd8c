"""Results that NumPy returns as views of an argument or of another result (``return m, m[::2]``,
``return x.T``): a call returns them as views too, so that a later write through one is seen in the
other, as it would be with NumPy's results.

The graph computes every result as a fresh array. At trace time, each result whose memory overlaps an
argument's, module state's or another result's (in the eager NumPy run) is followed back through the
graph's view nodes (ops with an ``as_view``: basic indexing, reshape, transpose, ...) to that root: the
result is then a `views` entry ``(result position, root)``, the root a result position (``>= 0``) or an
input (``-1 - i``). Per call signature the chain is read from the specialized graph (its slice bounds
and shapes concrete) and replayed with NumPy's own view calls on the root the call returns, so that a
reshape is a view or a copy exactly as NumPy makes it for the caller's array. A result that overlaps
another but that no chain of view nodes leads to is refused at trace time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numtrace_ir import CallSpec, Graph, registry, specialize

__all__ = ["ViewSteps", "apply_views", "find_views", "view_steps"]

# (result position, root, [(as_view, out shape, attrs, dims, output index)] from the root outwards)
ViewSteps = list[tuple[int, int, list[tuple[Callable, tuple, dict, list, int]]]]


def _as_view(node: Any) -> Callable | None:
    op = node.attrs["op"] if node.op == "prim.dynamic" else node.op
    opdef = registry.get(op)
    return opdef.as_view if opdef is not None else None


def _chain(value: Any, stop: Callable[[Any], bool]) -> list | None:
    """The view nodes from graph value `value` back to the first value for which `stop` holds, as
    ``(node, output index)`` outermost first; None where a node on the way is no view op."""
    chain: list = []
    while not stop(value):
        node = value.node
        if node is None or not node.inputs or _as_view(node) is None:
            return None
        chain.append((node, node.outputs.index(value)))
        value = node.inputs[0]
    return chain


def _overlaps(a: np.ndarray, b: np.ndarray) -> bool:
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))  # type: ignore[arg-type]
    except np.exceptions.TooHardError:
        return True


def find_views(graph: Graph, results: Sequence[Any], result_values: Sequence[Any], inputs: Sequence[Any],
               input_values: Sequence[Any], returned: dict[int, int], where: Callable[[int], str]
               ) -> list[tuple[int, int, int]]:
    """``(result position, root, steps)`` for each result that NumPy returned sharing memory with an
    input or another result (`results`/`inputs`: the eager arrays; `result_values`/`input_values`:
    their current graph values; `returned`: results that are an input itself, by position).
    NotImplementedError naming the result for one that no chain of view nodes relates to its root."""
    roots: dict[Any, int] = {}
    for i, value in enumerate(input_values):
        roots.setdefault(graph.inputs[i], -1 - i)
        roots.setdefault(value, -1 - i)
    for pos, value in enumerate(result_values):
        if pos not in returned:
            roots.setdefault(value, pos)
    overlaps: dict[int, list[int]] = {}   # result position -> what it overlaps (results, -1 - input)
    for pos, array in enumerate(results):
        if pos not in returned:
            others = [(q, a) for q, a in enumerate(results) if q != pos and returned.get(q, q) == q]
            others += [(-1 - i, a) for i, a in enumerate(inputs)]
            partners = [q for q, other in others if _overlaps(array, other)]
            if partners:
                overlaps[pos] = partners
    chains: dict[int, tuple[int, int]] = {}   # result position -> (root, chain length)
    for pos in overlaps:
        value = result_values[pos]
        own = roots.get(value)
        chain = _chain(value, lambda v: v is not value and v in roots) if own == pos else []
        if chain is not None:
            chains[pos] = (roots[chain[-1][0].inputs[0]] if chain else roots[value], len(chain))

    def rooted_at(q: int, pos: int) -> bool:
        while q in chains and q != pos:
            q = chains[q][0]
        return q == pos

    for pos, partners in overlaps.items():
        # A result no view chain leads from is fine where all it overlaps are views of it.
        if pos not in chains and not all(rooted_at(q, pos) for q in partners):
            raise NotImplementedError(
                f"{where(pos)} of the traced function shares memory with another result or an argument "
                "(NumPy returns it as a view), but the trace cannot rebuild it as a view: it is not a chain "
                "of view operations (basic indexing, reshape, transpose, ...) of an argument or of another "
                "result. Return a copy (np.copy) or the arrays it is a view of")
    found = [(pos, root, length) for pos, (root, length) in chains.items()]
    # A root that is a view result itself is rebuilt first: its node comes earlier in the graph.
    order = {node: k for k, node in enumerate(graph.nodes)}
    return sorted(found, key=lambda f: order.get(result_values[f[0]].node, -1))


def view_steps(graph: Graph, spec: CallSpec, views: Sequence[tuple[int, int, int]], types: Sequence[Any]
               ) -> ViewSteps:
    """Each of `views`' chains for a call with input `types`: read from the graph specialized to them,
    its attrs and shapes concrete."""
    g = specialize(graph, list(types), check_shapes=False)
    items = spec.result_items
    steps: ViewSteps = []
    for pos, root, length in views:
        value = g.outputs[items[pos]]
        chain = []
        for _ in range(length):
            node = value.node
            as_view = _as_view(node)
            assert as_view is not None  # the traced graph's chain, node for node
            dims = []
            for extra in node.inputs[1:]:
                if extra.node is None or extra.node.op != "prim.Constant":
                    raise NotImplementedError(
                        f"{spec.name}(): a result is a view whose shape depends on array data "
                        f"({node.op} at {node.loc}); a trace cannot return it as NumPy's view")
                dims.append(extra.node.attrs["value"])
            attrs = dict(node.attrs)
            if node.op == "prim.dynamic":
                attrs = dict(attrs["attrs"])
            chain.append((as_view, tuple(value.type.shape), attrs, dims, node.outputs.index(value)))
            value = node.inputs[0]
        chain.reverse()
        steps.append((pos, root, chain))
    return steps


def apply_views(steps: ViewSteps, results: Sequence[Any], inputs: Sequence[Any], what: str) -> tuple:
    """The flat `results` with each view result rebuilt from its root, as NumPy's view calls give it."""
    out = list(results)
    for pos, root, chain in steps:
        array = out[root] if root >= 0 else np.asarray(inputs[-1 - root])
        for as_view, shape, attrs, dims, index in chain:
            view = as_view(array, shape, attrs, dims)
            if isinstance(view, (tuple, list)):
                view = view[index]
            if view is None or view.shape != shape:
                raise RuntimeError(f"{what}(): numtrace internal error: result {pos} could not be rebuilt "
                                   "as NumPy's view")
            array = view
        out[pos] = array
    return tuple(out)
