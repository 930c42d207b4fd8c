"""The np.linalg decompositions that are one LAPACK gufunc call in NumPy (`eigh`, `eigvalsh`,
`cholesky`, `svd` without ``hermitian``, `svdvals`, `slogdet`), made as NumPy makes it but writing into
the planned output buffers: the same gufunc, signature (double or complex double work) and error
handling as ``np.linalg``'s wrapper. Only results NumPy keeps in the gufunc's double precision take this
path (float32 and complex64 ones are cast by the wrapper, which may warn: those run as the reference). The
results are NumPy's bits; only the temporaries and the copy out of them are saved."""

from __future__ import annotations

import numpy as np
from numpy.linalg import _linalg, _umath_linalg
from numtrace_ir import registry
from numtrace_ir.types import TensorType

__all__ = ["decomposition_into"]

_DOUBLE = (np.dtype(np.float64), np.dtype(np.complex128))
# The error callbacks np.linalg installs around each gufunc (they raise its LinAlgError messages).
_NONCONVERGENCE, _NONPOSDEF, _SVD_ERROR = (getattr(_linalg, f"_raise_linalgerror_{what}") for what in (
    "eigenvalues_nonconvergence", "nonposdef", "svd_nonconvergence"))

(_EIGH, _EIGVALSH, _CHOLESKY, _SVD, _SVDVALS, _SLOGDET) = map(registry.get, (
    "np.linalg.eigh", "np.linalg.eigvalsh", "np.linalg.cholesky", "np.linalg.svd", "np.linalg.svdvals",
    "np.linalg.slogdet"))


def _gufunc(op, attrs: dict):
    """NumPy's gufunc for the op's attrs, its real and complex signatures, and the error callback NumPy
    installs around it (None: none); None for a form NumPy computes otherwise."""
    if op is _EIGH or op is _EIGVALSH:
        lo = attrs["UPLO"] == "L"
        if op is _EIGH:
            fn = _umath_linalg.eigh_lo if lo else _umath_linalg.eigh_up
            return fn, "d->dd", "D->dD", _NONCONVERGENCE
        fn = _umath_linalg.eigvalsh_lo if lo else _umath_linalg.eigvalsh_up
        return fn, "d->d", "D->d", _NONCONVERGENCE
    if op is _CHOLESKY:
        fn = _umath_linalg.cholesky_up if attrs["upper"] else _umath_linalg.cholesky_lo
        return fn, "d->d", "D->D", _NONPOSDEF
    if op is _SVDVALS or (op is _SVD and not attrs["hermitian"] and not attrs["compute_uv"]):
        return _umath_linalg.svd, "d->d", "D->d", _SVD_ERROR
    if op is _SVD and not attrs["hermitian"]:
        fn = _umath_linalg.svd_f if attrs["full_matrices"] else _umath_linalg.svd_s
        return fn, "d->ddd", "D->DdD", _SVD_ERROR
    if op is _SLOGDET:
        return _umath_linalg.slogdet, "d->dd", "D->Dd", None
    return None


def decomposition_into(op, node):
    """``fn(a, out=o)`` (``out=(o1, o2, ...)`` for several results) for a decomposition node whose
    NumPy wrapper is one gufunc call; None for other nodes."""
    found = _gufunc(op, node.attrs)
    if found is None or len(node.inputs) != 1:
        return None
    fn, real, complex_, error = found
    t = node.inputs[0].type
    outs = [v.type for v in node.outputs]
    if not isinstance(t, TensorType) or t.dtype.kind not in "biufc" or t.dtype == np.float16 \
            or not all(isinstance(o, TensorType) and o.is_concrete and o.dtype in _DOUBLE for o in outs):
        return None
    signature = complex_ if t.dtype.kind == "c" else real
    errstate = np.errstate
    if error is None:
        def call(a, out):
            fn(a, signature=signature, out=out)
        return call

    def call_checked(a, out):
        with errstate(call=error, invalid="call", over="ignore", divide="ignore", under="ignore"):
            fn(a, signature=signature, out=out)
    return call_checked
