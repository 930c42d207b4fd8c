"""Random draws from NumPy's global generator (`np.random.*`), recorded as nondeterministic nodes so
a traced function draws fresh values on every call. Distribution parameters are static attrs.
`Generator` methods are not ops: a generator object is state the IR cannot carry."""

from __future__ import annotations

import numpy as np

from numtrace_ir.ops import rules
from numtrace_ir.registry import Attr, OpDef, Sample, register
from numtrace_ir.types import TensorType


def _size(v):
    return None if v is None else rules.to_shape(v)


def _rule(types, attrs):
    return TensorType(attrs.get("dtype") or np.float64, attrs["size"] or ())


def _dims_binder(name):
    """``np.random.rand(d0, d1, ...)``: the dims are positional."""

    def bind(args, kwargs):
        if kwargs:
            raise TypeError(f"{name}: unexpected keyword argument(s) {sorted(kwargs)}")
        return [], {"size": tuple(args) if args else None}

    return bind


def random_op(name: str, fn, params, *, target=None, binder=None, cases=({},)) -> OpDef:
    """A draw of shape ``size`` (None: one value, as a 0-d array) by `fn`; `target` (default `fn`) is
    the NumPy function that traces to it."""
    attr_names = [p.name for p in params]

    def impl(**kw):
        return np.asarray(fn(**{k: kw[k] for k in attr_names}))

    def samples(rng):
        for attrs in cases:
            for size in (None, (3, 4), (0,)):
                yield Sample((), {**attrs, "size": size})

    return register(
        OpDef(
            name,
            "random",
            params,
            _rule,
            impl,
            numpy_targets=[target or fn],
            samples=samples,
            nondeterministic=True,
            binder=binder,
        )
    )


_SIZE = Attr("size", None, _size)
random_op("np.random.random", np.random.random, [_SIZE])
random_op(
    "np.random.rand", np.random.random, [_SIZE], target=np.random.rand, binder=_dims_binder("np.random.rand")
)
random_op(
    "np.random.randn",
    np.random.standard_normal,
    [_SIZE],
    target=np.random.randn,
    binder=_dims_binder("np.random.randn"),
)
random_op("np.random.standard_normal", np.random.standard_normal, [_SIZE])
random_op(
    "np.random.uniform",
    np.random.uniform,
    [Attr("low", 0.0, rules.to_float_or_none), Attr("high", 1.0, rules.to_float_or_none), _SIZE],
    cases=({}, {"low": -2.0, "high": 3.0}),
)
random_op(
    "np.random.normal",
    np.random.normal,
    [Attr("loc", 0.0, rules.to_float_or_none), Attr("scale", 1.0, rules.to_float_or_none), _SIZE],
    cases=({}, {"loc": 1.0, "scale": 0.5}),
)
random_op(
    "np.random.randint",
    np.random.randint,
    [
        Attr("low", convert=rules.to_int),
        Attr("high", None, rules.to_int_or_none),
        _SIZE,
        Attr("dtype", np.dtype(np.int64), lambda v: rules.to_dtype_or_none(v)),
    ],
    cases=({"low": 5}, {"low": -3, "high": 3, "dtype": np.dtype(np.int32)}),
)
