"""Results that NumPy returns as views of an argument or of another result (``return m, m[::2]``,
``return x.T``, ``return np.real(z)``): a call returns them as views too, so that a later write through
one is seen in the other, as it would be with NumPy's results.

The graph computes every result as a fresh array. At trace time, each result whose memory overlaps an
argument's, module state's or another result's (in the eager NumPy run) is followed back through the
graph to those roots (the arguments and the other results, a view among them rebuilt first, so that a
view of a reshape that copied is a view of that copy, as NumPy's is): the nodes between are its replay,
NumPy's own calls on the roots (an op's ``as_view`` where it has one). Per call signature the replay is
read from the specialized graph (its slice bounds and shapes concrete) and run on the roots the call
returns, so that a reshape is a view or a copy exactly as NumPy makes it for the caller's array. The
replay is checked when tracing: run on the eager roots it must give NumPy's values sharing the memory
NumPy's result shares; a result for which it does not is refused at trace time, naming it.

Whether NumPy's result shares memory depends on the call: a reshape or ``np.ascontiguousarray`` of an
argument is a view at one layout and a copy at another, and an empty slice shares no memory at all. So a
result computed from a root by view calls only is replayed too, though it shares no memory at the traced
call (its replay then shares none either): at a call where NumPy's is a view, the trace's is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numtrace_ir import CallSpec, Graph, TensorType, registry, specialize

from . import codegen

__all__ = ["apply_views", "find_views", "view_steps"]

# (result position, replay(results, inputs) -> the view), in graph order: each reads the arguments and the
# other results, a view among them rebuilt before it (NumPy's ``r.T`` of a reshape ``r`` that copied is a
# view of that copy, not a second copy).
Replays = list[tuple[int, Callable[[Sequence[Any], Sequence[Any]], Any]]]

_REFUSAL = ("{what} of the traced function shares memory with {other} (NumPy returns a view), but the "
            "trace cannot rebuild it as NumPy's view ({why}). Return a copy (np.copy) of it")


# NumPy calls that return their argument's memory where its layout or dtype allows, beside the ops with an
# `as_view`: ``np.real`` of a real array, ``np.ascontiguousarray`` of a contiguous one, ``np.diag`` of a
# matrix.
_MAY_VIEW = frozenset({"np.real", "np.imag", "np.ascontiguousarray", "np.atleast_1d", "np.atleast_2d",
                       "np.atleast_3d", "np.diag", "np.broadcast_arrays"})


class _NotAView(Exception):
    """The replay of a result cannot be made: the reason."""


def _overlaps(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))  # type: ignore[arg-type]
    except np.exceptions.TooHardError:
        return True


def _replay(value: Any, roots: dict[Any, int]) -> Callable[[Sequence[Any], Sequence[Any]], Any]:
    """A function of ``(results, inputs)`` computing graph value `value` from the `roots` (graph value
    -> result position, or ``-1 - input``) with NumPy's calls, as generated Python source."""
    order: list = []
    seen: set = set()

    reads: set[int] = set()

    def visit(v: Any) -> None:
        if v in roots:
            if roots[v] >= 0:
                reads.add(roots[v])
            return
        if v in seen:
            return
        node = v.node
        if node is None:
            raise _NotAView(f"it reads graph input {v.name!r}")
        if node.op == "prim.host_call" or registry.get(node.op).nondeterministic:
            raise _NotAView(f"{node.op} is no NumPy view call")
        for u in node.inputs:
            visit(u)
        seen.add(v)
        if node not in order:
            order.append(node)

    visit(value)
    names: dict[Any, str] = {}
    for v, root in roots.items():
        names[v] = f"results[{root}]" if root >= 0 else f"inputs[{-1 - root}]"
    constants: dict[str, np.ndarray] = {}
    views: list = []
    lines = ["def replay(results, inputs):"]
    for k, node in enumerate(order):
        args = [names[u] for u in node.inputs]
        as_view = registry.get(node.op).as_view
        viewed = as_view is not None and node.op != "prim.dynamic"
        if viewed:
            scalars = [u for u in node.inputs[1:]]
            if any(u.node is None or u.node.op != "prim.Constant" for u in scalars):
                raise _NotAView(f"the shape of its {node.op} depends on array data")
            dims = [u.node.attrs["value"] for u in scalars]
            views.append((as_view, tuple(node.outputs[0].type.shape) if len(node.outputs) == 1 else None,
                          dict(node.attrs), dims))
            call = f"VIEWS[{len(views) - 1}]({args[0]})"
        else:
            call = codegen.call_text(node, args, constants)
            if call.startswith("op("):
                raise _NotAView(f"{node.op} is no NumPy call")
        if len(node.outputs) == 1:
            names[node.output] = f"v{k}"
            # A function of several results (np.broadcast_arrays) gives a sequence of one.
            lines.append(f"    v{k} = {call}" if viewed else f"    v{k} = ONE({call})")
        else:
            lines.append(f"    v{k} = {call}")
            for j, out in enumerate(node.outputs):
                names[out] = f"v{k}[{j}]"
    lines.append(f"    return {names[value]}")
    namespace: dict[str, Any] = {"np": np, "op": codegen.op, "CONSTANTS": constants,
                                 "VIEWS": [_view_call(*v) for v in views], "ONE": _one}
    exec("\n".join(lines) + "\n", namespace)   # the program's own nodes, rendered by `codegen`
    replay = namespace["replay"]
    replay.reads = reads   # the result positions it reads
    return replay


def _by_view_calls(value: Any, roots: dict[Any, int]) -> bool:
    """Whether graph value `value` is computed from roots through view calls only (NumPy's result may
    share a root's memory at another call even where it shares none at this one)."""
    if value in roots:
        return True
    return _is_view_call(value.node) and all(_by_view_calls(u, roots) for u in value.node.inputs
                                             if isinstance(u.type, TensorType))


def _is_view_call(node: Any) -> bool:
    """Whether `node` is a NumPy call that may return its argument's memory."""
    op = node.attrs["op"] if node is not None and node.op == "prim.dynamic" else getattr(node, "op", None)
    return op is not None and (registry.get(op).as_view is not None or op in _MAY_VIEW)


def _one(result: Any) -> Any:
    return result[0] if isinstance(result, (tuple, list)) else result


def _view_call(as_view: Callable, shape: tuple | None, attrs: dict, dims: list) -> Callable:
    return lambda a: as_view(np.asarray(a), shape, attrs, dims)


def _roots(graph: Graph, spec_items: Sequence[int], written: Sequence[int], views: Sequence[int]
           ) -> dict[Any, int]:
    """Graph value -> root: the inputs (a written one's new contents) and the results that are not
    views rebuilt themselves."""
    input_values = graph.inputs
    roots: dict[Any, int] = {}
    for i, value in enumerate(input_values):
        if i not in written:   # a written input's old contents are gone once the call wrote it back
            roots.setdefault(value, -1 - i)
    for k, i in enumerate(written):
        roots.setdefault(graph.outputs[len(graph.outputs) - len(written) + k], -1 - i)
    for pos, j in enumerate(spec_items):
        if j >= 0 and pos not in views:
            roots.setdefault(graph.outputs[j], pos)
    return roots


def find_views(graph: Graph, spec: CallSpec, results: Sequence[Any], inputs: Sequence[Any],
               where: Callable[[int], str]) -> list[int]:
    """The result positions NumPy returned sharing memory with an input or another result (or computed
    from them by view calls only), that are not a computed root the others are views of
    (`results`/`inputs`: the eager arrays), in graph order: a view another one reads comes first.
    NotImplementedError naming a result whose replay does not give NumPy's view."""
    items = spec.result_items
    overlaps: dict[int, list[int]] = {}
    for pos, array in enumerate(results):
        if items[pos] >= 0:
            partners = [q for q, other in enumerate(results) if q != pos and items[q] >= 0
                        and _overlaps(array, other)]
            partners += [-1 - i for i, other in enumerate(inputs) if _overlaps(array, other)]
            if partners:
                overlaps[pos] = partners
    may_view = [pos for pos, j in enumerate(items) if j >= 0 and pos not in overlaps and
                _by_view_calls(graph.outputs[j], _roots(graph, items, spec.written, [pos]))]
    if not overlaps and not may_view:
        return []
    # A result whose graph value comes first is a root candidate of those after it.
    order: dict[Any, int] = {node: k for k, node in enumerate(graph.nodes)}
    rank = {p: order.get(graph.outputs[j].node, -1) for p, j in enumerate(items) if j >= 0}
    candidates = sorted(overlaps, key=rank.__getitem__)
    views: list[int] = []
    # Replayed as a call at the traced shapes would be: shape arithmetic folded into the view calls.
    graph = specialize(graph, [v.type for v in graph.inputs], check_shapes=False)
    for pos in candidates:
        # A result shares memory with the arguments and the results before it as its replay does; those
        # after it that share its memory are checked when their turn comes (they may be views of it).
        earlier = [q for q in overlaps[pos] if q < 0 or rank[q] < rank[pos]]
        if not earlier:
            continue   # a root of the results after it (and perhaps a view itself: below)
        value = graph.outputs[items[pos]]
        roots = _roots(graph, items, spec.written, [pos])
        if roots.get(value, pos) >= 0 and roots.get(value, pos) != pos:
            roots.pop(value)   # a result CSE made equal to another: replayed from the roots all the same
        try:
            replayed = _replay(value, roots)(results, inputs)
            if np.shape(replayed) != np.shape(results[pos]) or not np.array_equal(replayed, results[pos],
                                                                                  equal_nan=True):
                raise _NotAView("its replay computes other values")
            for q in earlier:
                if not _overlaps(replayed, results[q] if q >= 0 else inputs[-1 - q]):
                    raise _NotAView("its replay does not share memory with it")
        except _NotAView as why:
            if all(q >= 0 and q not in views for q in earlier):
                continue   # a root the results after it may be views of
            q = next(q for q in earlier if q < 0 or q in views)
            other = where(q) if q >= 0 else f"argument #{-1 - q}"
            raise NotImplementedError(_REFUSAL.format(what=where(pos), other=other, why=why)) from None
        views.append(pos)
    others = [*(a for q, a in enumerate(results) if items[q] >= 0), *inputs]
    for pos in sorted((p for p, j in enumerate(items) if j >= 0), key=rank.__getitem__):
        if pos in views or any(q < 0 or rank[q] < rank[pos] for q in overlaps.get(pos, ())):
            continue
        value = graph.outputs[items[pos]]
        # Not from a result that is a view of a temporary: the backend makes it a contiguous array,
        # where NumPy's is strided (a reshape of it copies where NumPy's would not, or the reverse).
        roots = {v: r for v, r in _roots(graph, items, spec.written, [pos]).items()
                 if r < 0 or r in views or not _is_view_call(v.node)}
        if value in roots or not _by_view_calls(value, roots):
            continue
        try:
            replayed = _replay(value, roots)(results, inputs)
        except _NotAView:
            continue
        if np.shape(replayed) == np.shape(results[pos]) and \
                np.array_equal(replayed, results[pos], equal_nan=True) and \
                not any(_overlaps(replayed, other) for other in others if other is not results[pos]):
            views.append(pos)   # a copy here, as NumPy's is: a view where NumPy's is
    for pos in overlaps:   # every overlap is now a view relation, or refused
        if pos not in views and not all(q >= 0 and q in views for q in overlaps[pos]):
            q = next(q for q in overlaps[pos] if q < 0 or q not in views)
            other = where(q) if q >= 0 else f"argument #{-1 - q}"
            raise NotImplementedError(_REFUSAL.format(what=where(pos), other=other,
                                                      why="it is computed, not a view of the other"))
    return sorted(views, key=rank.__getitem__)   # a view read by another is rebuilt first


def view_steps(graph: Graph, spec: CallSpec, views: Sequence[int], types: Sequence[Any]) -> Replays:
    """The replays of the `views` results for a call with input `types`, from the graph specialized to
    them (slice bounds and shapes concrete)."""
    g = specialize(graph, list(types), check_shapes=False)
    items = spec.result_items
    replays: Replays = []
    read: set[int] = set()
    for pos in views:
        roots = _roots(g, items, spec.written, [pos])   # as when tracing: from the other results
        value = g.outputs[items[pos]]
        if roots.get(value, -1) >= 0:
            roots.pop(value)
        try:
            replays.append((pos, _replay(value, roots)))
        except _NotAView as why:
            raise NotImplementedError(f"{spec.name}(): a result NumPy returns as a view cannot be rebuilt "
                                      f"as one at these shapes ({why})") from None
        read |= replays[-1][1].reads   # type: ignore[attr-defined]
    index = {v: i for i, v in enumerate(g.inputs)}
    # The computed results the replays read first take NumPy's memory order (a reshape of them is a view
    # or a copy by it): backends return fresh results C-ordered.
    layouts: Replays = [(j, _in_numpys_order(g, g.outputs[items[j]], index, j))
                        for j in sorted(read - set(views)) if g.outputs[items[j]].node is not None]
    return layouts + replays


def _in_numpys_order(graph: Graph, value: Any, index: dict[Any, int], pos: int
                     ) -> Callable[[Sequence[Any], Sequence[Any]], Any]:
    """A replay step giving result `pos` (graph value `value`, computed) in the memory order NumPy's has
    for the call's inputs, where `_numpys_strides` knows it; else as the backend returned it. (The step
    holds `graph`: its values are read while it lives.)"""
    # an op asked for another order (``np.copy(x, order="F")``) lays out its result so from C-ordered
    # inputs, and so do the ops after a view that permutes axes (``np.concatenate([a.T, b.T])``, ``a.T + 1``)
    ordered = any(node.attrs.get("order", "K") not in ("K", "C") or node.op in _PERMUTING
                  for node in graph.nodes)

    def step(results: Sequence[Any], inputs: Sequence[Any]) -> Any:
        array = results[pos]
        if array.ndim < 2 or not ordered and all(a.flags.c_contiguous for a in inputs
                                                 if isinstance(a, np.ndarray)):
            return array   # every result of C-ordered inputs, their axes in order, is C-ordered
        strides = _numpys_strides(value, inputs, index, {}) if graph is not None else None
        if strides is None or _axis_order(strides, array.shape) == _axis_order(array.strides, array.shape):
            return array
        order = _axis_order(strides, array.shape)
        fresh = np.empty([array.shape[k] for k in order], array.dtype).transpose(np.argsort(order))
        np.copyto(fresh, array)
        return fresh

    return step


def _axis_order(strides: Sequence[int], shape: Sequence[int]) -> list[int]:
    """The axes from outermost to innermost in memory (a stable sort: ties keep C order)."""
    return sorted(range(len(shape)), key=lambda k: -abs(strides[k]) if shape[k] > 1 else 0)


def _numpys_strides(value: Any, inputs: Sequence[Any], index: dict[Any, int], memo: dict) -> tuple | None:
    """Strides (any unit; only their order matters) of NumPy's array for graph `value` at this call: an
    input's own, and an elementwise op's as NumPy's iterator lays out its result (``order="K"``:
    NpyIter's axis sort over the operands' strides, an operand's broadcast axes not counted), a copy's
    like its operand (`_COPIES_LIKE`), a join's, reduction's or scan's as NumPy lays it out (`_PROBED`);
    None for any other op."""
    if value in memo:
        return memo[value]
    node = value.node
    result: tuple | None = None
    if node is None:
        array = inputs[index[value]]
        result = tuple(0 if n == 1 else st for n, st in zip(array.shape, array.strides))
    elif registry.get(node.op).kind == "elementwise" and len(node.outputs) == 1 and \
            "order" not in node.attrs and node.attrs.get("copy", True) is not False:
        ndim = len(value.type.shape)
        operands = []
        for u in node.inputs:
            if not isinstance(u.type, TensorType) or not u.type.shape:
                continue
            strides = _numpys_strides(u, inputs, index, memo)
            if strides is None:
                break
            pad = ndim - len(strides)   # broadcast: missing and length-1 axes have stride 0
            operands.append((0,) * pad + tuple(0 if n == 1 else st for n, st in zip(u.type.shape, strides)))
        else:
            result = _like_strides(operands[0]) if node.op in _NEW_LIKE and len(operands) == 1 \
                else _iterator_strides(operands, ndim)
    elif node.op in _COPIES_LIKE and node.attrs.get("shape") is None and len(node.outputs) == 1:
        ndim = len(value.type.shape)
        order = node.attrs.get("order", "K")
        strides = _numpys_strides(node.inputs[0], inputs, index, memo)
        if strides is not None and len(strides) == ndim and order in ("A", "F") and \
                _axis_order(strides, value.type.shape) == list(range(ndim - 1, -1, -1)) and \
                0 not in [st for n, st in zip(value.type.shape, strides) if n > 1]:
            order = "F"   # ``order="A"``: Fortran for a Fortran-contiguous operand
        if order in ("C", "A", "F"):
            strides = tuple(range(ndim, 0, -1)) if order != "F" else tuple(range(1, ndim + 1))
        if strides is not None and len(strides) == ndim:
            result = _like_strides(strides)
    elif node.op in _VIEW_ONLY and len(node.outputs) == 1:
        as_view = registry.get(node.op).as_view
        strides = _numpys_strides(node.inputs[0], inputs, index, memo)
        if as_view is not None and strides is not None and all(
                u.node is not None and u.node.op == "prim.Constant" for u in node.inputs[1:]):
            view = as_view(_stand_in(node.inputs[0].type.shape, strides),
                           tuple(value.type.shape), dict(node.attrs),
                           [u.node.attrs["value"] for u in node.inputs[1:]])
            if view is not None:
                result = tuple(0 if n == 1 else st for n, st in zip(view.shape, view.strides))
    elif node.op in _PROBED and len(node.outputs) == 1:
        result = _probed_strides(node, inputs, index, memo)
    memo[value] = result
    return result


# Ops whose result NumPy lays out by its operands' layouts in its own way (``np.concatenate``:
# ``PyArray_CreateMultiSortedStridePerm``; a reduction or accumulation: its iterator's axis order;
# ``np.tril``: ``np.where`` over a broadcast mask; ``np.argmax``: C order): `_probed_strides` asks NumPy.
_PROBED = frozenset({
    "np.concatenate", "np.stack", "np.vstack", "np.hstack", "np.column_stack",
    "np.cumsum", "np.cumprod", "np.nancumsum", "np.nancumprod",
    "np.sum", "np.prod", "np.mean", "np.max", "np.min", "np.all", "np.any", "np.argmax", "np.argmin",
    "np.nansum", "np.nanprod", "np.nanmean", "np.nanmax", "np.nanmin", "np.std", "np.var", "np.nanstd",
    "np.nanvar", "np.ptp", "np.count_nonzero", "np.tril", "np.triu",
})


def _probed_strides(node: Any, inputs: Sequence[Any], index: dict[Any, int], memo: dict) -> tuple | None:
    """The strides of NumPy's result of `node` (an op of `_PROBED`): its reference run on small arrays
    laid out as its operands are (`_probe`); None where an operand's layout is not known or an input
    is neither an array nor a constant."""
    args = []
    for u in node.inputs:
        if isinstance(u.type, TensorType):
            strides = _numpys_strides(u, inputs, index, memo)
            if strides is None or len(strides) != len(u.type.shape):
                return None
            args.append(_probe(u.type, strides))
        elif u.node is not None and u.node.op == "prim.Constant":
            args.append(u.node.attrs["value"])
        else:
            return None
    try:
        with np.errstate(all="ignore"):
            out = registry.get(node.op).reference(*args, **node.attrs)
    except Exception:   # an op NumPy refuses at these lengths: layout unknown
        return None
    if not isinstance(out, np.ndarray) or out.ndim != len(node.outputs[0].type.shape):
        return None
    return tuple(0 if n == 1 else st for n, st in zip(node.outputs[0].type.shape, out.strides))


def _probe(t: TensorType, strides: Sequence[int]) -> np.ndarray:
    """An array of ones of `t`'s dtype, each axis of length at most 2 (a length-1 axis stays one, which
    is all NumPy's layout rules look at besides the axis order), contiguous in the axis order `strides`
    gives, a broadcast (stride 0) axis kept one."""
    shape = tuple(min(int(n), 2) for n in t.shape)
    itemsize = np.dtype(t.dtype).itemsize
    made = [0] * len(shape)
    step = itemsize
    for k in reversed(_axis_order(strides, t.shape)):
        if strides[k] == 0 and t.shape[k] > 1:
            continue
        made[k] = step
        step *= shape[k]
    base = np.ones(max(step // itemsize, 1), t.dtype)
    return np.lib.stride_tricks.as_strided(base, shape, tuple(made), writeable=False)


# View ops that never copy: their strides are read off NumPy's view of a stand-in with the operand's
# layout (`_stand_in`, no memory).
_VIEW_ONLY = frozenset({"np.getitem", "np.transpose", "np.swapaxes", "np.moveaxis", "np.expand_dims",
                        "np.squeeze", "np.flip", "np.diagonal", "np.broadcast_to", "prim.broadcast_to"})


# View ops whose result's axes can be out of memory order (of a C-ordered operand too).
_PERMUTING = frozenset({"np.transpose", "np.swapaxes", "np.moveaxis", "np.diagonal"})


# Elementwise ops whose result NumPy allocates like its operand (``PyArray_NewLikeArray``, order K), not
# through the iterator: a broadcast (stride 0) axis is the innermost there.
_NEW_LIKE = frozenset({"np.astype"})


# Ops that copy their first operand into an array NumPy allocates like it (``np.sort`` sorts
# ``a.copy(order="K")``), or as their ``order`` says.
_COPIES_LIKE = frozenset({"np.copy", "np.sort", "np.zeros_like", "np.ones_like", "np.empty_like",
                          "np.full_like"})


def _like_strides(strides: Sequence[int]) -> tuple:
    """NumPy's ``PyArray_CreateSortedStridePerm``: axes by decreasing absolute stride (a stable sort, so
    ties keep C order); the result is contiguous in that order (as strides: its rank from the inside)."""
    order = sorted(range(len(strides)), key=lambda k: -abs(strides[k]))
    rank = [0] * len(strides)
    for k, axis in enumerate(order):
        rank[axis] = len(strides) - k
    return tuple(rank)


def _stand_in(shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """A read-only array of `shape` laid out in the axis order `strides` gives, over one byte: its
    strides are made as a contiguous array's in that order (0 where `strides` has 0), and nothing ever
    reads it."""
    order = _axis_order(strides, shape)
    made = [0] * len(shape)
    step = 1
    for k in reversed(order):
        if strides[k] == 0 and shape[k] > 1:
            continue   # a broadcast axis stays one: NumPy's iterator does not order by it
        made[k] = step
        step *= max(int(shape[k]), 1)
    return np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), tuple(shape), tuple(made), writeable=False)


def _iterator_strides(operands: Sequence[tuple], ndim: int) -> tuple:
    """NumPy's ``npyiter_find_best_axis_ordering``: an insertion sort of the axes, innermost first, that
    moves an axis inward past another where an operand with both strides nonzero says so and none says
    otherwise; the result is contiguous in that order (as strides: its rank from the inside)."""
    perm = list(range(ndim - 1, -1, -1))   # innermost first
    for i0 in range(1, ndim):
        ipos, j0 = i0, perm[i0]
        for i1 in range(i0 - 1, -1, -1):
            j1 = perm[i1]
            ambiguous, swap = True, False
            for strides in operands:
                s0, s1 = strides[j0], strides[j1]
                if s0 != 0 and s1 != 0:
                    if abs(s1) <= abs(s0):
                        swap = False
                    elif ambiguous:
                        swap = True
                    ambiguous = False
            if ambiguous:
                continue
            if not swap:
                break
            ipos = i1
        if ipos != i0:
            perm.insert(ipos, perm.pop(i0))
    rank = [0] * ndim
    for k, axis in enumerate(perm):
        rank[axis] = k + 1
    return tuple(rank)


def apply_views(replays: Replays, results: Sequence[Any], inputs: Sequence[Any]) -> tuple:
    """The flat `results` with each view result rebuilt, in order, as NumPy's calls give it."""
    out = list(results)
    for pos, replay in replays:
        out[pos] = replay(out, inputs)
    return tuple(out)
