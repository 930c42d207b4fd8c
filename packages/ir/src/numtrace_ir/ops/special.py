"""Elementwise special functions NumPy writes in Python: `sinc` and `i0`. Each is one op with a shape
rule (the input's shape) so one trace serves every size, where tracing NumPy's code would record its
branches. `sinc` decomposes into the ufuncs NumPy's own code calls (backends fuse them); `i0`'s
Chebyshev series runs as NumPy's call."""

from __future__ import annotations

import numpy as np

from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.elementwise import _create
from numtrace_ir.ops.nanfunctions import _const
from numtrace_ir.registry import Input, OpDef, Sample, register
from numtrace_ir.types import TensorType


def _elementwise_rule(name: str, fn):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        return TensorType(rules.probe_dtype(name, fn, np.ones((1,), t.dtype)), t.shape)

    return rule


def _sinc_decompose(g, node):
    """NumPy's ``y = where(pi * x, pi * x, eps); sin(y) / y`` (eps: the float dtype's, else 1e-20),
    node for node, so the values are NumPy's up to the sine's ulps."""
    x = _create(g, node, "np.multiply", [_const(g, node, np.pi), node.inputs[0]])
    dt = x.type.dtype
    eps = float(np.finfo(dt).eps) if dt.kind == "f" else 1e-20
    y = _create(g, node, "np.where", [_create(g, node, "np.not_equal", [x, _const(g, node, 0)]), x,
                                      _const(g, node, eps)])
    return [_create(g, node, "np.divide", [_create(g, node, "np.sin", [y]), y])]


def _samples(dtypes, domain):
    def samples(rng):
        for dt in dtypes:
            yield Sample((sampling.array(rng, (3, 4), dt, domain),))
        for shape in ((), (0,), (2, 3, 4)):
            yield Sample((sampling.array(rng, shape, "f8", domain),))
        yield Sample((np.array([0.0, -0.0, 1.0, -2.0, 8.0, -8.0, 1e-30]),),
                     note="zeros and the series boundary")

    return samples


register(OpDef(
    "np.sinc", "elementwise", [Input("x")], _elementwise_rule("np.sinc", np.sinc), np.sinc,
    numpy_targets=[np.sinc], samples=_samples((*sampling.DTYPES, np.dtype("c16")), (-3.0, 3.0)),
    decompose=_sinc_decompose,
    doc="``sin(pi x) / (pi x)``, 1 at 0 (NumPy's formula: x = 0 is replaced by the dtype's eps)",
))


def _i0_rule(types, attrs):
    t = rules.first_tensor("np.i0", types)
    if t.dtype.kind == "c":
        raise TypeError("np.i0: i0 not supported for complex values")
    return _elementwise_rule("np.i0", np.i0)(types, attrs)


register(OpDef(
    "np.i0", "elementwise", [Input("x")], _i0_rule, np.i0,
    numpy_targets=[np.i0], samples=_samples(sampling.DTYPES, (-12.0, 12.0)),
    doc="the modified Bessel function of order 0 (NumPy's Chebyshev series, on both sides of |x| = 8)",
))
