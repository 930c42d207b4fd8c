"""Movement ops that join several arrays or split one: concatenate, stack, split, array_split, the
stacking helpers (hstack, vstack, column_stack) and atleast_1d/2d/3d."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Input, Inputs, OpDef, Param, Sample, Unsupported, register
from numtrace_ir.types import TensorType

_CASTING = rules.one_of("no", "equiv", "safe", "same_kind", "unsafe")


def _join_rule(name, stack):
    def rule(types, attrs):
        for t in types:
            if type(t) is not TensorType:
                raise TypeError(f"{name}: expected arrays, got {t}")
        dt = attrs["dtype"] or rules.result_dtype(name, types)
        casting = attrs.get("casting", "same_kind")
        for t in types:
            if not np.can_cast(t.dtype, dt, casting):
                raise TypeError(f"{name}: cannot cast {t.dtype} to {dt} with casting={casting!r}")
        first = types[0]
        if stack:
            for t in types[1:]:
                if len(t.shape) != first.ndim or not all(map(_same_or_symbolic, t.shape, first.shape)):
                    raise ShapeError(
                        f"{name}: all input arrays must have the same shape, got {first} and {t}"
                    )
            ax = rules.axis(name, attrs["axis"], first.ndim + 1)
            return TensorType(dt, first.shape[:ax] + (len(types),) + first.shape[ax:])
        if attrs["axis"] is None:
            return TensorType(dt, (_sum(dims.prod(t.shape) for t in types),))
        if first.ndim == 0:
            raise ShapeError(f"{name}: zero-dimensional arrays cannot be concatenated")
        ax = rules.axis(name, attrs["axis"], first.ndim)
        for t in types[1:]:
            if t.ndim != first.ndim or not all(
                _same_or_symbolic(a, b) for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != ax
            ):
                raise ShapeError(f"{name}: shapes {first} and {t} differ off axis {ax}")
        size = _sum(t.shape[ax] for t in types)
        return TensorType(dt, first.shape[:ax] + (size,) + first.shape[ax + 1 :])

    return rule


def _same_or_symbolic(a, b) -> bool:
    return dims.equal(a, b) or type(a) is not int or type(b) is not int


def _sum(ds):
    total = 0
    for d in ds:
        total = dims.add(total, d)
    return total


def _join_samples(stack):
    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample((sampling.array(rng, (2, 3), dt), sampling.array(rng, (2, 3), dt)), {})
        shapes = [((2, 3), (2, 3), (2, 3))] if stack else [((2, 3), (4, 3)), ((2, 3), (2, 1), (2, 0))]
        axes = [(1, -1)] if stack else [(0,), (1,)]
        for ss, ax in zip(shapes, axes):
            for a in ax:
                yield Sample(tuple(sampling.array(rng, s, "f8") for s in ss), {"axis": a})
        yield Sample((sampling.array(rng, (2, 3), "i4"), sampling.array(rng, (2, 3), "f4")), {},
                     note="mixed dtypes")
        yield Sample((sampling.array(rng, (2, 3), "f8"), sampling.array(rng, (2, 3), "f8")),
                     {"dtype": np.dtype("f4")})
        yield Sample((sampling.array(rng, (2, 3), "f8"), sampling.array(rng, (2, 3), "i4", (-300.0, 300.0))),
                     {"dtype": np.dtype("i1"), "casting": "unsafe"}, note="unsafe casting (ints wrap)")
        for dts, casting in ((("i4", "i2"), "safe"), (("f4", "f4"), "no")):
            yield Sample(tuple(sampling.array(rng, (2, 3), dt) for dt in dts), {"casting": casting})
        if stack:
            yield Sample((sampling.array(rng, (), "f8"), sampling.array(rng, (), "f8")), {})
        else:
            yield Sample((sampling.array(rng, (2, 3), "f8"), sampling.array(rng, (4,), "f8")), {"axis": None})

    return samples


def _join_impl(fn):
    def impl(arrays, axis, dtype, casting):
        return fn(arrays, axis=axis, dtype=dtype, casting=casting)

    return impl


# The registration loops below share these names; each holds a NumPy function or a shape helper.
_fn: Callable
_to_nd: Callable[[tuple], tuple]
_axis_of: Callable[[int], int]
for _name, _fn, _stack, _targets in (
    ("np.concatenate", np.concatenate, False, [np.concatenate, np.concat]),
    ("np.stack", np.stack, True, [np.stack]),
):
    register(
        OpDef(
            _name,
            "movement",
            [
                Inputs("arrays"),
                Attr("axis", 0, rules.to_int_or_none),
                Unsupported("out"),
                Attr("dtype", None, rules.to_dtype_or_none),
                Attr("casting", "same_kind", _CASTING),
            ],
            _join_rule(_name, _stack),
            _join_impl(_fn),
            numpy_targets=_targets,
            samples=_join_samples(_stack),
        )
    )


def _split_rule(name, even):
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        ax = rules.axis(name, attrs["axis"], t.ndim)
        n = t.shape[ax]
        ios = attrs["indices_or_sections"]
        if isinstance(ios, int):
            if ios <= 0:
                raise ShapeError(f"{name}: number of sections must be > 0, got {ios}")
            if even and type(n) is int and n % ios:
                raise ShapeError(f"{name}: array split does not result in an equal division (axis {ax} "
                                 f"of size {n} into {ios} sections)")
            # Section i of array_split has (n + k - 1 - i) // k elements; split's are all n // k.
            sizes = [
                dims.floordiv(dims.add(n, ios - 1 - i), ios) if not even else dims.floordiv(n, ios)
                for i in range(ios)
            ]
        else:
            sizes = [rules.slice_len(name, n, slice(a, b)) for a, b in zip((0, *ios), (*ios, None))]
        return tuple(TensorType(t.dtype, t.shape[:ax] + (s,) + t.shape[ax + 1 :]) for s in sizes)

    return rule


def _to_ios(v):
    return rules.to_int(v) if isinstance(v, (int, np.integer)) else rules.to_ints(v)


def _split_view(fn: Callable) -> Callable:
    return lambda a, out, attrs, dims: rules.results(fn(a, attrs["indices_or_sections"], attrs["axis"]))


for _name, _fn, _even in (("np.split", np.split, True), ("np.array_split", np.array_split, False)):
    _cases = [
        (((6, 4),), {"indices_or_sections": 3}),
        (((6, 4),), {"indices_or_sections": (1, 4), "axis": 0}),
        (((2, 6),), {"indices_or_sections": (2, -1, 9), "axis": -1}),
        (((0, 3),), {"indices_or_sections": 2}),
        (((4, 6),), {"indices_or_sections": 2, "axis": 1}),
        (((3, 4),), {"indices_or_sections": 1, "axis": 1}),
        (((0, 2),), {"indices_or_sections": (), "axis": 0}),
    ]
    if not _even:
        _cases.append((((7, 2),), {"indices_or_sections": 3}))
    register(
        OpDef(
            _name,
            "movement",
            [Input("ary"), Attr("indices_or_sections", convert=_to_ios), Attr("axis", 0, rules.to_int)],
            _split_rule(_name, _even),
            (
                lambda fn: (
                    lambda ary, indices_or_sections, axis: rules.results(
                        x.copy() for x in fn(ary, indices_or_sections, axis)
                    )
                )
            )(_fn),
            numpy_targets=[_fn],
            samples=sampling.sweep(_cases),
            as_view=_split_view(_fn),
            doc="one output per section",
        )
    )


# -- stacking helpers, atleast_nd, diag, broadcast_arrays -------------------------------------------

def _atleast(shape: tuple, ndim: int) -> tuple:
    """The shape of ``np.atleast_{ndim}d`` of an array of `shape`."""
    if len(shape) >= ndim:
        return shape
    if ndim == 3 and len(shape) == 2:
        return shape + (1,)
    if ndim == 3 and len(shape) == 1:
        return (1,) + shape + (1,)
    return (1,) * (ndim - len(shape)) + shape


def _stack_rule(name: str, reshape, axis_of):
    """hstack/vstack/column_stack: each input reshaped by `reshape`, then concatenated along
    `axis_of(first reshaped ndim)`, with concatenate's dtype rule and casting check."""
    concat = _join_rule(name, False)

    def rule(types, attrs):
        for t in types:
            if type(t) is not TensorType:
                raise TypeError(f"{name}: expected arrays, got {t}")
        shaped = tuple(TensorType(t.dtype, reshape(t.shape)) for t in types)
        return concat(shaped, {"axis": axis_of(shaped[0].ndim), "dtype": attrs.get("dtype"),
                               "casting": attrs.get("casting", "same_kind")})

    return rule


def _stack_samples(shapes_list, kw: bool):
    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample((sampling.array(rng, shapes_list[0][0], dt),
                          sampling.array(rng, shapes_list[0][1], dt)))
        for shapes in shapes_list[1:]:
            yield Sample(tuple(sampling.array(rng, s, "f8") for s in shapes))
        yield Sample((sampling.array(rng, shapes_list[0][0], "i4"),
                      sampling.array(rng, shapes_list[0][1], "f4")),
                     note="mixed dtypes")
        if kw:
            yield Sample((sampling.array(rng, shapes_list[0][0], "f8"),) * 2, {"dtype": np.dtype("f4")})
            yield Sample((sampling.array(rng, shapes_list[0][0], "i8"),) * 2,
                         {"dtype": np.dtype("f4"), "casting": "same_kind"})
            yield Sample((sampling.array(rng, shapes_list[0][0], "f4"),) * 2, {"casting": "no"})

    return samples


for _name, _fn, _to_nd, _axis_of, _kw, _shapes in (
    (
        "np.hstack",
        np.hstack,
        lambda s: _atleast(s, 1),
        lambda nd: 0 if nd == 1 else 1,
        True,
        [((2, 3), (2, 4)), ((3,), (2,)), ((), (2,), ()), ((2, 0), (2, 1)), ((2, 1, 3), (2, 2, 3)),
         ((0,), (0,))],
    ),
    (
        "np.vstack",
        np.vstack,
        lambda s: _atleast(s, 2),
        lambda nd: 0,
        True,
        [((2, 3), (4, 3)), ((3,), (3,)), ((3,), (2, 3)), ((), ()), ((0, 3), (1, 3)),
         ((2, 3, 4), (1, 3, 4))],
    ),
    (
        "np.column_stack",
        np.column_stack,
        lambda s: (s + (1,) if len(s) == 1 else (1, 1)) if len(s) < 2 else s,
        lambda nd: 1,
        False,
        [((3, 2), (3, 4)), ((3,), (3,)), ((3,), (3, 2)), ((), (1, 2)), ((0,), (0, 2)),
         ((2, 3, 4), (2, 1, 4))],
    ),
):
    _params: list[Param] = [Inputs("tup")]
    if _kw:
        _params += [Attr("dtype", None, rules.to_dtype_or_none), Attr("casting", "same_kind", _CASTING)]
    register(
        OpDef(
            _name,
            "movement",
            _params,
            _stack_rule(_name, _to_nd, _axis_of),
            (lambda fn, kw: (lambda tup, **attrs: fn(tup, **attrs)))(_fn, _kw),
            numpy_targets=[_fn],
            samples=_stack_samples(_shapes, _kw),
            doc="the inputs are made at least 1-d (hstack), 2-d (vstack) or columns (column_stack), "
            "then concatenated",
        )
    )


def _atleast_op(ndim: int) -> OpDef:
    name = f"np.atleast_{ndim}d"
    fn = getattr(np, f"atleast_{ndim}d")

    def rule(types, attrs):
        for t in types:
            if type(t) is not TensorType:
                raise TypeError(f"{name}: expected arrays, got {t}")
        return tuple(TensorType(t.dtype, _atleast(t.shape, ndim)) for t in types)

    def impl(arys):
        out = fn(*arys)
        return tuple(np.array(a, copy=True) for a in out) if len(arys) > 1 else np.array(out, copy=True)

    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample((sampling.array(rng, (3,), dt),))
        several = (((), (3,), (2, 3), (2, 3, 4)), ((0, 2), (1,)))
        for shapes in (((),), ((2, 3),), ((2, 3, 4, 1),), ((0,),)) + several:
            yield Sample(tuple(sampling.array(rng, s, "f8") for s in shapes))

    return register(
        OpDef(
            name,
            "movement",
            [Inputs("arys", star=True)],
            rule,
            impl,
            numpy_targets=[fn],
            samples=samples,
            doc="one output per input (NumPy returns one array for one input, a tuple for several)",
        )
    )


for _ndim in (1, 2, 3):
    _atleast_op(_ndim)
