"""SciPy functions real NumPy code calls, as ops with shape rules: ``scipy.special.logsumexp``.

SciPy writes it in Python over its array-API layer, whose checks hash and convert shapes (``{a.shape
for a in args}``, ``float(prod(shape))``): traced through, each of those fixes a size and the trace is
taken again at every new one. As one op (reference: SciPy's own function, called at run time), one
trace serves every size and the values are SciPy's. SciPy is imported only when the op is used; the
frontend dispatches calls to it while tracing (`numtrace.interception`). The forms with ``b=`` or
``return_sign=True`` are not the op: they trace through SciPy's code as before.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.reductions import _reduced_shape
from numtrace_ir.registry import Attr, Input, OpDef, Sample, register
from numtrace_ir.types import TensorType

LOGSUMEXP = "scipy.special.logsumexp"


def _logsumexp(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    from scipy.special import logsumexp

    return logsumexp(a, axis=axis, keepdims=keepdims)


def _axis(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, (tuple, list)):
        return tuple(rules.to_int(a) for a in v)
    return rules.to_int(v)


def _only_default(name: str, default: Any):
    def convert(v: Any) -> Any:
        if v is not default:   # another form of the function: the tracer follows SciPy's own code
            raise NotImplementedError(f"{LOGSUMEXP} with {name}={v!r:.40} is not the op")
        return v

    return convert


def _rule(types, attrs):
    t = rules.first_tensor(LOGSUMEXP, types)
    dtype = rules.probe_dtype(LOGSUMEXP, _logsumexp, np.zeros((1,), t.dtype))
    return TensorType(dtype, _reduced_shape(LOGSUMEXP, t.shape, attrs["axis"], attrs["keepdims"], False))


def _samples(rng):
    for dt in ("f8", "f4", "i8", "b1", "c16"):
        yield Sample((sampling.array(rng, (3, 4), dt),), {"axis": 1})
    x = sampling.array(rng, (2, 3, 4), "f8")
    yield Sample((x,), {})
    yield Sample((x,), {"axis": (0, 2), "keepdims": True})
    yield Sample((np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 0.0]]),), {"axis": 1})
    yield Sample((np.zeros((0, 3)),), {"axis": 0})
    yield Sample((np.array(1.5),), {})


register(
    OpDef(
        LOGSUMEXP,
        "reduction",
        [Input("a"), Attr("axis", None, _axis), Attr("b", None, _only_default("b", None)),
         Attr("keepdims", False, rules.to_bool),
         Attr("return_sign", False, _only_default("return_sign", False))],
        _rule,
        lambda a, axis, b, keepdims, return_sign: _logsumexp(a, axis, keepdims),
        samples=_samples,
        doc="``scipy.special.logsumexp(a, axis, keepdims=...)``: SciPy's own function at run time",
    )
)
