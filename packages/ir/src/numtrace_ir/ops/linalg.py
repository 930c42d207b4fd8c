"""Linear algebra from ``np.linalg``: `norm` (vector and matrix norms), `inv`, `solve`, `det`.

Each is one op whose reference is NumPy's own routine (LAPACK); dtypes are NumPy's, probed on 1x1
stand-ins (integer and bool inputs compute in float64, complex norms are real). Square-matrix dims
must be equal; a symbol against a number is accepted and checked when the graph is specialized.
"""

from __future__ import annotations

import math

import numpy as np

from numtrace_ir.dims import ShapeError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.registry import Attr, Input, OpDef, Sample, register
from numtrace_ir.types import TensorType

_MATRIX_ORDS = (None, "fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def _to_ord(v):
    """``ord``: None, 'fro', 'nuc' or a number (integral floats become ints, so 2 and 2.0 agree)."""
    if v is None or v in ("fro", "nuc"):
        return v
    if isinstance(v, str):
        raise ValueError(f"ord must be None, 'fro', 'nuc' or a number, got {v!r}")
    v = rules.to_scalar(v)
    if isinstance(v, (bool, complex)):
        raise TypeError(f"ord must be a real number, got {v!r}")
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        return int(v)
    return v


def _norm_axes(name: str, t: TensorType, ord, axis) -> tuple[tuple[int, ...], bool]:
    """The reduced axes and whether the norm is a matrix norm, with NumPy's checks of `ord`."""
    if axis is None:
        if ord is not None and t.ndim not in (1, 2):
            raise ShapeError(f"{name}: improper number of dimensions to norm ({t} with ord={ord!r})")
        red = tuple(range(t.ndim))
        matrix = ord is not None and t.ndim == 2
    else:
        items = axis if isinstance(axis, tuple) else (axis,)
        if len(items) not in (1, 2):
            raise ShapeError(f"{name}: improper number of dimensions to norm (axis={axis})")
        red = tuple(rules.axis(name, a, t.ndim) for a in items)
        if len(set(red)) != len(red):
            raise ShapeError(f"{name}: duplicate axes given ({axis})")
        matrix = len(red) == 2
    if matrix and ord not in _MATRIX_ORDS:
        raise ShapeError(f"{name}: invalid norm order {ord!r} for matrices")
    if not matrix and isinstance(ord, str):
        raise ShapeError(f"{name}: invalid norm order {ord!r} for vectors")
    return red, matrix


def _norm_rule(types, attrs):
    name = "np.linalg.norm"
    t = rules.first_tensor(name, types)
    ord, keepdims = attrs["ord"], attrs["keepdims"]
    red, matrix = _norm_axes(name, t, ord, attrs["axis"])
    stand_in = np.ones((1, 1) if matrix else (1,), t.dtype)
    dt = rules.probe_dtype(name, np.linalg.norm, stand_in, ord, (0, 1) if matrix else None)
    if keepdims:
        shape = tuple(1 if i in red else d for i, d in enumerate(t.shape))
    else:
        shape = tuple(d for i, d in enumerate(t.shape) if i not in red)
    return TensorType(dt, shape)


def _norm_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((sampling.array(rng, (3, 4), dt),), {})
    vec = [None, 1, 2, 3, 0, math.inf, -math.inf, -1, 0.5]
    for ord in vec:
        yield Sample((sampling.array(rng, (5,), "f8"),), {"ord": ord}, note=f"vector ord={ord}")
    for ord in _MATRIX_ORDS:
        yield Sample((sampling.array(rng, (3, 4), "f8"),), {"ord": ord}, note=f"matrix ord={ord}")
    yield Sample((sampling.array(rng, (3, 4), "f4"),), {"ord": 2}, note="spectral norm in float32")
    yield Sample((sampling.array(rng, (3, 4), "f8"),), {"axis": 1})
    yield Sample((sampling.array(rng, (3, 4), "i4"),), {"axis": 0, "ord": 1, "keepdims": True})
    yield Sample((sampling.array(rng, (2, 3, 4), "f8"),), {"axis": -1, "ord": math.inf})
    yield Sample((sampling.array(rng, (2, 3, 4), "f8"),), {"axis": (0, 2), "keepdims": True})
    yield Sample((sampling.array(rng, (2, 3, 4), "f4"),), {"axis": (2, 1), "ord": "nuc"})
    yield Sample((sampling.array(rng, (2, 3, 4), "f8"),), {"axis": (-1, 0), "ord": -1})
    yield Sample((sampling.array(rng, (2, 3, 4), "f8"),), {"keepdims": True}, note="flattened 2-norm of 3-d")
    yield Sample((sampling.array(rng, (4,), "c8"),), {}, note="complex vector: real result")
    yield Sample((sampling.array(rng, (3, 3), "c16"),), {"ord": "fro"})
    yield Sample((sampling.array(rng, (), "f8"),), {})
    yield Sample((sampling.array(rng, (), "f4"),), {"keepdims": True})
    yield Sample((sampling.array(rng, (0,), "f8"),), {})
    yield Sample((sampling.array(rng, (0, 3), "f8"),), {"axis": 1})
    yield Sample((sampling.array(rng, (0, 3), "f8"),), {"ord": "fro"})


register(
    OpDef(
        "np.linalg.norm",
        "reduction",
        [
            Input("x"),
            Attr("ord", None, _to_ord),
            Attr("axis", None, rules.to_axis),
            Attr("keepdims", False, rules.to_bool),
        ],
        _norm_rule,
        lambda x, ord, axis, keepdims: np.linalg.norm(x, ord, axis, keepdims),
        numpy_targets=[np.linalg.norm],
        samples=_norm_samples,
        doc="vector norms over one axis (or the flattened array when ord and axis are None), matrix "
        "norms over two axes; ord=±2 and 'nuc' take an SVD",
    )
)


def _square(name: str, t: TensorType) -> None:
    if t.ndim < 2:
        raise ShapeError(f"{name}: {t.ndim}-dimensional array given; it must be at least two-dimensional")
    m, n = t.shape[-2:]
    if type(m) is int and type(n) is int and m != n:
        raise ShapeError(f"{name}: last 2 dimensions of the array must be square, got {t}")


def _square_op(name: str, fn, out_shape, doc: str) -> OpDef:
    def rule(types, attrs):
        t = rules.first_tensor(name, types)
        _square(name, t)
        return TensorType(rules.probe_dtype(name, fn, np.ones((1, 1), t.dtype)), out_shape(t.shape))

    def samples(rng):
        for dt in sampling.DTYPES:
            yield Sample((_invertible(rng, (3, 3), dt),))
        for shape in ((2, 3, 3), (2, 1, 4, 4), (1, 1), (0, 0), (2, 0, 0), (0, 2, 2)):
            yield Sample((_invertible(rng, shape, "f8"),))
        yield Sample((_invertible(rng, (4, 4), "c16"),), note="complex")

    return register(
        OpDef(name, "other", [Input("a")], rule, fn, numpy_targets=[fn], samples=samples, doc=doc)
    )


def _invertible(rng, shape, dtype):
    """A well-conditioned stack of square matrices: random off-diagonal values, a dominant diagonal
    (bool: the identity)."""
    dtype = np.dtype(dtype)
    n = shape[-1] if shape else 0
    eye = np.broadcast_to(np.eye(n, dtype=bool), shape)
    if dtype.kind == "b":
        return eye.copy()
    return (sampling.array(rng, shape, dtype, (-2.0, 2.0)) + (4 * n + 1) * eye).astype(dtype)


_square_op(
    "np.linalg.inv",
    np.linalg.inv,
    lambda s: s,
    "a singular matrix raises LinAlgError when the graph runs, as in NumPy",
)
_square_op("np.linalg.det", np.linalg.det, lambda s: s[:-2], "the determinant of a 0x0 matrix is 1")


def _solve_rule(types, attrs):
    name = "np.linalg.solve"
    a, b = types
    if type(a) is not TensorType or type(b) is not TensorType:
        raise TypeError(f"{name}: expected two arrays, got {a} and {b}")
    _square(name, a)
    m = a.shape[-1]
    dt = rules.probe_dtype(name, np.linalg.solve, np.ones((1, 1), a.dtype), np.ones((1,), b.dtype))
    if b.ndim == 0:
        raise ShapeError(f"{name}: b must be at least one-dimensional, got {b}")
    if b.ndim == 1:  # NumPy 2: a 1-d b is one vector, solved against every matrix of a
        if type(b.shape[0]) is int and type(m) is int and b.shape[0] != m:
            raise ShapeError(f"{name}: b {b} does not match the {m}x{m} matrices of a {a}")
        return TensorType(dt, a.shape[:-1])
    if type(b.shape[-2]) is int and type(m) is int and b.shape[-2] != m:
        raise ShapeError(f"{name}: b {b} does not have {m} rows to match a {a}")
    batch = rules.broadcast(name, a.shape[:-2], b.shape[:-2])
    return TensorType(dt, batch + (m if type(m) is int else b.shape[-2], b.shape[-1]))


def _solve_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((_invertible(rng, (3, 3), dt), sampling.array(rng, (3,), dt)))
    for (sa, sb), (da, db) in (
        (((3, 3), (3, 2)), ("f8", "f8")),
        (((2, 3, 3), (3,)), ("f8", "f8")),
        (((2, 3, 3), (3, 2)), ("f4", "f4")),
        (((4, 1, 3, 3), (2, 3, 1)), ("f8", "f8")),
        (((3, 3), (3, 0)), ("f8", "f8")),
        (((0, 2, 2), (2,)), ("f8", "f8")),
        (((3, 3), (3,)), ("f4", "i4")),
        (((2, 2), (2,)), ("c8", "f4")),
    ):
        yield Sample((_invertible(rng, sa, da), sampling.array(rng, sb, db)))


register(
    OpDef(
        "np.linalg.solve",
        "other",
        [Input("a"), Input("b")],
        _solve_rule,
        lambda a, b: np.linalg.solve(a, b),
        numpy_targets=[np.linalg.solve],
        samples=_solve_samples,
        doc="NumPy 2 semantics: a 1-d b is a single right-hand side; otherwise b is (..., M, K) and the "
        "batch dims broadcast",
    )
)
