"""Reductions (`sum prod mean max min argmax argmin var std all any`), scans (`cumsum cumprod`) and
the ufunc methods that are the same ops (`np.add.reduce` is `np.sum` with ``axis=0``, ...)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Input, OpDef, Sample, Unsupported, get, register, register_target
from numtrace_ir.types import TensorType

# (attrs, shape, each output reduces at least one element) per sample.
_AXIS_CASES: tuple[tuple[dict, tuple[int, ...], bool], ...] = (
    ({}, (3, 4), True),
    ({"axis": 0}, (3, 4), True),
    ({"axis": -1, "keepdims": True}, (3, 4), True),
    ({"axis": (0, 2)}, (2, 3, 4), True),
    ({"axis": (-1, 0), "keepdims": True}, (2, 3, 4), True),
    ({}, (), True),
    ({"axis": 1}, (0, 3), True),
    ({"axis": 0}, (0, 3), False),
    ({}, (0,), False),
)


def _reduced_shape(name: str, shape: tuple, axis, keepdims: bool, nonempty: bool) -> tuple:
    red = rules.axes(name, axis, len(shape))
    if nonempty:
        for a in red:
            if shape[a] == 0:
                raise ShapeError(f"{name}: zero-size reduction along axis {a} of {shape} has no identity")
    if keepdims:
        return tuple(1 if i in red else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in red)


def reduction_op(
    name: str,
    fn: Callable,
    *,
    targets: Sequence = (),
    dtype_attr: bool = True,
    ddof: bool = False,
    nonempty: bool = False,
    single_axis: bool = False,
    dtypes: tuple = sampling.DTYPES,
    initial: bool = False,
) -> OpDef:
    """A reduction over ``axis`` (None, int, tuple; `single_axis` ops take None or an int) with
    ``keepdims`` and, where NumPy has them, ``dtype`` and ``ddof``. The output dtype is NumPy's,
    probed on a one-element array."""
    axis = Attr("axis", None, rules.to_int_or_none if single_axis else rules.to_axis)
    params: list[Input | Attr | Unsupported] = [Input("a"), axis]
    if dtype_attr:
        params.append(Attr("dtype", None, rules.to_dtype_or_none))
    params.append(Unsupported("out"))
    if ddof:
        params.append(Attr("ddof", 0, rules.to_int))
    params.append(Attr("keepdims", False, rules.to_bool))
    impl = fn
    if initial:  # NumPy's own default is a sentinel: the reference passes initial only when given
        params.append(Attr("initial", None, lambda v: None if v is None else rules.to_scalar(v)))

        def impl(a, initial=None, **attrs):
            return fn(a, **attrs) if initial is None else fn(a, initial=initial, **attrs)

    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        given = attrs.get("initial") is not None
        shape = _reduced_shape(name, t.shape, attrs["axis"], attrs["keepdims"], nonempty and not given)
        extra = {k: attrs[k] for k in ("dtype", "initial") if attrs.get(k) is not None}
        return TensorType(rules.probe_dtype(name, impl, np.ones((1,), t.dtype), **extra), shape)

    def samples(rng):
        dts = sampling.supported(lambda dt: fn(sampling.ones(dt)), dtypes)
        domain = (0.5, 2.0) if name == "np.prod" else (-3.0, 3.0)
        for dt in dts:
            yield Sample((sampling.array(rng, (3, 4), dt, domain),), {"axis": 1})
        for attrs, shape, empty in _AXIS_CASES:
            if not empty and (nonempty or name in _WARN_EMPTY):
                continue
            if single_axis and isinstance(attrs.get("axis"), tuple):
                continue
            yield Sample((sampling.array(rng, shape, dts[-1], domain),), dict(attrs))
        if dtype_attr and np.dtype("f8") in dts:
            yield Sample((sampling.array(rng, (2, 3), "i4"),), {"axis": 0, "dtype": np.dtype("f4")})
        if ddof:
            yield Sample((sampling.array(rng, (4, 3), "f4"),), {"axis": 0, "ddof": 1})
        if initial:
            yield Sample((sampling.array(rng, (3, 4), "f8", domain),), {"axis": 1, "initial": 0.5})
            yield Sample((sampling.array(rng, (0, 3), "f8", domain),), {"axis": 0, "initial": 2.0})

    # NumPy's reductions take every schema parameter by keyword (`a=`, `axis=`, ...).
    return OpDef(name, "reduction", params, rule, impl, numpy_targets=targets, samples=samples,
                 reduction=name[len("np."):], shape_warning=_too_few if name in _WARN_EMPTY else None)


# Reducing zero elements warns (mean of an empty slice: nan) for these; samples avoid it.
_WARN_EMPTY = {"np.mean", "np.var", "np.std"}


def _too_few(types: Sequence, attrs: dict) -> bool:
    """NumPy's "Mean of empty slice" / "Degrees of freedom <= 0 for slice": an output reduces at most
    ``ddof`` elements (none for a mean), told by the shapes alone (NumPy warns so for an empty output
    too)."""
    t = types[0]
    if not isinstance(t, TensorType) or not t.is_concrete:
        return False
    count = 1
    for a in rules.axes("reduction", attrs.get("axis"), len(t.shape)):
        count *= t.shape[a]
    return count <= attrs.get("ddof", 0)

# -- reductions with where= -------------------------------------------------------------------------

# Each reduction NumPy takes ``where=`` for -> its masked op (the tracer records a call with a mask as it).
MASKED: dict[str, str] = {}


def masked_op(base: OpDef) -> OpDef:
    """``base`` with ``where=``: the reduction over the elements the boolean `where` keeps (it broadcasts
    to the input's shape). NumPy reduces each run of kept elements as it meets them, so its float sums
    are not those of the unmasked reduction of ``where(mask, a, 0)``: the reference, NumPy's own call,
    is the op, and backends run it (no reduction fact, so none folds it as the plain reduction).
    Without ``initial`` a max or min refuses any mask, as NumPy does (a masked-out slice has no value)."""
    name = f"{base.name}_where"
    MASKED[base.name] = name
    needs_initial = base.name in ("np.max", "np.min")

    def rule(types, attrs):
        a, mask = types
        t = rules.first_tensor(name, (a,))
        if needs_initial and attrs.get("initial") is None:
            ufunc = {"np.max": "maximum", "np.min": "minimum"}[base.name]
            raise ValueError(f"{name}: reduction operation '{ufunc}' does not have an identity, so to use a "
                             "where mask one has to specify 'initial'")
        kind = mask.dtype.kind if isinstance(mask, TensorType) else mask.kind
        if kind not in ("b", "bool", "int"):
            raise TypeError(f"{name}: cannot cast where= of {mask} to bool according to the rule 'safe'")
        shape = rules.shape_of(mask)
        rules.broadcast(name, shape, t.shape)
        if len(shape) > t.ndim or any(type(m) is int and type(d) is int and m not in (1, d)
                                      for m, d in zip(shape[::-1], t.shape[::-1])):
            raise ShapeError(f"{name}: where= of shape {shape} does not broadcast to the input's {t.shape}")
        return base.rule((a,), attrs)

    def impl(a, where, **attrs):
        return base.impl(a, where=where, **attrs)

    def samples(rng):
        for sample in base.samples(rng):
            (a,) = sample.inputs
            attrs = dict(sample.attrs)
            if needs_initial:
                attrs.setdefault("initial", -1.0 if base.name == "np.max" else 1.0)
            keep = rng.random(np.shape(a)) < 0.6
            if keep.ndim:
                keep[:2] = keep[..., :2] = True   # two kept in every slice: a mean of none, a var of one warn
            else:
                keep = np.array(True)
            yield Sample((a, keep), attrs, note=sample.note)
        a = sampling.array(rng, (3, 4), "f8")
        extra = {"initial": 0.5} if needs_initial else {}
        yield Sample((a, np.array([True, False, True, True])), {"axis": 1, **extra}, note="mask of a row")
        yield Sample((a, np.array([[True], [False], [True]])), {"axis": 0, "keepdims": True, **extra},
                     note="mask of a column")
        if not needs_initial and base.name not in _WARN_EMPTY:
            yield Sample((a, False), {"axis": 1}, note="nothing kept")

    return OpDef(name, "reduction", [*base.params, Input("where", "any")], rule, impl, samples=samples,
                 doc=f"`{base.name}` with where=: NumPy's masked reduction (its summation order); "
                 "the tracer records a call with a mask as this op")


def _register(op: OpDef) -> None:
    """The reduction, and its masked op."""
    register(op)
    register(masked_op(op))


_register(reduction_op("np.sum", np.sum, targets=[np.sum, np.ndarray.sum], initial=True))
_register(reduction_op("np.prod", np.prod, targets=[np.prod, np.ndarray.prod], initial=True))
_register(reduction_op("np.mean", np.mean, targets=[np.mean, np.ndarray.mean]))
_register(reduction_op("np.var", np.var, targets=[np.var, np.ndarray.var], ddof=True,
                       dtypes=sampling.NUMERIC))
_register(reduction_op("np.std", np.std, targets=[np.std, np.ndarray.std], ddof=True,
                       dtypes=sampling.NUMERIC))
for _fn, _arg in ((np.max, np.argmax), (np.min, np.argmin)):
    _name = _fn.__name__  # "max", "min"
    _method = getattr(np.ndarray, _name)
    _register(
        reduction_op(
            f"np.{_name}",
            _fn,
            targets=[_fn, getattr(np, f"a{_name}"), _method],
            dtype_attr=False,
            nonempty=True,
            initial=True,
        )
    )
    register(
        reduction_op(
            f"np.arg{_name}",
            _arg,
            targets=[_arg, getattr(np.ndarray, f"arg{_name}")],
            dtype_attr=False,
            nonempty=True,
            single_axis=True,
        )
    )
_register(reduction_op("np.all", np.all, targets=[np.all, np.ndarray.all], dtype_attr=False))
_register(reduction_op("np.any", np.any, targets=[np.any, np.ndarray.any], dtype_attr=False))

# ufunc.reduce defaults to axis=0, unlike the functions.
for _ufunc, _op in (
    (np.add, "np.sum"),
    (np.multiply, "np.prod"),
    (np.maximum, "np.max"),
    (np.minimum, "np.min"),
    (np.logical_and, "np.all"),
    (np.logical_or, "np.any"),
):
    register_target(_ufunc, "reduce", get(_op).variant(axis=0))


def scan_op(name: str, fn: Callable, targets: list) -> OpDef:
    """A cumulative op along ``axis`` (None: over the flattened array) with an optional ``dtype``."""

    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        if attrs["axis"] is None:
            shape = (dims.prod(t.shape),)
        else:
            rules.axis(name, attrs["axis"], max(t.ndim, 1))
            shape = t.shape if t.ndim else (1,)
        return TensorType(rules.probe_dtype(name, fn, np.ones((1,), t.dtype), dtype=attrs["dtype"]), shape)

    def samples(rng):
        domain = (0.5, 2.0)
        for dt in sampling.DTYPES:
            yield Sample((sampling.array(rng, (3, 4), dt, domain),), {"axis": 1})
        for attrs, shape in (
            ({}, (3, 4)),
            ({"axis": -1}, (2, 3, 4)),
            ({"axis": 0}, (0, 3)),
            ({}, ()),
            ({"dtype": np.dtype("f4")}, (5,)),
        ):
            yield Sample((sampling.array(rng, shape, "f8", domain),), attrs)

    return OpDef(
        name,
        "reduction",
        [
            Input("a"),
            Attr("axis", None, rules.to_int_or_none),
            Attr("dtype", None, rules.to_dtype_or_none),
            Unsupported("out"),
        ],
        rule,
        lambda a, axis, dtype: fn(a, axis=axis, dtype=dtype),
        numpy_targets=targets,
        samples=samples,
        reduction=name[len("np."):],
        doc="0-d input with an axis gives shape (1,), as in NumPy",
    )


register(scan_op("np.cumsum", np.cumsum, [np.cumsum, np.ndarray.cumsum]))
register(scan_op("np.cumprod", np.cumprod, [np.cumprod, np.ndarray.cumprod]))
for _ufunc, _op in ((np.add, "np.cumsum"), (np.multiply, "np.cumprod")):
    register_target(_ufunc, "accumulate", get(_op).variant(axis=0))


def _diff_rule(types, attrs):
    name = "np.diff"
    t = rules.first_tensor(name, types)
    n = attrs["n"]
    if n < 0:
        raise ShapeError(f"{name}: order must be non-negative but got {n}")
    if n == 0:   # NumPy returns the input before looking at prepend/append
        return t
    if t.ndim == 0:
        raise ShapeError(f"{name}: diff requires input that is at least one dimensional")
    ax = rules.axis(name, attrs["axis"], t.ndim)
    length = t.shape[ax]
    parts = dict(zip([p for p in ("prepend", "append") if p not in attrs["omitted"]], types[1:]))
    for part, pt in parts.items():
        shape = rules.shape_of(pt)
        if not shape:   # a scalar or 0-d array is broadcast to one slice along the axis
            length = dims.add(length, 1)
            continue
        if len(shape) != t.ndim or any(type(d) is int and type(e) is int and d != e
                                       for i, (d, e) in enumerate(zip(shape, t.shape)) if i != ax):
            raise ShapeError(f"{name}: {part} of shape {shape} does not fit {t.shape} along axis {ax}")
        length = dims.add(length, shape[ax])
    example = {p: np.ones((1,), rules.strong(pt)) for p, pt in parts.items()}
    dt = rules.probe_dtype(name, np.diff, np.ones((2,), t.dtype), **example)
    return TensorType(dt, t.shape[:ax] + (dims.maximum(dims.sub(length, n), 0),) + t.shape[ax + 1 :])


def _diff_impl(a, n, axis, prepend, append):
    parts = {k: v for k, v in (("prepend", prepend), ("append", append)) if v is not None}
    return np.array(np.diff(a, n, axis, **parts), copy=True)


def _diff_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 5), dt),), {})
    for shape, attrs in (
        ((3, 5), {"n": 2}),
        ((4, 3), {"axis": 0}),
        ((2, 3, 4), {"axis": 1, "n": 2}),
        ((6,), {"n": 0}),
        ((3,), {"n": 5}),
        ((0, 3), {"axis": 0}),
        ((3, 0), {}),
    ):
        yield Sample((sampling.array(rng, shape, "f8"),), attrs)
    yield Sample((sampling.array(rng, (5,), "bool"),), {"n": 2}, note="bool diff is not_equal")
    yield Sample((sampling.array(rng, (4,), "f4"), 0), {"omitted": ("append",)}, note="prepend a scalar")
    yield Sample((sampling.array(rng, (3, 4), "f8"), sampling.array(rng, (3, 2), "f8"),
                  sampling.array(rng, (), "f8")), {"n": 2, "omitted": ()}, note="prepend and append")
    yield Sample((sampling.array(rng, (2, 3), "i4"), sampling.array(rng, (1, 3), "i8")),
                 {"axis": 0, "omitted": ("prepend",)}, note="append rows")
    yield Sample((sampling.array(rng, (5,), "bool"), True, False), {"omitted": ()}, note="bool with both")


register(
    OpDef(
        "np.diff",
        "other",
        [
            Input("a"),
            Attr("n", 1, rules.to_int),
            Attr("axis", -1, rules.to_int),
            Input("prepend", "any", optional=True),
            Input("append", "any", optional=True),
        ],
        _diff_rule,
        _diff_impl,
        numpy_targets=[np.diff],
        samples=_diff_samples,
        omitted=("prepend", "append"),
        doc="n-th differences along one axis (bool arrays: not_equal); the axis shrinks by n, to at "
        "least 0 (after `prepend` and `append` are joined along it; a scalar is one slice)",
    )
)
