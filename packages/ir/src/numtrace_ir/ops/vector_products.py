"""Vector products: `cross` (3-vectors), `kron`, `vdot`, and the gufuncs `vecdot`, `matvec`, `vecmat`.

The reference is NumPy's call; the rules give the broadcast batch dims and the vector dims, and the
dtype NumPy's loop resolves (probed on one-element stand-ins).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.nanfunctions import defaults_or_host
from numtrace_ir.registry import Attr, Input, OpDef, Param, Sample, Unsupported, register
from numtrace_ir.types import TensorType


def _tensors(name, types):
    return [rules.first_tensor(name, (t,)) for t in types]


def _probe(name, fn, types, shapes):
    return rules.probe_dtype(name, fn, *(np.ones(s, t.dtype) for t, s in zip(types, shapes)))


def _same(name, a, b) -> None:
    if type(a) is int and type(b) is int and a != b:
        raise ShapeError(f"{name}: vector lengths {a} and {b} differ")


# -- cross -----------------------------------------------------------------------------------------

def _cross_axes(attrs):
    if attrs["axis"] is not None:
        return (attrs["axis"],) * 3
    return attrs["axisa"], attrs["axisb"], attrs["axisc"]


def _cross_rule(types, attrs):
    name = "np.cross"
    a, b = _tensors(name, types)
    axa, axb, axc = _cross_axes(attrs)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"{name}: inputs must be at least 1-d")
    axa, axb = rules.axis(name, axa, a.ndim), rules.axis(name, axb, b.ndim)
    na, nb = a.shape[axa], b.shape[axb]
    if na not in (2, 3) or nb not in (2, 3):
        raise ShapeError(f"{name}: incompatible dimensions for cross product (dimension must be 2 or 3)")
    batch = rules.broadcast(name, a.shape[:axa] + a.shape[axa + 1:], b.shape[:axb] + b.shape[axb + 1:])
    with warnings.catch_warnings():   # NumPy's deprecation of 2-vectors, warned by the reference
        warnings.simplefilter("ignore", DeprecationWarning)
        dt = _probe(name, np.cross, (a, b), ((na,), (nb,)))
    if na == nb == 2:
        return TensorType(dt, batch)
    c = rules.axis(name, axc, len(batch) + 1)
    return TensorType(dt, batch[:c] + (3,) + batch[c:])


def _cross_samples(rng):
    for dt in sampling.NUMERIC:
        yield Sample((sampling.array(rng, (4, 3), dt), sampling.array(rng, (4, 3), dt)))
    yield Sample((sampling.array(rng, (2, 1, 3), "f8"), sampling.array(rng, (5, 3), "f8")), note="broadcast")
    yield Sample((sampling.array(rng, (3, 4), "f4"), sampling.array(rng, (4, 3), "f4")),
                 {"axisa": 0, "axisc": 0}, note="axes")
    yield Sample((sampling.array(rng, (3, 2), "f8"), sampling.array(rng, (3, 2), "f8")), {"axis": 0})
    yield Sample((sampling.array(rng, (3,), "i4"), sampling.array(rng, (3,), "f8")), note="mixed")


register(OpDef(
    "np.cross", "contraction",
    [Input("a"), Input("b"), Attr("axisa", -1, rules.to_int), Attr("axisb", -1, rules.to_int),
     Attr("axisc", -1, rules.to_int), Attr("axis", None, rules.to_int_or_none)],
    _cross_rule, lambda a, b, axisa, axisb, axisc, axis: np.cross(a, b, axisa, axisb, axisc, axis),
    numpy_targets=[np.cross], samples=_cross_samples, binder=defaults_or_host("np.cross"),
    doc="3-vectors (or NumPy's deprecated 2-vectors) along the given axes",
))


# -- kron, vdot ------------------------------------------------------------------------------------

def _kron_rule(types, attrs):
    name = "np.kron"
    a, b = (rules.shape_of(t) for t in types)
    nd = max(len(a), len(b))
    a, b = (1,) * (nd - len(a)) + tuple(a), (1,) * (nd - len(b)) + tuple(b)
    dt = rules.result_dtype(name, types)
    return TensorType(dt, tuple(dims.mul(x, y) for x, y in zip(a, b)))


def _kron_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (2, 3), dt), sampling.array(rng, (2, 2), dt)))
    yield Sample((sampling.array(rng, (3,), "f8"), sampling.array(rng, (2, 2, 2), "f4")), note="ranks differ")
    yield Sample((sampling.array(rng, (2, 2), "i4"), 2.5), note="scalar")
    yield Sample((sampling.array(rng, (0, 2), "f8"), sampling.array(rng, (3, 1), "f8")), note="empty")


register(OpDef(
    "np.kron", "contraction", [Input("a", "any"), Input("b", "any")], _kron_rule,
    lambda a, b: np.asarray(np.kron(a, b)), numpy_targets=[np.kron], samples=_kron_samples,
    doc="the Kronecker product: block (i, j) is a[i, j] * b",
))


def _vdot_rule(types, attrs):
    name = "np.vdot"
    a, b = _tensors(name, types)
    _same(name, dims.prod(a.shape), dims.prod(b.shape))
    return TensorType(_probe(name, np.vdot, (a, b), ((1,), (1,))), ())


def _vdot_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (2, 3), dt), sampling.array(rng, (6,), dt)))
    yield Sample((sampling.array(rng, (4,), "c16"), sampling.array(rng, (2, 2), "c16")), note="complex")
    yield Sample((sampling.array(rng, (0,), "f8"), sampling.array(rng, (0,), "f8")), note="empty")


register(OpDef(
    "np.vdot", "contraction", [Input("a"), Input("b")], _vdot_rule,
    lambda a, b: np.asarray(np.vdot(a, b)), numpy_targets=[np.vdot], samples=_vdot_samples,
    doc="the dot product of the flattened arrays, the first conjugated",
))


# -- gufuncs: vecdot, matvec, vecmat ---------------------------------------------------------------

def _gufunc_rule(name, fn):
    """(a core dims, b core dims, out core dims) by the gufunc's signature."""

    def rule(types, attrs):
        a, b = _tensors(name, types)
        if fn is np.vecdot:
            ax = attrs["axis"]
            if a.ndim < 1 or b.ndim < 1:
                raise ShapeError(f"{name}: inputs must be at least 1-d")
            ia, ib = rules.axis(name, ax, a.ndim), rules.axis(name, ax, b.ndim)
            _same(name, a.shape[ia], b.shape[ib])
            batch = rules.broadcast(name, a.shape[:ia] + a.shape[ia + 1:], b.shape[:ib] + b.shape[ib + 1:])
            core, probe = (), ((1,), (1,))
        elif fn is np.matvec:
            if a.ndim < 2 or b.ndim < 1:
                raise ShapeError(f"{name}: needs a matrix and a vector, got {a} and {b}")
            _same(name, a.shape[-1], b.shape[-1])
            batch = rules.broadcast(name, a.shape[:-2], b.shape[:-1])
            core, probe = (a.shape[-2],), ((1, 1), (1,))
        else:
            if a.ndim < 1 or b.ndim < 2:
                raise ShapeError(f"{name}: needs a vector and a matrix, got {a} and {b}")
            _same(name, a.shape[-1], b.shape[-2])
            batch = rules.broadcast(name, a.shape[:-1], b.shape[:-2])
            core, probe = (b.shape[-1],), ((1,), (1, 1))
        return TensorType(_probe(name, fn, (a, b), probe), batch + core)

    return rule


def _gufunc_samples(fn):
    core = {np.vecdot: ((4,), (4,)), np.matvec: ((3, 4), (4,)), np.vecmat: ((4,), (4, 3))}[fn]

    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample(tuple(sampling.array(rng, (2,) + s, dt) for s in core))
        yield Sample((sampling.array(rng, (5, 1) + core[0], "f8"), sampling.array(rng, (2,) + core[1], "f8")),
                     note="broadcast batch")
        yield Sample((sampling.array(rng, core[0], "c16"), sampling.array(rng, core[1], "c16")),
                     note="complex")
        yield Sample((sampling.array(rng, (0,) + core[0], "f4"), sampling.array(rng, core[1], "i4")),
                     note="empty batch, mixed")
        if fn is np.vecdot:
            yield Sample((sampling.array(rng, (4, 3), "f8"), sampling.array(rng, (4, 1), "f8")), {"axis": 0})

    return samples


_fn: Any
for _fn in (np.vecdot, np.matvec, np.vecmat):
    _name = f"np.{_fn.__name__}"
    _params: list[Param] = [Input("x1"), Input("x2"), Unsupported("out")]
    if _fn is np.vecdot:
        _params.append(Attr("axis", -1, rules.to_int))
    register(OpDef(
        _name, "contraction", _params, _gufunc_rule(_name, _fn),
        (lambda f: lambda x1, x2, **kw: np.asarray(f(x1, x2, **kw)))(_fn),
        numpy_targets=[_fn], samples=_gufunc_samples(_fn), binder=defaults_or_host(_name),
        doc="NumPy's gufunc (the first operand conjugated for vecdot and vecmat); its other keywords "
        "(axes=, dtype=, ...) are host calls",
    ))
