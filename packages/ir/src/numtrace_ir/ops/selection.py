"""Choosing among arrays by conditions (`np.select`) and building coordinate grids (`np.meshgrid`): a
static count of operands, shapes broadcast or laid out by rule, so one trace serves every size. Both
run as NumPy's call (a backend without a lowering runs it on the host)."""

from __future__ import annotations

import numpy as np

from numtrace_ir import dims
from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Inputs, OpDef, Sample, register
from numtrace_ir.types import TensorType

# -- select ----------------------------------------------------------------------------------------

def _select_rule(types, attrs):
    n = attrs["n"]
    if n < 1 or len(types) != 2 * n + 1:
        raise TypeError(f"np.select: {len(types)} inputs for {n} conditions (conditions, choices, default)")
    conds, choices = types[:n], types[n:]
    for i, c in enumerate(conds):
        if (c.dtype != np.bool_) if type(c) is TensorType else c.kind != "bool":
            raise TypeError(f"np.select: invalid entry {i} in condlist: should be boolean ndarray")
    dtype = rules.result_dtype("np.select", choices)
    shape = rules.broadcast("np.select", *(rules.shape_of(t) for t in types))
    return TensorType(dtype, shape)


def _select_binder(args, kwargs):
    given = dict(zip(("condlist", "choicelist", "default"), args))
    given.update(kwargs)
    if set(given) - {"condlist", "choicelist", "default"} or not {"condlist", "choicelist"} <= set(given):
        raise TypeError("np.select: takes condlist, choicelist and default")
    conds, choices = list(given["condlist"]), list(given["choicelist"])
    if len(conds) != len(choices) or not conds:
        raise ValueError("np.select: list of cases must be same length as list of conditions, and not empty")
    return [*conds, *choices, given.get("default", 0)], {"n": len(conds)}


def _select_impl(args, n):
    return np.select(list(args[:n]), list(args[n:2 * n]), args[2 * n])


def _select_samples(rng):
    def x(shape, dt="f8"):
        return sampling.array(rng, shape, dt)

    for dt in sampling.DTYPES:
        a = x((3, 4), dt)
        yield Sample((x((3, 4)) > 0, x((3, 4)) > 1, a, x((3, 4), dt), 0), {"n": 2})
    yield Sample((x((3, 4)) > 0, x((4,)) > 0.5, x((3, 1)), 2.5, -1), {"n": 2}, note="broadcast, scalars")
    yield Sample((x((5,)) > 0, 1, 2.5), {"n": 1}, note="scalar choice and default")
    yield Sample((x((2, 3)) > 0, x((2, 3), "f4"), 7), {"n": 1}, note="float32 keeps its dtype")
    yield Sample((x((0, 3)) > 0, x((0, 3)), np.float32(1.5)), {"n": 1}, note="empty")


register(OpDef(
    "np.select", "other", [Inputs("args", "any", star=True), Attr("n", convert=rules.to_int)],
    _select_rule, _select_impl, numpy_targets=[np.select], samples=_select_samples, binder=_select_binder,
    doc="inputs: the n conditions, the n choices, then the default; the first true condition's choice",
))


# -- meshgrid --------------------------------------------------------------------------------------

def _meshgrid_rule(types, attrs):
    n = len(types)
    if n == 0:
        raise TypeError("np.meshgrid: needs at least one array")
    sizes = [dims.prod(rules.shape_of(t)) for t in types]
    xy = attrs["indexing"] == "xy" and n > 1
    order = [1, 0, *range(2, n)] if xy else list(range(n))
    out = []
    for i, t in enumerate(types):
        if attrs["sparse"]:
            shape = tuple(sizes[i] if order[a] == i else 1 for a in range(n))
        else:
            shape = tuple(sizes[order[a]] for a in range(n))
        out.append(TensorType(rules.strong(t), shape))
    return tuple(out)


def _to_copy(v):
    if not rules.to_bool(v):
        raise NotImplementedError("np.meshgrid(copy=False) returns views of its inputs: a host call")
    return True


def _meshgrid_samples(rng):
    def x(n, dt="f8"):
        return sampling.array(rng, (n,), dt)

    for dt in sampling.DTYPES:
        yield Sample((x(3, dt), x(4, dt)), {})
    for inputs, attrs in (((x(3), x(2), x(4)), {}), ((x(3), x(2), x(4)), {"indexing": "ij"}),
                          ((x(3), x(5)), {"sparse": True}),
                          ((x(3), x(2), x(4)), {"sparse": True, "indexing": "ij"}),
                          ((x(4),), {}), ((x(0), x(3)), {}), ((sampling.array(rng, (2, 3), "f4"), 1.5), {})):
        yield Sample(inputs, attrs)


def _meshgrid_impl(xi, copy, sparse, indexing):
    grids = tuple(np.meshgrid(*xi, sparse=sparse, indexing=indexing))
    return grids if len(grids) > 1 else grids[0]   # one output: the array itself


register(OpDef(
    "np.meshgrid", "other",
    [Inputs("xi", "any", star=True), Attr("copy", True, _to_copy), Attr("sparse", False, rules.to_bool),
     Attr("indexing", "xy", rules.one_of("xy", "ij"))],
    _meshgrid_rule, _meshgrid_impl, numpy_targets=[np.meshgrid], samples=_meshgrid_samples,
    doc="each input flattened and laid along its own axis ('xy': the first two swapped); `copy=False` "
    "(views of the inputs) is a host call",
))
