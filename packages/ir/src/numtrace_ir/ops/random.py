"""Random draws, recorded as nondeterministic nodes so a traced function draws fresh values on every
call. Distribution parameters are static attrs; a ``size`` may name symbolic dims (``("n0", 3)``),
each given by an int scalar input (``dims``), so a draw sized by ``x.shape`` follows the input's shape
at run time, as ``prim.full`` does.

`np.random.*` draw from NumPy's global generator, as the untraced code does: after
``np.random.seed(s)`` a traced call draws what the eager call draws.

`np.random.Generator` methods come in two forms. With a ``state`` input (a PCG64 state packed into a
``uint64[6]`` tensor, see `pack_state`) the draw is a pure function ``state -> (state', values)``: a
generator the traced function creates itself starts its chain from its seeded state (a constant) or,
unseeded, from `np.random.default_rng` (fresh OS entropy per call), so each call draws what the eager
function draws. Without a state (a generator that outlives the call, e.g. closed over), the IR cannot
carry the object: the draw uses a process-wide generator seeded from OS entropy, so the distribution
is the user's but the stream is not.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from numtrace_ir.ops import rules
from numtrace_ir.registry import Attr, Input, Inputs, OpDef, Sample, get, register
from numtrace_ir.types import ScalarType, TensorType

STATE_SIZE = 6
_MASK = (1 << 64) - 1


def pack_state(bit_generator: np.random.BitGenerator) -> np.ndarray:
    """A PCG64 bit generator's state as ``uint64[6]``: state (hi, lo), increment (hi, lo), whether a
    32-bit half is buffered, and that half. `TypeError` for other bit generators."""
    st = bit_generator.state
    if st.get("bit_generator") != "PCG64":
        raise TypeError(
            f"only PCG64 generators (np.random.default_rng) can be traced, got {st.get('bit_generator')}"
        )
    s, inc = st["state"]["state"], st["state"]["inc"]
    return np.array([s >> 64, s & _MASK, inc >> 64, inc & _MASK, st["has_uint32"], st["uinteger"]], np.uint64)


# Bound at import: a trace patches the np.random names while it runs (the frontend's interception).
_PCG64, _GENERATOR_CLASS = np.random.PCG64, np.random.Generator


def unpack_state(state: np.ndarray) -> np.random.Generator:
    """A fresh Generator in the packed `state` (see `pack_state`)."""
    v = [int(x) for x in np.asarray(state, np.uint64).reshape(STATE_SIZE)]
    bg = _PCG64()
    bg.state = {"bit_generator": "PCG64", "state": {"state": (v[0] << 64) | v[1], "inc": (v[2] << 64) | v[3]},
                "has_uint32": v[4], "uinteger": v[5]}
    return _GENERATOR_CLASS(bg)


_STATE_TYPE = TensorType(np.dtype(np.uint64), (STATE_SIZE,))


def _size(v):
    """None (one value), or a shape whose entries are ints or dim symbols (each an int input)."""
    if v is None:
        return None
    shape = rules.to_dyn_shape(v)
    if any(type(d) is int and d < 0 for d in shape):
        raise ValueError(f"negative dimensions are not allowed: {v!r}")
    return shape


def _concrete(size, dims):
    return None if size is None else rules.fill_dyn_shape(size, dims)


def _draw_type(types, attrs, name):
    """A draw's type. One value (no ``size``) is what NumPy returns it as: a Python float for every float
    draw (whatever the dtype), a Python int for ``np.random.randint`` without a dtype, else a NumPy
    scalar (``Generator.integers``); Python numbers are weak scalars (NEP 50: ``x_f32 * rng.random()``
    stays float32), so they are scalar values of the graph, not 0-d arrays."""
    size = attrs["size"]
    rules.check_dyn_dims(name, "size", size or (), tuple(types))
    dtype = attrs.get("dtype")
    ints = name == "np.random.randint"
    if size is None and (dtype is None or dtype.kind == "f"):
        return ScalarType("int" if ints else "float")
    return TensorType(dtype or np.dtype(int if ints else np.float64), size or ())


def _as_drawn(values, size):
    """A draw's result as its type says: the Python number NumPy returned for one value, else an array."""
    if size is None and type(values) in (float, int):
        return values
    return np.asarray(values)


def _call_binder(name: str, call: OpDef, skip_self: bool):
    """Bind NumPy's call (``np.random.normal(loc, scale, size)``, ``rng.normal(...)`` with the generator
    first when `skip_self`) against `call`, the attrs-only schema; the graph inputs (dims, state) are the
    tracer's to add."""

    def bind(args, kwargs):
        if skip_self:
            if not args or not isinstance(args[0], np.random.Generator):
                raise TypeError(f"{name}: expected a numpy.random.Generator as the first argument")
            args = args[1:]
        _, attrs = call.bind_schema(args, kwargs)
        if skip_self:
            attrs["omitted"] = ("state",)  # the tracer passes a state input where it has one
        return [], attrs

    return bind


def _dims_binder(name):
    """``np.random.rand(d0, d1, ...)``: the dims are positional."""

    def bind(args, kwargs):
        if kwargs:
            raise TypeError(f"{name}: unexpected keyword argument(s) {sorted(kwargs)}")
        return [], {"size": tuple(args) if args else None}

    return bind


def _samples(cases, stateful=False):
    def samples(rng):
        none = {"omitted": ("state",)} if stateful else {}
        for attrs in cases:
            for size in (None, (3, 4), (0,)):
                yield Sample((), {**attrs, **none, "size": size})
        yield Sample((3,), {**cases[0], **none, "size": ("n", 2)}, note="size from a traced dim")
        if stateful:
            state = pack_state(np.random.default_rng(7).bit_generator)
            for attrs in cases:
                yield Sample((state,), {**attrs, "size": (2, 3)}, note="seeded state")
            yield Sample((state, 4), {**cases[0], "size": (2, "n")}, note="seeded state, traced dim")

    return samples


def random_op(
    name: str,
    fn: Callable,
    params: list,
    *,
    target: Callable | None = None,
    binder: Callable | None = None,
    cases: tuple = ({},),
) -> OpDef:
    """A draw of shape ``size`` (None: one value, typed as NumPy returns it, see `_draw_type`) by `fn`;
    `target` (default `fn`) is the NumPy function that traces to it."""

    def impl(dims, size, **attrs):
        return _as_drawn(fn(size=_concrete(size, dims), **attrs), size)

    call = OpDef(name, "random", params, lambda types, attrs: None, impl)
    return register(
        OpDef(
            name,
            "random",
            [Inputs("dims", "scalar", star=True, minimum=0), *params],
            lambda types, attrs: _draw_type(types, attrs, name),
            impl,
            numpy_targets=[target or fn],
            samples=_samples(cases),
            nondeterministic=True,
            data_dependent_shape=True,  # a size may name dims given at run time
            binder=binder or _call_binder(name, call, False),
        )
    )


def _randint_dtype(v):
    """None for NumPy's default (``int``: one value is a Python int, an array int64), else the dtype."""
    return None if v is None or v is int else rules.to_dtype_or_none(v)


def _randint(low, high=None, size=None, dtype=None):
    return np.random.randint(low, high, size, dtype=int if dtype is None else dtype)


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
    _randint,
    target=np.random.randint,
    params=[
        Attr("low", convert=rules.to_int),
        Attr("high", None, rules.to_int_or_none),
        _SIZE,
        Attr("dtype", None, _randint_dtype),
    ],
    cases=({"low": 5}, {"low": -3, "high": 3, "dtype": np.dtype(np.int32)},
           {"low": 2, "dtype": np.dtype(np.int64)}),
)


# -- Generator methods ---------------------------------------------------------------------------------

_GENERATOR = np.random.default_rng()


def _fresh_state():
    return pack_state(np.random.default_rng().bit_generator)


register(
    OpDef(
        "np.random.default_rng",
        "random",
        [],
        lambda types, attrs: _STATE_TYPE,
        _fresh_state,
        samples=lambda rng: [Sample(())],
        nondeterministic=True,
        doc="the packed state of ``np.random.default_rng()`` (no seed: fresh OS entropy on every call)",
    )
)


def _float_dtype(v):
    dt = rules.to_dtype_or_none(v)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"expected float32 or float64, got {v!r}")
    return dt


def _generator_op(method: str, params: list, cases: tuple) -> OpDef:
    name = f"np.random.Generator.{method}"

    def impl(state, dims, size, **attrs):
        size = _concrete(size, dims)
        if state is None:
            return _as_drawn(getattr(_GENERATOR, method)(size=size, **attrs), size)
        gen = unpack_state(state)
        values = _as_drawn(getattr(gen, method)(size=size, **attrs), size)
        return pack_state(gen.bit_generator), values

    def rule(types, attrs):
        stateful = "state" not in attrs["omitted"]
        if stateful and types[0] != _STATE_TYPE:
            raise TypeError(f"{name}: the state must be {_STATE_TYPE}, got {types[0]}")
        out = _draw_type(types[1:] if stateful else types, attrs, name)
        return (_STATE_TYPE, out) if stateful else out

    call = OpDef(name, "random", params, lambda types, attrs: None, impl)
    return register(
        OpDef(
            name,
            "random",
            [Input("state", optional=True), Inputs("dims", "scalar", star=True, minimum=0), *params],
            rule,
            impl,
            numpy_targets=[(getattr(np.random.Generator, method), "__call__")],
            samples=_samples(cases, stateful=True),
            nondeterministic=True,
            data_dependent_shape=True,  # a size may name dims given at run time
            binder=_call_binder(name, call, True),
        )
    )


_FLOAT_DTYPE = Attr("dtype", np.dtype(np.float64), _float_dtype)
GENERATOR_METHODS = {}
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
    GENERATOR_METHODS[_method] = _generator_op(_method, _params, _cases)
del _method, _params, _cases
__all__ = ["GENERATOR_METHODS", "STATE_SIZE", "get", "pack_state", "random_op", "unpack_state"]
