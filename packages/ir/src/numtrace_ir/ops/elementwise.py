"""Elementwise ops: every NumPy ufunc the tracer records (one factory for all of them), plus `where`,
`clip`, `astype`, `round` and `nan_to_num`. Shapes broadcast; dtypes follow NEP 50 (Python scalars
are weak), resolved by NumPy's own ufunc type resolution."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Input, OpDef, Sample, Unsupported, get, register, register_target
from numtrace_ir.types import ScalarType, TensorType

_DIVISOR = ((-3.0, 3.0), (1.0, 4.0))
# Input domains that keep samples free of warnings (nan, division by zero, overflow).
DOMAINS = {
    "divide": _DIVISOR,
    "floor_divide": _DIVISOR,
    "remainder": _DIVISOR,
    "fmod": _DIVISOR,
    "divmod": _DIVISOR,
    "power": ((0.5, 3.0), (0.0, 3.0)),
    "float_power": ((0.5, 3.0), (-2.0, 2.0)),
    "left_shift": ((0.0, 20.0), (0.0, 5.0)),
    "right_shift": ((0.0, 100.0), (0.0, 5.0)),
    "gcd": ((-12.0, 12.0), (-12.0, 12.0)),
    "lcm": ((-12.0, 12.0), (-12.0, 12.0)),
    "sqrt": ((0.0, 5.0),),
    "log": ((0.1, 5.0),),
    "log2": ((0.1, 5.0),),
    "log10": ((0.1, 5.0),),
    "log1p": ((-0.5, 5.0),),
    "arcsin": ((-0.9, 0.9),),
    "arccos": ((-0.9, 0.9),),
    "arctanh": ((-0.9, 0.9),),
    "arccosh": ((1.0, 5.0),),
    "reciprocal": ((0.5, 4.0),),
    "tan": ((-1.2, 1.2),),
}

BINARY_UFUNCS = tuple(
    getattr(np, n)
    for n in """
    add subtract multiply divide floor_divide remainder power float_power fmod maximum minimum fmax fmin
    arctan2 hypot logaddexp logaddexp2 copysign heaviside nextafter equal not_equal less less_equal greater
    greater_equal logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor left_shift
    right_shift gcd lcm divmod""".split()
)
UNARY_UFUNCS = tuple(
    getattr(np, n)
    for n in """
    logical_not invert negative positive absolute fabs sign sqrt cbrt square reciprocal exp exp2 expm1 log
    log2 log10 log1p sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh arctanh floor ceil
    trunc rint isnan isinf isfinite signbit deg2rad rad2deg conjugate modf frexp spacing
    bitwise_count""".split()
)
# Ufuncs whose float (and complex) results come from a math library rather than from IEEE 754's
# correctly rounded operations: NumPy computes them with its AVX-512 loops (SVML), its AVX2 loops or
# the C library depending on the CPU, and these differ in the last bits (ci/isa_ulps.py measures by
# how much). No backend can equal NumPy bit for bit on every machine there, so tests compare them
# within ulps (`numtrace_ir.exactness.numpy_exact`). `power`'s integer loop is exact.
MATH_LIBRARY_UFUNCS = frozenset(
    getattr(np, n)
    for n in """
    exp exp2 expm1 log log2 log10 log1p sin cos tan arcsin arccos arctan sinh cosh tanh arcsinh arccosh
    arctanh cbrt power float_power arctan2 hypot logaddexp logaddexp2""".split()
)
# Ufuncs whose complex loop calls the math library (hypot, csqrt) though their float loop is exact.
MATH_LIBRARY_COMPLEX_UFUNCS = frozenset({np.absolute, np.sqrt, np.sign})
# NumPy aliases (the same ufunc object under another name) trace to the canonical op.
ALIASES = {np.degrees: np.rad2deg, np.radians: np.deg2rad}


def _ufunc_rule(name: str, ufunc: np.ufunc):
    def rule(types, attrs):
        shape = rules.broadcast(name, *(rules.shape_of(t) for t in types))
        return tuple(TensorType(dt, shape) for dt in rules.ufunc_dtypes(name, ufunc, types))

    return rule


def _ufunc_samples(ufunc: np.ufunc):
    domains = DOMAINS.get(ufunc.__name__, ((-3.0, 3.0),) * ufunc.nin)
    dtypes = sampling.supported(lambda dt: ufunc.resolve_dtypes((dt,) * ufunc.nin + (None,) * ufunc.nout))

    def samples(rng):
        if not dtypes:
            return
        last = dtypes[-1]
        shape_sets = sampling.UNARY_SHAPES if ufunc.nin == 1 else sampling.BINARY_SHAPES
        first = shape_sets[0] if ufunc.nin == 1 else shape_sets[1]
        cases = [(dt, first) for dt in dtypes] + [(last, s) for s in shape_sets]
        for dt, shapes in cases:
            shapes = (shapes,) if ufunc.nin == 1 else shapes
            yield Sample(tuple(sampling.array(rng, s, dt, d) for s, d in zip(shapes, domains)), note=str(dt))
        if ufunc.nin == 2:
            kind = {"b": "bool", "i": "int", "u": "int"}.get(last.kind, "float")
            try:
                ufunc.resolve_dtypes((last, rules.WEAK_TYPES[kind], None) + (None,) * (ufunc.nout - 1))
            except TypeError:
                return
            x = sampling.array(rng, (3, 4), last, domains[0])
            yield Sample((x, sampling.scalar(rng, kind, domains[1])), note="weak scalar rhs")
            yield Sample(
                (sampling.scalar(rng, kind, domains[0]), sampling.array(rng, (3, 4), last, domains[1])),
                note="weak scalar lhs",
            )
            if len({d.kind for d in dtypes} & set("if")) == 2:
                mixed = [d for d in dtypes if d.kind == "i"][0], [d for d in dtypes if d.kind == "f"][0]
                yield Sample(
                    tuple(sampling.array(rng, (2, 3), d, dom) for d, dom in zip(mixed, domains)),
                    note="mixed dtypes",
                )

    return samples


def _create(g, node, op: str, inputs, **attrs):
    """A node of `op` at the graph's insertion point, at `node`'s source line; its (first) output."""
    return g.create_node(op, list(inputs), get(op).normalize_attrs(attrs), loc=node.loc).outputs[0]


def _divmod_decompose(g, node):
    """``divmod(a, b)`` is ``(floor_divide(a, b), remainder(a, b))``: NumPy computes all three with the
    same ``npy_divmod``, so the values agree bit for bit."""
    return [_create(g, node, "np.floor_divide", node.inputs), _create(g, node, "np.remainder", node.inputs)]


_DECOMPOSITIONS: dict[np.ufunc, Callable] = {np.divmod: _divmod_decompose}


def ufunc_op(ufunc: np.ufunc) -> OpDef:
    """The op of a NumPy ufunc's ``__call__``: inputs x / x1, x2 (arrays or weak scalars)."""
    name = f"np.{ufunc.__name__}"
    ins: list[Input | Unsupported] = (
        [Input("x", "any")] if ufunc.nin == 1 else [Input(f"x{i + 1}", "any") for i in range(ufunc.nin)]
    )
    outs: list[Input | Unsupported] = (
        [Unsupported("out")] if ufunc.nout == 1 else [Unsupported(f"out{i + 1}") for i in range(ufunc.nout)]
    )
    targets = [ufunc] + [alias for alias, canonical in ALIASES.items() if canonical is ufunc]
    return OpDef(
        name,
        "elementwise",
        ins + outs,
        _ufunc_rule(name, ufunc),
        rules.positional(ufunc),
        numpy_targets=targets,
        samples=_ufunc_samples(ufunc),
        ufunc=ufunc,
        decompose=_DECOMPOSITIONS.get(ufunc),
        doc=f"NumPy ufunc `{ufunc.__name__}`",
    )


for _u in BINARY_UFUNCS + UNARY_UFUNCS:
    register(ufunc_op(_u))


# -- where, clip, astype, round, nan_to_num --------------------------------------------------------


def _where_rule(types, attrs):
    shape = rules.broadcast("np.where", *(rules.shape_of(t) for t in types))
    return TensorType(rules.result_dtype("np.where", types[1:]), shape)


def _where_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), bool), sampling.array(rng, (3, 4), dt),
                      sampling.array(rng, (4,), dt)))
    yield Sample((sampling.array(rng, (2, 1, 4), bool), sampling.array(rng, (3, 1), "f4"), 0.5),
                 note="weak scalar")
    yield Sample((sampling.array(rng, (0, 4), bool), 1, sampling.array(rng, (4,), "i4")), note="empty")
    yield Sample((sampling.array(rng, (), bool), sampling.array(rng, (), "f4"),
                  sampling.array(rng, (2,), "f8")), note="0-d")


register(
    OpDef(
        "np.where",
        "elementwise",
        [Input("condition", "any"), Input("x", "any"), Input("y", "any")],
        _where_rule,
        lambda condition, x, y: np.where(condition, x, y),
        numpy_targets=[np.where],
        samples=_where_samples,
        doc="`np.where(condition, x, y)`; the one-argument form (nonzero) is not an op",
    )
)


def _clip_rule(types, attrs):
    name = "np.clip"
    shape = rules.broadcast(name, *(rules.shape_of(t) for t in types))
    bounds = [rules.example(t) for t in types[1:]]
    args = [rules.example(types[0])] + [
        bounds.pop(0) if n not in attrs["omitted"] else None for n in ("a_min", "a_max")
    ]
    return TensorType(rules.probe_dtype(name, np.clip, *args), shape)


def _clip_samples(rng):
    for dt in sampling.NUMERIC:
        yield Sample((sampling.array(rng, (3, 4), dt), sampling.array(rng, (4,), dt, (-3, 0)), 1))
    yield Sample((sampling.array(rng, (3, 4), "f4"), 0.0), {"omitted": ("a_max",)}, note="relu-like")
    yield Sample((sampling.array(rng, (3, 4), "i4"), 2), {"omitted": ("a_min",)})
    yield Sample((sampling.array(rng, (), "f8"), -1.0, sampling.array(rng, (2, 1), "f4", (1, 2))),
                 note="0-d, broadcast")
    yield Sample((sampling.array(rng, (0, 2), "f8"), -1.0, 1.0), note="empty")


def _clip_binder(strict: bool):
    """NumPy 2 also spells the bounds ``min=`` / ``max=``. `np.clip` needs both bounds unless one of
    those is used; ``ndarray.clip`` (not `strict`) takes any subset."""

    def bind(args, kwargs):
        renamed = False
        for new, old in (("min", "a_min"), ("max", "a_max")):
            if new in kwargs:
                if old in kwargs:
                    raise TypeError(f"np.clip: pass {old} or {new}, not both")
                kwargs[old] = kwargs.pop(new)
                renamed = True
        given = len(args) + ("a_min" in kwargs) + ("a_max" in kwargs)
        if strict and not renamed and given < 3:
            raise TypeError("np.clip: missing a_min or a_max (None leaves a side open)")
        return get("np.clip").bind_schema(args, kwargs)

    return bind


def _clip_decompose(g, node):
    """np.clip as NumPy computes it (`numpy._core._methods._clip`): a Python int bound beyond an integer
    array's range on its open side is dropped; with one bound left, ``maximum(x, a_min)`` or
    ``minimum(x, a_max)``; with two, the ``clip`` ufunc's loop in the result dtype (array operands cast
    to it first). None for a Python int bound of an integer array that is not a constant (whether NumPy
    drops it depends on its value) or one NumPy rejects.

    Floats differ from these ops only on a -0.0/0.0 tie and where x and a bound are both NaN. The
    loop for bounds that vary, ``min(max(x, lo), hi)`` with x first, gives the bound on a tie and x's
    NaN, as np.maximum and np.minimum do with x first. The loop for two uniform bounds (both the same
    for every element: `_uniform_bound`) keeps x on a tie (``x < lo``, ``x > hi``) and gives a NaN
    bound (a_min's first) whatever x is. float16 has one loop, the first's. Bounds broadcast along
    some axes only, or arrays in other than C order, make NumPy's iterator pick the loop (buffering,
    axis order): numtrace then takes the one for bounds that vary (docs/guide/sharp-edges.md)."""
    x, *bounds = node.inputs
    dtype = node.outputs[0].type.dtype
    sides = [b for b in ("a_min", "a_max") if b not in node.attrs.get("omitted", ())]
    steps = []
    for side, v in zip(sides, bounds):
        if isinstance(v.type, ScalarType) and v.type.kind == "int" and x.type.dtype.kind in "iu":
            if v.node is None or v.node.op != "prim.Constant":
                return None
            value, info = v.node.attrs["value"], np.iinfo(x.type.dtype)
            if (value <= info.min) if side == "a_min" else (value >= info.max):
                continue
            if not info.min <= value <= info.max:
                return None
        steps.append((side, v if isinstance(v.type, ScalarType) else _cast(g, node, v, dtype)))
    result = _cast(g, node, x, dtype)
    if not steps:
        return [_create(g, node, "np.astype", [x], dtype=dtype) if result is x else result]
    shape = node.outputs[0].type.shape
    if len(steps) == 2 and dtype.kind == "f" and dtype != np.float16 and all(
            _uniform_bound(v, shape) for _, v in steps):
        return [_clip_uniform(g, node, result, steps[0][1], steps[1][1])]
    for side, v in steps:   # x first: on a tie maximum/minimum give the bound, of two NaNs x's
        result = _create(g, node, "np.maximum" if side == "a_min" else "np.minimum", [result, v])
    return [result]


def _uniform_bound(v, shape) -> bool:
    """Whether NumPy's clip loop reads bound `v` with stride 0 over a result of `shape`: a scalar, a
    0-d array, or a one-element array broadcast (an array of the result's rank and size 1 is not)."""
    if isinstance(v.type, ScalarType):
        return True
    own = v.type.shape
    if not own:
        return True
    if any(not isinstance(d, (int, np.integer)) for d in (*own, *shape)):
        return False
    return int(np.prod(own)) == 1 and (len(own) < len(shape) or int(np.prod(shape)) > 1)


def _clip_uniform(g, node, x, lo, hi):
    """NumPy's clip loop for uniform float bounds: x below lo gives lo, then above hi gives hi, so a
    tie keeps x; a NaN bound (lo's first) fills the result. ``minimum(hi, maximum(lo, x))`` is that
    except where both bounds are NaN (it gives hi): a bound known not NaN needs no more; lo known NaN
    stands for hi; otherwise (hi may be NaN) ``where(isnan(lo), lo, ...)``."""
    lo_value = _constant_float(lo)
    if lo_value is not None and np.isnan(lo_value):
        hi = lo
    clipped = _create(g, node, "np.minimum", [hi, _create(g, node, "np.maximum", [lo, x])])
    hi_value = _constant_float(hi)
    if lo_value is not None or (hi_value is not None and not np.isnan(hi_value)):
        return clipped
    return _create(g, node, "np.where", [_create(g, node, "np.isnan", [lo]), lo, clipped])


def _constant_float(v):
    """The value of a scalar constant `v`, else None."""
    if isinstance(v.type, ScalarType) and v.node is not None and v.node.op == "prim.Constant":
        return float(v.node.attrs["value"])
    return None


def _cast(g, node, v, dtype):
    """Tensor `v` as `dtype`: itself, or an np.astype of it."""
    return v if v.type.dtype == dtype else _create(g, node, "np.astype", [v], dtype=dtype)


def _clip_impl(a, a_min, a_max):
    return np.clip(a, a_min, a_max)


register(
    OpDef(
        "np.clip",
        "elementwise",
        [
            Input("a"),
            Input("a_min", "any", optional=True),
            Input("a_max", "any", optional=True),
            Unsupported("out"),
        ],
        _clip_rule,
        _clip_impl,
        binder=_clip_binder(strict=True),
        numpy_targets=[np.clip],
        samples=_clip_samples,
        decompose=_clip_decompose,
        doc="a bound given as None is left out of the inputs and named in `omitted`",
    )
)
register_target(np.ndarray.clip, "__call__", get("np.clip").variant(binder=_clip_binder(strict=False)))


def _same_type_rule(name):
    def rule(types, attrs):
        return rules.first_tensor(name, types)

    return rule


def _astype_rule(types, attrs):
    t = rules.first_tensor("np.astype", types)
    return TensorType(attrs["dtype"], t.shape)


def _per_dtype_samples(dtypes, attrs_list=({},), shapes=((3, 4), (), (0, 2), (2, 3, 4)), domain=(-3.0, 3.0)):
    """Every dtype at the first shape with each attr set, then every shape at the last dtype."""

    def samples(rng):
        for dt in dtypes:
            for attrs in attrs_list:
                yield Sample((sampling.array(rng, shapes[0], dt, domain),), dict(attrs))
        for s in shapes[1:]:
            yield Sample((sampling.array(rng, s, dtypes[-1], domain),), dict(attrs_list[-1]))

    return samples


register(
    OpDef(
        "np.astype",
        "elementwise",
        [Input("x"), Attr("dtype", convert=rules.to_dtype), Attr("copy", True, rules.to_bool)],
        _astype_rule,
        rules.forwarding(np.ndarray.astype, "x", drop=("copy",), method=True),
        numpy_targets=[np.astype, np.ndarray.astype],
        samples=_per_dtype_samples(sampling.DTYPES, [{"dtype": np.dtype(d)} for d in ("f4", "i8", "bool")]),
        doc="`copy` is recorded but the result is always a new array (the IR is functional); "
        "`ndarray.astype(dtype)` binds too (its positional `order` does not: pass keywords)",
    )
)

register(
    OpDef(
        "np.round",
        "elementwise",
        [Input("a"), Attr("decimals", 0, rules.to_int), Unsupported("out")],
        _same_type_rule("np.round"),
        lambda a, decimals: np.round(a, decimals),
        numpy_targets=[np.round, np.around, np.ndarray.round],
        samples=_per_dtype_samples(sampling.NUMERIC, [{}, {"decimals": 2}, {"decimals": -1}]),
    )
)


def _nan_to_num_samples(rng):
    x = sampling.array(rng, (3, 5), "f8")
    x[0, :3] = [np.nan, np.inf, -np.inf]
    yield Sample((x,))
    yield Sample((x.astype("f4"),), {"nan": 1.5, "posinf": 9.0, "neginf": -9.0})
    yield Sample((sampling.array(rng, (2, 3), "i4"),))
    yield Sample((sampling.array(rng, (), "f4"),))
    yield Sample((sampling.array(rng, (0,), "f8"),))


register(
    OpDef(
        "np.nan_to_num",
        "elementwise",
        [
            Input("x"),
            Attr("copy", True, rules.to_bool),
            Attr("nan", 0.0, rules.to_float_or_none),
            Attr("posinf", None, rules.to_float_or_none),
            Attr("neginf", None, rules.to_float_or_none),
        ],
        _same_type_rule("np.nan_to_num"),
        lambda x, copy, nan, posinf, neginf: np.nan_to_num(
            x, copy=True, nan=nan, posinf=posinf, neginf=neginf
        ),
        numpy_targets=[np.nan_to_num],
        samples=_nan_to_num_samples,
    )
)


def _isclose_rule(types, attrs):
    name = "np.isclose"
    if all(type(t) is not TensorType for t in types):
        raise TypeError(f"{name}: expected at least one array, got {types[0]} and {types[1]}")
    rules.probe_dtype(name, np.isclose, *(rules.example(t) for t in types))  # rejects what NumPy does
    return TensorType(np.dtype(bool), rules.broadcast(name, *(rules.shape_of(t) for t in types)))


def _isclose_samples(rng):
    for dt in sampling.DTYPES:
        a = sampling.array(rng, (3, 4), dt)
        yield Sample((a, a + (sampling.array(rng, (3, 4), dt, (0.0, 2.0)) * 1e-6).astype(dt)))
    for sa, sb in sampling.BINARY_SHAPES:
        yield Sample((sampling.array(rng, sa, "f8"), sampling.array(rng, sb, "f8")))
    x = sampling.array(rng, (2, 5), "f4")
    y = x + np.float32(1e-3)
    x[0, :3] = y[0, :3] = [np.nan, np.inf, -np.inf]
    yield Sample((x, y), {"equal_nan": True}, note="nan and inf")
    yield Sample((x, y), {"rtol": 1e-2, "atol": 0.0}, note="rtol only")
    yield Sample((x, y), {"rtol": 0.0, "atol": 2e-3}, note="atol only")
    yield Sample((sampling.array(rng, (3, 4), "f8"), 0.5), {"atol": 1.0}, note="weak scalar")
    yield Sample((1, sampling.array(rng, (4,), "i4")), {}, note="weak int and int array")


register(
    OpDef(
        "np.isclose",
        "elementwise",
        [
            Input("a", "any"),
            Input("b", "any"),
            Attr("rtol", 1e-05, rules.to_float),
            Attr("atol", 1e-08, rules.to_float),
            Attr("equal_nan", False, rules.to_bool),
        ],
        _isclose_rule,
        lambda a, b, rtol, atol, equal_nan: np.isclose(a, b, rtol, atol, equal_nan),
        numpy_targets=[np.isclose],
        samples=_isclose_samples,
        doc="``|a - b| <= atol + rtol * |b|`` elementwise (inf equals inf of the same sign); "
        "`rtol`/`atol` are static numbers",
    )
)


def _complex_part_rule(name):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        dt = np.dtype(f"f{t.dtype.itemsize // 2}") if t.dtype.kind == "c" else t.dtype
        return TensorType(dt, t.shape)

    return rule


def _complex_part_samples(rng):
    for dt in sampling.DTYPES + (np.dtype("c8"), np.dtype("c16")):
        yield Sample((sampling.array(rng, (3, 4), dt),))
    for shape in ((), (0, 2), (2, 3, 4)):
        yield Sample((np.asarray(sampling.array(rng, shape,
                                                "c8")),))  # sampling.array gives a NumPy scalar for ()
    yield Sample((sampling.array(rng, (), "f8"),))


for _name, _fn in (("np.real", np.real), ("np.imag", np.imag)):
    register(
        OpDef(
            _name,
            "elementwise",
            [Input("val")],
            _complex_part_rule(_name),
            (lambda fn: lambda val: np.array(fn(val), copy=True))(_fn),
            numpy_targets=[_fn],
            samples=_complex_part_samples,
            doc="`x.real` / `x.imag` of a traced array record this op; of a real array: a copy / zeros",
        )
    )


# -- ``**`` of NumPy scalars -----------------------------------------------------------------------------


def scalar_power(a, b):
    """``a ** b`` as NumPy computes it for NumPy scalars (0-d arrays stand for them) and Python numbers.
    NumPy routes it by the operands' types: float scalars with Python or float scalar exponents run its
    scalar math, C pow (``np.float64(-0.0) ** 0.5`` is +0.0, ``np.float64(-inf) ** 0.5`` is +inf, with
    "scalar power" warnings), where np.power's SIMD loops give -0.0 and NaN; other pairs (an int scalar
    to a Python float) run the ufunc. Calling ``**`` on the scalars takes NumPy's own route."""
    return rules.numpy_value(a) ** rules.numpy_value(b)


# The interpreter calls the operator itself from the node's line, so NumPy warns there (`OnScalars`).
_scalar_power_impl = rules.positional(scalar_power)
_scalar_power_impl.on_scalars = lambda attrs: operator.pow   # type: ignore[attr-defined]


def _scalar_power_rule(types, attrs):
    if any(type(t) is TensorType and t.shape != () for t in types):
        raise TypeError(f"np.scalar_power: operands are NumPy scalars or Python numbers, got "
                        f"{', '.join(map(str, types))}")
    return TensorType(rules.ufunc_dtypes("np.scalar_power", np.power, types)[0], ())


def _scalar_power_samples(rng):
    def s(dt, v):
        return np.array(v, dt)

    for dt in ("f2", "f4", "f8"):
        for base in (-0.0, -np.inf, 2.0, np.nan):   # no warnings: the test makes them errors
            yield Sample((s(dt, base), 0.5), note=f"{dt} C pow special values")
        yield Sample((s(dt, 3.0), s("f4", -1.5)), note="float scalar exponent")
        yield Sample((2.5, s(dt, -0.0)), note="python base")
    yield Sample((s("i8", 3), 2), note="int scalar, int exponent")
    yield Sample((s("i1", 3), 0.5), note="int scalar, python float: the ufunc")
    yield Sample((s("u1", 3), s("i1", 2)), note="promoted ints")
    yield Sample((s("?", True), 2), note="bool scalar")
    yield Sample((s("c8", 1 - 2j), 0.5), note="complex scalar")


register(
    OpDef(
        "np.scalar_power",
        "other",   # 0-d operands only: no empty or broadcast forms; backends run its NumPy reference
        [Input("a", "any"), Input("b", "any")],
        _scalar_power_rule,
        _scalar_power_impl,
        samples=_scalar_power_samples,
        doc="``a ** b`` (and ``pow``) of NumPy scalars and Python numbers: NumPy's own operator on the "
        "scalars, so its routing to scalar math (C pow's signed zeros and infinities) or to the ufunc holds",
    )
)


# -- + - * / // % divmod, unary - and abs() of NumPy scalars ------------------------------------------------

# The ufuncs whose Python operator NumPy's scalars run as scalar math ("overflow encountered in scalar
# add": it checks int overflow, which the ufunc on 0-d arrays wraps silently), by the ufunc's name; divmod
# gives two results, as np.divmod does.
SCALAR_OPERATORS = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
                    "divide": operator.truediv, "floor_divide": operator.floordiv, "remainder": operator.mod,
                    "divmod": divmod}
# The unary ones ("overflow encountered in scalar negative" at an int type's minimum, of an unsigned
# nonzero; ``+s`` and ``~s`` never warn: the ufuncs np.positive and np.invert give NumPy's values).
SCALAR_UNARY_OPERATORS = {"negative": operator.neg, "absolute": operator.abs}


def _operator_name(table: dict, op_name: str) -> Callable[[Any], str]:
    def convert(v: Any) -> str:
        if v not in table:
            raise ValueError(f"{op_name}: op must be one of {sorted(table)}, got {v!r}")
        return v

    return convert


def scalar_operator(a, b, op):
    """``a + b`` (``op``: the ufunc's name) as NumPy computes it for NumPy scalars (0-d arrays stand for
    them) and Python numbers: its scalar math, which warns of int overflow ("overflow encountered in
    scalar add"; the ufunc on 0-d arrays wraps silently) and names its warnings "scalar"."""
    return SCALAR_OPERATORS[op](rules.numpy_value(a), rules.numpy_value(b))


def scalar_unary_operator(a, op):
    """``-a`` or ``abs(a)`` (``op``: the ufunc's name) as NumPy computes it for a NumPy scalar (a 0-d
    array stands for it): its scalar math, which warns "overflow encountered in scalar negative" at an
    int type's minimum (the ufunc on a 0-d array wraps silently), and whose complex abs() is C hypot
    (np.absolute's loop differs in the last bit)."""
    return SCALAR_UNARY_OPERATORS[op](rules.numpy_value(a))


# (as np.scalar_power's)
scalar_operator.on_scalars = lambda attrs: SCALAR_OPERATORS[attrs["op"]]   # type: ignore[attr-defined]
scalar_unary_operator.on_scalars = (   # type: ignore[attr-defined]
    lambda attrs: SCALAR_UNARY_OPERATORS[attrs["op"]])


def _scalar_operator_rule(op_name: str):
    def rule(types, attrs):
        if any(type(t) is TensorType and t.shape != () for t in types):
            raise TypeError(f"{op_name}: operands are NumPy scalars or Python numbers, got "
                            f"{', '.join(map(str, types))}")
        dtypes = rules.ufunc_dtypes(op_name, getattr(np, attrs["op"]), types)
        return tuple(TensorType(dt, ()) for dt in dtypes)

    return rule


def _scalar_operator_samples(rng):
    for op in SCALAR_OPERATORS:
        yield Sample((np.array(10, "i1"), 3), {"op": op}, note="int8 scalar, Python int")
        yield Sample((2, np.array(-2.5, "f4")), {"op": op}, note="Python int, float32 scalar")
        yield Sample((np.array(7, "u1"), np.array(-3, "i8")), {"op": op}, note="promoted ints")
        yield Sample((np.array(1.5, "f8"), 0.25), {"op": op}, note="float64 scalar, Python float")


def _scalar_unary_operator_samples(rng):
    for op in SCALAR_UNARY_OPERATORS:   # no overflow (-np.uint16(3) warns): the test makes warnings errors
        for dt, v in (("i1", -127), ("u2", 0), ("i8", 5), ("f4", -2.5), ("c16", 3 - 4j)):
            yield Sample((np.array(v, dt),), {"op": op}, note=f"{dt} scalar")
    yield Sample((np.array(True),), {"op": "absolute"}, note="bool scalar")


register(
    OpDef(
        "np.scalar_operator",
        "other",   # 0-d operands only: no empty or broadcast forms; backends run its NumPy reference
        [Input("a", "any"), Input("b", "any"), Attr("op", convert=_operator_name(SCALAR_OPERATORS,
                                                                                  "np.scalar_operator"))],
        _scalar_operator_rule("np.scalar_operator"),
        scalar_operator,
        samples=_scalar_operator_samples,
        doc="``a + b``, ``-``, ``*``, ``/``, ``//``, ``%``, ``divmod`` (two results) of NumPy scalars "
        "(traced or constants) and numbers: NumPy's own operator on the scalars (its scalar math: int "
        "overflow warned, 'scalar' warnings)",
    )
)
register(
    OpDef(
        "np.scalar_unary_operator",
        "other",   # as np.scalar_operator
        [Input("a", "any"), Attr("op", convert=_operator_name(SCALAR_UNARY_OPERATORS,
                                                               "np.scalar_unary_operator"))],
        _scalar_operator_rule("np.scalar_unary_operator"),
        scalar_unary_operator,
        samples=_scalar_unary_operator_samples,
        doc="``-a`` and ``abs(a)`` of a traced NumPy int scalar, ``abs(a)`` of a complex one: NumPy's own "
        "operator on the scalar (its scalar math: 'overflow encountered in scalar negative' at the type's "
        "minimum, C hypot for a complex abs)",
    )
)
