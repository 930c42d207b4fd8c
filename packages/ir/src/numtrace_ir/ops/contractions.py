"""Contractions: `matmul`, `dot`, `einsum`, `tensordot`, `outer`, `inner` and the ufunc ``.outer``
forms. A contracted pair of dims must be equal; a symbol against a number is accepted (checked at
run time). Result dtypes are NumPy's promotion of the operands."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Input, Inputs, OpDef, Sample, Unsupported, get, register
from numtrace_ir.types import TensorType


def _contract(name: str, a, b, where: str) -> None:
    """Contracted dims must match; a symbolic one is checked when the graph is specialized."""
    if type(a) is int and type(b) is int and a != b:
        raise ShapeError(f"{name}: {where}: {a} != {b}")


def _two_tensors(name, types):
    a, b = types
    if type(a) is not TensorType or type(b) is not TensorType:
        raise TypeError(f"{name}: expected two arrays, got {a} and {b}")
    return a, b, rules.result_dtype(name, types)


def _matmul_rule(types, attrs):
    name = "np.matmul"
    a, b, dt = _two_tensors(name, types)
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"{name}: operands must be at least 1-d, got {a} and {b}")
    sa = a.shape if a.ndim > 1 else (1,) + a.shape
    sb = b.shape if b.ndim > 1 else b.shape + (1,)
    _contract(name, sa[-1], sb[-2], f"contracted dims of {a} and {b}")
    batch = rules.broadcast(name, sa[:-2], sb[:-2])
    out = batch + ((sa[-2],) if a.ndim > 1 else ()) + ((sb[-1],) if b.ndim > 1 else ())
    return TensorType(dt, out)


def _dot_rule(types, attrs):
    name = "np.dot"
    a, b, dt = _two_tensors(name, types)
    if a.ndim == 0 or b.ndim == 0:
        return TensorType(dt, a.shape or b.shape)
    k = -2 if b.ndim > 1 else -1
    _contract(name, a.shape[-1], b.shape[k], f"last dim of {a} vs dim {k} of {b}")
    return TensorType(dt, a.shape[:-1] + b.shape[:k] + (b.shape[-1:] if b.ndim > 1 else ()))


def _inner_rule(types, attrs):
    name = "np.inner"
    a, b, dt = _two_tensors(name, types)
    if a.ndim == 0 or b.ndim == 0:
        return TensorType(dt, a.shape or b.shape)
    _contract(name, a.shape[-1], b.shape[-1], f"last dims of {a} and {b}")
    return TensorType(dt, a.shape[:-1] + b.shape[:-1])


def _outer_rule(types, attrs):
    a, b, dt = _two_tensors("np.outer", types)
    return TensorType(dt, (dims.prod(a.shape), dims.prod(b.shape)))


def _tensordot_axes(name, axes, na, nb):
    if isinstance(axes, int):
        if axes < 0 or axes > min(na, nb):
            raise ShapeError(f"{name}: axes={axes} must be in [0, {min(na, nb)}]")
        return tuple(range(na - axes, na)), tuple(range(axes))
    if len(axes) != 2:
        raise ShapeError(f"{name}: axes must be an int or a pair of axis sequences, got {axes}")
    xa, xb = (rules.to_ints(x) for x in axes)
    if len(xa) != len(xb):
        raise ShapeError(f"{name}: axes {axes} contract different numbers of dims")
    return tuple(rules.axis(name, x, na) for x in xa), tuple(rules.axis(name, x, nb) for x in xb)


def _tensordot_rule(types, attrs):
    name = "np.tensordot"
    a, b, dt = _two_tensors(name, types)
    xa, xb = _tensordot_axes(name, attrs["axes"], a.ndim, b.ndim)
    for i, j in zip(xa, xb):
        _contract(name, a.shape[i], b.shape[j], f"axis {i} of {a} vs axis {j} of {b}")
    keep_a = tuple(d for i, d in enumerate(a.shape) if i not in xa)
    keep_b = tuple(d for i, d in enumerate(b.shape) if i not in xb)
    return TensorType(dt, keep_a + keep_b)


def _to_axes(v):
    if isinstance(v, (int, np.integer)):
        return rules.to_int(v)
    if isinstance(v, (list, tuple)) and len(v) == 2:
        return tuple(rules.to_ints(x) for x in v)
    raise TypeError(f"expected an int or a pair of axis sequences, got {v!r}")


def _parse_einsum(name: str, subscripts: str, shapes: list) -> tuple:
    """The output shape, after checking operand ranks and label sizes (ellipsis dims broadcast)."""
    spec = subscripts.replace(" ", "")
    ins, arrow, out = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(shapes):
        raise ShapeError(f"{name}: {subscripts!r} names {len(terms)} operands, got {len(shapes)}")
    sizes: dict[str, dims.Dim] = {}
    ell_shapes = []
    for term, shape in zip(terms, shapes):
        labels = term.replace("...", "")
        if not all(c.isalpha() for c in labels):
            raise ShapeError(f"{name}: bad subscripts {subscripts!r}")
        n_ell = len(shape) - len(labels)
        if ("..." in term and n_ell < 0) or ("..." not in term and n_ell != 0):
            raise ShapeError(f"{name}: operand {term!r} does not match shape {shape}")
        pre = term.index("...") if "..." in term else len(labels)
        ell_shapes.append(tuple(shape[pre : pre + n_ell]) if "..." in term else ())
        for c, d in zip(labels, shape[:pre] + shape[pre + max(n_ell, 0) :]):
            if c in sizes and not dims.equal(sizes[c], d):
                if sizes[c] == 1:
                    sizes[c] = d
                elif d != 1:
                    _contract(name, sizes[c], d, f"label {c!r}")
            else:
                sizes.setdefault(c, d)
    ell = rules.broadcast(name, *ell_shapes)
    if not arrow:
        counts = {c: ins.count(c) for c in sizes}
        out = ("..." if ell_shapes and any("..." in t for t in terms) else "") + "".join(
            sorted(c for c, n in counts.items() if n == 1)
        )
    labels_out = out.replace("...", "")
    if len(set(labels_out)) != len(labels_out) or any(c not in sizes for c in labels_out):
        raise ShapeError(f"{name}: bad output subscripts in {subscripts!r}")
    pre = out.index("...") if "..." in out else len(labels_out)
    return (
        tuple(sizes[c] for c in labels_out[:pre])
        + (ell if "..." in out else ())
        + tuple(sizes[c] for c in labels_out[pre:])
    )


def _einsum_rule(types, attrs):
    name = "np.einsum"
    for t in types:
        if type(t) is not TensorType:
            raise TypeError(f"{name}: operands must be arrays, got {t}")
    shape = _parse_einsum(name, attrs["subscripts"], [t.shape for t in types])
    dtype = attrs.get("dtype")
    if dtype is None or _einsum_is_view(attrs["subscripts"], len(types)):
        return TensorType(rules.result_dtype(name, types), shape)
    for t in types:
        if not np.can_cast(t.dtype, dtype, attrs.get("casting", "safe")):
            raise TypeError(
                f"{name}: cannot cast operand {t.dtype} to dtype={dtype} under casting={attrs['casting']!r}"
            )
    return TensorType(dtype, shape)


def _einsum_is_view(subscripts: str, operands: int) -> bool:
    """Whether NumPy's einsum answers with a view of its one operand (no label summed: a transpose or
    a diagonal), which keeps the operand's dtype whatever `dtype=` and `casting=` say."""
    ins, arrow, out = subscripts.replace(" ", "").partition("->")
    labels = set(ins) - {"."}
    if operands != 1 or "," in ins:
        return False
    return labels <= set(out) if arrow else all(ins.count(c) == 1 for c in labels)


def _to_optimize(v: Any) -> Any:
    """`optimize`: a bool, a strategy name, or an explicit ``['einsum_path', (0, 1), ...]`` path
    (kept as a tuple so equal calls give equal attrs). It changes NumPy's summation order, so the
    reference passes it on unchanged."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if v in ("greedy", "optimal"):
        return str(v)
    if isinstance(v, (list, tuple)) and v and v[0] == "einsum_path":
        return ("einsum_path",) + tuple(tuple(rules.to_ints(p)) for p in v[1:])
    raise ValueError(f"np.einsum: optimize must be a bool, 'greedy', 'optimal' or an einsum_path list, "
                     f"got {v!r}")


def _einsum_impl(operands, subscripts, dtype=None, casting="safe", optimize=False):
    if isinstance(optimize, tuple):
        optimize = ["einsum_path", *optimize[1:]]
    return np.einsum(subscripts, *operands, dtype=dtype, casting=casting, optimize=optimize)


# NumPy's letter for each sublist subscript 0..51 (its C parser's and einsumfunc's `einsum_symbols`).
_EINSUM_SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _sublist_subscripts(items) -> str:
    """One operand's (or the output's) sublist as NumPy spells it in letters: ints and Ellipsis."""
    out = []
    for s in items:
        if s is Ellipsis:
            out.append("...")
            continue
        try:
            s = operator.index(s)
        except TypeError:
            raise TypeError("np.einsum: each subscript must be either an integer or an ellipsis") from None
        if not 0 <= s < len(_EINSUM_SYMBOLS):
            raise ValueError(f"np.einsum: subscript {s} is not within the valid range [0, 52)")
        out.append(_EINSUM_SYMBOLS[s])
    return "".join(out)


def _einsum_bind(args, kwargs):
    """NumPy's two call forms: ``einsum("ij,jk->ik", a, b)``, and the sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` (each operand followed by its subscripts, then optionally
    the output's), which is the first with each subscript written as NumPy's letter for it."""
    if args and not isinstance(args[0], str):
        n = len(args) // 2
        if n == 0:
            raise TypeError("np.einsum: the sublist form needs an operand and its subscript list")
        subscripts = ",".join(_sublist_subscripts(s) for s in args[1 : 2 * n : 2])
        if len(args) % 2:
            subscripts += "->" + _sublist_subscripts(args[-1])
        args = (subscripts, *args[0 : 2 * n : 2])
    return get("np.einsum").bind_schema(args, kwargs)


def _pairs(*shape_pairs, dtypes=sampling.NUMERIC):
    """Samples for a two-operand contraction: every dtype at the first pair, every pair in float64."""

    def samples(rng):
        for dt in dtypes + (np.dtype(bool),):
            yield Sample(tuple(sampling.array(rng, s, dt) for s in shape_pairs[0]))
        for shapes in shape_pairs[1:]:
            yield Sample(tuple(sampling.array(rng, s, "f8") for s in shapes))
        yield Sample(
            (sampling.array(rng, shape_pairs[0][0], "i4"), sampling.array(rng, shape_pairs[0][1], "f4")),
            note="mixed dtypes",
        )

    return samples


def _binop(name, fn, rule, samples, targets, extra=()):
    params = [Input("a"), Input("b")] + list(extra)
    attr_names = [p.name for p in extra if isinstance(p, Attr)]

    def impl(a, b, **kw):
        return fn(a, b, **{k: kw[k] for k in attr_names})

    return register(OpDef(name, "contraction", params, rule, impl, numpy_targets=targets, samples=samples))


_binop(
    "np.matmul",
    np.matmul,
    _matmul_rule,
    _pairs(
        ((3, 4), (4, 5)),
        ((4,), (4, 2)),
        ((3, 4), (4,)),
        ((2, 3, 4), (4, 5)),
        ((2, 1, 3, 4), (5, 4, 2)),
        ((0, 4), (4, 3)),
        ((3, 0), (0, 2)),
        ((4,), (4,)),
    ),
    [np.matmul],
    [Unsupported("out")],
)
_binop(
    "np.dot",
    np.dot,
    _dot_rule,
    _pairs(
        ((3, 4), (4, 5)), ((4,), (4,)), ((2, 3, 4), (5, 4, 2)), ((), (3, 2)), ((3, 4), (4,)), ((0, 4), (4, 3))
    ),
    [np.dot, np.ndarray.dot],
    [Unsupported("out")],
)
_binop(
    "np.inner",
    np.inner,
    _inner_rule,
    _pairs(((3, 4), (5, 4)), ((4,), (4,)), ((2, 3, 4), (4,)), ((), (3,)), ((0, 2), (3, 2))),
    [np.inner],
)
_binop(
    "np.outer",
    np.outer,
    _outer_rule,
    _pairs(((3,), (4,)), ((2, 3), (4,)), ((), (3,)), ((0,), (2,))),
    [np.outer],
    [Unsupported("out")],
)


def _tensordot_samples(rng):
    yield from _pairs(((3, 4, 5), (4, 5, 2)))(rng)
    yield Sample((sampling.array(rng, (3, 4), "f8"), sampling.array(rng, (4, 2), "f8")), {"axes": 1})
    yield Sample((sampling.array(rng, (2, 3), "f8"), sampling.array(rng, (4,), "f8")), {"axes": 0})
    yield Sample((sampling.array(rng, (3, 4, 5), "f4"), sampling.array(rng, (5, 3, 2), "f4")),
                 {"axes": ((0, 2), (1, 0))})
    yield Sample((sampling.array(rng, (0, 4), "f8"), sampling.array(rng, (4, 2), "f8")), {"axes": 1})


_binop(
    "np.tensordot",
    np.tensordot,
    _tensordot_rule,
    _tensordot_samples,
    [np.tensordot],
    [Attr("axes", 2, _to_axes)],
)


def _einsum_samples(rng):
    cases = (
        ("ij,jk->ik", (3, 4), (4, 5)),
        ("ij,jk", (3, 4), (4, 2)),
        ("ii->i", (3, 3)),
        ("ij->", (3, 4)),
        ("bij,bjk->bik", (2, 3, 4), (2, 4, 5)),
        ("...ij,...jk->...ik", (2, 3, 4), (4, 5)),
        ("i,j->ij", (3,), (4,)),
        ("ij->ji", (0, 2)),
        ("...i->...", (2, 3, 4)),
    )
    for dt in sampling.NUMERIC:
        yield Sample((sampling.array(rng, (3, 4), dt), sampling.array(rng, (4, 5), dt)),
                     {"subscripts": "ij,jk->ik"})
    for sub, *shapes in cases:
        yield Sample(tuple(sampling.array(rng, s, "f8") for s in shapes), {"subscripts": sub})
    ab = (sampling.array(rng, (3, 4), "f4"), sampling.array(rng, (4, 5), "f4"))
    yield Sample(ab, {"subscripts": "ij,jk->ik", "dtype": np.dtype("f8")}, note="dtype= widens")
    yield Sample(ab, {"subscripts": "ij,jk->ik", "dtype": np.dtype("f2"), "casting": "same_kind"})
    yield Sample(ab, {"subscripts": "ij,jk->ik", "optimize": True})
    abc = ab + (sampling.array(rng, (5, 2), "f4"),)
    yield Sample(abc, {"subscripts": "ij,jk,kl->il", "optimize": "greedy"})
    yield Sample(abc, {"subscripts": "ij,jk,kl->il", "optimize": ("einsum_path", (1, 2), (0, 1))})


register(
    OpDef(
        "np.einsum",
        "contraction",
        [
            Attr("subscripts", convert=str),
            Inputs("operands", star=True),
            Unsupported("out"),
            Attr("dtype", None, rules.to_dtype_or_none),
            Unsupported("order", "K", same=("C",)),
            Attr("casting", "safe", rules.one_of("no", "equiv", "safe", "same_kind", "unsafe")),
            Attr("optimize", False, _to_optimize),
        ],
        _einsum_rule,
        _einsum_impl,
        numpy_targets=[np.einsum],
        samples=_einsum_samples,
        binder=_einsum_bind,
        doc="a subscripts string; the interleaved operand/sublist form is bound to the string NumPy reads "
        "it as",
    )
)


def _ufunc_outer(ufunc: np.ufunc) -> OpDef:
    """``ufunc.outer(a, b)``: every pair, shape ``a.shape + b.shape``, the ufunc's NEP 50 dtype."""
    name = f"np.{ufunc.__name__}.outer"

    def rule(types, attrs):
        shape = rules.shape_of(types[0]) + rules.shape_of(types[1])
        # ufunc.outer converts a Python scalar with np.asarray first: it is not weak (NEP 50).
        strong = tuple(TensorType(rules.strong(t), ()) for t in types)
        return TensorType(rules.ufunc_dtypes(name, ufunc, strong)[0], shape)

    def samples(rng):
        for dt in sampling.supported(lambda dt: ufunc.outer(sampling.ones(dt), sampling.ones(dt)),
                                     sampling.DTYPES):
            yield Sample((sampling.array(rng, (3,), dt), sampling.array(rng, (2, 2), dt)))
        yield Sample((sampling.array(rng, (), "f4"), sampling.array(rng, (0, 3), "f4")))
        yield Sample((sampling.array(rng, (2, 3), "f8"), 2.0), note="Python scalar")
        yield Sample((sampling.array(rng, (3,), "i4"), 7), note="Python int: converted to int64, not weak")
        yield Sample((1.5, sampling.array(rng, (2,), "f4")),
                     note="Python float: converted to float64, not weak")

    return OpDef(
        name,
        "elementwise",
        [Input("A", "any"), Input("B", "any")],
        rule,
        lambda A, B: ufunc.outer(A, B),
        numpy_targets=[(ufunc, "outer")],
        samples=samples,
    )


for _u in (np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.equal, np.less, np.greater):
    register(_ufunc_outer(_u))
