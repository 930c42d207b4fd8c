"""Movement and contraction ops rewritten, on a graph specialized to concrete shapes, into ops the
planner lowers as views, joins and fused elementwise kernels: NumPy computes each as these steps
would, so the values are the same bit for bit (a copy or one product per element, no reassociation).

``diff`` is differences of two slices (n times), ``roll`` a join of two slices, ``tile`` and ``repeat``
(one count) a broadcast view reshaped, ``triu``/``tril`` a select against a constant mask, ``outer``
``multiply.outer`` of the raveled operands, ``hstack``/``vstack``/``column_stack`` reshapes and a
``concatenate``, ``atleast_*`` reshapes. ``tensordot`` and ``inner`` are NumPy's own reduction to one
matmul of transposed, reshaped operands (the sum's order is the matmul kernel's, as for ``matmul``);
``einsum`` of one or two operands is diagonals, sums, and such a matmul (its sums within the project's
summation tolerance).
A node with no rewrite for its attributes (``diff`` with ``prepend``) is left for a host step.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from numtrace_ir import registry
from numtrace_ir.graph import Graph
from numtrace_ir.passes import replace_node

__all__ = ["REWRITES", "rewrite"]

Rewrite = Callable[[Graph, Any], "list | None"]
REWRITES: dict[str, Rewrite] = {}


def _rewrites(*names: str) -> Callable[[Rewrite], Rewrite]:
    def deco(fn: Rewrite) -> Rewrite:
        for name in names:
            REWRITES[name] = fn
        return fn

    return deco


def _node(g: Graph, node, op: str, inputs: list, **attrs) -> Any:
    return g.create_node(op, list(inputs), registry.get(op).normalize_attrs(attrs), loc=node.loc).outputs[0]


def _shape(v) -> tuple[int, ...]:
    return tuple(int(d) for d in v.type.shape)


def _reshape(g, node, v, shape) -> Any:
    return v if _shape(v) == tuple(shape) else _node(g, node, "np.reshape", [v], shape=tuple(shape))


def _slice(g, node, v, axis: int, start, stop) -> Any:
    index = (slice(None),) * axis + (slice(start, stop),)
    return _node(g, node, "np.getitem", [v], index=index)


def _const(g, node, value) -> Any:
    return g.create_node("prim.Constant", [], attrs={"value": value}, loc=node.loc).outputs[0]


@_rewrites("np.diff")
def _diff(g, node):
    if set(node.attrs) - {"n", "axis", "omitted"} or len(node.inputs) != 1:  # prepend or append given
        return None
    (x,) = node.inputs
    n, axis = int(node.attrs.get("n", 1)), int(node.attrs.get("axis", -1)) % max(1, len(_shape(x)))
    if n == 0:
        return None
    bool_in = x.type.dtype.kind == "b"
    for _ in range(n):  # NumPy: a[1:] - a[:-1] (not_equal for booleans), n times
        hi, lo = _slice(g, node, x, axis, 1, None), _slice(g, node, x, axis, None, -1)
        x = _node(g, node, "np.not_equal" if bool_in else "np.subtract", [hi, lo])
    return [x]


@_rewrites("np.roll")
def _roll(g: Graph, node: Any) -> list | None:
    (x,) = node.inputs
    shape, shift, axis = _shape(x), node.attrs["shift"], node.attrs.get("axis")
    if axis is None:
        if not isinstance(shift, (int, np.integer)):
            if len(shift) != 1:
                return None
            shift = shift[0]
        flat = _reshape(g, node, x, (int(np.prod(shape, dtype=np.int64)),))
        return [_reshape(g, node, _roll_axis(g, node, flat, 0, int(shift)), shape)]
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    shifts = (shift,) * len(axes) if isinstance(shift, (int, np.integer)) else tuple(shift)
    if len(shifts) != len(axes):
        return None
    total: dict[int, int] = {}
    for a, s in zip(axes, shifts):  # NumPy adds the shifts of a repeated axis
        a = int(a) % len(shape)
        total[a] = total.get(a, 0) + int(s)
    for a, s in total.items():
        x = _roll_axis(g, node, x, a, s)
    return [x]


def _roll_axis(g, node, x, axis: int, shift: int):
    n = _shape(x)[axis]
    if n == 0 or shift % n == 0:
        return x
    k = shift % n
    parts = [_slice(g, node, x, axis, n - k, None), _slice(g, node, x, axis, None, n - k)]
    return _node(g, node, "np.concatenate", parts, axis=axis)


@_rewrites("np.tile")
def _tile(g, node):
    (x,) = node.inputs
    reps = tuple(int(r) for r in node.attrs["reps"])
    shape = _shape(x)
    d = max(len(reps), len(shape))
    reps, shape = (1,) * (d - len(reps)) + reps, (1,) * (d - len(shape)) + shape
    spread = tuple(v for pair in zip((1,) * d, shape) for v in pair)  # (1, d0, 1, d1, ...)
    wide = tuple(v for pair in zip(reps, shape) for v in pair)  # (r0, d0, r1, d1, ...)
    b = _node(g, node, "np.broadcast_to", [_reshape(g, node, x, spread)], shape=wide)
    return [_node(g, node, "np.reshape", [b], shape=tuple(r * s for r, s in zip(reps, shape)))]


@_rewrites("np.repeat")
def _repeat(g, node):
    (x,) = node.inputs
    repeats, axis = tuple(node.attrs["repeats"]), node.attrs.get("axis")
    if len(repeats) != 1:
        return None  # per-element counts: a gather
    r = int(repeats[0])
    if axis is None:
        x = _reshape(g, node, x, (int(np.prod(_shape(x), dtype=np.int64)),))
        axis = 0
    shape = _shape(x)
    axis = int(axis) % len(shape)
    inner = shape[: axis + 1] + (1,) + shape[axis + 1:]
    wide = shape[: axis + 1] + (r,) + shape[axis + 1:]
    b = _node(g, node, "np.broadcast_to", [_reshape(g, node, x, inner)], shape=wide)
    return [_node(g, node, "np.reshape", [b], shape=shape[:axis] + (shape[axis] * r,) + shape[axis + 1:])]


def _triangle(upper: bool) -> Rewrite:
    def rewrite(g, node):
        (x,) = node.inputs
        shape, k = _shape(x), int(node.attrs.get("k", 0))
        m, n = shape[-2:] if len(shape) >= 2 else (shape[0], shape[0])
        if len(shape) < 2:
            return None  # a 1-d input builds a matrix (np.tri of its broadcast)
        rows, cols = np.arange(m)[:, None], np.arange(n)[None, :]
        keep = cols - rows >= k if upper else cols - rows <= k  # np.tri's mask, as NumPy builds it
        zero = _const(g, node, np.zeros((), x.type.dtype))
        return [_node(g, node, "np.where", [_const(g, node, keep), x, zero])]

    return rewrite


REWRITES["np.triu"] = _triangle(True)
REWRITES["np.tril"] = _triangle(False)


@_rewrites("np.outer")
def _outer(g, node):
    a, b = (_reshape(g, node, v, (int(np.prod(_shape(v), dtype=np.int64)),)) for v in node.inputs)
    return [_node(g, node, "np.multiply.outer", [a, b])]


def _contract(g, node, a, b, axes_a: list[int], axes_b: list[int]):
    """NumPy's tensordot: free axes of ``a`` first and of ``b`` last, one matmul of the two reshaped
    to (M, K) @ (K, N), the result reshaped to the free dims."""
    sa, sb = _shape(a), _shape(b)
    axes_a = [x % len(sa) for x in axes_a]
    axes_b = [x % len(sb) for x in axes_b]
    free_a = [i for i in range(len(sa)) if i not in axes_a]
    free_b = [i for i in range(len(sb)) if i not in axes_b]
    k = int(np.prod([sa[i] for i in axes_a], dtype=np.int64))
    ta = _node(g, node, "np.transpose", [a], axes=tuple(free_a + axes_a))
    tb = _node(g, node, "np.transpose", [b], axes=tuple(axes_b + free_b))
    m = int(np.prod([sa[i] for i in free_a], dtype=np.int64))
    n = int(np.prod([sb[i] for i in free_b], dtype=np.int64))
    prod = _node(g, node, "np.matmul", [_reshape(g, node, ta, (m, k)), _reshape(g, node, tb, (k, n))])
    return _reshape(g, node, prod, tuple(sa[i] for i in free_a) + tuple(sb[i] for i in free_b))


@_rewrites("np.tensordot")
def _tensordot(g, node):
    a, b = node.inputs
    axes = node.attrs.get("axes", 2)
    if isinstance(axes, (int, np.integer)):
        na = len(_shape(a))
        return [_contract(g, node, a, b, list(range(na - int(axes), na)), list(range(int(axes))))]
    axes_a, axes_b = ([x] if isinstance(x, (int, np.integer)) else list(x) for x in axes)
    return [_contract(g, node, a, b, list(axes_a), list(axes_b))]


@_rewrites("np.inner")
def _inner(g, node):
    a, b = node.inputs
    if not _shape(a) or not _shape(b):
        return [_node(g, node, "np.multiply", [a, b])]
    return [_contract(g, node, a, b, [-1], [-1])]


@_rewrites("np.einsum")
def _einsum(g: Graph, node: Any) -> list | None:
    """One or two operands, explicit labels (no ``...``): repeated labels of an operand become
    diagonals, labels only one operand has and the output lacks are summed there, and two operands are
    one batched matmul of the transposed, reshaped operands (an outer product has K = 1: one product
    per element); the result is transposed to the output's labels. Other forms stay a host step."""
    spec = str(node.attrs["subscripts"]).replace(" ", "")
    ins, arrow, out = spec.partition("->")
    terms = ins.split(",")
    if "..." in spec or len(terms) != len(node.inputs) or len(terms) > 2:
        return None
    if not arrow:
        out = "".join(sorted(c for c in set(ins) - {","} if ins.count(c) == 1))
    dtype = node.outputs[0].type.dtype
    if dtype == np.float16 and len(terms) == 2 and set(terms[0]) & set(terms[1]) - set(out):
        return None  # NumPy's einsum rounds each float16 partial sum: no matmul sums as it does
    sizes: dict[str, int] = {}
    operands = []
    for i, (term, v) in enumerate(zip(terms, node.inputs)):
        for c, n in zip(term, _shape(v)):
            if sizes.setdefault(c, n) != n:
                return None  # a label of size 1 broadcast against another size
        v = v if v.type.dtype == dtype else _node(g, node, "np.astype", [v], dtype=dtype)
        v, labels = _einsum_diagonals(g, node, v, term)
        others = out + "".join(t for j, t in enumerate(terms) if j != i)
        drop = tuple(k for k, c in enumerate(labels) if c not in others)
        if drop:
            if dtype.kind == "b" or dtype == np.float16:  # NumPy's einsum sums these its own way
                return None
            v = _node(g, node, "np.sum", [v], axis=drop, dtype=dtype)
            labels = "".join(c for k, c in enumerate(labels) if k not in drop)
        operands.append((v, labels))
    if len(operands) == 1:
        v, labels = operands[0]
        return [_permute(g, node, v, labels, out)]
    (a, la), (b, lb) = operands
    batch = [c for c in la if c in lb and c in out]
    summed = [c for c in la if c in lb and c not in out]
    free_a, free_b = [c for c in la if c not in lb], [c for c in lb if c not in la]

    def dims(labels):
        return tuple(sizes[c] for c in labels)

    def size(labels):
        return int(np.prod(dims(labels), dtype=np.int64))

    ta = _permute(g, node, a, la, "".join(batch + free_a + summed))
    tb = _permute(g, node, b, lb, "".join(batch + summed + free_b))
    ma = _reshape(g, node, ta, dims(batch) + (size(free_a), size(summed)))
    mb = _reshape(g, node, tb, dims(batch) + (size(summed), size(free_b)))
    prod = _reshape(g, node, _node(g, node, "np.matmul", [ma, mb]), dims(batch + free_a + free_b))
    return [_permute(g, node, prod, "".join(batch + free_a + free_b), out)]


def _einsum_diagonals(g, node, v, labels: str) -> tuple[Any, str]:
    """``v`` with each repeated label taken along its diagonal (NumPy puts it last), and its labels."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        p = labels.index(c)
        q = labels.index(c, p + 1)
        v = _node(g, node, "np.diagonal", [v], axis1=p, axis2=q)
        labels = "".join(x for k, x in enumerate(labels) if k not in (p, q)) + c
    return v, labels


def _permute(g, node, v, labels: str, order: str) -> Any:
    """``v`` (axes named by ``labels``) transposed to ``order``."""
    if labels == order:
        return v
    return _node(g, node, "np.transpose", [v], axes=tuple(labels.index(c) for c in order))


def _atleast(ndim: int) -> Rewrite:
    def rewrite(g, node):
        outs = []
        for v in node.inputs:
            s = _shape(v)
            if len(s) >= ndim:
                outs.append(v)  # NumPy returns the array itself (a view for the caller)
                continue
            new = {0: (1,) * ndim, 1: (1,) + s + (1,) * (ndim - 2) if ndim == 3 else (1,) + s}.get(len(s))
            if len(s) == 2:  # atleast_3d of a matrix: (M, N, 1)
                new = s + (1,)
            outs.append(_reshape(g, node, v, new))
        return outs

    return rewrite


for _n in (1, 2, 3):
    REWRITES[f"np.atleast_{_n}d"] = _atleast(_n)


def _stack(kind: str) -> Rewrite:
    def rewrite(g, node):
        if node.attrs.get("dtype") is not None:
            return None
        parts = []
        for v in node.inputs:
            s = _shape(v)
            if kind == "v":
                parts.append(_reshape(g, node, v, (1, *s) if len(s) < 2 else s) if len(s) else
                             _reshape(g, node, v, (1, 1)))
            elif kind == "h":
                parts.append(_reshape(g, node, v, (1,)) if not s else v)
            else:  # column_stack: 1-d (and 0-d) inputs become columns
                column = (int(np.prod(s, dtype=np.int64)), 1)
                parts.append(_reshape(g, node, v, column) if len(s) < 2 else v)
        axis = 1 if kind == "c" or (kind == "h" and len(_shape(parts[0])) > 1) else 0
        dtype = node.outputs[0].type.dtype
        parts = [p if p.type.dtype == dtype else _node(g, node, "np.astype", [p], dtype=dtype)
                 for p in parts]
        return [_node(g, node, "np.concatenate", parts, axis=axis)]

    return rewrite


REWRITES.update({"np.hstack": _stack("h"), "np.vstack": _stack("v"), "np.column_stack": _stack("c")})


def rewrite(g: Graph) -> int:
    """Apply `REWRITES` to every node of ``g`` they cover; a rewrite whose result types differ from the
    node's is undone (the node then runs as a host step). Returns how many nodes were rewritten."""
    count = 0
    for node in list(g.nodes):
        fn = REWRITES.get(node.op)
        values = (*node.inputs, *node.outputs)
        if fn is None or not all(getattr(v.type, "is_concrete", False) for v in values):
            continue
        count += replace_node(g, node, functools.partial(_tolerant, fn))
    return count


def _tolerant(fn: Callable, g: Graph, node: Any) -> Any:
    """`fn`'s rewrite, or None for an attribute form it does not know (the node is left whole)."""
    try:
        return fn(g, node)
    except Exception:
        return None
