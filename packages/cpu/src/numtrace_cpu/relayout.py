"""Transposed results written in the layout a copying reshape gives them.

``np.reshape(np.transpose(p @ v, (1, 0, 2)), (seq, d))`` (attention merging its heads) makes NumPy
copy the transposed product into a new array: the reshape of a transposed array is no view. When a
product or a fused pass computes the value that is transposed, for that transpose alone, it can write
it straight into the reshape's result instead, through the inverse view of that array (a
`LayoutViewStep` placed before it: ``r.reshape(t_shape).transpose(inverse)``); the transpose and the
reshape steps are dropped, their result being that array already.
"""

from __future__ import annotations

import numpy as np
from numtrace_ir import registry
from numtrace_ir.types import TensorType

from numtrace_cpu.joins import producers_and_writes, splice
from numtrace_cpu.steps import FusedStep, LayoutViewStep, MatmulStep, Step, ViewStep

__all__ = ["write_reshapes_in_place"]

_TRANSPOSE = registry.get("np.transpose").name
# ``a.reshape(b, n, d)`` with sizes read from ``x.shape`` records prim.reshape; with its sizes
# known at compile (no scalar inputs left) it reshapes as np.reshape does.
_RESHAPES = frozenset(registry.get(name).name for name in ("np.reshape", "prim.reshape"))


def write_reshapes_in_place(steps: list[Step], types: dict, outputs: list[int]) -> list[Step]:
    """The steps with every copying reshape of a transposed product or fused-pass output computed in
    place (see the module docstring). Each value of the chain (the computed one, its transpose, the
    reshape) must be read by the next step alone, none a graph output or written again."""
    producer, writes = producers_and_writes(steps)
    readers: dict[int, list[int]] = {}
    for k, step in enumerate(steps):
        for v in set(step.inputs):
            readers.setdefault(v, []).append(k)
    before: dict[int, Step] = {}
    dropped: set = set()
    for k, step in enumerate(steps):
        if not _movement(step, _RESHAPES):
            continue
        (t,), (r,) = step.inputs, step.outputs
        j = producer.get(t)
        if j is None or not _movement(steps[j], {_TRANSPOSE}) or readers.get(t) != [k]:
            continue
        (h,) = steps[j].inputs
        p = producer.get(h)
        if (p is None or type(steps[p]) not in (MatmulStep, FusedStep) or p in before
                or readers.get(h) != [j] or {h, t, r} & set(outputs) or writes.get(h) or writes.get(r)):
            continue
        inverse = _inverse_view(types[h], steps[j].nodes[0], step.nodes[0], types[r])
        if inverse is None:
            continue
        before[p] = LayoutViewStep(inputs=[r], outputs=[h], nodes=[steps[j].nodes[0], step.nodes[0]],
                                   fn=inverse)
        dropped |= {j, k}
    return splice(steps, before, dropped)


def _movement(step: Step, ops: frozenset | set) -> bool:
    return (type(step) is ViewStep and len(step.nodes) == 1 and step.nodes[0].op in ops
            and len(step.inputs) == 1 and len(step.outputs) == 1)


def _inverse_view(th, transpose, reshape, tr):
    """``a -> a.reshape(t_shape).transpose(inverse)``: the view of the reshape's result `a` that holds
    the transpose's input, when that reshape copies (else None: it is a view already)."""
    if not (isinstance(th, TensorType) and isinstance(tr, TensorType) and th.is_concrete and tr.is_concrete
            and th.dtype == tr.dtype and reshape.attrs.get("order", "C") == "C"):
        return None
    axes = transpose.attrs.get("axes")
    nd = len(th.shape)
    axes = tuple(reversed(range(nd))) if axes is None else tuple(int(a) % nd for a in axes)
    if sorted(axes) != list(range(nd)):
        return None
    t_shape = tuple(int(th.shape[a]) for a in axes)
    inverse = tuple(int(i) for i in np.argsort(axes))
    out_shape = tuple(int(n) for n in tr.shape)
    if int(np.prod(t_shape, dtype=np.int64)) != int(np.prod(out_shape, dtype=np.int64)) or 0 in out_shape:
        return None
    c_strides = [int(np.prod(th.shape[d + 1:], dtype=np.int64)) for d in range(nd)]
    if _reshapes_as_view(t_shape, tuple(c_strides[a] for a in axes), out_shape):
        return None   # the reshape is a view: nothing to gain
    # The inverse view is result.reshape(t_shape) (a view: result is C-ordered) transposed back, so
    # the transposed view of it that the reshape reads is that C-ordered array: reshaped, result.

    def inverse_view(a):
        return a.reshape(t_shape).transpose(inverse)
    return inverse_view


def _reshapes_as_view(shape: tuple, strides: tuple, new_shape: tuple) -> bool:
    """Whether NumPy reshapes an array of `shape` and `strides` (in items) to `new_shape` (same size,
    no zero in it) as a view: every run of dims that a new dim (or run of them) spans must be one
    equally spaced run (NumPy's no-copy reshape), decided without an array of that size."""
    old = [(n, st) for n, st in zip(shape, strides) if n != 1]
    new = [n for n in new_shape if n != 1]
    i = j = 0
    while i < len(old):
        i1, j1, a, b = i + 1, j + 1, old[i][0], new[j]
        while a != b:
            if a < b:
                a *= old[i1][0]
                i1 += 1
            else:
                b *= new[j1]
                j1 += 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(i, i1 - 1)):
            return False
        i, j = i1, j1
    return True
