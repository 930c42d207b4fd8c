"""Primitive ops: constants, reads of traced shapes (`prim.dim`, `prim.size`), Python scalar arithmetic
on them (so shapes computed from traced shapes stay in the graph), and the shape-generic variants of
reshape / broadcast_to / full whose shape comes from int scalar inputs.

A dynamic shape attr is a tuple whose entries are ints (static; ``-1`` infers, for `prim.reshape`) or
dims (a symbol or a dim expression), one per scalar input in order, standing for that input's value
at run time. The tracer names an input by the dims it was computed from where it knows them
(``x.reshape(x.shape[0], -1)`` on ``f32[B, 4, 8]`` gives shape ``("B", -1)`` and type ``f32[B, 32]``),
and by a fresh symbol otherwise; as the values are only known at run time, these ops are marked
``data_dependent_shape``.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence

import numpy as np

from numtrace_ir.dims import NotModelledError, ShapeError
from numtrace_ir.guards import GuardError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Input, Inputs, OpDef, Sample, get, register
from numtrace_ir.types import ScalarType, TensorType, normalize_dtype

_RANK = {"bool": 0, "int": 1, "float": 2, "complex": 3}
_KIND_OF_RANK = {v: k for k, v in _RANK.items()}


# -- constants and shape reads --------------------------------------------------------------------


def _to_constant(v):
    if isinstance(v, np.ndarray):
        normalize_dtype(v.dtype)  # only the IR's dtypes
        return v
    if isinstance(v, np.generic):
        return np.asarray(v)
    return rules.to_scalar(v)


def _constant_rule(types, attrs):
    v = attrs["value"]
    if isinstance(v, np.ndarray):
        return TensorType(v.dtype, v.shape)
    return ScalarType({bool: "bool", int: "int", float: "float", complex: "complex"}[type(v)])


def _constant_key(attrs):
    """The memo key of a constant's type: the value's Python type (1, 1.0 and True differ), or an
    array's dtype and shape."""
    v = (attrs or {}).get("value")
    return (np.ndarray, v.dtype, v.shape) if isinstance(v, np.ndarray) else (type(v), v)


def _constant_samples(rng):
    for value in (
        3,
        -2.5,
        True,
        1 + 2j,
        sampling.array(rng, (2, 3), "f4"),
        sampling.array(rng, (), "i8"),
        sampling.array(rng, (0,), "bool"),
    ):
        yield Sample((), {"value": value})


register(
    OpDef(
        "prim.Constant",
        "prim",
        [Attr("value", convert=_to_constant)],
        _constant_rule,
        lambda value: value.copy() if isinstance(value, np.ndarray) else value,
        samples=_constant_samples,
        memo_key=_constant_key,
        doc="a Python scalar (weak) or an array",
    )
)


def _dim_rule(types, attrs):
    t = rules.first_tensor("prim.dim", types)
    rules.axis("prim.dim", attrs["axis"], t.ndim)
    return ScalarType("int")


def _shape_samples(rng, with_axis):
    for shape in ((3, 4), (0, 5), (2, 3, 4)):
        for axis in (0, -1) if with_axis else (None,):
            yield Sample((sampling.array(rng, shape, "f4"),), {} if axis is None else {"axis": axis})
    if not with_axis:
        yield Sample((sampling.array(rng, (), "i4"),))


register(
    OpDef(
        "prim.dim",
        "prim",
        [Input("a"), Attr("axis", convert=rules.to_int)],
        _dim_rule,
        lambda a, axis: a.shape[axis],
        samples=lambda rng: _shape_samples(rng, True),
        doc="``a.shape[axis]`` read from a traced array: an int that follows the input's shape",
    )
)


def _size_rule(types, attrs):
    rules.first_tensor("prim.size", types)
    return ScalarType("int")


register(
    OpDef(
        "prim.size",
        "prim",
        [Input("a")],
        _size_rule,
        lambda a: a.size,
        samples=lambda rng: _shape_samples(rng, False),
        doc="``a.size`` (``len(a)`` is `prim.dim` axis 0)",
    )
)


# -- Python scalar arithmetic -----------------------------------------------------------------------


def _kind(name, t) -> int:
    if type(t) is not ScalarType:
        raise TypeError(f"{name}: operands are Python scalars, got {t}")
    return _RANK[t.kind]


def scalar_op(suffix: str, fn: Callable, *, result: Callable[[list[int]], int | None], nin: int = 2,
              negative_int: int = -3) -> OpDef:
    """A Python operator on scalars; `result(ranks)` gives the result kind's rank (TypeError if none).
    Samples pair 7, 2.5, True and 1-2j, with `negative_int` as the second int operand."""
    name = f"prim.{suffix}"

    def rule(types, attrs):
        rank = result([_kind(name, t) for t in types])
        if rank is None:
            raise TypeError(f"{name}: unsupported operand kinds ({', '.join(map(str, types))})")
        return ScalarType(_KIND_OF_RANK[rank])

    def samples(rng):
        values = {"bool": True, "int": 7, "float": 2.5, "complex": 1 - 2j}
        for k1 in values:
            for k2 in values if nin == 2 else (None,):
                second = negative_int if k2 == "int" else values.get(k2)
                args = (values[k1],) if nin == 1 else (values[k1], second)
                if result([_RANK[k] for k in (k1, k2) if k]) is not None:
                    yield Sample(args)

    params = [Input("a", "scalar")] + ([Input("b", "scalar")] if nin == 2 else [])
    return register(OpDef(name, "scalar", params, rule, rules.positional(fn), samples=samples))


def _python_pow(a, b):
    return a**b


def _arith(ranks):
    return max(max(ranks), 1)


def _real_arith(ranks):
    return None if max(ranks) == 3 else max(max(ranks), 1)


scalar_op("add", operator.add, result=_arith)
scalar_op("sub", operator.sub, result=_arith)
scalar_op("mul", operator.mul, result=_arith)
scalar_op("truediv", operator.truediv, result=lambda r: max(max(r), 2))
scalar_op("floordiv", operator.floordiv, result=_real_arith)
scalar_op("mod", operator.mod, result=_real_arith)
scalar_op("neg", operator.neg, result=_arith, nin=1)
for _cmp in ("eq", "ne"):
    scalar_op(_cmp, getattr(operator, _cmp), result=lambda r: 0)
for _cmp in ("lt", "le", "gt", "ge"):
    scalar_op(_cmp, getattr(operator, _cmp), result=lambda r: None if max(r) == 3 else 0)
scalar_op("int", int, result=lambda r: None if r[0] == 3 else 1, nin=1)
scalar_op("float", float, result=lambda r: None if r[0] == 3 else 2, nin=1)
# ``**`` of Python numbers: an int result only for an int base and a non-negative int exponent, which
# the tracer records only when the exponent is such a literal (``n ** 2``); any float makes a float.
scalar_op("pow", _python_pow, result=lambda r: None if max(r) == 3 else max(max(r), 1), negative_int=3)
# ``math.floor``/``math.ceil``/``round`` of a real number: ints.
for _name, _fn in (("floor", math.floor), ("ceil", math.ceil), ("round", round)):
    scalar_op(_name, _fn, result=lambda r: None if r[0] == 3 else 1, nin=1)


# -- guards ---------------------------------------------------------------------------------------


def _guard_rule(types, attrs):
    if len(types) != 1 or type(types[0]) not in (ScalarType, TensorType):
        raise TypeError(f"prim.guard: guards one Python scalar or array, got {types}")
    if isinstance(types[0], TensorType) != isinstance(attrs["expected"], np.ndarray):
        raise TypeError(f"prim.guard: an array value needs an array expected, a scalar a scalar ({types[0]})")
    return ScalarType("bool")


def _to_expected(v):
    """A guard's expected value: a Python scalar, or an array for a guard on array data."""
    if isinstance(v, np.ndarray):
        normalize_dtype(v.dtype)
        return v
    return rules.to_scalar(v)


def _guard(value, expected, what=""):
    """The run-time form of a guard (the reference backend runs it; `specialize` folds away those the
    input shapes decide). An array value must equal `expected` bit for bit, except that every NaN
    equals every NaN: a NaN's sign and payload depend on the loop that made it (NumPy's and a
    backend's differ), and a guard that no run can pass would refuse the inputs it was traced from."""
    if isinstance(expected, np.ndarray):
        now = np.asarray(value, dtype=expected.dtype)
        if now.shape != expected.shape or not _same_bits(now, expected):
            raise GuardError(what or "the guarded value", None, _shown(expected), _shown(now), "inputs")
        return True
    if value != expected and not (_is_nan(value) and _is_nan(expected)):
        raise GuardError(what or "the guarded value", None, expected, value)
    return True


def _is_nan(x):
    return isinstance(x, (float, complex, np.inexact)) and bool(np.isnan(x))


def _same_bits(now, expected):
    """Equal bit for bit (so -0.0 differs from 0.0), NaNs of any sign or payload being equal."""
    if now.tobytes() == expected.tobytes():
        return True
    if expected.dtype.kind not in "fc":
        return False
    nan = np.isnan(expected)
    if not np.array_equal(np.isnan(now), nan):
        return False
    return now[~nan].tobytes() == expected[~nan].tobytes()


def _shown(a):
    """An array as a guard's message shows it: its value, a scalar for one element."""
    return a.item() if a.size == 1 else a.tolist() if a.size <= 8 else f"{a.dtype}{list(a.shape)} array"


register(
    OpDef(
        "prim.guard",
        "prim",
        [Input("value", "any"), Attr("expected", convert=_to_expected), Attr("what", "", str)],
        _guard_rule,
        _guard,
        samples=lambda rng: iter((Sample((3,), {"expected": 3}), Sample((2.5,), {"expected": 2.5}),
                                  Sample((True,), {"expected": True}),
                                  Sample((np.array(True),), {"expected": np.array(True), "what": "bool(x)"}),
                                  Sample((np.arange(3.0),), {"expected": np.arange(3.0),
                                                             "what": "x.tolist()"}))),
        effect=True,
        memo_key=lambda attrs: isinstance((attrs or {}).get("expected"), np.ndarray),
        doc="the trace holds only while `value` equals `expected`: a scalar computed from input shapes "
        "(checked once per input signature by `specialize`), or array data that left the graph as a "
        "Python value (`what` says how; checked by every run), see numtrace_ir.guards",
    )
)


# -- shape-generic reshape / broadcast_to / full ----------------------------------------------------


_to_dyn_shape = rules.to_dyn_shape


def _dyn_shape(name, attrs, scalars) -> tuple:
    return rules.check_dyn_dims(name, "shape", attrs["shape"], scalars)


def _dyn_binder(name, n_tensors):
    """``op(*tensors, shape, **attrs)`` where `shape` mixes ints and traced int scalars: each traced
    entry becomes an input named by `names` (default ``dyn0``, ``dyn1``, ...)."""

    def bind(args, kwargs):
        if len(args) != n_tensors + 1:
            raise TypeError(f"{name}: expected {n_tensors} array(s) and a shape")
        shape = args[-1] if isinstance(args[-1], (tuple, list)) else (args[-1],)
        names = list(kwargs.pop("names", ()))
        entries, scalars = [], []
        for d in shape:
            if isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)):
                entries.append(int(d))
            else:
                entries.append(names.pop(0) if names else f"dyn{len(scalars)}")
                scalars.append(d)
        return [*args[:n_tensors], *scalars], {"shape": tuple(entries), **kwargs}

    return bind


def _dyn_reshape_rule(types, attrs):
    t = rules.first_tensor("prim.reshape", types)
    return TensorType(
        t.dtype, rules.reshape_dims("prim.reshape", t.shape, _dyn_shape("prim.reshape", attrs, types[1:]))
    )


def _dyn_broadcast_rule(types, attrs):
    t = rules.first_tensor("prim.broadcast_to", types)
    shape = _dyn_shape("prim.broadcast_to", attrs, types[1:])
    if len(shape) < t.ndim:
        raise ShapeError(f"prim.broadcast_to: cannot broadcast {t} to fewer dims {shape}")
    for d, s in zip(t.shape[::-1], shape[::-1]):
        if type(d) is int and type(s) is int and d not in (1, s):
            raise ShapeError(f"prim.broadcast_to: cannot broadcast {t} to {shape}")
    return TensorType(t.dtype, shape)


def _dyn_full_rule(types, attrs):
    shape = _dyn_shape("prim.full", attrs, types)
    if any(type(d) is int and d < 0 for d in shape):
        raise ShapeError(f"prim.full: negative dim in {shape}")
    return TensorType(attrs["dtype"], shape)


_concrete = rules.fill_dyn_shape


def _dyn_samples(kind):
    def samples(rng):
        if kind == "full":
            for dt in sampling.DTYPES:
                yield Sample((3,), {"shape": ("n", 2), "fill_value": 1, "dtype": dt})
            yield Sample((0, 4), {"shape": ("a", "b"), "fill_value": 0.5, "dtype": np.dtype("f4")})
            yield Sample((), {"shape": (2,), "fill_value": 0, "dtype": np.dtype("f8")})
            yield Sample((3,), {"shape": ("n",), "fill_value": np.int64(2**53 + 1), "dtype": np.dtype("i4")})
            return
        for dt in sampling.DTYPES:
            yield Sample(
                (sampling.array(rng, (3, 4) if kind == "reshape" else (1, 4), dt), 3),
                {"shape": ("n", -1) if kind == "reshape" else ("n", 4)},
            )
        if kind == "reshape":
            yield Sample((sampling.array(rng, (2, 3, 4), "f8"), 2, 4), {"shape": ("a", -1, "b")})
            yield Sample((sampling.array(rng, (0, 3), "f8"), 0), {"shape": ("z", 5)})
        else:
            yield Sample((sampling.array(rng, (3, 1), "f8"), 2, 5), {"shape": ("a", 3, "b")})
            yield Sample((sampling.array(rng, (), "f8"), 0), {"shape": ("z",)})

    return samples


register(
    OpDef(
        "prim.reshape",
        "movement",
        [Input("a"), Inputs("dims", "scalar", star=True, minimum=0), Attr("shape", convert=_to_dyn_shape)],
        _dyn_reshape_rule,
        lambda a, dims, shape: np.reshape(a, _concrete(shape, dims)),
        samples=_dyn_samples("reshape"),
        binder=_dyn_binder("prim.reshape", 1),
        view="reshape",
        as_view=lambda a, out, attrs, dims: np.reshape(a, _concrete(attrs["shape"], dims)),
        data_dependent_shape=True,
        doc="reshape to a shape computed from traced ints (``x.reshape(x.shape[0], -1)``)",
    )
)
register(
    OpDef(
        "prim.broadcast_to",
        "movement",
        [Input("a"), Inputs("dims", "scalar", star=True, minimum=0), Attr("shape", convert=_to_dyn_shape)],
        _dyn_broadcast_rule,
        lambda a, dims, shape: np.broadcast_to(a, _concrete(shape, dims)).copy(),
        samples=_dyn_samples("broadcast_to"),
        binder=_dyn_binder("prim.broadcast_to", 1),
        as_view=lambda a, out, attrs, dims: np.broadcast_to(a, _concrete(attrs["shape"], dims)),
        data_dependent_shape=True,
    )
)
register(
    OpDef(
        "prim.full",
        "creation",
        [
            Inputs("dims", "scalar", star=True, minimum=0),
            Attr("shape", convert=_to_dyn_shape),
            Attr("fill_value", 0, rules.to_fill_value),
            Attr("dtype", np.dtype(np.float64), rules.to_dtype),
        ],
        _dyn_full_rule,
        lambda dims, shape, fill_value, dtype: np.full(_concrete(shape, dims), fill_value, dtype),
        samples=_dyn_samples("full"),
        binder=_dyn_binder("prim.full", 0),
        data_dependent_shape=True,
        doc="``np.zeros/ones/full(shape)`` with a shape computed from traced ints",
    )
)


# -- an op whose attributes come from traced numbers ---------------------------------------------------

_PLACEHOLDER = re.compile(r"\$(\d+)\Z")


def fill_placeholders(value, scalars):
    """`value` with each ``"$k"`` (tuples and slices walked) replaced by ``scalars[k]``."""
    if type(value) is str:
        m = _PLACEHOLDER.match(value)
        return scalars[int(m.group(1))] if m else value
    if type(value) is tuple:
        return tuple(fill_placeholders(v, scalars) for v in value)
    if type(value) is slice:
        return slice(*(fill_placeholders(v, scalars) for v in (value.start, value.stop, value.step)))
    return value


def dynamic_call(attrs: dict, inputs: list) -> tuple:
    """(the target op, its inputs, its attrs) of a `prim.dynamic` node once its numbers are known."""
    op = get(attrs["op"])
    k = attrs["scalars"]
    op_inputs, scalars = list(inputs[: len(inputs) - k]), list(inputs[len(inputs) - k :])
    filled = {name: fill_placeholders(v, scalars) for name, v in attrs["attrs"]}
    return op, op_inputs, op.normalize_attrs(filled)


def _to_attr_pairs(v):
    if type(v) is not tuple or not all(type(p) is tuple and len(p) == 2 and type(p[0]) is str for p in v):
        raise TypeError(f"expected a tuple of (name, value) pairs, got {v!r}")
    return v


def _to_target(v):
    if not isinstance(v, str) or v == "prim.dynamic":
        raise TypeError(f"expected the name of another op, got {v!r}")
    get(v)  # UnknownOpError for a name the registry lacks
    return v


def _dynamic_rule(types, attrs):
    k = attrs["scalars"]
    if not 0 < k <= len(types) or any(type(t) is not ScalarType for t in types[len(types) - k :]):
        raise TypeError(f"prim.dynamic: the last {k} inputs must be the Python numbers of the attributes")
    return TensorType(attrs["dtype"], attrs["shape"])


def _dynamic_samples(rng):
    yield Sample((sampling.array(rng, (6, 3), "f4"), 4),
                 {"op": "np.getitem", "attrs": (("index", (slice(None, "$0"),)),), "scalars": 1,
                  "shape": ("m", 3), "dtype": np.dtype("f4")})
    yield Sample((5, 2), {"op": "np.arange", "attrs": (("start", "$1"), ("stop", "$0")), "scalars": 2,
                          "shape": ("m",), "dtype": np.dtype("i8")})


register(
    OpDef(
        "prim.dynamic",
        "prim",
        [Inputs("args", "any", star=True), Attr("op", convert=_to_target),
         Attr("attrs", convert=_to_attr_pairs), Attr("scalars", convert=rules.to_int),
         Attr("shape", convert=_to_dyn_shape), Attr("dtype", convert=rules.to_dtype)],
        _dynamic_rule,
        lambda args, op, attrs, scalars, shape, dtype: _run_dynamic(args, op, attrs, scalars),
        samples=_dynamic_samples,
        data_dependent_shape=True,
        doc="op `op` with attributes holding ``\"$k\"`` for the k-th trailing number input "
        "(``x[: n - 1]``, ``np.arange(n)`` with n a traced size); `specialize` turns it into `op` once the "
        "numbers are known, so backends never see it",
    )
)


def _run_dynamic(args, op, attrs, scalars):
    target, op_inputs, filled = dynamic_call({"op": op, "attrs": attrs, "scalars": scalars}, args)
    return target.reference(*op_inputs, **filled)


# -- shape checks of dead code -----------------------------------------------------------------------


def checkable(op: str) -> bool:
    """Whether a node of `op` is an array op that a ``prim.check`` can stand for: not a check, guard,
    constant, scalar op or host call (a ``prim.dynamic`` or ``prim.reshape`` of computed sizes is one)."""
    return not op.startswith("prim.") or op == "prim.dynamic" or get(op).kind == "movement"


def _to_checked(v):
    if not isinstance(v, str):
        raise TypeError(f"expected the name of an array op, got {v!r}")
    get(v)  # UnknownOpError for a name the registry lacks
    if not checkable(v):
        raise TypeError(f"expected the name of an array op, got {v!r}")
    return v


def _checked_call(op: str, attrs: tuple) -> tuple:
    target = get(op)
    return target, target.normalize_attrs(dict(attrs))


def _check_rule(types, attrs):
    target, checked = _checked_call(attrs["op"], attrs["attrs"])
    try:
        target.infer(types, checked)  # the checked op's error for shapes its NumPy call refuses
    except NotModelledError:
        pass   # shapes NumPy takes: `check_decided` leaves the call to NumPy at run time
    return ScalarType("bool")


# Kinds of ops whose NumPy errors come from shapes alone, but for the ops listed (an all-NaN slice,
# weights summing to 0) and for an integer array input of an indexing or moving op or of a power (NumPy
# checks indices, counts and exponents; an integer number input, as np.take's index, too).
_SHAPE_CHECKED_KINDS = ("elementwise", "reduction", "movement", "index", "contraction", "creation")
_READS_DATA = ("np.nanargmax", "np.nanargmin", "np.average")
_READS_INTEGERS = ("index", "movement")


def _reads_data(target: OpDef, types: Sequence) -> bool:
    if target.kind not in _SHAPE_CHECKED_KINDS or target.name in _READS_DATA:
        return True
    integers = any(t.dtype.kind in "iu" if isinstance(t, TensorType) else t.kind == "int" for t in types)
    return integers and (target.kind in _READS_INTEGERS or target.name == "np.power")


def check_decided(types, attrs) -> bool:
    """Whether a ``prim.check`` of inputs of `types` holds by their shapes (its rule has accepted them):
    they are all known and NumPy's call cannot refuse their data (the caller knows its numbers).
    Otherwise it is left to run time, where the op runs (a data-dependent size, an index array, a
    singular matrix, a shape that the op's rule does not model)."""
    target, checked = _checked_call(attrs["op"], attrs["attrs"])
    tensors = [t for t in types if isinstance(t, TensorType)]
    if not all(t.is_concrete for t in tensors) or _reads_data(target, types):
        return False
    try:
        target.infer(types, checked)
    except NotModelledError:
        return False
    return True


def _run_check(args, op, attrs):
    target, checked = _checked_call(op, attrs)
    target.reference(*args, **checked)  # shapes known only now, or data NumPy reads: NumPy decides
    return True


def _check_samples(rng):
    yield Sample((sampling.array(rng, (3, 4), "f4"),), {"op": "np.getitem", "attrs": (("index", (0,)),)})
    yield Sample((sampling.array(rng, (2, 3), "f8"), sampling.array(rng, (3,), "f8")),
                 {"op": "np.add", "attrs": ()})


register(
    OpDef(
        "prim.check",
        "prim",
        [Inputs("args", "any", star=True), Attr("op", convert=_to_checked),
         Attr("attrs", (), convert=_to_attr_pairs)],
        _check_rule,
        _run_check,
        samples=_check_samples,
        effect=True,
        doc="what is left of a node of op `op` whose value is never used: NumPy's call still refuses "
        "inputs whose shapes it cannot take (``x[0]`` of an empty `x`, the max of an empty array), so "
        "the op's rule still checks them; `specialize` decides it from the call's shapes (then it is a "
        "constant), a size known only at run time or data NumPy's call reads (an index array, a singular "
        "matrix) runs the op",
    )
)
