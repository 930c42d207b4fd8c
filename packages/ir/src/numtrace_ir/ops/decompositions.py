"""Matrix decompositions and the functions built on them, from ``np.linalg``: `eigh`, `eigvalsh`, `eig`,
`eigvals`, `svd`, `svdvals`, `qr`, `cholesky`, `slogdet`, `lstsq`, `pinv`, `matrix_rank`, `cond`.

Each is one op over a stack of matrices ``(..., M, N)`` whose reference is NumPy's own routine, so
every backend makes NumPy's LAPACK call on the same data and gets its bits (and its `LinAlgError`s).
Output dtypes are NumPy's, probed on 1x1 stand-ins (integer and bool inputs compute in float64,
float32 stays float32). Two results NumPy decides from the values are modelled, not frozen:
`lstsq`'s residuals have a data-dependent length (0 or K, by the rank), and `eig`/`eigvals` return a
real array when every eigenvalue is real (NumPy before 2.5; asked of NumPy at import): the op records
the kind it traced and a call whose values give the other kind breaks a guard (a re-trace) instead of
being cast.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numtrace_ir import dims
from numtrace_ir.dims import ShapeError
from numtrace_ir.guards import GuardError
from numtrace_ir.ops import rules, sampling
from numtrace_ir.ops.linalg import _invertible, _square
from numtrace_ir.registry import Attr, Input, OpDef, Sample, register
from numtrace_ir.types import TensorType, normalize_dtype

_LA = np.linalg


def _dtypes(name: str, fn, *args: Any, **kwargs: Any) -> tuple[np.dtype, ...]:
    """The dtype of each result of `fn` on stand-in arguments (NumPy decides)."""
    try:
        with np.errstate(all="ignore"):
            out = fn(*args, **kwargs)
    except (TypeError, np.exceptions.DTypePromotionError) as e:
        raise TypeError(f"{name}: unsupported dtypes ({e})") from None
    outs = out if isinstance(out, tuple) else (out,)
    return tuple(normalize_dtype(np.asarray(o).dtype) for o in outs)


def _stand_in(t: TensorType) -> np.ndarray:
    return np.ones((1, 1), t.dtype)


def _matrices(name: str, types: tuple, square: bool = False) -> tuple[TensorType, tuple, Any, Any]:
    """The stacked-matrix input: its type, batch dims, rows and columns (NumPy's checks first)."""
    t = rules.first_tensor(name, types)
    if square:
        _square(name, t)
    elif t.ndim < 2:
        raise ShapeError(f"{name}: {t.ndim}-dimensional array given; it must be at least two-dimensional")
    m, n = t.shape[-2:]
    if square:   # a symbol against a number: the number (checked when the graph is specialized)
        m = n = m if type(m) is int else n
    return t, t.shape[:-2], m, n


def _uplo(v: Any) -> str:
    if not isinstance(v, str) or v.upper() not in ("L", "U"):
        raise ValueError(f"UPLO argument must be 'L' or 'U', got {v!r}")
    return v.upper()


def _cutoff(v: Any) -> Any:
    """A tolerance given as a Python number (passed to NumPy as it is, so its dtype rules hold); an
    array of them (one per matrix) is not modelled: the call stays a host call."""
    if v is None or type(v) in (int, float):
        return v
    raise NotImplementedError(f"a tolerance of type {type(v).__name__} (one per matrix) is not modelled")


def _cutoff_or_default(v: Any) -> Any:
    return v if isinstance(v, str) and v == "default" else _cutoff(v)


def _hermitian(rng, shape, dtype):
    """A stack of Hermitian positive-definite matrices (dominant real diagonal)."""
    x = _invertible(rng, shape, dtype)
    return x + np.swapaxes(x, -1, -2).conj()


def _general(rng, shape, dtype):
    return sampling.array(rng, shape, dtype)


def _op(name, fn, params, rule, impl, samples, doc, **facts):
    return register(OpDef(name, "other", params, rule, impl, numpy_targets=[fn], samples=samples, doc=doc,
                          **facts))


def _stack_samples(make, square: bool, dtypes=sampling.DTYPES, complex_dtype="c16", **attrs):
    """Samples over dtypes, batch stacks, 1x1 and empty stacks."""
    shapes = ((2, 3, 3), (2, 1, 4, 4), (1, 1), (0, 2, 2), (0, 0)) if square else \
        ((2, 3, 4), (2, 1, 4, 3), (1, 1), (1, 3), (0, 2, 3))

    def samples(rng):
        base = (3, 3) if square else (4, 3)
        for dt in dtypes:
            yield Sample((make(rng, base, dt),), dict(attrs))
        for shape in shapes:
            yield Sample((make(rng, shape, "f8"),), dict(attrs))
        yield Sample((make(rng, base, complex_dtype),), dict(attrs), note="complex")

    return samples


# -- Hermitian eigenproblems ----------------------------------------------------------------------

def _eigh_rule(types, attrs):
    name = "np.linalg.eigh"
    t, batch, m, _ = _matrices(name, types, square=True)
    w, v = _dtypes(name, _LA.eigh, _stand_in(t))
    return TensorType(w, batch + (m,)), TensorType(v, batch + (m, m))


def _eigvalsh_rule(types, attrs):
    name = "np.linalg.eigvalsh"
    t, batch, m, _ = _matrices(name, types, square=True)
    (w,) = _dtypes(name, _LA.eigvalsh, _stand_in(t))
    return TensorType(w, batch + (m,))


def _uplo_samples(make):
    base = _stack_samples(make, True)

    def samples(rng):
        yield from base(rng)
        yield Sample((_general(rng, (3, 3), "f8"),), {"UPLO": "U"}, note="upper triangle read")
        yield Sample((_general(rng, (2, 3, 3), "f4"),), {"UPLO": "L"}, note="lower triangle read")

    return samples


_op("np.linalg.eigh", _LA.eigh, [Input("a"), Attr("UPLO", "L", _uplo)], _eigh_rule,
    lambda a, UPLO: _LA.eigh(a, UPLO), _uplo_samples(_hermitian),
    "eigenvalues (ascending, real) and eigenvectors of Hermitian matrices, reading the UPLO triangle")
_op("np.linalg.eigvalsh", _LA.eigvalsh, [Input("a"), Attr("UPLO", "L", _uplo)], _eigvalsh_rule,
    lambda a, UPLO: _LA.eigvalsh(a, UPLO), _uplo_samples(_hermitian),
    "eigenvalues (ascending, real) of Hermitian matrices")


# -- general eigenproblems: the result dtype depends on the values ---------------------------------

# Whether NumPy returns a real array from a real matrix whose eigenvalues are all real (NumPy 2.5 returns
# a complex one always): asked of the installed NumPy itself.
_REAL_WHEN_REAL = _LA.eigvals(np.eye(1)).dtype.kind != "c"


def _real_result(concrete: Any) -> dict:
    w = concrete[0] if isinstance(concrete, tuple) else concrete
    return {"real": np.asarray(w).dtype.kind != "c"}


def _eig_dtypes(name: str, t: TensorType, real: bool) -> tuple[np.dtype, np.dtype]:
    (w,) = _dtypes(name, _LA.eigvals, _stand_in(t))   # real for a real 1x1 matrix
    if t.dtype.kind == "c" or not real:
        w = np.result_type(w, np.complex64)
    return w, w


def _check_kind(name: str, w: np.ndarray, real: bool) -> None:
    if (w.dtype.kind != "c") != real:
        traced, now = ("real", "complex") if real else ("complex", "real")
        rule = ("NumPy returns a real array only when every eigenvalue is real" if _REAL_WHEN_REAL
                else "this NumPy returns a complex array always")
        raise GuardError(f"{name}'s result dtype ({rule})", None, traced, now, "input values")


def _eig(a, real):
    w, v = _LA.eig(a)
    if a.dtype.kind != "c":
        _check_kind("np.linalg.eig", w, real)
    return w, v


def _eigvals(a, real):
    w = _LA.eigvals(a)
    if a.dtype.kind != "c":
        _check_kind("np.linalg.eigvals", w, real)
    return w


def _eig_rule(name: str, vectors: bool):
    def rule(types, attrs):
        t, batch, m, _ = _matrices(name, types, square=True)
        w, v = _eig_dtypes(name, t, attrs["real"])
        values = TensorType(w, batch + (m,))
        return (values, TensorType(v, batch + (m, m))) if vectors else values

    return rule


def _rotation(rng, shape, dtype):
    """Stacks of plane rotations by random angles (complex eigenvalues)."""
    theta = rng.uniform(0.3, 2.8, shape[:-2])
    c, s = np.cos(theta), np.sin(theta)
    out = np.zeros(shape)
    out[..., 0, 0], out[..., 0, 1], out[..., 1, 0], out[..., 1, 1] = c, -s, s, c
    return out.astype(dtype)


def _eig_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((_hermitian(rng, (3, 3), dt),), {"real": _REAL_WHEN_REAL},
                     note="symmetric: real eigenvalues")
    for shape in ((2, 3, 3), (1, 1), (0, 2, 2), (0, 0)):
        yield Sample((_hermitian(rng, shape, "f8"),), {"real": _REAL_WHEN_REAL})
    yield Sample((_rotation(rng, (2, 2), "f8"),), {"real": False}, note="rotation: complex eigenvalues")
    yield Sample((_rotation(rng, (3, 2, 2), "f4"),), {"real": False})
    yield Sample((_general(rng, (3, 3), "c16"),), {"real": False}, note="complex input")


for _f, _vectors in ((_LA.eig, True), (_LA.eigvals, False)):
    _name = f"np.linalg.{_f.__name__}"
    _op(_name, _f, [Input("a"), Attr("real", False, rules.to_bool)], _eig_rule(_name, _vectors),
        _eig if _vectors else _eigvals, _eig_samples,
        "eigenvalues (and right eigenvectors) of general matrices; `real` is the kind NumPy gave at trace "
        "time (a real array when every eigenvalue is real), and a call whose values give the other kind "
        "breaks a guard", result_attrs=_real_result,
        effect=True)   # a check: the traced function may have read only the result's dtype


# -- singular values ------------------------------------------------------------------------------

def _svd_rule(types, attrs):
    name = "np.linalg.svd"
    full, uv, herm = attrs["full_matrices"], attrs["compute_uv"], attrs["hermitian"]
    t, batch, m, n = _matrices(name, types, square=herm)
    dts = _dtypes(name, _LA.svd, _stand_in(t), full, uv, herm)
    k = m if herm else dims.minimum(m, n)
    if not uv:
        return TensorType(dts[0], batch + (k,))
    if herm:
        u, vh = (m, m), (m, m)
    else:
        u, vh = ((m, m), (n, n)) if full else ((m, k), (k, n))
    return TensorType(dts[0], batch + u), TensorType(dts[1], batch + (k,)), TensorType(dts[2], batch + vh)


def _svd_samples(rng):
    for full in (True, False):
        for dt in sampling.DTYPES:
            yield Sample((_general(rng, (4, 3), dt),), {"full_matrices": full})
        for shape in ((2, 3, 5), (2, 1, 4, 3), (1, 1), (0, 2, 3), (3, 0), (0, 4)):
            yield Sample((_general(rng, shape, "f8"),), {"full_matrices": full})
        yield Sample((_general(rng, (3, 4), "c8"),), {"full_matrices": full}, note="complex")
    for shape, dt in (((4, 3), "f8"), ((2, 3, 4), "f4"), ((0, 2), "f8"), ((3, 4), "c16")):
        yield Sample((_general(rng, shape, dt),), {"compute_uv": False})
    for dt in ("i4", "f4", "f8", "c16"):
        yield Sample((_hermitian(rng, (3, 3), dt),), {"hermitian": True})
        yield Sample((_hermitian(rng, (2, 3, 3), dt),), {"hermitian": True, "compute_uv": False})


_op("np.linalg.svd", _LA.svd,
    [Input("a"), Attr("full_matrices", True, rules.to_bool), Attr("compute_uv", True, rules.to_bool),
     Attr("hermitian", False, rules.to_bool)],
    _svd_rule,
    lambda a, full_matrices, compute_uv, hermitian: _LA.svd(a, full_matrices, compute_uv, hermitian),
    _svd_samples,
    "(u, s, vh) with K = min(M, N) singular values, descending; full_matrices gives square u and vh; "
    "hermitian takes NumPy's eigh route (square matrices)")


def _svdvals_rule(types, attrs):
    name = "np.linalg.svdvals"
    t, batch, m, n = _matrices(name, types)
    (s,) = _dtypes(name, _LA.svdvals, _stand_in(t))
    return TensorType(s, batch + (dims.minimum(m, n),))


_op("np.linalg.svdvals", _LA.svdvals, [Input("x")], _svdvals_rule, lambda x: _LA.svdvals(x),
    _stack_samples(_general, False), "the K = min(M, N) singular values, descending")


# -- QR and Cholesky ------------------------------------------------------------------------------

def _qr_mode(v: Any) -> str:
    if v in ("reduced", "complete", "r"):
        return v
    if v in ("raw", "full", "f", "economic", "e"):
        raise NotImplementedError(f"qr mode {v!r} (Householder form, or a deprecated mode) is not modelled")
    raise ValueError(f"Unrecognized mode '{v}'")


def _qr_rule(types, attrs):
    name = "np.linalg.qr"
    t, batch, m, n = _matrices(name, types)
    mode = attrs["mode"]
    dts = _dtypes(name, _LA.qr, _stand_in(t), mode)
    k = dims.minimum(m, n)
    if mode == "r":
        return TensorType(dts[0], batch + (k, n))
    q, r = ((m, m), (m, n)) if mode == "complete" else ((m, k), (k, n))
    return TensorType(dts[0], batch + q), TensorType(dts[1], batch + r)


def _qr_samples(rng):
    for mode in ("reduced", "complete", "r"):
        for dt in sampling.DTYPES:
            yield Sample((_general(rng, (4, 3), dt),), {"mode": mode})
        for shape in ((2, 3, 5), (2, 1, 4, 3), (1, 1), (0, 2, 3), (3, 0)):
            yield Sample((_general(rng, shape, "f8"),), {"mode": mode})
        yield Sample((_general(rng, (3, 4), "c16"),), {"mode": mode}, note="complex")


_op("np.linalg.qr", _LA.qr, [Input("a"), Attr("mode", "reduced", _qr_mode)], _qr_rule,
    lambda a, mode: _LA.qr(a, mode), _qr_samples,
    "(q, r): reduced q is (M, K), r (K, N); complete q is (M, M), r (M, N); mode 'r' gives r alone. "
    "The 'raw' Householder form stays a host call")


def _cholesky_rule(types, attrs):
    name = "np.linalg.cholesky"
    t, batch, m, _ = _matrices(name, types, square=True)
    (dt,) = _dtypes(name, _LA.cholesky, _stand_in(t))
    return TensorType(dt, batch + (m, m))


def _cholesky_samples(rng):
    yield from _stack_samples(_hermitian, True)(rng)
    yield Sample((_hermitian(rng, (2, 3, 3), "f8"),), {"upper": True})
    yield Sample((_hermitian(rng, (3, 3), "c8"),), {"upper": True})


_op("np.linalg.cholesky", _LA.cholesky, [Input("a"), Attr("upper", False, rules.to_bool)], _cholesky_rule,
    lambda a, upper: _LA.cholesky(a, upper=upper), _cholesky_samples,
    "the lower (or upper) Cholesky factor; a matrix that is not positive-definite raises LinAlgError "
    "when the graph runs, as in NumPy")


# -- determinants, inverses, ranks ----------------------------------------------------------------

def _slogdet_rule(types, attrs):
    name = "np.linalg.slogdet"
    t, batch, _, _ = _matrices(name, types, square=True)
    sign, logdet = _dtypes(name, _LA.slogdet, _stand_in(t))
    return TensorType(sign, batch), TensorType(logdet, batch)


def _slogdet_samples(rng):
    yield from _stack_samples(_invertible, True)(rng)
    yield Sample((np.zeros((2, 2)),), note="singular: sign 0, logabsdet -inf")


_op("np.linalg.slogdet", _LA.slogdet, [Input("a")], _slogdet_rule, lambda a: _LA.slogdet(a),
    _slogdet_samples, "(sign, logabsdet) of the determinant; a 0x0 matrix gives (1, 0)")


def _pinv_rule(types, attrs):
    name = "np.linalg.pinv"
    t, batch, m, n = _matrices(name, types)
    if 0 in (m, n):   # NumPy returns an empty array of the input's dtype
        if t.dtype.kind not in "biufc":
            raise TypeError(f"{name}: unsupported dtype {t.dtype}")
        dt = t.dtype
    else:
        (dt,) = _dtypes(name, _LA.pinv, _stand_in(t))
    return TensorType(dt, batch + (n, m))


def _pinv(a, rcond, hermitian, rtol):
    given = {} if isinstance(rtol, str) else {"rtol": rtol}
    return _LA.pinv(a, rcond, hermitian, **given)


def _pinv_samples(rng):
    yield from _stack_samples(_general, False)(rng)
    yield Sample((_general(rng, (3, 4), "f8"),), {"rcond": 0.3})
    yield Sample((_general(rng, (2, 4, 3), "f4"),), {"rtol": 0.25})
    yield Sample((_general(rng, (4, 3), "f8"),), {"rtol": None}, note="rtol=None: max(M, N) * eps")
    yield Sample((_hermitian(rng, (3, 3), "f8"),), {"hermitian": True})
    yield Sample((_general(rng, (0, 3), "i4"),), note="empty: the input's dtype")


_op("np.linalg.pinv", _LA.pinv,
    [Input("a"), Attr("rcond", None, _cutoff), Attr("hermitian", False, rules.to_bool),
     Attr("rtol", "default", _cutoff_or_default)],
    _pinv_rule, _pinv, _pinv_samples,
    "the (..., N, M) pseudo-inverse by NumPy's SVD; rtol 'default' is NumPy's (rtol not given); an array "
    "of cutoffs stays a host call")


def _matrix_rank_rule(types, attrs):
    name = "np.linalg.matrix_rank"
    t = rules.first_tensor(name, types)
    if t.ndim < 2:
        raise ShapeError(f"{name}: a vector's rank is a Python int, not an array")
    (dt,) = _dtypes(name, _LA.matrix_rank, _stand_in(t), hermitian=attrs["hermitian"])
    return TensorType(dt, t.shape[:-2])


def _matrix_rank_bind(args: tuple, kwargs: dict) -> tuple[list, dict]:
    op = _MATRIX_RANK
    a = args[0] if args else kwargs.get("A")
    if getattr(a, "ndim", 0) < 2:
        raise NotImplementedError("np.linalg.matrix_rank: a vector's rank is a Python int")
    return op.bind_schema(args, kwargs)


def _matrix_rank_samples(rng):
    yield from _stack_samples(_general, False)(rng)
    low = _general(rng, (4, 2), "f8") @ _general(rng, (2, 5), "f8")
    yield Sample((low,), note="rank 2")
    yield Sample((low,), {"tol": 1e-3})
    yield Sample((low,), {"rtol": 0.5})
    yield Sample((_hermitian(rng, (2, 3, 3), "f8"),), {"hermitian": True})


_MATRIX_RANK = _op(
    "np.linalg.matrix_rank", _LA.matrix_rank,
    [Input("A"), Attr("tol", None, _cutoff), Attr("hermitian", False, rules.to_bool),
     Attr("rtol", None, _cutoff)],
    _matrix_rank_rule,
    lambda A, tol, hermitian, rtol: _LA.matrix_rank(A, tol, hermitian, rtol=rtol), _matrix_rank_samples,
    "the number of singular values above the tolerance, per matrix (a vector's rank, a Python int, and "
    "per-matrix tolerance arrays stay host calls)", binder=_matrix_rank_bind)

_COND_ORDS = (None, "fro", "nuc", np.inf, -np.inf, 1, -1, 2, -2)


def _cond_p(v: Any) -> Any:
    if v is None or isinstance(v, str):
        if v not in _COND_ORDS:
            raise ValueError(f"Invalid norm order '{v}' for matrices")
        return v
    v = rules.to_scalar(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if v not in _COND_ORDS:
        raise ValueError(f"Invalid norm order {v!r} for matrices")
    return v


def _cond_rule(types, attrs):
    name = "np.linalg.cond"
    p = attrs["p"]
    t, batch, _, _ = _matrices(name, types, square=p not in (None, 2, -2))
    (dt,) = _dtypes(name, _LA.cond, _stand_in(t), p)
    return TensorType(dt, batch)


def _cond_samples(rng):
    for p in _COND_ORDS:
        yield Sample((_invertible(rng, (3, 3), "f8"),), {"p": p})
    for dt in sampling.DTYPES[1:]:
        yield Sample((_invertible(rng, (2, 3, 3), dt),), {})
    yield Sample((_general(rng, (2, 3, 4), "f8"),), {"p": -2}, note="rectangular: singular values")
    yield Sample((_invertible(rng, (3, 3), "c16"),), {"p": 1})
    yield Sample((np.zeros((2, 2, 2)),), {"p": "fro"}, note="singular: inf")


_op("np.linalg.cond", _LA.cond, [Input("x"), Attr("p", None, _cond_p)], _cond_rule,
    lambda x, p: _LA.cond(x, p), _cond_samples,
    "the condition number in norm p (singular values for None and ±2, else norm(x) * norm(inv(x))); "
    "empty matrices raise LinAlgError as in NumPy")


# -- least squares --------------------------------------------------------------------------------

def _lstsq_rule(types, attrs):
    name = "np.linalg.lstsq"
    if len(types) != 2 or any(type(t) is not TensorType for t in types):
        raise TypeError(f"{name}: expected two arrays, got {types}")
    a, b = types
    if a.ndim != 2 or b.ndim not in (1, 2):
        raise ShapeError(f"{name}: a must be 2-d and b 1-d or 2-d, got {a} and {b}")
    m, n = a.shape
    if type(m) is int and type(b.shape[0]) is int and m != b.shape[0]:
        raise ShapeError(f"{name}: Incompatible dimensions ({a} and {b})")
    x, resid, rank, s = _dtypes(name, _LA.lstsq, _stand_in(a), np.ones((1,), b.dtype))
    rhs = b.shape[1:]
    return (TensorType(x, (n,) + rhs), TensorType(resid, (attrs["size"],)), TensorType(rank, ()),
            TensorType(s, (dims.minimum(m, n),)))


def _lstsq_samples(rng):
    for dt in sampling.DTYPES:
        yield Sample((_general(rng, (5, 3), dt), _general(rng, (5,), dt)), note="full rank: residuals")
    for (sa, sb), dt in ((((5, 3), (5, 2)), "f8"), (((3, 5), (3,)), "f8"), (((4, 4), (4, 3)), "f4"),
                         (((5, 3), (5, 0)), "f8"), (((0, 3), (0,)), "f8"), (((3, 0), (3, 2)), "f8"),
                         (((4, 2), (4,)), "c16")):
        yield Sample((_general(rng, sa, dt), _general(rng, sb, dt)))
    low = _general(rng, (5, 1), "f8") @ _general(rng, (1, 3), "f8")
    yield Sample((low, _general(rng, (5,), "f8")), note="rank-deficient: no residuals")
    yield Sample((_general(rng, (5, 3), "f8"), _general(rng, (5,), "f8")), {"rcond": 0.5})


_op("np.linalg.lstsq", _LA.lstsq,
    [Input("a"), Input("b"), Attr("rcond", None, _cutoff),
     Attr("size", "nres", lambda v: dims.normalize(str(v)))],
    _lstsq_rule, lambda a, b, rcond, size: _LA.lstsq(a, b, rcond), _lstsq_samples,
    "(x, residuals, rank, s) for a 2-d a; the residuals' length `size` is data-dependent (K when a has "
    "full column rank and M > N, else 0), a symbol per node", data_dependent_shape=True)
