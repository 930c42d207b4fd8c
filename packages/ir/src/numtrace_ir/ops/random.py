"""Random draws, recorded as nondeterministic nodes so a traced function draws fresh values on every
call. Distribution parameters are static attrs.

`np.random.*` draw from NumPy's global generator, as the untraced code does. A `Generator` object is
state the IR cannot carry: ``rng.normal(...)`` traces to `np.random.Generator.normal`, whose
reference draws from a process-wide generator seeded from OS entropy, so the distribution is the
user's but the stream is not (a seeded `Generator` does not make a traced function repeatable).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from numtrace_ir.ops import rules
from numtrace_ir.registry import Attr, OpDef, Sample, get, register
from numtrace_ir.types import TensorType


def _size(v):
    return None if v is None else rules.to_shape(v)


def _rule(types, attrs):
    dtype = attrs.get("dtype") or np.dtype(np.float64)
    if attrs["size"] is None and dtype.kind == "f":  # NumPy returns a Python float, whatever the dtype
        dtype = np.dtype(np.float64)
    return TensorType(dtype, attrs["size"] or ())


def _dims_binder(name):
    """``np.random.rand(d0, d1, ...)``: the dims are positional."""

    def bind(args, kwargs):
        if kwargs:
            raise TypeError(f"{name}: unexpected keyword argument(s) {sorted(kwargs)}")
        return [], {"size": tuple(args) if args else None}

    return bind


def random_op(
    name: str,
    fn: Callable,
    params: list,
    *,
    target: Callable | None = None,
    binder: Callable | None = None,
    cases: tuple = ({},),
) -> OpDef:
    """A draw of shape ``size`` (None: one value, as a 0-d array) by `fn`; `target` (default `fn`) is
    the NumPy function that traces to it."""

    def impl(**attrs):
        return np.asarray(fn(**attrs))

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
_LOW, _HIGH = Attr("low", 0.0, rules.to_float_or_none), Attr("high", 1.0, rules.to_float_or_none)
_LOC, _SCALE = Attr("loc", 0.0, rules.to_float_or_none), Attr("scale", 1.0, rules.to_float_or_none)
random_op(
    "np.random.uniform",
    np.random.uniform,
    [_LOW, _HIGH, _SIZE],
    cases=({}, {"low": -2.0, "high": 3.0}),
)
random_op(
    "np.random.normal",
    np.random.normal,
    [_LOC, _SCALE, _SIZE],
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


# -- Generator methods ---------------------------------------------------------------------------------

_GENERATOR = np.random.default_rng()


def _method_binder(name: str):
    """``rng.method(*args, **kwargs)``: the generator (first argument) is dropped, see the module doc."""

    def bind(args, kwargs):
        if not args or not isinstance(args[0], np.random.Generator):
            raise TypeError(f"{name}: expected a numpy.random.Generator as the first argument")
        return get(name).bind_schema(args[1:], kwargs)

    return bind


def _float_dtype(v):
    dt = rules.to_dtype_or_none(v)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"expected float32 or float64, got {v!r}")
    return dt


_FLOAT_DTYPE = Attr("dtype", np.dtype(np.float64), _float_dtype)
for _method, _params, _cases in (
    ("random", [_SIZE, _FLOAT_DTYPE], ({}, {"dtype": np.dtype(np.float32)})),
    ("standard_normal", [_SIZE, _FLOAT_DTYPE], ({}, {"dtype": np.dtype(np.float32)})),
    ("normal", [_LOC, _SCALE, _SIZE], ({}, {"loc": 1.0, "scale": 0.5})),
    ("uniform", [_LOW, _HIGH, _SIZE], ({}, {"low": -2.0, "high": 3.0})),
    (
        "integers",
        [
            Attr("low", convert=rules.to_int),
            Attr("high", None, rules.to_int_or_none),
            _SIZE,
            Attr("dtype", np.dtype(np.int64), rules.to_dtype_or_none),
            Attr("endpoint", False, rules.to_bool),
        ],
        ({"low": 5}, {"low": -3, "high": 3, "dtype": np.dtype(np.int32), "endpoint": True}),
    ),
):
    _name = f"np.random.Generator.{_method}"
    random_op(
        _name,
        getattr(_GENERATOR, _method),
        _params,
        target=getattr(np.random.Generator, _method),
        binder=_method_binder(_name),
        cases=_cases,
    )
