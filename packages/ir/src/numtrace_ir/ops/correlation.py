"""Covariance and correlation matrices: `cov`, `corrcoef`. NumPy's call is the reference (warnings for
too few observations included); the rule gives the variables-by-variables shape, squeezed as NumPy
squeezes it (one variable: a 0-d result), so one trace serves any number of observations."""

from __future__ import annotations

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.nanfunctions import defaults_or_host
from numtrace_ir.registry import Attr, Input, OpDef, Param, Sample, Unsupported, register
from numtrace_ir.types import TensorType


def _variables(name: str, t, rowvar: bool, is_m: bool):
    """The number of variables of `m` or `y` as NumPy makes them 2-d: ``m`` is transposed when
    ``rowvar`` is False and it is not 1-d, ``y`` when its first dim is not 1."""
    if t.ndim > 2:
        raise ShapeError(f"{name}: m and y must have at most 2 dimensions, got {t}")
    shape = (1,) * (2 - t.ndim) + tuple(t.shape)
    if not rowvar and (t.ndim != 1 if is_m else shape[0] != 1):
        shape = shape[::-1]
    return shape[0]


def _rule(name: str):
    def rule(types, attrs):
        tensors = [rules.first_tensor(name, (t,)) for t in types]
        rowvar = attrs["rowvar"]
        n = _variables(name, tensors[0], rowvar, True)
        if n == 0:
            return TensorType(np.float64, (0, 0))
        for t in tensors[1:]:
            n = dims.add(n, _variables(name, t, rowvar, False))
        dt = attrs["dtype"] or rules.result_dtype(name, (*tensors, TensorType(np.float64, ())))
        return TensorType(dt, () if n == 1 else (n, n))

    return rule


def _samples(cov: bool):
    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample((sampling.array(rng, (3, 6), dt),), {"omitted": ("y",)})
        for shape, attrs in (((6,), {}), ((5, 3), {"rowvar": False}), ((1, 6), {}),
                             ((4, 1), {"rowvar": False}), ((2, 5), {"dtype": np.dtype("f4")})):
            yield Sample((sampling.array(rng, shape, "f8"),), {"omitted": ("y",), **attrs})
        yield Sample((sampling.array(rng, (3, 5), "f8"), sampling.array(rng, (2, 5), "f4")), note="with y")
        yield Sample((sampling.array(rng, (5, 2), "f8"), sampling.array(rng, (5,), "f8")), {"rowvar": False},
                     note="with y, rowvar=False")
        yield Sample((sampling.array(rng, (2, 4), "c16"),), {"omitted": ("y",)}, note="complex")
        if cov:
            yield Sample((sampling.array(rng, (3, 6), "f8"),), {"omitted": ("y",), "bias": True})
            yield Sample((sampling.array(rng, (3, 6), "f8"),), {"omitted": ("y",), "ddof": 2})

    return samples


def _cov_impl(m, y, rowvar, bias, ddof, dtype):
    return np.asarray(np.cov(m, y, rowvar, bias, ddof, dtype=dtype))


def _corrcoef_impl(x, y, rowvar, dtype):
    return np.asarray(np.corrcoef(x, y, rowvar, dtype=dtype))


_COV_PARAMS: list[Param] = [
    Input("m"), Input("y", optional=True), Attr("rowvar", True, rules.to_bool),
    Attr("bias", False, rules.to_bool),
    Attr("ddof", None, rules.to_int_or_none), Unsupported("fweights"), Unsupported("aweights"),
    Attr("dtype", None, rules.to_dtype_or_none),
]
_CORRCOEF_PARAMS: list[Param] = [
    Input("x"), Input("y", optional=True), Attr("rowvar", True, rules.to_bool),
    Unsupported("bias", np._NoValue), Unsupported("ddof", np._NoValue),
    Attr("dtype", None, rules.to_dtype_or_none),
]
register(OpDef("np.cov", "other", _COV_PARAMS, _rule("np.cov"), _cov_impl, numpy_targets=[np.cov],
               samples=_samples(True), binder=defaults_or_host("np.cov"),
               doc="variables by variables (0-d for one variable); fweights/aweights are host calls"))
register(OpDef("np.corrcoef", "other", _CORRCOEF_PARAMS, _rule("np.corrcoef"), _corrcoef_impl,
               numpy_targets=[np.corrcoef], samples=_samples(False), binder=defaults_or_host("np.corrcoef"),
               doc="variables by variables (0-d for one variable)"))
