"""Creation ops: shaped like an input (`zeros_like`, `ones_like`, `full_like`: the input's values are not
read, only its dtype and shape), and ranges and matrices made from numbers (`arange`, `linspace`, `eye`,
`tri`). Arrays created from constant numbers are constants of the trace; these ops are recorded when a
number is a traced size (through `prim.dynamic`), so the array follows the input's shape."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Input, OpDef, Param, Sample, Unsupported, register
from numtrace_ir.types import ScalarType, TensorType


def _like_rule(name):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        shape = t.shape if attrs["shape"] is None else attrs["shape"]
        return TensorType(attrs["dtype"] or t.dtype, shape)

    return rule


def like_op(name: str, fn: Callable, fill: bool) -> OpDef:
    fill_param: list[Param] = [Attr("fill_value", convert=rules.to_fill_value)] if fill else []
    params: list[Param] = (
        [Input("a")]
        + fill_param
        + [
            Attr("dtype", None, rules.to_dtype_or_none),
            Attr("order", "K", rules.one_of("C", "F", "A", "K")),
            Unsupported("subok", True),
            Attr("shape", None, lambda v: None if v is None else rules.to_shape(v)),
        ]
    )
    fill_attrs = {"fill_value": 2} if fill else {}
    cases = [
        (((3, 4),), fill_attrs),
        (((),), fill_attrs),
        (((0, 2),), {**fill_attrs, "dtype": np.dtype("f4")}),
        (((3, 4),), {**fill_attrs, "shape": (2, 5)}),
        (((2, 3),), {**fill_attrs, "order": "F"}),
    ]
    if fill:
        cases.append((((2, 2),), {"fill_value": 1.5, "dtype": np.dtype("i4")}))
    return register(
        OpDef(
            name,
            "creation",
            params,
            _like_rule(name),
            lambda a, **kw: fn(a, **kw),
            numpy_targets=[fn],
            samples=sampling.sweep(cases),
        )
    )


like_op("np.zeros_like", np.zeros_like, False)
like_op("np.ones_like", np.ones_like, False)
like_op("np.full_like", np.full_like, True)


# -- ranges and matrices from numbers (``np.arange(n)`` with n a traced size is recorded through
# `prim.dynamic`, which supplies the numbers at run time) ----------------------------------------------


def _has_numpy_scalar(*values) -> bool:
    return any(type(v) is np.ndarray for v in values)


def _kind(v) -> ScalarType | TensorType:
    if type(v) is np.ndarray:
        return TensorType(v.dtype, ())
    return ScalarType("bool" if type(v) is bool else "int" if type(v) is int else "float")


def _arange_rule(types, attrs):
    start, stop, step = attrs["start"], attrs["stop"], attrs["step"]
    if _has_numpy_scalar(start, stop, step):
        # NumPy's arange takes its length and dtype from the scalars' own types (np.uint64 with an int
        # is float64; a small int type's arithmetic wraps): NumPy's answer, not a model of it.
        out = _arange(start, stop, step, attrs["dtype"])
        return TensorType(out.dtype, out.shape)
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("np.arange: step must not be zero")
    length = max(0, math.ceil((stop - start) / step))
    dtype = attrs["dtype"] or rules.result_dtype("np.arange", tuple(_kind(v) for v in (start, stop, step)))
    return TensorType(dtype, (length,))


def _arange(start, stop, step, dtype):
    start, stop, step = rules.numpy_value(start), rules.numpy_value(stop), rules.numpy_value(step)
    return np.arange(start, stop, step, dtype=dtype) if stop is not None else np.arange(start, step=step,
                                                                                         dtype=dtype)


def _linspace_rule(types, attrs):
    num = attrs["num"]
    if num < 0:
        raise ValueError(f"np.linspace: num must be non-negative, got {num}")
    dtype = attrs["dtype"] or rules.result_dtype(
        "np.linspace", (_kind(attrs["start"]), _kind(attrs["stop"]), ScalarType("float")))
    return TensorType(dtype, (num,))


def _eye_rule(types, attrs):
    n, m = attrs["N"], attrs["M"]
    if n < 0 or (m is not None and m < 0):
        raise ValueError(f"negative dimensions are not allowed: {n}, {m}")
    return TensorType(attrs["dtype"], (n, n if m is None else m))


def _creation_samples(cases):
    def samples(rng):
        for attrs in cases:
            yield Sample((), attrs)

    return samples


_FLOAT = np.dtype(np.float64)


def _float_default(v):
    return _FLOAT if v is None else rules.to_dtype_or_none(v)


def _arange_number(v):
    """A real bound or step: the rule runs NumPy's arange on NumPy scalars, which warns of a complex one's
    cast (a warning the call then gives twice)."""
    return rules.to_number(v, real=True)


register(OpDef(
    "np.arange", "creation",
    [Attr("start", convert=_arange_number),
     Attr("stop", None, lambda v: None if v is None else _arange_number(v)),
     Attr("step", 1, lambda v: 1 if v is None else _arange_number(v)),   # NumPy reads step=None as 1
     Attr("dtype", None, rules.to_dtype_or_none), Unsupported("device"),
     Unsupported("like")],
    _arange_rule, _arange, numpy_targets=[np.arange],
    samples=_creation_samples([{"start": 5}, {"start": 2, "stop": 9, "step": 3}, {"start": 0.5, "stop": 3.0},
                               {"start": 4, "stop": 0, "step": -1}, {"start": 3, "dtype": np.dtype("f4")},
                               {"start": 0}, {"start": np.uint64(1), "stop": 7},
                               {"start": 0.5, "stop": 3.0, "step": np.float32(0.1)}]),
    memo_key=rules.typed_memo_key,
    doc="``np.arange(start, stop, step)``: a 1-D range"))
register(OpDef(
    "np.linspace", "creation",
    [Attr("start", convert=rules.to_number), Attr("stop", convert=rules.to_number),
     Attr("num", 50, rules.to_int),
     Attr("endpoint", True, rules.to_bool), Unsupported("retstep", False),
     Attr("dtype", None, rules.to_dtype_or_none), Attr("axis", 0, rules.to_int)],
    _linspace_rule,
    lambda start, stop, num, endpoint, dtype, axis: np.linspace(
        rules.numpy_value(start), rules.numpy_value(stop), num, endpoint, dtype=dtype, axis=axis),
    numpy_targets=[np.linspace],
    samples=_creation_samples([{"start": 0.0, "stop": 1.0, "num": 5}, {"start": 0, "stop": 10, "num": 0},
                               {"start": -1, "stop": 1, "num": 4, "endpoint": False},
                               {"start": np.float32(0.1), "stop": 1.0, "num": 4},
                               {"start": np.float16(-1), "stop": np.float16(3), "num": 6}]),
    memo_key=rules.typed_memo_key,
    doc="``np.linspace(start, stop, num)`` (scalar bounds)"))
register(OpDef(
    "np.eye", "creation",
    [Attr("N", convert=rules.to_int), Attr("M", None, rules.to_int_or_none), Attr("k", 0, rules.to_int),
     Attr("dtype", _FLOAT, _float_default), Attr("order", "C", rules.one_of("C", "F")),
     Unsupported("device"), Unsupported("like")],
    _eye_rule,
    lambda N, M, k, dtype, order: np.eye(N, M, k, dtype=dtype, order=order),
    numpy_targets=[np.eye],
    samples=_creation_samples([{"N": 3}, {"N": 2, "M": 4, "k": 1}, {"N": 0},
                               {"N": 3, "dtype": np.dtype("i4")}]),
    doc="``np.eye(N, M, k)`` (``np.identity(n)`` is ``np.eye(n)``)"))
register(OpDef(
    "np.tri", "creation",
    [Attr("N", convert=rules.to_int), Attr("M", None, rules.to_int_or_none), Attr("k", 0, rules.to_int),
     Attr("dtype", _FLOAT, _float_default), Unsupported("like")],
    _eye_rule,
    lambda N, M, k, dtype: np.tri(N, M, k, dtype=dtype),
    numpy_targets=[np.tri],
    samples=_creation_samples([{"N": 3}, {"N": 2, "M": 4, "k": -1}, {"N": 0, "M": 2}]),
    doc="``np.tri(N, M, k)``: ones at and below the k-th diagonal"))
